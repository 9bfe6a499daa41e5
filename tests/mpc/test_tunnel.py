"""TLS 1.3 end to end through a relay (mpc.channel.tunnel.TLSTunnel).

Two users run the Yao runtime on a noisy kernel inside a tunnel whose
carrier frames pass through a relay thread that records everything it
forwards.  The tests check what the relay saw against the plaintext frames
each user sent and received (no 16-byte window of any plaintext frame, no
input encoding, no label), that one flipped byte anywhere in the data phase
fails the session on *both* sides with ``TamperedStream``, and that a
partner with another certificate name or role, or from another CA, is
refused on both sides.  Every wait has a timeout; nothing here times.
"""

from __future__ import annotations

import os
import struct
import threading

import numpy as np
import pytest

from pairwise.circuits.ir import ints_to_bits
from pairwise.circuits.kernels import pack_pair
from pairwise.circuits.noise import noisy_kernel
from pairwise.mpc.channel import MemoryChannel, TLSTunnel, TranscriptChannel
from pairwise.mpc.channel.tunnel import MAX_RECORD, check_records
from pairwise.mpc.errors import (
    AccessDenied,
    AuthenticationError,
    ChannelError,
    ChannelTimeout,
    PeerClosed,
    TamperedStream,
)
from pairwise.mpc.tls import TLSConfig, create_certificate
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession

T = 30.0  # generous: a loaded 2-core machine


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    for name in ("alice", "bob", "mallory"):
        create_certificate(d, name, "client")
    create_certificate(d, "srv", "server")
    other = tmp_path_factory.mktemp("other-ca")
    create_certificate(other, "bob", "client")  # same name, another CA
    return {"dir": d, "other": other}


class Relay:
    """Forwards carrier frames between two users in both directions, recording them; may alter one frame.

    ``tamper(direction, index, frame) -> bytes | None`` returns a replacement for
    frame number ``index`` (per direction, counting from 0) or None to forward it.
    """

    def __init__(self, tamper=None) -> None:
        self.a_user, a_relay = MemoryChannel.pair(timeout=T)
        self.b_user, b_relay = MemoryChannel.pair(timeout=T)
        self.seen: dict[str, list[bytes]] = {"ab": [], "ba": []}
        self.tamper = tamper
        self.threads = [
            threading.Thread(target=self._pump, args=(a_relay, b_relay, "ab"), daemon=True),
            threading.Thread(target=self._pump, args=(b_relay, a_relay, "ba"), daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _pump(self, src, dst, direction) -> None:
        """One direction, as a relay should: a user who leaves still gets what the other sent before.

        When ``src`` ends, ``dst`` is closed after the frames already queued; when
        ``dst`` is gone, this direction stops and the other one closes ``src``
        once it has delivered what ``dst`` sent last (an alert, say).
        """
        while True:
            try:
                frame = src.recv(T)
            except ChannelError:
                dst.close()
                return
            i = len(self.seen[direction])
            self.seen[direction].append(frame)
            if self.tamper is not None:
                try:
                    frame = self.tamper(direction, i, frame) or frame
                except ChannelError:  # the relay gives up on the pair
                    src.close()
                    dst.close()
                    return
            try:
                dst.send(frame)
            except ChannelError:
                return

    def join(self) -> None:
        for t in self.threads:
            t.join(T)

    def everything(self) -> bytes:
        return b"".join(self.seen["ab"] + self.seen["ba"])


def run_pair(fa, fb):
    """Run fa() and fb() in two threads; return (result or exception) of each."""
    out = [None, None]

    def wrap(i, f):
        try:
            out[i] = f()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            out[i] = exc

    ts = [
        threading.Thread(target=wrap, args=(0, fa), daemon=True),
        threading.Thread(target=wrap, args=(1, fb), daemon=True),
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join(4 * T)
        assert not t.is_alive(), "a party hung"
    return out


BITS = 16
NC = noisy_kernel("kendall", BITS, False, epsilon=1.0)


def garbler_party(carrier, pki, x, record, **kw):
    def go():
        tun = TLSTunnel(carrier, TLSConfig(pki["dir"], "alice"), server=True, peer_name="bob", timeout=T, **kw)
        ch = TranscriptChannel(tun)
        record["garbler"] = ch
        s = GarblerSession(ch, session_id=b"pair-1")
        res = s.run(NC.circuit, {"x": x}, output="evaluator", random=("rx", "ry"))
        tun.finish(T)
        record["rx"] = res.random_bits["rx"]
        return "ok"

    return go


def evaluator_party(carrier, pki, y, record, **kw):
    def go():
        tun = TLSTunnel(carrier, TLSConfig(pki["dir"], "bob"), server=False, peer_name="alice", timeout=T, **kw)
        ch = TranscriptChannel(tun)
        record["evaluator"] = ch
        s = EvaluatorSession(ch, session_id=b"pair-1")
        res = s.run(NC.circuit, {"y": y}, output="evaluator", random=("rx", "ry"))
        tun.finish(T)
        return res

    return go


def test_noisy_kendall_through_the_relay_reveals_no_plaintext(pki):
    relay = Relay()
    x, y = pack_pair(1234, 40000, BITS, False), pack_pair(999, 50000, BITS, False)
    rec: dict = {}
    g, e = run_pair(garbler_party(relay.a_user, pki, x, rec), evaluator_party(relay.b_user, pki, y, rec))
    assert g == "ok", g
    assert not isinstance(e, BaseException), e
    relay.join()
    # the 2PC computed a k-RR code of sign(x1-x2)*sign(y1-y2) = +1; codes are 0, 1, 2 (a noisy value, any is possible)
    assert int(np.asarray(e.outputs[0]).reshape(-1)[0]) in (0, 1, 2)
    wire = relay.everything()
    # every relayed frame is whole TLS records; after the handshake all of them application data
    for d in ("ab", "ba"):
        frames = relay.seen[d]
        assert frames
        for f in frames:
            assert check_records(f, handshake_done=False) is None
        assert all(check_records(f, handshake_done=True) is None for f in frames[2:])
    plain = rec["garbler"].sent + rec["garbler"].received
    assert sum(map(len, plain)) > 2000  # the 2PC moved real traffic: base OTs, IKNP, tables
    windows = 0
    for frame in plain:
        for i in range(0, max(0, len(frame) - 15), 4):
            w = frame[i : i + 16]
            if len(set(w)) > 2:  # skip runs of one or two byte values (zero padding): not secrets
                windows += 1
                assert w not in wire, "a 16-byte window of a plaintext 2PC frame appears on the relay"
    assert windows > 100
    # the inputs' encodings (little-endian, as the runtime packs them) never appear either
    for v in (x, y):
        assert struct.pack("<Q", v)[:5] not in wire  # 5 bytes: a chance match has probability < 2^-24 here
    # the hello of the 2PC session (its magic) is plaintext inside, not on the relay
    assert b"PAIRWISE" not in wire


@pytest.mark.parametrize("pairs", [((10, 20), (30, 5)), ((7, 7), (7, 9)), ((60000, 1), (2, 65535))])
def test_evaluator_result_equals_the_circuit_in_the_clear(pki, pairs):
    """The tunnel is a faithful channel: the output equals the circuit evaluated in plaintext
    (Circuit.evaluate_bits) on both inputs and both parties' random bits."""
    relay = Relay()
    x, y = pack_pair(*pairs[0], BITS, False), pack_pair(*pairs[1], BITS, False)
    rec: dict = {}
    g, e = run_pair(garbler_party(relay.a_user, pki, x, rec), evaluator_party(relay.b_user, pki, y, rec))
    assert g == "ok" and not isinstance(e, BaseException), (g, e)
    c = NC.circuit
    want = c.evaluate_bits([ints_to_bits([x], 2 * BITS), ints_to_bits([y], 2 * BITS), rec["rx"], e.random_bits["ry"]])
    assert [g.name for g in c.inputs] == ["x", "y", "rx", "ry"]
    assert np.array_equal(e.output_bits[0], want[0])


def flip_at(direction, frame_index, offset):
    def tamper(d, i, frame):
        if d == direction and i == frame_index:
            b = bytearray(frame)
            b[offset % len(b)] ^= 0x01
            return bytes(b)
        return None

    return tamper


# data-phase frames: index 3+ in each direction is after the handshake and the admission frames
@pytest.mark.parametrize("direction", ["ab", "ba"])
@pytest.mark.parametrize("offset", [0, 2, 4, 5, 20, -1])  # record type, version, length, first ciphertext, body, tag
def test_one_flipped_byte_fails_the_session_on_both_sides(pki, direction, offset):
    relay = Relay(tamper=flip_at(direction, 4, offset))
    x, y = pack_pair(1, 2, BITS, False), pack_pair(3, 4, BITS, False)
    rec: dict = {}
    g, e = run_pair(garbler_party(relay.a_user, pki, x, rec), evaluator_party(relay.b_user, pki, y, rec))
    assert len(relay.seen[direction]) > 4, "the test did not reach the frame it meant to alter"
    assert isinstance(g, TamperedStream), repr(g)
    assert isinstance(e, TamperedStream), repr(e)


@pytest.mark.parametrize("frame_index", [0, 1, 2, 3])
def test_a_flipped_byte_in_the_handshake_or_admission_fails_both_sides(pki, frame_index):
    relay = Relay(tamper=flip_at("ba", frame_index, 40))
    x, y = pack_pair(1, 2, BITS, False), pack_pair(3, 4, BITS, False)
    rec: dict = {}
    g, e = run_pair(garbler_party(relay.a_user, pki, x, rec), evaluator_party(relay.b_user, pki, y, rec))
    assert isinstance(g, ChannelError), repr(g)
    assert isinstance(e, ChannelError), repr(e)


def test_a_dropped_frame_is_detected(pki):
    """A relay that drops a record: the next record fails authentication (implicit sequence numbers)."""
    dropped = []

    def drop(d, i, frame):
        if d == "ab" and i == 5 and not dropped:
            dropped.append(frame)
            return b"\x17\x03\x03" + bytes(0)  # replaced by garbage that is not a record
        return None

    relay = Relay(tamper=drop)
    rec: dict = {}
    g, e = run_pair(
        garbler_party(relay.a_user, pki, pack_pair(1, 2, BITS, False), rec),
        evaluator_party(relay.b_user, pki, pack_pair(3, 4, BITS, False), rec),
    )
    assert isinstance(e, TamperedStream), repr(e)
    assert isinstance(g, TamperedStream), repr(g)


def test_a_replayed_record_is_detected(pki):
    def replay(d, i, frame, _mem={}):  # noqa: B006 - the default is the replay's memory across calls
        if d == "ab" and i == 4:
            _mem["f"] = frame
        if d == "ab" and i == 5 and "f" in _mem:
            return _mem["f"]
        return None

    relay = Relay(tamper=replay)
    rec: dict = {}
    g, e = run_pair(
        garbler_party(relay.a_user, pki, pack_pair(1, 2, BITS, False), rec),
        evaluator_party(relay.b_user, pki, pack_pair(3, 4, BITS, False), rec),
    )
    assert isinstance(e, TamperedStream), repr(e)
    assert isinstance(g, TamperedStream), repr(g)


def tunnel_pair(pki, a_name, a_dir, a_pin, b_name, b_dir, b_pin, **kw):
    relay = Relay()

    def a():
        t = TLSTunnel(relay.a_user, TLSConfig(a_dir, a_name), server=True, peer_name=a_pin, timeout=T, **kw)
        t.send(b"ping")
        assert t.recv() == b"pong"
        t.finish(T)
        return t.peer_identity

    def b():
        t = TLSTunnel(relay.b_user, TLSConfig(b_dir, b_name), server=False, peer_name=b_pin, timeout=T, **kw)
        assert t.recv() == b"ping"
        t.send(b"pong")
        t.finish(T)
        return t.peer_identity

    return run_pair(a, b)


def test_pinned_names_and_identities(pki):
    ia, ib = tunnel_pair(pki, "alice", pki["dir"], "bob", "bob", pki["dir"], "alice")
    assert ia.name == "bob" and ib.name == "alice"


def test_a_partner_with_another_certificate_name_is_refused_on_both_sides(pki):
    # alice expects bob, but mallory (a valid certificate of the same CA) answers
    ra, rb = tunnel_pair(pki, "alice", pki["dir"], "bob", "mallory", pki["dir"], "alice")
    assert isinstance(ra, AccessDenied) and "'mallory'" in str(ra) and "bob" in str(ra), repr(ra)
    assert isinstance(rb, AccessDenied) and "refused this tunnel" in str(rb), repr(rb)


def test_a_partner_with_another_role_is_refused(pki):
    ra, rb = tunnel_pair(pki, "alice", pki["dir"], "srv", "srv", pki["dir"], "alice", peer_roles="client")
    assert isinstance(ra, AccessDenied) and "role" in str(ra), repr(ra)
    assert isinstance(rb, AccessDenied), repr(rb)


def test_a_partner_from_another_ca_fails_authentication(pki):
    ra, rb = tunnel_pair(pki, "alice", pki["dir"], "bob", "bob", pki["other"], "alice")
    assert isinstance(ra, AuthenticationError), repr(ra)
    assert isinstance(rb, AuthenticationError), repr(rb)


def test_a_silent_relay_times_out_on_both_sides(pki):
    """A relay that forwards nothing: the handshake waits at most its timeout, then ChannelTimeout."""
    a_user, _a_relay = MemoryChannel.pair(timeout=1.0)
    b_user, _b_relay = MemoryChannel.pair(timeout=1.0)

    def a():
        return TLSTunnel(a_user, TLSConfig(pki["dir"], "alice"), server=True, peer_name="bob", handshake_timeout=1.0)

    def b():
        return TLSTunnel(b_user, TLSConfig(pki["dir"], "bob"), server=False, peer_name="alice", handshake_timeout=1.0)

    ra, rb = run_pair(a, b)
    assert isinstance(ra, ChannelTimeout) and isinstance(rb, ChannelTimeout), (ra, rb)


def test_a_relay_that_stops_mid_session_gives_peer_closed_or_timeout_never_success(pki):
    def cut(d, i, frame):
        if i == 6:
            raise ChannelError("relay stops")  # the pump closes both sides
        return None

    relay = Relay(tamper=cut)
    rec: dict = {}
    g, e = run_pair(
        garbler_party(relay.a_user, pki, pack_pair(1, 2, BITS, False), rec),
        evaluator_party(relay.b_user, pki, pack_pair(3, 4, BITS, False), rec),
    )
    assert isinstance(g, (PeerClosed, ChannelTimeout)), repr(g)
    assert isinstance(e, (PeerClosed, ChannelTimeout)), repr(e)


def test_large_frames_and_many_small_frames_round_trip(pki):
    relay = Relay()
    big = os.urandom(3 * MAX_RECORD * 20 + 7)  # many records, several carrier chunks
    smalls = [os.urandom(n) for n in range(0, 300, 7)]

    def a():
        t = TLSTunnel(relay.a_user, TLSConfig(pki["dir"], "alice"), server=True, peer_name="bob", timeout=T)
        t.send(big)
        for s in smalls:
            t.send(s)
        back = t.recv()
        t.finish(T)
        return back, t.wire_stats()

    def b():
        t = TLSTunnel(relay.b_user, TLSConfig(pki["dir"], "bob"), server=False, peer_name="alice", timeout=T)
        got = t.recv()
        rest = [t.recv() for _ in smalls]
        t.send(got[:100])
        t.finish(T)
        return got, rest

    (back, wire), (got, rest) = run_pair(a, b)
    assert got == big and rest == smalls and back == big[:100]
    assert all(len(f) <= (1 << 18) for f in relay.seen["ab"])  # carrier frames are bounded
    assert wire["bytes_sent"] > len(big)


def test_oversized_frame_is_refused_before_allocation(pki):
    relay = Relay()

    def a():
        t = TLSTunnel(relay.a_user, TLSConfig(pki["dir"], "alice"), server=True, peer_name="bob", timeout=T)
        t.send(b"x" * 5000)
        try:
            t.recv(5)
        except ChannelError as exc:
            return exc

    def b():
        t = TLSTunnel(relay.b_user, TLSConfig(pki["dir"], "bob"), server=False, peer_name="alice", timeout=T)
        try:
            t.recv(max_size=4096)
        except ChannelError as exc:
            t.close()
            return exc

    ra, rb = run_pair(a, b)
    assert "larger than the limit" in str(rb), rb
    assert isinstance(ra, (PeerClosed, ChannelTimeout)), ra


def test_check_records_rejects_non_tls_frames():
    rec = bytes([23, 3, 3, 0, 20]) + os.urandom(20)
    assert check_records(rec, handshake_done=True) is None
    assert check_records(rec + rec, handshake_done=True) is None
    assert "cut off" in check_records(rec[:-1], handshake_done=True)
    assert "trailing" in check_records(rec + b"\x17", handshake_done=True)
    assert "type 22" in check_records(bytes([22]) + rec[1:], handshake_done=True)
    assert check_records(bytes([22]) + rec[1:], handshake_done=False) is None
    assert "length" in check_records(bytes([23, 3, 3, 0, 3]) + b"abc", handshake_done=True)
    assert "empty" in check_records(b"", handshake_done=True)


def test_constructor_validates_its_arguments(pki):
    a, _ = MemoryChannel.pair()
    cfg = TLSConfig(pki["dir"], "alice")
    with pytest.raises(ValueError, match="peer_name"):
        TLSTunnel(a, cfg, server=True, peer_name="")
    with pytest.raises(TypeError):
        TLSTunnel(object(), cfg, server=True, peer_name="bob")  # type: ignore[arg-type]
    small, _ = MemoryChannel.pair(max_frame=1000)
    with pytest.raises(ValueError, match="TLS record"):
        TLSTunnel(small, cfg, server=True, peer_name="bob")
    with pytest.raises(ValueError, match="2\\^31"):
        TLSTunnel(a, cfg, server=True, peer_name="bob", max_frame=1 << 31)


def test_bits_helpers_still_work_through_the_tunnel(pki):
    relay = Relay()
    bits = np.random.default_rng(1).integers(0, 2, 1001).astype(bool)  # test data, not a secret

    def a():
        t = TLSTunnel(relay.a_user, TLSConfig(pki["dir"], "alice"), server=True, peer_name="bob", timeout=T)
        t.send_bits(bits)
        t.finish(T)

    def b():
        t = TLSTunnel(relay.b_user, TLSConfig(pki["dir"], "bob"), server=False, peer_name="alice", timeout=T)
        got = t.recv_bits(1001)
        t.finish(T)
        return got

    _, got = run_pair(a, b)
    assert np.array_equal(got, bits)
