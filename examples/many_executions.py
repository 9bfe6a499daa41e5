"""Many executions in one session, with the Python API, between two processes.

One session pays the handshake and the 128 base OTs once; every execution then
costs its garbled tables (32 bytes per AND gate), one frame from the evaluator
(its execution header and one correction bit per input bit) and, when both
learn the output, one frame of output bits back.  Here: AES-128 with the
garbler's key and the evaluator's plaintexts, 200 executions of one block each,
then one SIMD execution of 100 blocks, every result checked against
``cryptography``'s AES.

Run it (both roles on loopback; the evaluator is a child process):

    python examples/many_executions.py [--executions 200]

or one role per terminal (or machine, adding TLS as in examples/tls.py):

    python examples/many_executions.py --role garbler --port 9000
    python examples/many_executions.py --role evaluator --port 9000

Security model: semi-honest Yao (pairwise.mpc.twopc).  Both sides derive the
demo's key and plaintexts from a public seed so that each can check the
outputs; in real use each party's input is its own secret.
"""

from __future__ import annotations

import argparse
import hashlib
import socket
import subprocess
import sys
import time

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

import pairwise
from pairwise.mpc.garble import jit
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest


def demo_block(tag: str, i: int) -> int:
    """A public, reproducible 128-bit value (the demo's key and plaintexts; not a secret)."""
    return int.from_bytes(hashlib.sha256(f"{tag}/{i}".encode()).digest()[:16], "big")


def aes(key: int, block: int) -> int:
    enc = Cipher(algorithms.AES(key.to_bytes(16, "big")), modes.ECB()).encryptor()
    return int.from_bytes(enc.update(block.to_bytes(16, "big")), "big")


def garbler(port: int, executions: int) -> None:
    circuit = pairwise.load_circuit("aes128")
    jit.warm_up()  # the compiled one-instance loops, before the peer waits on us
    key = demo_block("key", 0)
    with pairwise.TCPChannel.listen("127.0.0.1", port, timeout=60) as ch:
        session = GarblerSession(ch, extra=circuit_digest(circuit))
        t0 = time.perf_counter()
        for i in range(executions):
            r = session.run(circuit, key)  # the garbler's only input group: the key
            assert r.outputs[0] == aes(key, demo_block("pt", i))
        per = (time.perf_counter() - t0) / executions
        r = session.run(circuit, [key] * 100)  # one SIMD execution of 100 instances
        assert [int(v) for v in r.outputs[0]] == [aes(key, demo_block("simd", j)) for j in range(100)]
        print(
            f"garbler: {executions} executions, {per * 1e3:.2f} ms each; SIMD x100 in {r.seconds * 1e3:.0f} ms; "
            f"all outputs equal cryptography's AES"
        )


def evaluator(port: int, executions: int) -> None:
    circuit = pairwise.load_circuit("aes128")
    jit.warm_up()
    with pairwise.TCPChannel.connect("127.0.0.1", port, deadline=60, timeout=60) as ch:
        session = EvaluatorSession(ch, extra=circuit_digest(circuit))
        key = demo_block("key", 0)  # (known here only to check the outputs)
        sent = 0
        for i in range(executions):
            r = session.run(circuit, demo_block("pt", i))  # the evaluator's input group: the plaintext
            assert r.outputs[0] == aes(key, demo_block("pt", i))
            sent += r.bytes_sent
        r = session.run(circuit, [demo_block("simd", j) for j in range(100)])
        assert [int(v) for v in r.outputs[0]] == [aes(key, demo_block("simd", j)) for j in range(100)]
        print(
            f"evaluator: {executions} executions, {sent / executions:.0f} bytes sent per execution "
            f"(header, correction bits, output bits, IKNP batches)"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=["garbler", "evaluator"], help="run one role only (default: both)")
    ap.add_argument("--port", type=int, default=0, help="loopback port (default: a free one)")
    ap.add_argument("--executions", type=int, default=200)
    args = ap.parse_args(argv)
    if args.role == "garbler":
        garbler(args.port, args.executions)
        return 0
    if args.role == "evaluator":
        evaluator(args.port, args.executions)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, __file__, "--role", "evaluator", "--port", str(port), "--executions", str(args.executions)]
    )
    try:
        garbler(port, args.executions)
        return child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()


if __name__ == "__main__":
    sys.exit(main())
