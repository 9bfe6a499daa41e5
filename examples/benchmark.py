"""Benchmark a circuit between two processes: latency of the first execution, then amortized time and CPU.

Measures what a user of the runtime sees for a circuit of their choice
(a kernel name, ``aes128``, a Bristol Fashion file, or ``FILE.py:FUNCTION``):
the first execution of a fresh session (handshake, base OTs, first IKNP batch,
one execution), then many executions of one instance in the same session
(wall time and process CPU per execution on each side) and one SIMD batch.
Inputs are random; outputs are checked against the plaintext circuit.

Run it:

    python examples/benchmark.py                       # AES-128, 300 executions
    python examples/benchmark.py --circuit examples/custom_circuit.py:dot_product --executions 500

For a comparison with EMP-toolkit, run both interleaved on the same machine
with ``benchmarks/twoparty.py --emp PATH`` (benchmarks/RESULTS.md): a ratio
against a figure measured elsewhere says little.  Record ``uptime`` with any
number: on a shared machine, prefer the CPU columns.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

import pairwise
from pairwise.circuits.ir import EVALUATOR, GARBLER
from pairwise.commands.twopc import load_circuit
from pairwise.mpc.garble import garble_and_evaluate, jit
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest


def random_bits(circuit, party, batch: int, rng) -> dict:
    """Uniform input bits for each of the party's groups (a benchmark's inputs; (batch, width) bools)."""
    return {g.name: rng.integers(0, 2, size=(batch, g.width)).astype(bool) for g in circuit.groups_of(party)}


def party(role: str, port: int, spec: str, executions: int, simd: int, seed: int) -> dict:
    circuit = load_circuit(spec)
    jit.warm_up()  # compiled loops and the circuit's schedule before any timer, as a long-running party
    garble_and_evaluate(circuit, [np.zeros((1, g.width), bool) for g in circuit.inputs])
    rng = np.random.default_rng(seed)  # the same stream on both sides: each can check the outputs
    both = [(random_bits(circuit, GARBLER, 1, rng), random_bits(circuit, EVALUATOR, 1, rng)) for _ in range(executions)]
    simd_in = (random_bits(circuit, GARBLER, simd, rng), random_bits(circuit, EVALUATOR, simd, rng))
    mine = 0 if role == "garbler" else 1
    if role == "garbler":
        ch = pairwise.TCPChannel.listen("127.0.0.1", port, timeout=60)
        t0 = time.perf_counter()
        session = GarblerSession(ch, extra=circuit_digest(circuit))
    else:
        ch = pairwise.TCPChannel.connect("127.0.0.1", port, deadline=60, timeout=60)
        t0 = time.perf_counter()
        session = EvaluatorSession(ch, extra=circuit_digest(circuit))
    first = session.run(circuit, both[0][mine])
    first_s = time.perf_counter() - t0
    c0, w0, per = time.process_time(), time.perf_counter(), []
    for g_in, e_in in both[1:]:
        per.append(session.run(circuit, (g_in, e_in)[mine]).seconds)
    wall = (time.perf_counter() - w0) / max(1, len(per))
    cpu = (time.process_time() - c0) / max(1, len(per))
    r = session.run(circuit, simd_in[mine])
    ok = True
    for res, (g_in, e_in) in ((first, both[0]), (r, simd_in)):
        want = circuit.evaluate_bits([g_in.get(g.name, e_in.get(g.name)) for g in circuit.inputs])
        ok &= all(np.array_equal(a, b) for a, b in zip(res.output_bits, want))
    ch.close()
    return {
        "role": role,
        "circuit": circuit.name,
        "and_gates": circuit.n_and,
        "first_ms": 1e3 * first_s,
        "amortized_ms": 1e3 * wall,
        "median_ms": 1e3 * statistics.median(per) if per else None,
        "cpu_ms": 1e3 * cpu,
        "simd": simd,
        "simd_ms_per_instance": 1e3 * r.seconds / simd,
        "check": ok,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--circuit", default="aes128")
    ap.add_argument("--executions", type=int, default=300)
    ap.add_argument("--simd", type=int, default=100)
    ap.add_argument("--role", choices=["garbler", "evaluator"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role:
        print(json.dumps(party(args.role, args.port, args.circuit, args.executions, args.simd, args.seed)))
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        __file__,
        "--circuit",
        args.circuit,
        "--executions",
        str(args.executions),
        "--simd",
        str(args.simd),
        "--port",
        str(port),
        "--seed",
        str(args.seed),
    ]
    procs = [
        subprocess.Popen(cmd + ["--role", role], stdout=subprocess.PIPE, text=True) for role in ("garbler", "evaluator")
    ]
    try:
        outs = [p.communicate(timeout=600)[0] for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit(f"a party failed (exit codes {[p.returncode for p in procs]})")
        rows = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    g, e = rows
    print(f"{g['circuit']} ({g['and_gates']} AND gates), two processes on loopback, load {os.getloadavg()[0]:.2f}")
    print(f"  first execution (handshake, base OTs, one execution): {max(g['first_ms'], e['first_ms']):.1f} ms")
    print(
        f"  amortized over {args.executions - 1} executions: {max(g['amortized_ms'], e['amortized_ms']):.2f} ms "
        f"(median {max(g['median_ms'], e['median_ms']):.2f} ms); CPU per execution garbler {g['cpu_ms']:.2f} ms, "
        f"evaluator {e['cpu_ms']:.2f} ms"
    )
    print(f"  SIMD x{args.simd}: {max(g['simd_ms_per_instance'], e['simd_ms_per_instance']):.3f} ms per instance")
    print(f"  outputs checked against the plaintext circuit: {g['check'] and e['check']}")
    return 0 if g["check"] and e["check"] else 1


if __name__ == "__main__":
    sys.exit(main())
