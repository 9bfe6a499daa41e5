"""In-process tests of mpc.channel: framing, typed helpers, counters, errors, handshake.

The two-process TCP tests are in tests/system/test_channel_tcp.py.
"""

from __future__ import annotations

import os
import socket
import struct
import threading

import numpy as np
import pytest

import pairwise.mpc.channel as channel_mod
import pairwise.mpc.channel.memory as memory_mod
from pairwise.mpc.channel import (
    DEFAULT_MAX_FRAME,
    HEADER_BYTES,
    MAGIC,
    PROTOCOL_VERSION,
    Channel,
    ChannelError,
    ChannelTimeout,
    FrameError,
    HandshakeError,
    Hello,
    MemoryChannel,
    NullChannel,
    PeerClosed,
    TCPChannel,
    TCPListener,
    TranscriptChannel,
    TruncatedFrame,
    handshake,
    session_bytes,
)


def run_pair(fa, fb, timeout=10.0):
    """Run fa(a) in this thread and fb(b) in another over a MemoryChannel pair; return both results.

    Exceptions are returned, not raised, so tests can check both sides.
    """
    a, b = MemoryChannel.pair(timeout=timeout)
    out = {}

    def side(name, f, ch):
        try:
            with ch:  # closed at the end, as a real party would: the peer then sees PeerClosed
                out[name] = f(ch)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out[name] = exc

    th = threading.Thread(target=side, args=("b", fb, b))
    th.start()
    side("a", fa, a)
    th.join(timeout + 5)
    assert not th.is_alive()
    return out["a"], out["b"]


def tcp_pair(timeout=5.0, max_frame=DEFAULT_MAX_FRAME, buffered=False):
    """Two TCPChannel ends over loopback in one process (for exact wire checks)."""
    with TCPListener("127.0.0.1", 0) as lst:
        client = TCPChannel.connect(
            "127.0.0.1", lst.port, deadline=5, timeout=timeout, max_frame=max_frame, buffered=buffered
        )
        server = lst.accept(timeout, max_frame=max_frame, buffered=buffered)
    return client, server


# ---------------------------------------------------------------- error classes


def test_error_hierarchy():
    from pairwise.mpc import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, OSError), name
        assert issubclass(cls, ChannelError), name
    assert issubclass(errors.ChannelTimeout, TimeoutError)
    assert issubclass(errors.PeerClosed, ConnectionError)
    assert issubclass(errors.TruncatedFrame, errors.FrameError)
    assert issubclass(errors.TruncatedFrame, errors.PeerClosed)
    assert str(errors.FrameError("clear message")) == "clear message"


# ---------------------------------------------------------------- memory channel


@pytest.mark.parametrize("size", [0, 1, 15, 16, 1000, 70_000, 3_000_000])
def test_memory_frames_roundtrip_and_counters(size):
    payload = os.urandom(size)
    a, b = MemoryChannel.pair(timeout=2)
    a.send(payload)
    a.send(b"second")
    assert b.recv() == payload
    assert b.recv() == b"second"
    assert a.messages_sent == 2 and b.messages_received == 2
    assert a.bytes_sent == size + 6 + 2 * HEADER_BYTES == b.bytes_received
    assert a.bytes_received == 0 and b.bytes_sent == 0
    assert a.stats() == {"bytes_sent": a.bytes_sent, "bytes_received": 0, "messages_sent": 2, "messages_received": 0}


def test_memory_send_copies_buffer():
    a, b = MemoryChannel.pair(timeout=2)
    buf = bytearray(b"abcd")
    a.send(buf)
    buf[0] = ord("X")
    assert b.recv() == b"abcd"


def test_memory_recv_timeout():
    a, b = MemoryChannel.pair(timeout=0.05)
    with pytest.raises(ChannelTimeout, match="within 0.05 s"):
        b.recv()
    # a timeout at a frame boundary leaves the channel usable
    a.send(b"late")
    assert b.recv() == b"late"
    with pytest.raises(ChannelTimeout):
        b.recv(timeout=0.01)


def test_memory_peer_close_delivers_pending_then_raises():
    a, b = MemoryChannel.pair(timeout=2)
    a.send(b"last words")
    a.close()
    assert b.recv() == b"last words"
    with pytest.raises(PeerClosed):
        b.recv()
    with pytest.raises(PeerClosed):
        b.send(b"x")
    with pytest.raises(ChannelError, match="closed"):
        a.send(b"x")
    a.close()  # idempotent


def test_memory_close_wakes_blocked_receiver():
    def receiver(ch):
        return ch.recv()

    def closer(ch):
        import time

        time.sleep(0.1)
        ch.close()

    ra, rb = run_pair(receiver, closer, timeout=10)
    assert isinstance(ra, PeerClosed)  # raised at once, not after the 10 s timeout


def test_max_frame_send_and_recv_limits():
    a, b = MemoryChannel.pair(timeout=1, max_frame=100)
    with pytest.raises(FrameError, match="max_frame=100"):
        a.send(b"x" * 101)
    a.send(b"x" * 100)  # channel still usable after a refused send
    assert b.recv() == b"x" * 100
    a.send(b"y" * 50)
    with pytest.raises(FrameError, match="exceeds the limit of 10 bytes"):
        b.recv(max_size=10)
    with pytest.raises(ChannelError, match="unusable"):
        b.recv()


@pytest.mark.parametrize("bad", [0, -1, 2**32])
def test_bad_max_frame(bad):
    with pytest.raises(ValueError, match="max_frame"):
        MemoryChannel.pair(max_frame=bad)


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "x"])
def test_bad_timeout(bad):
    with pytest.raises(ValueError, match="timeout"):
        MemoryChannel.pair(timeout=bad)


# ---------------------------------------------------------------- typed helpers


def test_blocks_roundtrip_little_endian():
    rng = np.random.default_rng(1)  # test data only
    blocks = rng.integers(0, 2**64, size=(37, 2), dtype=np.uint64)
    a, b = MemoryChannel.pair(timeout=2)
    a.send_blocks(blocks)
    a.send_blocks(blocks.reshape(37, 1, 2))
    got = b.recv_blocks(37)
    assert got.dtype == np.uint64 and got.flags.writeable
    assert np.array_equal(got, blocks)
    assert np.array_equal(b.recv_blocks((37, 1)), blocks.reshape(37, 1, 2))
    # wire format: 16 bytes per block, lo word first, little-endian (independent reference)
    t = TranscriptChannel(MemoryChannel.pair()[0])
    t.send_blocks(blocks[:1])
    lo, hi = int(blocks[0, 0]), int(blocks[0, 1])
    assert t.sent[0] == lo.to_bytes(8, "little") + hi.to_bytes(8, "little")
    assert int.from_bytes(t.sent[0], "little") == lo | (hi << 64)


def test_empty_arrays_roundtrip():
    a, b = MemoryChannel.pair(timeout=2)
    a.send_blocks(np.empty((2, 0, 2), dtype=np.uint64))
    a.send_bits(np.empty(0, dtype=bool))
    a.send_array(np.empty((0, 3), dtype=np.int32))
    assert b.recv_blocks((2, 0)).shape == (2, 0, 2)
    assert b.recv_bits(0).shape == (0,)
    assert b.recv_array(np.int32, (0, 3)).shape == (0, 3)
    assert a.bytes_sent == 3 * HEADER_BYTES


def test_recv_blocks_wrong_size():
    a, b = MemoryChannel.pair(timeout=2)
    a.send(b"\x00" * 32)
    with pytest.raises(FrameError, match="expected 3 blocks"):
        b.recv_blocks(3)
    a2, b2 = MemoryChannel.pair(timeout=2)
    a2.send(b"\x00" * 17)
    with pytest.raises(FrameError, match="multiple of 16"):
        b2.recv_blocks()


def test_send_blocks_validates():
    a, _ = MemoryChannel.pair()
    with pytest.raises(ValueError, match="last axis 2"):
        a.send_blocks(np.zeros((4, 3), dtype=np.uint64))
    with pytest.raises(ValueError, match="uint64"):
        a.send_blocks(np.zeros((4, 2), dtype=np.int64))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000, 12345])
def test_bits_roundtrip_against_int_reference(n):
    bits = np.frombuffer(os.urandom(n), dtype=np.uint8) & 1
    t = TranscriptChannel(MemoryChannel.pair(timeout=2)[0])
    a, b = MemoryChannel.pair(timeout=2)
    a.send_bits(bits)
    t.send_bits(bits.astype(bool))
    got = b.recv_bits(n)
    assert got.dtype == np.bool_ and np.array_equal(got, bits.astype(bool))
    # packing: bit i is bit (i % 8) of byte i // 8 (independent reference via python ints)
    ref = sum(int(v) << i for i, v in enumerate(bits)).to_bytes((n + 7) // 8, "little")
    assert t.sent[0] == ref
    assert a.bytes_sent == (n + 7) // 8 + HEADER_BYTES


def test_bits_reject_bad_values_and_padding():
    a, b = MemoryChannel.pair(timeout=2)
    with pytest.raises(ValueError, match="0/1"):
        a.send_bits(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="1-D"):
        a.send_bits(np.zeros((2, 2), dtype=bool))
    a.send(bytes([0b1000_0001]))  # 3 bits announced, bit 7 set in the padding
    with pytest.raises(FrameError, match="padding"):
        b.recv_bits(3)
    a2, b2 = MemoryChannel.pair(timeout=2)
    a2.send(b"\x00")
    with pytest.raises(FrameError, match="expected 9 bits"):
        b2.recv_bits(9)  # 9 bits need 2 bytes


def test_bits_exact_size_passes():
    a, b = MemoryChannel.pair(timeout=2)
    a.send(b"\xff\x01")
    assert b.recv_bits(9).all()


def test_array_roundtrip():
    a, b = MemoryChannel.pair(timeout=2)
    x = np.arange(-5, 7, dtype=np.int32).reshape(3, 4)
    a.send_array(x)
    a.send_array(np.array([1.5, -2.25]))
    got = b.recv_array(np.int32, (3, 4))
    assert np.array_equal(got, x) and got.dtype == np.int32
    assert np.array_equal(b.recv_array(np.float64, 2), [1.5, -2.25])
    a.send_array(np.zeros(3, dtype=np.uint16))
    with pytest.raises(FrameError, match="expected 4 values"):
        b.recv_array(np.uint16, 4)


# ---------------------------------------------------------------- null / transcript


def test_null_channel_counts_and_refuses_recv():
    ch = NullChannel()
    ch.send(b"abc")
    ch.send_blocks(np.zeros((10, 2), dtype=np.uint64))
    ch.flush()
    assert ch.messages_sent == 2 and ch.bytes_sent == 3 + 160 + 2 * HEADER_BYTES
    with pytest.raises(ChannelError, match="nothing to receive"):
        ch.recv()


def test_transcript_channel_records_both_directions():
    a, b = MemoryChannel.pair(timeout=2)
    ta = TranscriptChannel(a)
    ta.send(b"ping")
    b.send(b"pong")
    assert ta.recv() == b"pong"
    assert ta.sent == [b"ping"] and ta.received == [b"pong"]
    assert a.bytes_sent == ta.bytes_sent == 8


# ---------------------------------------------------------------- TCP in one process


@pytest.mark.parametrize("buffered", [False, True])
def test_tcp_frames_counters_match_wire(buffered):
    c, s = tcp_pair(buffered=buffered)
    with c, s:
        sizes = [0, 1, 100, 70_000, 2_000_000]
        payloads = [os.urandom(n) for n in sizes]
        for p in payloads:
            c.send(p)
        c.flush()
        for p in payloads:
            assert s.recv() == p
        assert c.bytes_sent == s.bytes_received == sum(sizes) + HEADER_BYTES * len(sizes)
        assert c.messages_sent == s.messages_received == len(sizes)
        s.send_blocks(np.arange(10, dtype=np.uint64).reshape(5, 2))
        s.flush()
        assert np.array_equal(c.recv_blocks(5), np.arange(10).reshape(5, 2))


def test_tcp_recv_flushes_pending_sends():
    # a request/response exchange with small buffered frames must not deadlock
    c, s = tcp_pair(timeout=5, buffered=True)
    with c, s:
        c.send(b"request")  # small: stays in the send buffer
        got = {}

        def server():
            got["request"] = s.recv()
            s.send(b"reply")
            s.flush()

        th = threading.Thread(target=server)
        th.start()
        assert c.recv() == b"reply"  # this recv flushed "request" first
        th.join(5)
        assert got["request"] == b"request"


def test_tcp_buffered_holds_small_frames_until_flush():
    c, s = tcp_pair(timeout=2, buffered=True)
    with c, s:
        c.send(b"small")
        s._sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            s._sock.recv(1)  # nothing on the wire yet
        c.flush()
        s._sock.setblocking(True)
        s._sock.settimeout(2)
        assert s._sock.recv(9) == struct.pack("!I", 5) + b"small"
    c2, s2 = tcp_pair(timeout=2, buffered=False)
    with c2, s2:
        c2.send(b"direct")
        s2._sock.settimeout(2)
        assert s2._sock.recv(10) == struct.pack("!I", 6) + b"direct"  # written at once


def test_tcp_raw_wire_format():
    c, s = tcp_pair()
    with c, s:
        raw = s._sock  # the accepted socket, read raw bytes from it
        c.send(b"hello")
        c.flush()
        data = b""
        while len(data) < 9:
            data += raw.recv(9 - len(data))
        assert data == struct.pack("!I", 5) + b"hello"


def test_tcp_oversize_header_rejected_without_allocation():
    c, s = tcp_pair(max_frame=1 << 20)
    with c, s:
        c._sock.sendall(struct.pack("!I", 0xFFFF_FFF0))
        with pytest.raises(FrameError, match="exceeds the limit"):
            s.recv()
        with pytest.raises(ChannelError, match="unusable"):
            s.recv()


def test_tcp_truncated_and_closed():
    c, s = tcp_pair()
    with s:
        c._sock.sendall(struct.pack("!I", 100) + b"x" * 10)
        c._sock.close()
        with pytest.raises(TruncatedFrame, match="got 10 of 100 bytes"):
            s.recv()
    c2, s2 = tcp_pair()
    with s2:
        c2.close()
        with pytest.raises(PeerClosed, match="closed the connection"):
            s2.recv()


def test_tcp_silent_peer_times_out():
    c, s = tcp_pair(timeout=0.2)
    with c, s:
        with pytest.raises(ChannelTimeout, match="within 0.2 s"):
            s.recv()


def test_listener_accept_timeout_and_port_zero():
    with TCPListener("127.0.0.1", 0) as lst:
        assert lst.port > 0 and lst.address == ("127.0.0.1", lst.port)
        with pytest.raises(ChannelTimeout, match="no peer connected"):
            lst.accept(timeout=0.05)


def test_listener_serves_many_clients():
    with TCPListener("127.0.0.1", 0) as lst:
        clients = [TCPChannel.connect("127.0.0.1", lst.port, deadline=5, timeout=5) for _ in range(3)]
        servers = [lst.accept(5) for _ in range(3)]
    for i, c in enumerate(clients):
        c.send(bytes([i]))
        c.flush()
    got = sorted(s.recv() for s in servers)
    assert got == [b"\x00", b"\x01", b"\x02"]
    for ch in clients + servers:
        ch.close()


def test_port_validation():
    with pytest.raises(ValueError, match="port"):
        TCPChannel.connect("127.0.0.1", 0, deadline=0.1)
    with pytest.raises(ValueError, match="port"):
        TCPListener("127.0.0.1", 70000)


def test_tcp_channel_over_socketpair():
    # TCPChannel works over any connected stream socket (e.g. one a server accepted itself)
    x, y = socket.socketpair()
    a, b = TCPChannel(x, timeout=2), TCPChannel(y, timeout=2)
    with a, b:
        a.send(b"over a socketpair")
        a.flush()
        assert b.recv() == b"over a socketpair"


# ---------------------------------------------------------------- handshake


def test_handshake_success_and_run_id():
    ra, rb = run_pair(
        lambda ch: handshake(ch, "garbler", "sess-1", b"digest", peer_role="evaluator"),
        lambda ch: handshake(ch, "evaluator", "sess-1", b"digest"),
    )
    assert ra.peer_role == "evaluator" and rb.peer_role == "garbler"
    assert ra.session_id == rb.session_id == b"sess-1"
    assert ra.run_id == rb.run_id and len(ra.run_id) == 16
    ra2, _ = run_pair(
        lambda ch: handshake(ch, "garbler", "sess-1", b"digest"),
        lambda ch: handshake(ch, "evaluator", "sess-1", b"digest"),
    )
    assert ra2.run_id != ra.run_id  # fresh nonces every run


@pytest.mark.parametrize(
    "kw_a, kw_b, message",
    [
        (dict(extra=b"circuit A"), dict(extra=b"circuit B"), "circuit mismatch"),
        (dict(session_id="s1"), dict(session_id="s2"), "session id mismatch"),
        (dict(role="garbler"), dict(role="garbler"), "role conflict"),
    ],
)
def test_handshake_mismatch_detected_on_both_sides(kw_a, kw_b, message):
    base_a = dict(role="garbler", session_id="s", extra=b"")
    base_b = dict(role="evaluator", session_id="s", extra=b"")
    ra, rb = run_pair(
        lambda ch: handshake(ch, **{**base_a, **kw_a}),
        lambda ch: handshake(ch, **{**base_b, **kw_b}),
    )
    for r in (ra, rb):
        assert isinstance(r, HandshakeError), r
        assert message in str(r)


def test_handshake_expected_peer_role():
    ra, rb = run_pair(
        lambda ch: handshake(ch, "garbler", "s", peer_role="evaluator"),
        lambda ch: handshake(ch, "server", "s"),
    )
    assert isinstance(ra, HandshakeError) and "role mismatch" in str(ra)
    assert rb.peer_role == "garbler"


def test_handshake_custom_extra_label():
    ra, rb = run_pair(
        lambda ch: handshake(ch, "server0", "s", b"p1", extra_label="parameter"),
        lambda ch: handshake(ch, "server1", "s", b"p2", extra_label="parameter"),
    )
    assert "parameter mismatch" in str(ra) and "parameter mismatch" in str(rb)


def test_handshake_version_mismatch():
    def old_peer(ch):
        ch.send(Hello(role="evaluator", session_id=b"s", version=PROTOCOL_VERSION + 1).encode())
        return ch.recv()

    ra, rb = run_pair(lambda ch: handshake(ch, "garbler", "s"), old_peer)
    assert isinstance(ra, HandshakeError) and "protocol version mismatch" in str(ra)
    assert Hello.decode(rb).role == "garbler"  # what the other side saw: a version-1 hello


@pytest.mark.parametrize(
    "frame, message",
    [
        (b"GET / HTTP/1.1\r\n\r\n", "not a pairwise endpoint"),
        (MAGIC + b"\x00", "not a pairwise endpoint"),
        (MAGIC + struct.pack("!H", PROTOCOL_VERSION) + b"\x00" * 16 + b"\x05ab", "malformed"),
        (Hello(role="e", session_id=b"s").encode() + b"trailing", "malformed"),
    ],
)
def test_handshake_rejects_garbage_hello(frame, message):
    # the garbage peer sends, then reads our hello before hanging up
    ra, _ = run_pair(lambda ch: handshake(ch, "garbler", "s"), lambda ch: (ch.send(frame), ch.recv()), timeout=2)
    assert isinstance(ra, HandshakeError) and message in str(ra)


def test_handshake_oversized_first_frame():
    ra, _ = run_pair(
        lambda ch: handshake(ch, "garbler", "s"), lambda ch: (ch.send(b"\x00" * 100_000), ch.recv()), timeout=2
    )
    assert isinstance(ra, HandshakeError) and "did not send a pairwise handshake" in str(ra)


def test_handshake_silent_peer_times_out():
    # the silent peer reads our hello and then waits (until we hang up)
    ra, _ = run_pair(
        lambda ch: handshake(ch, "garbler", "s", timeout=0.1), lambda ch: (ch.recv(), ch.recv()), timeout=2
    )
    assert isinstance(ra, ChannelTimeout) and "handshake" in str(ra)


def test_handshake_validates_arguments():
    a, _ = MemoryChannel.pair()
    with pytest.raises(ValueError, match="role"):
        handshake(a, "", "s")
    with pytest.raises(ValueError, match="role"):
        handshake(a, "x" * 33, "s")
    with pytest.raises(ValueError, match="session id"):
        handshake(a, "g", b"")
    with pytest.raises(ValueError, match="digest"):
        handshake(a, "g", "s", b"x" * 5000)
    assert session_bytes("é") == "é".encode()
    with pytest.raises(ValueError, match="str or bytes"):
        session_bytes(12)


def test_channel_is_abstract():
    ch = Channel()
    with pytest.raises(NotImplementedError):
        ch.send(b"x")


def test_memory_recycled_frames_are_reused_by_same_size_sends(monkeypatch):
    """recycle() hands a received frame back: the next send of that size reuses its memory, other sizes do not."""
    a, b = MemoryChannel.pair(timeout=2)
    a.send(b"x" * 1000)
    f = b.recv_frame()
    b.recycle(f)
    a.send(b"y" * 1000)
    g = b.recv_frame()
    assert g is f and g == b"y" * 1000 and b.bytes_received == 2 * (1000 + HEADER_BYTES)
    b.recycle(g)
    a.send(b"z" * 999)
    h = b.recv_frame()
    assert h is not f and h == b"z" * 999
    # at most RECYCLE_BYTES are kept per direction
    monkeypatch.setattr(memory_mod, "RECYCLE_BYTES", 1500)  # read where it is defined
    b.recycle(h)  # 999 bytes kept (the 1000-byte one is still pooled: 1999 > 1500, so this one is dropped)
    a.send(b"w" * 999)
    assert b.recv_frame() is not h
    a.close()
    b.recycle(bytearray(10))  # after the peer closed: harmless
    b.close()
    b.recycle(bytearray(10))  # after closing: ignored


def test_recycle_is_a_no_op_elsewhere():
    n = NullChannel()
    n.recycle(bytearray(5))


# Every name of the former single module pairwise.mpc.channel (issue 24 made it a package);
# the private ones are imported by tests, benchmarks and protocols.
_FORMER_MODULE_NAMES = """
AccessDenied AddressInUse AuthenticationError BytesLike Channel ChannelError ChannelTimeout ConnectError
DEFAULT_HANDSHAKE_TIMEOUT DEFAULT_MAX_FRAME DEFAULT_TIMEOUT FrameError HEADER_BYTES HandshakeError
HandshakeResult Hello InsecureTransport MAGIC MemoryChannel NullChannel PROTOCOL_VERSION PeerClosed
PeerFilter PendingConnection ProtocolError RECYCLE_BYTES TCPChannel TCPListener TranscriptChannel
TruncatedFrame _ADMIT _ADMIT_MAX _FLUSH_AT _HEADER _HELLO_FIXED _HELLO_MAX _MAX_EXTRA _MAX_FRAME_LIMIT
_MAX_ROLE _MAX_SESSION _NONCE_BYTES _Pipe _RECV_STEP _SMALL_FRAME _ZEROS _admission _admit _admitted
_as_byte_view _check_peers _check_port _check_role _check_timeout _describe_oserror _frombuffer _show
handshake session_bytes
""".split()


@pytest.mark.parametrize("name", _FORMER_MODULE_NAMES)
def test_the_package_re_exports_every_name_of_the_former_module(name):
    """Moved names keep a re-export, and it is the very object of the submodule that defines it."""
    import importlib

    obj = getattr(channel_mod, name)  # AttributeError when a re-export went missing
    modules = [
        importlib.import_module(m)
        for m in (
            "pairwise.mpc.channel.base",
            "pairwise.mpc.channel.memory",
            "pairwise.mpc.channel.tcp",
            "pairwise.mpc.channel.hello",
            "pairwise.mpc.errors",
        )
    ]
    sources = [getattr(m, name) for m in modules if hasattr(m, name)]
    assert sources and all(s is obj for s in sources)


def test_the_handshake_function_is_not_shadowed_by_a_submodule():
    assert callable(channel_mod.handshake) and channel_mod.handshake.__module__ == "pairwise.mpc.channel.hello"
    assert channel_mod.__all__.count("handshake") == 1


def test_tcp_recycled_frames_are_reused_for_the_same_size_and_overwritten_whole():
    """A frame handed back with recycle() receives the next frame of its size (every byte rewritten); other
    sizes get a fresh buffer, and a truncated frame still fails."""
    a, b = socket.socketpair()
    ca, cb = TCPChannel(a, timeout=5), TCPChannel(b, timeout=5)
    try:
        ca.send(b"x" * 1000)
        f = cb.recv_frame()
        assert f == b"x" * 1000
        cb.recycle(f)
        ca.send(b"y" * 1000)
        g = cb.recv_frame()
        assert g is f and g == b"y" * 1000
        cb.recycle(g)
        ca.send(b"z" * 999)
        h = cb.recv_frame()
        assert h is not f and h == b"z" * 999
        a.sendall(struct.pack("!I", 1000) + b"w" * 10)  # the recycled size, cut short
        a.close()
        with pytest.raises(TruncatedFrame):
            cb.recv_frame()
    finally:
        ca.close()
        cb.close()
