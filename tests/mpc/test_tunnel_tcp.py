"""TLSTunnel over real TCP connections through a raw-byte relay, as the collect aggregator relays.

Each user connects outbound to the relay with a TCPChannel in mutual TLS (the
users' certificates, the relay's own); the relay pipes the decrypted byte
streams of the two connections into each other (asyncio, one task per
direction, half-close when a side ends), optionally flipping one byte at a
given offset of one direction.  The users' tunnel runs inside.  Checks: the
2PC completes and the relay's bytes hold no plaintext frame of the tunnel,
and a flipped byte fails both users with TamperedStream.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from pairwise.circuits.kernels import pack_pair
from pairwise.circuits.noise import noisy_kernel
from pairwise.mpc.channel import TCPChannel, TLSTunnel, TranscriptChannel
from pairwise.mpc.errors import ChannelError, TamperedStream
from pairwise.mpc.tls import TLSConfig, create_certificate
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession

T = 30.0
NC = noisy_kernel("kendall", 16, False, epsilon=1.0)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    create_certificate(d, "relay", "server")
    for name in ("alice", "bob"):
        create_certificate(d, name, "client")
    return d


class RawRelay:
    """Accepts two TLS connections and pipes their byte streams (after the admission step) into each other."""

    def __init__(self, pki, flip: tuple[int, int] | None = None) -> None:
        self.pki, self.flip = pki, flip  # flip: (direction 0 = first->second, byte offset)
        self.seen = [bytearray(), bytearray()]
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),), daemon=True)
        self.thread.start()
        assert self.ready.wait(T)

    async def _main(self) -> None:
        from pairwise.mpc.channel.tcp import _ADMIT

        conns: list = []
        both = asyncio.Event()

        async def on_conn(reader, writer):
            writer.write((len(_ADMIT) + 1).to_bytes(4, "big") + _ADMIT + b"\x01")  # admit any CA certificate
            await writer.drain()
            n = int.from_bytes(await reader.readexactly(4), "big")
            await reader.readexactly(n)  # the user's verdict on us
            conns.append((reader, writer))
            if len(conns) == 2:
                both.set()

        ctx = TLSConfig(self.pki, "relay").context(server=True)
        server = await asyncio.start_server(on_conn, "127.0.0.1", 0, ssl=ctx)
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        await asyncio.wait_for(both.wait(), T)

        async def pipe(i, src, dst):
            off = 0
            try:
                while True:
                    data = await asyncio.wait_for(src.read(1 << 16), T)
                    if not data:
                        break
                    self.seen[i] += data
                    if self.flip is not None and self.flip[0] == i and off <= self.flip[1] < off + len(data):
                        b = bytearray(data)
                        b[self.flip[1] - off] ^= 0x01
                        data = bytes(b)
                    off += len(data)
                    dst.write(data)
                    await dst.drain()
            except (TimeoutError, ConnectionError, OSError):
                pass
            try:
                dst.write_eof()  # half-close: the other user still reads what was sent before
            except (OSError, RuntimeError):
                pass

        (r0, w0), (r1, w1) = conns
        await asyncio.gather(pipe(0, r0, w1), pipe(1, r1, w0))
        for w in (w0, w1):
            w.close()
        server.close()


def parties(relay, pki, wait: float = T):
    """Both users through ``relay``; ``wait`` bounds each of their waits for data after the handshake (a test whose
    tampering leaves one user waiting for bytes that never come gives a short one: the outcome is the same, a
    ChannelError); connecting and the TLS handshake keep the generous ``T``."""
    rec: dict = {}

    def garbler():
        carrier = TCPChannel.connect(
            "127.0.0.1", relay.port, timeout=T, tls=TLSConfig(pki, "alice"), peer_names="relay"
        )
        tun = TLSTunnel(
            carrier, TLSConfig(pki, "alice"), server=True, peer_name="bob", timeout=wait, handshake_timeout=T
        )
        ch = rec["g"] = TranscriptChannel(tun)
        GarblerSession(ch, b"p").run(
            NC.circuit, {"x": pack_pair(5, 6, 16, False)}, output="evaluator", random=("rx", "ry")
        )
        tun.finish(wait)
        return "ok"

    def evaluator():
        carrier = TCPChannel.connect("127.0.0.1", relay.port, timeout=T, tls=TLSConfig(pki, "bob"), peer_names="relay")
        tun = TLSTunnel(
            carrier, TLSConfig(pki, "bob"), server=False, peer_name="alice", timeout=wait, handshake_timeout=T
        )
        r = EvaluatorSession(TranscriptChannel(tun), b"p").run(
            NC.circuit, {"y": pack_pair(7, 1, 16, False)}, output="evaluator", random=("rx", "ry")
        )
        tun.finish(wait)
        return r

    out = [None, None]

    def wrap(i, f):
        try:
            out[i] = f()
        except BaseException as exc:  # noqa: BLE001
            out[i] = exc

    # the garbler connects first, so it is the relay's connection 0
    tg = threading.Thread(target=wrap, args=(0, garbler), daemon=True)
    tg.start()
    import time

    time.sleep(0.3)
    te = threading.Thread(target=wrap, args=(1, evaluator), daemon=True)
    te.start()
    for t in (tg, te):
        t.join(4 * T)
        assert not t.is_alive()
    return out, rec


def test_2pc_through_a_tcp_relay_shows_only_ciphertext(pki):
    relay = RawRelay(pki)
    (g, e), rec = parties(relay, pki)
    assert g == "ok" and not isinstance(e, BaseException), (g, e)
    relay.thread.join(T)
    wire = bytes(relay.seen[0] + relay.seen[1])
    plain = rec["g"].sent + rec["g"].received
    for frame in plain:
        for i in range(0, max(0, len(frame) - 15), 4):
            w = frame[i : i + 16]
            if len(set(w)) > 2:
                assert w not in wire
    assert b"PAIRWISE" not in wire[200:]  # the only plaintext magic is none: the hello is inside the tunnel


# offsets land in TLS payload, in TLS record headers and in the relay's own length prefixes alike
@pytest.mark.parametrize(
    "direction,offset",
    [
        (0, 3000),
        (1, 2500),
        (0, 1500),
        (1, 1200),
        (1, 4000),
        # the garbler's last data frame (bytes 5970-8653 of its stream): the garbler reads no data after it, only the
        # evaluator's fin (TLSTunnel.finish), which the evaluator never sends once it saw the corrupt record
        (0, 6000),
    ],
)
def test_a_flipped_byte_in_the_tcp_relay_fails_both_users(pki, direction, offset):
    relay = RawRelay(pki, flip=(direction, offset))
    (g, e), _ = parties(relay, pki)
    assert len(relay.seen[direction]) > offset
    assert isinstance(g, ChannelError) and isinstance(e, ChannelError), (g, e)
    assert isinstance(g, TamperedStream) and isinstance(e, TamperedStream), (g, e)


def frame_starts(stream: bytes) -> list[int]:
    """Offsets of the relay-level frames (4-byte length prefixes) in one direction's byte stream."""
    out, pos = [], 0
    while pos + 4 <= len(stream):
        out.append(pos)
        pos += 4 + int.from_bytes(stream[pos : pos + 4], "big")
    return out


@pytest.fixture(scope="module")
def clean_frames(pki) -> list[int]:
    """Frame offsets of the evaluator's stream in one untampered session (the same for every session)."""
    clean = RawRelay(pki)
    (g, e), _ = parties(clean, pki)
    assert g == "ok" and not isinstance(e, BaseException), (g, e)
    clean.thread.join(T)
    starts = frame_starts(bytes(clean.seen[1]))
    assert len(starts) > 5
    return starts


SHORT = 3.0  # the wait of a user left waiting for bytes the tampering relay never delivers


@pytest.mark.parametrize("which", [2, 3, 4])  # the high byte of a length prefix: an announced +64 KiB frame
def test_a_flipped_length_prefix_fails_both_users(pki, clean_frames, which):
    relay = RawRelay(pki, flip=(1, clean_frames[-which] + 1))
    (g, e), _ = parties(relay, pki, wait=SHORT)
    assert isinstance(g, ChannelError) and isinstance(e, ChannelError), (g, e)


def test_the_last_confirmation_can_only_be_checked_by_its_receiver(pki, clean_frames):
    """The evaluator's close_notify is the last frame it sends: a relay that corrupts it fails the garbler, while
    the evaluator has received everything intact and may report (two generals: any protocol has a last message;
    the collect aggregator counts a pair only when both users report success)."""
    relay = RawRelay(pki, flip=(1, clean_frames[-1] + 1))
    (g, e), _ = parties(relay, pki, wait=SHORT)
    assert isinstance(g, ChannelError), g
