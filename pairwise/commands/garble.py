"""``pairwise bench garble``: garbling and evaluation throughput of the half-gates engine.

Command
    ``pairwise bench garble --circuit (aes128|KERNEL|FILE) [--bits W] [--signed]
    --batch B [--repeat N] [--chunk C] [--threads T] [--progress|--no-progress] [--json]``

    Garbles the circuit for B instances into memory (tables of 32 bytes per AND
    per instance), evaluates them, checks the decoded outputs against plaintext
    evaluation, and prints two rates per role: *per machine*, AND gates per
    second of wall time (best of N runs, on T threads: default every CPU of
    the process; the engine splits a batch's chunks, a chunk's instances or a
    wide level's gates over them, :mod:`pairwise.mpc.garble.fused`), and *per
    core*, AND gates per second of process CPU time (all runs but the first).
    JSON keys: ``and_gates`` (per instance), ``batch``, ``garble_mands`` and
    ``eval_mands`` (millions of AND gates per second, per machine, all
    instances counted), ``garble_mands_per_core`` and ``eval_mands_per_core``,
    ``threads``, ``path`` (``aesni``, ``openssl`` or ``numpy``: how the engine
    ran), ``table_bytes``; also ``garble_seconds``, ``eval_seconds``,
    ``garble_fresh_mands``, ``circuit``, ``chunk``, ``repeat``, ``correct``.

    The timed sections are :meth:`pairwise.mpc.garble.Garbler.garble` (labels and Delta
    are drawn before the timer starts) and :meth:`pairwise.mpc.garble.Evaluator.evaluate`.
    The first run garbles into freshly allocated memory (reported as
    ``garble_fresh_mands``: on this VM touching fresh memory costs ~2 ms per
    MiB in page faults); later runs reuse that table buffer, so
    ``garble_mands`` (best of N) measures garbling itself; garbler and
    evaluator keep their scratch from run to run (``keep_scratch``, as a
    session does).  The compiled loops (:mod:`pairwise.mpc.garble.jit`) are
    loaded before any timer.

    ``--progress`` (default: when stderr is a terminal) draws a bar on stderr
    of the 2N garble and evaluate steps; it is updated between the timed
    sections, never inside one.

Security model
    A benchmark: both roles run in one process on random inputs; nothing is
    secret beyond the run.  Labels still come from the OS CSPRNG.
"""

from __future__ import annotations

import json
import time

import numpy as np

from pairwise.circuits.catalog import resolve_circuit
from pairwise.circuits.ir import Circuit
from pairwise.circuits.kernels import KERNELS

from .options import add_progress, positive_int, progress_bar

#: Refuse in-memory benchmarks whose tables would exceed this many bytes.
MAX_TABLE_BYTES = 3 << 30


def bench_garble(
    circuit: Circuit, batch: int, repeat: int = 3, chunk: int | None = None, progress=None, threads: int | None = None
) -> dict:
    """Best-of-``repeat`` garbling and evaluation times of ``circuit`` for ``batch`` instances.

    ``threads``: the engine's threads for these runs (None: its default, every
    CPU of the process).  ``progress(done, total)``, if given, counts the
    ``2 * repeat`` garble and evaluate steps; it is called between the timed
    sections only.
    """
    from pairwise.mpc.garble import Evaluator, GarbleError, Garbler, decode, split_outputs, table_bytes

    if repeat < 1:
        raise GarbleError(f"repeat must be at least 1, got {repeat}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise GarbleError(f"threads must be a positive integer, got {threads!r}")
    nbytes = table_bytes(circuit, batch) if batch >= 1 else 0
    if nbytes > MAX_TABLE_BYTES:
        raise GarbleError(
            f"tables of {circuit.n_and} ANDs x {batch} instances need {nbytes / 2**30:.1f} GiB in memory "
            f"(limit {MAX_TABLE_BYTES / 2**30:.0f} GiB); use a smaller --batch"
        )
    rng = np.random.default_rng()  # public benchmark inputs, not secrets
    bits = [rng.integers(0, 2, size=(batch, g.width)).astype(bool) for g in circuit.inputs]
    want = circuit.evaluate_bits(bits)
    from pairwise.mpc.garble import fused, jit

    jit.warm_up()  # the compiled loops: load them before any timer
    saved = fused.THREADS
    if threads is not None:
        fused.THREADS = threads
    used_threads = fused.THREADS
    best_g = best_e = float("inf")
    cpu_g = cpu_e = 0.0
    runs = 0
    fresh_g = None
    correct = True
    used_chunk = None
    buf = None
    if progress:
        progress(0, 2 * repeat)
    try:
        for r in range(repeat):
            g = Garbler(circuit, batch, chunk=chunk, keep_scratch=True)
            active = g.encode_all(bits)
            t0, c0 = time.perf_counter(), time.process_time()
            if buf is None:  # first run: tables into freshly allocated memory
                gc = g.garble()
            else:  # later runs reuse the first run's table memory (no page faults)
                gc = g.garble(out=buf)
            t1, c1 = time.perf_counter(), time.process_time()
            if buf is None:
                fresh_g = t1 - t0
                buf = gc.tables
            if progress:
                progress(2 * r + 1, 2 * repeat)
            ev = Evaluator(circuit, batch, chunk=g.chunk, keep_scratch=True)
            t2, c2 = time.perf_counter(), time.process_time()
            out = ev.evaluate(active, gc)
            t3, c3 = time.perf_counter(), time.process_time()
            best_g = min(best_g, t1 - t0)
            best_e = min(best_e, t3 - t2)
            if r > 0 or repeat == 1:  # (the first run also pays for fresh memory and first-use costs)
                cpu_g += c1 - c0
                cpu_e += c3 - c2
                runs += 1
            got = split_outputs(circuit, decode(out, g.decode_bits))
            correct &= all(np.array_equal(a, b) for a, b in zip(got, want))
            used_chunk = g.chunk
            if progress:
                progress(2 * r + 2, 2 * repeat)
    finally:
        fused.THREADS = saved
    n = circuit.n_and * batch
    rate = lambda ands, s: ands / s / 1e6 if s > 0 else float("inf")  # noqa: E731
    return {
        "circuit": circuit.name,
        "and_gates": circuit.n_and,
        "batch": batch,
        "chunk": used_chunk,
        "repeat": repeat,
        "threads": used_threads,
        "path": jit.path(),
        "garble_seconds": best_g,
        "eval_seconds": best_e,
        "garble_mands": rate(n, best_g),
        "eval_mands": rate(n, best_e),
        "garble_mands_per_core": rate(n * runs, cpu_g),
        "eval_mands_per_core": rate(n * runs, cpu_e),
        "table_bytes": nbytes,
        "garble_fresh_mands": rate(n, fresh_g) if fresh_g else float("inf"),
        "correct": bool(correct),
    }


def register(root, groups) -> None:
    p = groups["bench"].add_parser("garble", help="half-gates garbling / evaluation throughput (M AND/s)")
    p.add_argument(
        "--circuit", default="aes128", help=f"aes128, a kernel ({', '.join(KERNELS)}) or a Bristol Fashion file"
    )
    p.add_argument("--bits", type=int, default=32, help="kernel width in bits, default 32")
    p.add_argument("--signed", action="store_true", help="signed kernel inputs")
    p.add_argument(
        "--batch", type=positive_int, required=True, metavar="B", help="instances garbled at once (SIMD batch)"
    )
    p.add_argument("--repeat", type=positive_int, default=3, help="runs; the best is reported (default 3)")
    p.add_argument("--chunk", type=positive_int, default=None, help="instances per chunk (default: automatic)")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="engine threads (default: every CPU of the process; 1: one core)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_progress(p)
    p.set_defaults(func=cmd_bench_garble)


def cmd_bench_garble(args) -> int:
    from pairwise.mpc.garble import GarbleError

    if args.batch < 1:
        raise GarbleError(f"--batch must be a positive integer, got {args.batch}")
    c = resolve_circuit(args.circuit, args.bits, args.signed)
    with progress_bar(args, f"bench garble {c.name}", unit="step") as progress:
        r = bench_garble(c, args.batch, repeat=args.repeat, chunk=args.chunk, progress=progress, threads=args.threads)
    if args.json:
        print(json.dumps(r))
    else:
        print(
            f"circuit      {r['circuit']} ({r['and_gates']} AND gates), batch {r['batch']}, chunk {r['chunk']}, "
            f"{r['threads']} thread(s), {r['path']} path"
        )
        for role, key, sec in (("garble", "garble", "garble_seconds"), ("evaluate", "eval", "eval_seconds")):
            print(
                f"{role:<12} {r[key + '_mands']:8.2f} M AND/s per machine ({r[sec] * 1e3:.1f} ms, best of "
                f"{r['repeat']})   {r[key + '_mands_per_core']:8.2f} M AND/s per core (per CPU second)"
            )
        print(f"fresh memory {r['garble_fresh_mands']:8.2f} M AND/s (the first garbling, into fresh table memory)")
        print(f"tables       {r['table_bytes']} bytes (32 per AND per instance)")
        print(f"correct      {r['correct']}")
    return 0 if r["correct"] else 1
