"""The Yao runtime and ``pairwise 2pc`` / ``pairwise demo 2pc`` between real processes on loopback.

Every party is a separate Python process: the real command line
(``python -m pairwise 2pc garbler|evaluator ...``), or a short script that
speaks the real protocol up to some point and then dies, stalls or sends
garbage.  Outputs are checked against independent references (Python-int
kernel formulas, ``cryptography``'s AES).  Every wait is bounded: each
``communicate`` has a timeout well above what a correct run needs, every
party gets a ``--timeout``, and children are killed in ``finally``.
No test measures time; the bounds only turn a hang into a failure.

Loaded machines (issue 14): a party's wait for its peer *to connect* is
separate from its wait on a message (``--connect-timeout`` vs
``--timeout``), and the connect waits are as generous as the bounds,
because a peer that is a fresh Python process may need many seconds to
start on a busy 2-core machine.  Short ``--timeout`` values appear only
where a test wants a timeout, after the peer is known to be connected.
Tests that start many processes start at most :data:`MAX_PROCS` at a time.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import struct
import subprocess
import sys
import textwrap
import time
from importlib import resources

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from pairwise.circuits.kernels import kernel_reference
from pairwise.mpc.channel import ChannelTimeout, TCPListener

CLI = [sys.executable, "-m", "pairwise"]
BOUND = 180.0  # upper bound on any wait for a child; correct runs finish in a few seconds on an idle machine
PARTY_TIMEOUT = "60"  # --timeout given to the parties in correct runs: no wait on a message longer than this
ACCEPT = str(int(BOUND))  # --connect-timeout: how long a party waits for its peer's process to connect
MAX_PROCS = max(2, os.cpu_count() or 2)  # child processes started at once by the many-process tests

PREAMBLE = textwrap.dedent(
    """
    import json, os, signal, socket, struct, sys, time
    import numpy as np
    from pairwise.circuits.catalog import resolve_circuit
    from pairwise.mpc import twopc
    from pairwise.mpc.channel import TCPChannel
    from pairwise.mpc.garble import default_chunk
    from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest
    from pairwise.commands.twopc import _cot_source, _ot_batch
    def session_args(c):  # what `pairwise 2pc` passes for circuit c
        return {"ot_batch": _ot_batch(c), "extra": circuit_digest(c), "cot": _cot_source(c)}
    def say(**kw):
        print(json.dumps(kw), flush=True)
    def die():
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen(CLI + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def script(body: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PREAMBLE + textwrap.dedent(body), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout: float = BOUND) -> tuple[int, str, str]:
    """Wait for the process (bounded), return (returncode, stdout, stderr); kill it if it hangs."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(
            f"process {proc.args[-8:]} did not finish within {timeout} s (hang); stderr: {err}"
        ) from None
    return proc.returncode, out, err


def kill(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        try:
            p.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError):
            pass


def read_line(proc: subprocess.Popen, timeout: float = BOUND) -> dict:
    """Next JSON line of a script child (bounded wait)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            raise AssertionError(f"child printed nothing within {timeout} s")
    finally:
        sel.close()
    line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        raise AssertionError(f"child exited ({proc.returncode}) without output: {proc.stderr.read()}")
    return json.loads(line)


def wait_stderr(proc: subprocess.Popen, text: str, timeout: float = BOUND) -> str:
    """Read the child's stderr line by line until ``text`` appears (bounded); the lines read so far."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    seen = []
    end = time.monotonic() + timeout
    try:
        while not any(text in line for line in seen):
            left = end - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise AssertionError(f"{text!r} not on stderr within {timeout} s; got {''.join(seen)!r}")
            line = proc.stderr.readline()
            if not line:
                raise AssertionError(f"child exited ({proc.wait(10)}) before printing {text!r}: {''.join(seen)!r}")
            seen.append(line)
    finally:
        sel.close()
    return "".join(seen)


def stop(proc: subprocess.Popen) -> tuple[int, str, str]:
    """SIGTERM (a clean, catchable exit for ``pairwise``), then collect (rc, stdout, rest of stderr)."""
    proc.terminate()
    return finish(proc)


def start_pair(garbler_args: list[str], evaluator_args: list[str]) -> tuple[subprocess.Popen, subprocess.Popen]:
    """Start both CLI parties on a free loopback port (the evaluator retries until the garbler listens)."""
    port = free_port()
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--timeout",
        PARTY_TIMEOUT,
        "--connect-timeout",
        ACCEPT,
        *garbler_args,
    )
    e = cli(
        "2pc",
        "evaluator",
        "--connect",
        f"127.0.0.1:{port}",
        "--timeout",
        PARTY_TIMEOUT,
        "--connect-timeout",
        ACCEPT,
        *evaluator_args,
    )
    return g, e


def in_waves(jobs: list, start, collect, per_job: int) -> list:
    """``start(job)`` at most MAX_PROCS // per_job jobs at a time, ``collect`` their results in order.

    ``start`` returns a tuple holding the job's processes; every process is killed in the end.
    """
    width = max(1, MAX_PROCS // per_job)
    results = []
    for i in range(0, len(jobs), width):
        started = []
        try:
            for job in jobs[i : i + width]:
                started.append(start(job))
            results += [collect(procs) for procs in started]
        finally:
            kill(*(p for procs in started for p in procs if isinstance(p, subprocess.Popen)))
    return results


def run_pairs(cases: list[tuple[list[str], list[str]]]):
    """Run garbler/evaluator pairs (each on its own port, a few at a time); [((rc, out, err) g, (...) e), ...]."""
    return in_waves(cases, lambda c: start_pair(*c), lambda ge: (finish(ge[0]), finish(ge[1])), per_job=2)


def run_all(commands: list[list[str]], timeout: float = BOUND, per_job: int = 1) -> list[tuple[int, str, str]]:
    """Run CLI commands (a few at a time; ``per_job`` processes each); their (rc, stdout, stderr) in order."""
    return in_waves(commands, lambda c: (cli(*c),), lambda ps: finish(ps[0], timeout), per_job=per_job)


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def aes_ecb(key: bytes, block: bytes) -> bytes:
    return Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(block)


# --------------------------------------------------------------------------- correct runs


KERNEL_CASES = [
    # kernel, bits, signed, garbler input, evaluator input, expected output
    ("gini", 32, False, "4000000000", "123", 4000000000 - 123),
    ("kendall", 16, True, "-3,4", "5,-1", -1),  # the example
    ("auc", 64, False, str(2**64 - 1), "0", 2),
]


@pytest.mark.slow  # several processes at once (still runs in CI)
def test_cli_kernels_both_parties():
    cases = []
    for kernel, bits, signed, g_in, e_in, _ in KERNEL_CASES:
        common = ["--circuit", kernel, "--bits", str(bits), "--json"] + (["--signed"] if signed else [])
        cases.append((common + [f"--input={g_in}"], common + [f"--input={e_in}"]))
    for (kernel, _bits, _signed, g_in, e_in, expected), ((grc, gout, gerr), (erc, eout, eerr)) in zip(
        KERNEL_CASES, run_pairs(cases)
    ):
        assert grc == 0 and erc == 0, (kernel, gerr, eerr)
        gd, ed = last_json(gout), last_json(eout)
        if kernel == "kendall":
            ref = kernel_reference("kendall", tuple(map(int, g_in.split(","))), tuple(map(int, e_in.split(","))))
        else:
            ref = kernel_reference(kernel, [int(g_in)], [int(e_in)])[0]
        assert int(ref) == expected
        assert gd["outputs"] == ed["outputs"] == [expected], kernel
        for key in (
            "outputs",
            "and_gates",
            "bytes_sent",
            "bytes_received",
            "messages_sent",
            "messages_received",
            "seconds",
        ):
            assert key in gd and key in ed
        assert gd["role"] == "garbler" and ed["role"] == "evaluator"
        assert gd["and_gates"] == ed["and_gates"] > 0
        # each side counts the whole session; what one sent the other received
        assert gd["bytes_sent"] == ed["bytes_received"] and gd["bytes_received"] == ed["bytes_sent"]
        assert gd["messages_sent"] == ed["messages_received"] and gd["messages_received"] == ed["messages_sent"]
        assert gd["seconds"] > 0 and ed["seconds"] > 0


@pytest.mark.slow  # several processes at once (still runs in CI)
def test_cli_aes128_against_cryptography():
    """The built-in aes128 and the same circuit given as a Bristol Fashion file path."""
    ref = resources.files("pairwise.circuits").joinpath("data", "aes_128.txt.gz")
    with resources.as_file(ref) as path:
        specs = ["aes128", str(path)]
        data = [(os.urandom(16), os.urandom(16)) for _ in specs]
        results = run_pairs(
            [
                (
                    ["--circuit", spec, "--json", "--input", key.hex()],
                    ["--circuit", spec, "--json", "--input", pt.hex()],
                )
                for spec, (key, pt) in zip(specs, data)
            ]
        )
    for spec, (key, pt), ((grc, gout, gerr), (erc, eout, eerr)) in zip(specs, data, results):
        assert grc == 0 and erc == 0, (spec, gerr, eerr)
        want = aes_ecb(key, pt).hex()
        assert last_json(gout)["outputs"] == last_json(eout)["outputs"] == [want], spec
        gd = last_json(gout)
        assert gd["and_gates"] == 6400
        # the garbler's traffic is dominated by 32 bytes per AND gate (plus its 128 labels and the base OTs)
        assert 32 * 6400 <= gd["bytes_sent"] <= 1.08 * 32 * 6400


def test_cli_output_to_garbler_only_and_text_report():
    common = ["--circuit", "auc", "--bits", "12", "--output", "garbler"]
    [((grc, gout, gerr), (erc, eout, eerr))] = run_pairs(
        [(common + ["--input", "700", "--json"], common + ["--input", "700"])]
    )
    assert grc == 0 and erc == 0, (gerr, eerr)
    assert last_json(gout)["outputs"] == [1]  # x == y: 2[x > y] + [x == y] = 1
    assert "(not revealed to this party)" in eout
    for key in ("and_gates", "bytes_sent", "bytes_received", "seconds"):
        assert key in eout


# --------------------------------------------------------------------------- mismatches


def test_cli_circuit_mismatch_both_fail():
    """An evaluator with another circuit stops both parties at once: each prints "circuit mismatch" and exits
    with status 2 (the garbler does not wait out its --connect-timeout, which is BOUND here)."""
    gini32 = ["--circuit", "gini", "--bits", "32"]
    others = {
        "width": ["--circuit", "gini", "--bits", "16"],
        "signedness": ["--circuit", "gini", "--bits", "32", "--signed"],
        "kernel": ["--circuit", "auc", "--bits", "32"],
    }

    def collect(pair):
        g, e = pair
        return finish(g), finish(e)

    results = in_waves(
        [(gini32 + ["--input", "5"], other + ["--input", "6"]) for other in others.values()],
        lambda c: start_pair(*c),
        collect,
        per_job=2,
    )
    for what, ((grc, gout, gerr), (erc, eout, eerr)) in zip(others, results):
        assert erc == 2 and "circuit mismatch" in eerr and "this side runs" in eerr, (what, eerr)
        assert grc == 2 and "circuit mismatch" in gerr and "gini32u" in gerr, (what, gerr)
        assert not gout and not eout  # nothing was computed


def test_cli_stray_connection_does_not_stop_the_garbler():
    """A connection that is no pairwise peer is rejected and the garbler goes on to serve its evaluator."""
    port = free_port()
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "5",
        "--timeout",
        PARTY_TIMEOUT,
        "--connect-timeout",
        ACCEPT,
    )
    try:
        deadline = time.monotonic() + BOUND
        while True:  # the stray: garbage bytes, then gone
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                    sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
                break
            except OSError:
                assert time.monotonic() < deadline, "the garbler never listened"
                time.sleep(0.1)
        wait_stderr(g, "rejected connection")
        e = cli(
            "2pc",
            "evaluator",
            "--connect",
            f"127.0.0.1:{port}",
            "--circuit",
            "gini",
            "--input",
            "9",
            "--json",
            "--timeout",
            PARTY_TIMEOUT,
            "--connect-timeout",
            ACCEPT,
        )
        erc, eout, eerr = finish(e)
        grc, gout, gerr = finish(g)
        assert erc == grc == 0, (eerr, gerr)
        assert last_json(eout)["outputs"] == [4]
    finally:
        kill(g)


def test_execution_header_mismatch_between_processes():
    """Same session digest but a different circuit per execution: ExecutionMismatch on both processes."""
    child = script(
        """
        c = resolve_circuit("gini", 16)
        ch = TCPChannel.connect("127.0.0.1", int(sys.argv[1]), deadline=180, timeout=60)
        s = EvaluatorSession(ch, ot_batch=1024)
        try:
            s.run(c, 3)
        except twopc.ExecutionMismatch as exc:
            say(error=str(exc))
        """,
        port := free_port(),
    )
    try:
        from pairwise.circuits.catalog import resolve_circuit
        from pairwise.mpc.channel import TCPChannel
        from pairwise.mpc.twopc import ExecutionMismatch, GarblerSession

        with TCPChannel.listen("127.0.0.1", port, timeout=BOUND, recv_timeout=60) as ch:
            s = GarblerSession(ch, ot_batch=1024)
            with pytest.raises(ExecutionMismatch, match="circuit mismatch"):
                s.run(resolve_circuit("gini", 32), 3)
            assert "circuit mismatch" in read_line(child)["error"]
        rc, _, err = finish(child)
        assert rc == 0, err
    finally:
        kill(child)


# --------------------------------------------------------------------------- peer killed / silent


def test_evaluator_killed_mid_tables_garbler_reports_connection_error():
    port = free_port()
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--circuit",
        "aes128",
        "--input",
        "00" * 16,
        "--timeout",
        PARTY_TIMEOUT,
        "--connect-timeout",
        ACCEPT,
    )
    ev = script(
        """
        c = resolve_circuit("aes128")
        ch = TCPChannel.connect("127.0.0.1", int(sys.argv[1]), deadline=180, timeout=60)
        s = EvaluatorSession(ch, **session_args(c))
        header = twopc.wire.exec_header(c, 1, default_chunk(c, 1), 0, "both")
        ch.send(header)                          # the pool is empty: the headers cross on their own,
        assert ch.recv() == header
        s.cot.batch_size = 128                   # (as the session sizes a base-OT batch: the shortfall)
        r, _ = s.cot.recv_random(128)            # then the COTs (128 bits: from base OTs, as the CLI does),
        ch.send_bits(r)                          # then d = r xor x for x = 0 (the garbler's labels: its stream)
        for _ in range(3):
            ch.recv()                            # the first frames of the garbler's stream
        say(killing=True)
        die()
        """,
        port,
    )
    try:
        assert read_line(ev)["killing"]
        # the garbler is sending tables or waiting for the output bits: it must see the connection drop,
        # not wait out its --timeout
        rc, out, err = finish(g)
        assert rc == 2
        assert "PeerClosed" in err or "closed" in err, err
        assert "ChannelTimeout" not in err
    finally:
        kill(g, ev)


def test_garbler_killed_mid_tables_evaluator_reports_connection_error():
    port = free_port()
    gar = script(
        """
        c = resolve_circuit("variance", 32)
        ch = TCPChannel.listen("127.0.0.1", int(sys.argv[1]), timeout=180, recv_timeout=60)
        s = GarblerSession(ch, **session_args(c))
        from pairwise.mpc.garble import Garbler
        header = twopc.wire.exec_header(c, 1, default_chunk(c, 1), 0, "both")
        assert ch.recv() == header               # the evaluator's header alone (its pool is empty),
        ch.send(header)                          # ours back,
        s.cot.batch_size = 32                    # (as the session sizes a base-OT batch: the shortfall)
        q = s.cot.send_random(32)                # the COTs (32 bits: from base OTs, as the CLI does),
        q[ch.recv_bits(32)] ^= s.delta           # then its correction bits d
        gb = Garbler(c, 1, delta=s.delta, input_zero={"y": q.reshape(32, 1, 2)}, chunk=default_chunk(c, 1))
        seg = next(iter(gb.iter_tables()))
        ch.send(bytes(seg[: len(seg) // 2]))     # half a segment, then gone
        say(killing=True)
        die()
        """,
        port,
    )
    e = cli(
        "2pc",
        "evaluator",
        "--connect",
        f"127.0.0.1:{port}",
        "--circuit",
        "variance",
        "--input",
        "7",
        "--timeout",
        PARTY_TIMEOUT,
        "--connect-timeout",
        ACCEPT,
    )
    try:
        assert read_line(gar)["killing"]
        rc, out, err = finish(e)
        assert rc == 2
        assert "closed the connection" in err, err
    finally:
        kill(gar, e)


def test_silent_evaluator_garbler_times_out_not_hangs():
    """The peer completes the session setup and then says nothing (but keeps the socket open)."""
    port = free_port()
    # --timeout 10: long enough for the setup's messages on a busy machine, short enough for a test
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "1",
        "--timeout",
        "10",
        "--connect-timeout",
        ACCEPT,
    )
    ev = script(
        """
        c = resolve_circuit("gini", 32)
        ch = TCPChannel.connect("127.0.0.1", int(sys.argv[1]), deadline=180, timeout=60)
        s = EvaluatorSession(ch, **session_args(c))
        say(ready=True)
        time.sleep(300)  # killed when the test ends
        """,
        port,
    )
    try:
        assert read_line(ev)["ready"]
        rc, out, err = finish(g)
        assert rc == 2
        assert "ChannelTimeout" in err and "within 10 s" in err, err
    finally:
        kill(g, ev)


def test_garbler_without_peer_times_out():
    port = free_port()
    rc, out, err = finish(
        cli("2pc", "garbler", "--listen", f"127.0.0.1:{port}", "--circuit", "gini", "--input", "1", "--timeout", "1")
    )
    assert rc == 2 and "no peer connected" in err, err


# --------------------------------------------------------------------------- garbage on the socket


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"\xff\xff\xff\xff", "exceeds the limit"),  # oversized length prefix
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "exceeds the limit"),  # another protocol on the port
        (struct.pack("!I", 10) + b"0123456789", "not a pairwise endpoint"),  # framed, but not a hello
        (struct.pack("!I", 100) + b"x" * 10, "middle of a frame"),  # truncated, then closed
    ],
    ids=["oversized", "http", "framed-garbage", "truncated"],
)
def test_garbage_server_evaluator_clear_error(raw, message):
    with TCPListener("127.0.0.1", 0) as lst:
        e = cli(
            "2pc",
            "evaluator",
            "--connect",
            f"127.0.0.1:{lst.port}",
            "--circuit",
            "gini",
            "--input",
            "1",
            "--timeout",
            PARTY_TIMEOUT,
            "--connect-timeout",
            ACCEPT,
        )
        try:
            conn = lst.accept(BOUND)
            conn._sock.sendall(raw)  # raw bytes, not a frame: the point of this test
            try:
                conn._sock.shutdown(socket.SHUT_WR)
            except OSError:  # the evaluator already rejected the bytes and closed (a loaded machine's timing)
                pass
            rc, out, err = finish(e)
            conn.close()
        finally:
            kill(e)
    assert rc == 2
    assert message in err, err


def test_garbage_client_garbler_clear_error():
    port = free_port()
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "1",
        "--timeout",
        PARTY_TIMEOUT,
        "--connect-timeout",
        ACCEPT,
    )
    try:
        sock = None
        end = time.monotonic() + BOUND
        while time.monotonic() < end:  # the garbler process needs a moment (on a busy machine, many) to listen
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                if g.poll() is not None:
                    break
                time.sleep(0.05)
        assert sock is not None, f"garbler never listened: {finish(g)}"
        with sock:
            sock.sendall(b"\xf0" + os.urandom(63))  # big-endian length prefix >= 0xf0000000: over any limit
            err = wait_stderr(g, "did not send a pairwise handshake")
        rc, out, rest = stop(g)  # it rejected the stranger and kept waiting for its evaluator
    finally:
        kill(g)
    assert rc == 143 and not out
    assert "exceeds the limit" in err + rest, err


def test_oversized_frame_after_setup_rejected():
    """A peer that passes the handshake and the base OTs, then sends a huge frame instead of its header."""
    port = free_port()
    g = cli(
        "2pc",
        "garbler",
        "--listen",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "1",
        "--timeout",
        PARTY_TIMEOUT,
        "--connect-timeout",
        ACCEPT,
    )
    ev = script(
        """
        c = resolve_circuit("gini", 32)
        ch = TCPChannel.connect("127.0.0.1", int(sys.argv[1]), deadline=180, timeout=60)
        s = EvaluatorSession(ch, **session_args(c))
        ch._sock.sendall(struct.pack("!I", 1 << 27) + b"\\0" * 1000)
        say(sent=True)
        time.sleep(300)  # killed when the test ends
        """,
        port,
    )
    try:
        assert read_line(ev)["sent"]
        rc, out, err = finish(g)
        assert rc == 2
        from pairwise.mpc.twopc import EXEC
        from pairwise.mpc.twopc.session import REQUEST_SLACK

        limit = EXEC.size + REQUEST_SLACK  # the header alone (the evaluator's COT pool is empty), + slack
        assert f"exceeds the limit of {limit} bytes" in err, err
    finally:
        kill(g, ev)


# --------------------------------------------------------------------------- addresses and inputs


def test_port_in_use_clear_error():
    with TCPListener("127.0.0.1", 0) as lst:
        rc, out, err = finish(
            cli(
                "2pc",
                "garbler",
                "--listen",
                f"127.0.0.1:{lst.port}",
                "--circuit",
                "gini",
                "--input",
                "1",
                "--timeout",
                "5",
            )
        )
    assert rc == 2 and "address already in use" in err, err


def test_connect_failures_clear_error():
    port = free_port()
    closed = cli(
        "2pc",
        "evaluator",
        "--connect",
        f"127.0.0.1:{port}",
        "--circuit",
        "gini",
        "--input",
        "1",
        "--connect-timeout",
        "0.5",
    )
    unresolvable = cli(
        "2pc",
        "evaluator",
        "--connect",
        "no-such-host.invalid:9000",
        "--circuit",
        "gini",
        "--input",
        "1",
        "--connect-timeout",
        "5",
    )
    bad_address = cli("2pc", "evaluator", "--connect", "127.0.0.1", "--circuit", "gini", "--input", "1")
    try:
        rc, _, err = finish(closed)
        assert rc == 2 and f"could not connect to 127.0.0.1:{port} within 0.5 s" in err, err
        rc, _, err = finish(unresolvable)
        assert rc == 2 and "cannot resolve host" in err, err
        rc, _, err = finish(bad_address)
        assert rc == 2 and "HOST:PORT" in err, err
    finally:
        kill(closed, unresolvable, bad_address)


BAD_INPUTS = {
    "unsigned": (["--circuit", "gini", "--bits", "8", "--input", "256"], "out of range for 8-bit unsigned"),
    "signed": (["--circuit", "gini", "--bits", "8", "--signed", "--input=-129"], "out of range for 8-bit signed"),
    "kendall-format": (["--circuit", "kendall", "--bits", "8", "--input", "1,2,3"], "two integers"),
    "aes-hex": (["--circuit", "aes128", "--input", "ff" * 17], "more than 128 bits"),
    "not-hex": (["--circuit", "aes128", "--input", "xyz"], "not hexadecimal"),
    "width": (["--circuit", "gini", "--bits", "80", "--input", "1"], "width must be"),
    "circuit": (["--circuit", "no-such-circuit", "--input", "1"], "no such circuit"),
}


def bad_input_runs(cases: dict, with_evaluator=()) -> dict:
    """Run each bad-input case as garbler on a *taken* port and (if named in ``with_evaluator``) as
    evaluator against a trap listener (both parties share the parser; a few cases run both).
    A few cases run at a time (MAX_PROCS processes).

    Returns {case: (garbler result, evaluator result or None, connections that reached the trap)}.
    """
    listeners = []

    def start(name):
        args = cases[name][0]
        taken, trap = TCPListener("127.0.0.1", 0), TCPListener("127.0.0.1", 0)
        listeners.extend([taken, trap])
        g = cli("2pc", "garbler", "--listen", f"127.0.0.1:{taken.port}", "--timeout", PARTY_TIMEOUT, *args)
        e = (
            cli("2pc", "evaluator", "--connect", f"127.0.0.1:{trap.port}", "--timeout", PARTY_TIMEOUT, *args)
            if name in with_evaluator
            else None
        )
        return g, e, trap

    def collect(job):
        g, e, trap = job
        gres, eres = finish(g), (finish(e) if e is not None else None)
        try:  # both processes have exited: any connection they made is queued on the trap by now
            trap.accept(0.1).close()
            reached = 1
        except ChannelTimeout:
            reached = 0
        return gres, eres, reached

    names = list(cases)
    try:
        results = in_waves(names, lambda n: start(n), collect, per_job=2)
    finally:
        for lst in listeners:
            lst.close()
    return dict(zip(names, results))


@pytest.mark.slow  # several processes at once (still runs in CI)
def test_bad_input_fails_before_any_socket():
    """The range/format check comes first: not "address already in use", and no connection to the trap."""
    both = ("unsigned", "signed", "aes-hex")
    runs = bad_input_runs(BAD_INPUTS, with_evaluator=both)
    for name, ((grc, _, gerr), eres, reached) in runs.items():
        message = BAD_INPUTS[name][1]
        assert grc == 2 and message in gerr, (name, gerr)
        if name in both:
            erc, _, eerr = eres
            assert erc == 2 and message in eerr, (name, eerr)
        assert reached == 0, name


def test_kendall_input_out_of_range_says_out_of_range():
    case = {"kendall-range": (["--circuit", "kendall", "--bits", "8", "--signed", "--input", "1,200"], "out of range")}
    (grc, _, gerr), (erc, _, eerr), reached = bad_input_runs(case, with_evaluator=case)["kendall-range"]
    assert reached == 0 and grc == erc == 2
    assert "out of range" in gerr and "out of range" in eerr, gerr


# --------------------------------------------------------------------------- demo


DEMOS = [
    ([], [1234 - 987]),  # default: gini 32, inputs 1234 and 987
    (
        ["--circuit", "variance", "--bits", "8", "--signed", "--garbler-input=-128", "--evaluator-input", "127"],
        [255 * 255 // 2],
    ),
]


@pytest.mark.slow  # several processes at once (still runs in CI)
def test_demo_2pc():
    commands = [["demo", "2pc", "--json", *args] for args, _ in DEMOS]
    commands.append(["demo", "2pc", "--circuit", "aes128"])  # text report, FIPS-197 C.1 inputs by default
    commands.append(["demo", "2pc", "--bits", "8", "--garbler-input", "300"])
    *json_runs, text_run, bad_run = run_all(commands, per_job=3)  # each demo is three processes
    for (args, expected), (rc, out, err) in zip(DEMOS, json_runs):
        assert rc == 0, (args, err)
        d = last_json(out)
        assert d["garbler"]["outputs"] == d["evaluator"]["outputs"] == expected, args
        assert d["garbler"]["bytes_sent"] == d["evaluator"]["bytes_received"]
        assert d["garbler"]["and_gates"] == d["evaluator"]["and_gates"] > 0
    rc, out, err = text_run
    assert rc == 0, err
    assert out.count("outputs=['69c4e0d86a7b0430d8cdb78070b4c55a']") == 2 and "two processes on 127.0.0.1:" in out
    rc, out, err = bad_run  # a bad input fails before any process starts
    assert rc == 2 and "out of range" in err, err
