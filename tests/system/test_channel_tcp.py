"""Two-process TCP tests of mpc.channel: real sockets between this process and a child Python.

Each child is ``python -c <script>`` (the project venv's interpreter) that talks
JSON lines on stdout; every wait in the parent and in the child is bounded by
a short timeout, and children are killed in ``finally`` blocks.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time

import numpy as np
import pytest

from pairwise.mpc.channel import (
    AddressInUse,
    ChannelTimeout,
    ConnectError,
    FrameError,
    HandshakeError,
    InsecureTransport,
    PeerClosed,
    TCPChannel,
    TCPListener,
    TruncatedFrame,
    handshake,
)
from tests.support.processes import CHILD_TIMEOUT, finish, read_line, spawn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- frames


def test_frames_echo_between_processes():
    child = spawn(
        """
        with TCPListener("127.0.0.1", 0) as lst:
            say(port=lst.port)
            ch = lst.accept(20)
        handshake(ch, "server", "echo-test")
        for _ in range(int(sys.argv[1])):
            ch.send(ch.recv())
        blocks = ch.recv_blocks(1000)
        ch.send_blocks(blocks ^ np.uint64(1))
        bits = ch.recv_bits(77)
        ch.send_bits(~bits)
        ch.close()
        """,
        5,
    )
    try:
        port = read_line(child)["port"]
        with TCPChannel.connect("127.0.0.1", port, deadline=10, timeout=CHILD_TIMEOUT) as ch:
            info = handshake(ch, "client", "echo-test", peer_role="server")
            assert info.peer_role == "server"
            payloads = [b"", b"a", os.urandom(65_537), os.urandom(1 << 20), os.urandom(5_000_001)]
            for p in payloads:
                ch.send(p)
                assert ch.recv() == p
            blocks = np.frombuffer(os.urandom(16_000), dtype=np.uint64).reshape(1000, 2)
            ch.send_blocks(blocks)
            assert np.array_equal(ch.recv_blocks(1000), blocks ^ np.uint64(1))
            bits = np.frombuffer(os.urandom(77), dtype=np.uint8) & 1
            ch.send_bits(bits)
            assert np.array_equal(ch.recv_bits(77), bits == 0)
            with pytest.raises(PeerClosed):
                ch.recv()
            # counters: wire bytes including the 4-byte prefixes; hellos of both sides have equal size
            hello = 8 + 2 + 16 + (1 + len("client")) + (2 + len("echo-test")) + 2
            expected = sum(len(p) + 4 for p in payloads) + (16_000 + 4) + (10 + 4) + (hello + 4)
            assert ch.messages_sent == ch.messages_received == len(payloads) + 3
            assert ch.bytes_sent == ch.bytes_received == expected
        assert child.wait(CHILD_TIMEOUT) == 0, child.stderr.read()
    finally:
        finish(child)


# --------------------------------------------------------------------------- bad frames


@pytest.mark.parametrize(
    "raw, error, message",
    [
        # length prefix announcing 2 GiB: refused before allocating anything
        (struct.pack("!I", 1 << 31), FrameError, "exceeds the limit"),
        # an HTTP request is not a frame: "GET " read as a length of ~1.2 GB
        (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", FrameError, "exceeds the limit"),
    ],
)
def test_oversized_or_garbage_frame_rejected(raw, error, message):
    with TCPListener("127.0.0.1", 0) as lst:
        child = spawn(
            """
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
            s.sendall(bytes.fromhex(sys.argv[2]))
            say(sent=True)
            time.sleep(20)
            """,
            lst.port,
            raw.hex(),
        )
        try:
            ch = lst.accept(CHILD_TIMEOUT)
            read_line(child)
            with ch:
                with pytest.raises(error, match=message):
                    ch.recv()
        finally:
            finish(child)


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "did not send a pairwise handshake"),
        (struct.pack("!I", 24) + b"\x13\x37" * 12, "not a pairwise endpoint"),
    ],
)
def test_garbage_instead_of_handshake(raw, message):
    with TCPListener("127.0.0.1", 0) as lst:
        child = spawn(
            """
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
            s.sendall(bytes.fromhex(sys.argv[2]))
            time.sleep(20)
            """,
            lst.port,
            raw.hex(),
        )
        try:
            with lst.accept(CHILD_TIMEOUT) as ch:
                with pytest.raises(HandshakeError, match=message):
                    handshake(ch, "server", "s")
        finally:
            finish(child)


def test_truncated_frame_rejected():
    with TCPListener("127.0.0.1", 0) as lst:
        child = spawn(
            """
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
            s.sendall(struct.pack("!I", 1000) + b"x" * 10)
            os._exit(0)
            """,
            lst.port,
        )
        try:
            with lst.accept(CHILD_TIMEOUT) as ch:
                with pytest.raises(TruncatedFrame, match="got 10 of 1000 bytes"):
                    ch.recv()
        finally:
            finish(child)


# --------------------------------------------------------------------------- dead / silent peers


def test_peer_killed_mid_recv_raises_connection_error_not_timeout():
    with TCPListener("127.0.0.1", 0) as lst:
        child = spawn(
            """
            ch = TCPChannel.connect("127.0.0.1", int(sys.argv[1]), deadline=20, timeout=20)
            handshake(ch, "evaluator", "kill-test")
            ch.send(b"partial protocol state")
            say(ready=True)
            time.sleep(60)
            """,
            lst.port,
        )
        try:
            ch = lst.accept(CHILD_TIMEOUT, recv_timeout=CHILD_TIMEOUT)
            with ch:
                handshake(ch, "garbler", "kill-test")
                assert read_line(child)["ready"]
                assert ch.recv() == b"partial protocol state"
                killer = threading.Timer(0.3, lambda: os.kill(child.pid, signal.SIGKILL))
                killer.start()
                try:
                    # blocked in recv when the peer dies: PeerClosed (a ConnectionError) at once,
                    # not ChannelTimeout after CHILD_TIMEOUT seconds
                    with pytest.raises(PeerClosed):
                        ch.recv()
                finally:
                    killer.join()
        finally:
            finish(child)


def test_silent_peer_times_out():
    with TCPListener("127.0.0.1", 0) as lst:
        child = spawn(
            """
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
            say(connected=True)
            time.sleep(20)
            """,
            lst.port,
        )
        try:
            with lst.accept(CHILD_TIMEOUT, recv_timeout=0.3) as ch:
                read_line(child)
                with pytest.raises(ChannelTimeout, match="within 0.3 s"):
                    ch.recv()
        finally:
            finish(child)


# --------------------------------------------------------------------------- connect / listen


def test_connect_to_closed_port_fails_with_clear_error():
    port = free_port()
    with pytest.raises(ConnectError, match=rf"could not connect to 127\.0\.0\.1:{port} within 0\.5 s"):
        TCPChannel.connect("127.0.0.1", port, deadline=0.5)


def test_connect_unresolvable_host():
    with pytest.raises(ConnectError, match="cannot resolve host 'no-such-host.invalid'"):
        TCPChannel.connect("no-such-host.invalid", 9000, deadline=5)


def test_connect_unreachable_address_gives_up_at_deadline():
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): never routed; refused, unreachable or silent here
    with pytest.raises(ConnectError, match="could not connect to 192.0.2.1:9"):
        TCPChannel.connect("192.0.2.1", 9, deadline=0.5, insecure=True)


def test_plaintext_off_loopback_needs_insecure():
    # refused before any packet is sent: the address is not loopback and there is no TLS
    with pytest.raises(InsecureTransport, match="not a loopback address.*--insecure"):
        TCPChannel.connect("192.0.2.1", 9, deadline=0.5)
    with pytest.raises(InsecureTransport, match="refusing plaintext listening on 0.0.0.0"):
        TCPListener("0.0.0.0", 0)


def test_connect_retries_until_the_peer_listens():
    port = free_port()
    child = spawn(
        """
        time.sleep(0.5)
        ch = TCPChannel.listen("127.0.0.1", int(sys.argv[1]), timeout=20)
        handshake(ch, "server", "late")
        ch.close()
        """,
        port,
    )
    try:
        with TCPChannel.connect("127.0.0.1", port, deadline=CHILD_TIMEOUT, timeout=CHILD_TIMEOUT) as ch:
            assert handshake(ch, "client", "late").peer_role == "server"
        assert child.wait(CHILD_TIMEOUT) == 0, child.stderr.read()
    finally:
        finish(child)


def test_port_in_use_clear_error():
    child = spawn(
        """
        with TCPListener("127.0.0.1", 0) as lst:
            say(port=lst.port)
            time.sleep(20)
        """
    )
    try:
        port = read_line(child)["port"]
        with pytest.raises(AddressInUse, match=f"cannot listen on 127.0.0.1:{port}: address already in use"):
            TCPListener("127.0.0.1", port)
        with pytest.raises(AddressInUse):
            TCPChannel.listen("127.0.0.1", port, timeout=1)
    finally:
        finish(child)


# --------------------------------------------------------------------------- handshake


def test_handshake_mismatch_detected_by_both_processes():
    child = spawn(
        """
        with TCPListener("127.0.0.1", 0) as lst:
            say(port=lst.port)
            ch = lst.accept(20)
        try:
            handshake(ch, "evaluator", "sess", extra=b"circuit-hash-A")
            say(error=None)
        except HandshakeError as e:
            say(error=type(e).__name__, message=str(e))
        """
    )
    try:
        port = read_line(child)["port"]
        with TCPChannel.connect("127.0.0.1", port, deadline=10, timeout=CHILD_TIMEOUT) as ch:
            with pytest.raises(HandshakeError, match="circuit mismatch"):
                handshake(ch, "garbler", "sess", extra=b"circuit-hash-B")
        report = read_line(child)
        assert report["error"] == "HandshakeError"
        assert "circuit mismatch" in report["message"]
    finally:
        finish(child)


# --------------------------------------------------------------------------- bounded memory


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _rx_queue(server_port: int, client_port: int) -> int | None:
    """Bytes waiting in the receive queue of the server's socket for this client (/proc/net/tcp)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            f = row.split()
            local, remote, queues = f[1], f[2], f[4]
            if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                return int(queues.split(":")[1], 16)
    return None


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc")
def test_announced_huge_frames_do_not_allocate():
    """Three peers announce 250 MiB frames (under the 256 MiB limit) and send 3 MiB of each: the
    receiving process grows by about what arrived, not by what was announced (old code: +750 MiB)."""
    server = spawn(
        """
        import threading
        lst = TCPListener("127.0.0.1", 0)
        say(port=lst.port, pid=os.getpid())
        chans = [lst.accept(20, recv_timeout=60) for _ in range(3)]
        def sink(ch):
            try:
                ch.recv()
            except ChannelError:
                pass
        for ch in chans:
            threading.Thread(target=sink, args=(ch,), daemon=True).start()
        say(accepted=3)
        time.sleep(60)  # the test kills us
        """
    )
    socks = []
    try:
        info = read_line(server)
        socks = [socket.create_connection(("127.0.0.1", info["port"]), timeout=CHILD_TIMEOUT) for _ in range(3)]
        assert read_line(server)["accepted"] == 3
        base = _rss_kib(info["pid"])
        chunk = os.urandom(1 << 20)
        for s in socks:
            s.sendall(struct.pack("!I", 250 << 20))
            for _ in range(3):
                s.sendall(chunk)
        # wait (bounded) until the server has read everything we sent: its receive queues are empty
        deadline = time.monotonic() + CHILD_TIMEOUT
        ports = [s.getsockname()[1] for s in socks]
        while any(_rx_queue(info["port"], p) for p in ports):
            assert time.monotonic() < deadline, "the server did not read the frames"
            time.sleep(0.05)
        grown_mib = (_rss_kib(info["pid"]) - base) / 1024
        assert grown_mib < 50, f"receiver grew by {grown_mib:.0f} MiB for 9 MiB received"
    finally:
        for s in socks:
            s.close()
        finish(server)
