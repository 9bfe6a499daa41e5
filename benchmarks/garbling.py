"""Garbling and evaluation throughput of the half-gates engine (mpc.garble).

Measures in-memory M AND gates/s for garbling and for evaluation on
  (a) the AES-128 Bristol circuit with B = 1, 64, 1024 instances,
  (b) the gini kernel at 32 bits with B = 10^5,
  (c) a synthetic layer of 2^20 independent AND gates (B = 1),
  (d) AES-128 for 10^4 instances garbled and evaluated in one streamed pass
      (segments flow from the garbler to the evaluator; peak memory reported),
plus the latency of one AES-128 garble + evaluate (B = 1), and optionally a
profile of where the time goes (``--profile``).

Usage::

    .venv/bin/python benchmarks/garbling.py            # full table
    .venv/bin/python benchmarks/garbling.py --quick    # smaller sizes
    .venv/bin/python benchmarks/garbling.py --json
    .venv/bin/python benchmarks/garbling.py --profile  # cProfile breakdown (AES B=1024, layer)
    .venv/bin/python benchmarks/garbling.py --two-process 1024  # both cores: garbler and evaluator processes

Per core and per machine: the SIMD rows (AES-128 at B = 64, 1024, gini, the AND
layer) run twice, ``T=1`` (one thread: the per-core rate) and ``T=`` every CPU of
the process (the engine splits the batch's chunks, or a chunk's instances, or a
wide level's gates, over its threads: ``mpc.garble.fused``); the garbler and the
evaluator still run one after the other.  The same-run comparison with
EMP-toolkit is ``benchmarks/garbling_vs_emp.py``.  ``--two-process B`` runs AES-128 for B instances (and gini-32 for 10^5, as in
(b)) as one SIMD execution between a garbler process and an evaluator process over
loopback TCP (benchmarks/_twoparty_worker.py: real session, IKNP OT for the
evaluator's inputs), so garbling and evaluation overlap on the two cores, and
prints AND gates per second of wall time next to the one-process garble +
evaluate rate.  The other way to use both cores is to run two independent
garbler/evaluator pairs, one per core: that is what ``pairwise ustat
--cluster local:2`` does with its Dask workers (benchmarks/ustat_scale.py
measures it).

Every run also checks the decoded outputs against plaintext evaluation.
Timings are wall-clock best-of-N, next to AND gates per CPU second over all N
runs (robust when the machine's 2 cores are shared; a per-core figure, not a
per-machine one).  The first run garbles into freshly allocated memory
(``fresh``: first-touch page faults); later runs reuse that buffer and the
engine's scratch (``keep_scratch``, as a session repeating executions does).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time

import numpy as np

from pairwise.circuits.catalog import resolve_circuit
from pairwise.circuits.ir import AND, EVALUATOR, GARBLER, Circuit, InputGroup, OutputGroup
from pairwise.mpc.garble import Evaluator, Garbler, decode, jit, split_outputs


def and_layer_circuit(n: int) -> Circuit:
    """n independent AND gates: garbler bits a[i], evaluator bits b[i], outputs a[i] & b[i]."""
    return Circuit(
        3 * n,
        np.full(n, AND, dtype=np.uint8),
        np.arange(n),
        np.arange(n, 2 * n),
        np.arange(2 * n, 3 * n),
        [InputGroup("a", GARBLER, np.arange(n)), InputGroup("b", EVALUATOR, np.arange(n, 2 * n))],
        [OutputGroup("z", np.arange(2 * n, 3 * n))],
        name=f"and_layer_{n}",
    )


def measure(circuit: Circuit, batch: int, repeat: int, threads: int | None = None) -> dict:
    """Best-of-``repeat`` garble() and evaluate() times (wall and CPU) for one configuration.

    ``threads``: the engine's threads for this run (``mpc.garble.fused.THREADS``; None: its default,
    every CPU of the process; 1: the per-core figure).  Garbler and Evaluator keep their scratch for the
    next run (``keep_scratch``, as a session repeating executions does), and tables go into the first
    run's buffer, so only the first run touches fresh memory (``garble_fresh_mands``).  CPU rates
    (``*_cpu_mands``) divide the AND gates of every run but the first by their process CPU time.
    """
    from pairwise.mpc.garble import fused

    rng = np.random.default_rng()
    bits = [rng.integers(0, 2, size=(batch, g.width)).astype(bool) for g in circuit.inputs]
    want = circuit.evaluate_bits(bits)
    jit.warm_up()  # the compiled loops (mpc.garble.jit): load them before the timers, as bench garble does
    saved = fused.THREADS
    if threads is not None:
        fused.THREADS = threads
    best = {"garble": (float("inf"), 0.0), "eval": (float("inf"), 0.0), "both": (float("inf"), 0.0)}
    cpu = {"garble": 0.0, "eval": 0.0}
    ok = True
    buf = None
    fresh = None
    runs = 0
    try:
        for r in range(repeat):
            g = Garbler(circuit, batch, keep_scratch=True)
            active = g.encode_all(bits)
            w0, c0 = time.perf_counter(), time.process_time()
            gc = g.garble(out=buf)  # first run: fresh memory; later runs reuse it
            w1, c1 = time.perf_counter(), time.process_time()
            if buf is None:
                buf, fresh = gc.tables, w1 - w0
            out = Evaluator(circuit, batch, keep_scratch=True).evaluate(active, gc)
            w2, c2 = time.perf_counter(), time.process_time()
            for key, wall, c in (("garble", w1 - w0, c1 - c0), ("eval", w2 - w1, c2 - c1), ("both", w2 - w0, c2 - c0)):
                if wall < best[key][0]:
                    best[key] = (wall, c)
            if r > 0 or repeat == 1:
                cpu["garble"] += c1 - c0
                cpu["eval"] += c2 - c1
                runs += 1
            got = split_outputs(circuit, decode(out, g.decode_bits))
            ok &= all(np.array_equal(a, b) for a, b in zip(got, want))
    finally:
        fused.THREADS = saved
    n = circuit.n_and * batch
    return {
        "circuit": circuit.name,
        "and_gates": circuit.n_and,
        "batch": batch,
        "threads": threads if threads is not None else fused.THREADS,
        "path": jit.path(),
        "garble_mands": n / best["garble"][0] / 1e6,
        "eval_mands": n / best["eval"][0] / 1e6,
        "garble_cpu_mands": n * runs / cpu["garble"] / 1e6 if cpu["garble"] > 0 else float("inf"),
        "eval_cpu_mands": n * runs / cpu["eval"] / 1e6 if cpu["eval"] > 0 else float("inf"),
        "garble_ms": best["garble"][0] * 1e3,
        "eval_ms": best["eval"][0] * 1e3,
        "garble_cpu_ms": best["garble"][1] * 1e3,
        "eval_cpu_ms": best["eval"][1] * 1e3,
        "garble_eval_ms": best["both"][0] * 1e3,
        "table_bytes": 32 * n,
        "garble_fresh_mands": n / fresh / 1e6,
        "correct": bool(ok),
    }


def measure_streamed(circuit_spec: str, batch: int) -> dict:
    """Garble and evaluate in one pass, segments flowing straight from garbler to evaluator.

    Neither side holds all tables.  Runs in a fresh subprocess so that
    ``peak_rss_mib`` (the process's peak resident memory, inputs and plaintext
    check included) is about this case alone: the 2 GiB bound of the issue.
    """
    import subprocess

    res = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--streamed-child", circuit_spec, str(batch)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if res.returncode != 0:
        raise RuntimeError(f"streamed benchmark failed: {res.stderr.strip()[-2000:]}")
    return json.loads(res.stdout)


def _streamed_child(circuit_spec: str, batch: int) -> dict:
    import resource

    circuit = resolve_circuit(circuit_spec)
    rng = np.random.default_rng()
    bits = [rng.integers(0, 2, size=(batch, g.width)).astype(bool) for g in circuit.inputs]
    g = Garbler(circuit, batch)
    active = g.encode_all(bits)
    w0, c0 = time.perf_counter(), time.process_time()
    out = Evaluator(circuit, batch).evaluate(active, g.iter_tables())
    w1, c1 = time.perf_counter(), time.process_time()
    got = split_outputs(circuit, decode(out, g.decode_bits))
    want = circuit.evaluate_bits(bits)
    n = circuit.n_and * batch
    return {
        "circuit": circuit.name,
        "and_gates": circuit.n_and,
        "batch": batch,
        "chunk": g.chunk,
        "garble_eval_mands": n / (w1 - w0) / 1e6,
        "garble_eval_ms": (w1 - w0) * 1e3,
        "garble_eval_cpu_ms": (c1 - c0) * 1e3,
        "table_bytes": 32 * n,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "correct": all(np.array_equal(a, b) for a, b in zip(got, want)),
    }


def cases(quick: bool) -> list[tuple[str, Circuit, int, int, tuple]]:
    """(label, circuit, batch, repeat, thread counts): SIMD batches and the wide layer run per core (1 thread)
    and per machine (every CPU); one AES-128 instance has nothing to split (one thread)."""
    from pairwise.mpc.garble import fused

    aes = resolve_circuit("aes128")
    gini = resolve_circuit("gini", 32)
    layer = and_layer_circuit(1 << (16 if quick else 20))
    both = (1, fused.THREADS) if fused.THREADS > 1 else (1,)
    out = [
        ("(a) AES-128", aes, 1, 20, (1,)),
        ("(a) AES-128", aes, 64, 5, both),
        ("(a) AES-128", aes, 1024, 3, both),
        ("(b) gini 32-bit", gini, 10**4 if quick else 10**5, 3, both),
        ("(c) AND layer", layer, 1, 5, both),
    ]
    return out


class _TimedNumpy:
    """Wraps the ufuncs mpc.garble calls (``_xor``, ``_and``, ``_mul``, ``_neg``, ``_copy``) so cProfile sees them as functions."""

    def __init__(self) -> None:
        from pairwise.mpc.garble import evaluator, garbler, kernels

        self._np = np
        self._mods = (kernels, garbler, evaluator)  # every module of the engine that calls them

        def wrap(f):
            def ufunc(*a, **k):
                return f(*a, **k)

            ufunc.__name__ = f.__name__
            return ufunc

        # One wrapper per ufunc, each with its own code object, so cProfile keeps them apart.
        self._wrapped = {
            "_xor": wrap(np.bitwise_xor),
            "_and": _copy_fn(wrap(np.bitwise_and), "bitwise_and"),
            "_mul": _copy_fn(wrap(np.multiply), "multiply"),
            "_neg": _copy_fn(wrap(np.negative), "negative"),
            "_copy": _copy_fn(wrap(np.copyto), "copyto"),
        }
        self._saved = {}

    def __enter__(self):
        for mod in self._mods:
            for name, f in self._wrapped.items():
                if hasattr(mod, name):
                    self._saved[mod, name] = getattr(mod, name)
                    setattr(mod, name, f)
        return self

    def __exit__(self, *exc):
        for (mod, name), f in self._saved.items():
            setattr(mod, name, f)


def _copy_fn(f, name):
    import types

    code = f.__code__.replace(co_name=name)
    g = types.FunctionType(code, f.__globals__, name, f.__defaults__, f.__closure__)
    return g


#: cProfile entries grouped into stages: (stage, predicate on (file, function name)).
_STAGES = [
    ("AES (OpenSSL ECB, in place)", lambda f, n: "update_into" in n),
    ("gathers (ndarray.take)", lambda f, n: "'take' of 'numpy.ndarray'" in n),
    ("XOR ufunc calls", lambda f, n: n == "ufunc"),
    ("AND / multiply / negate ufunc calls", lambda f, n: n in ("bitwise_and", "multiply", "negative")),
    ("copies (np.copyto)", lambda f, n: n == "copyto"),
    ("hash XORs (TccrHasher, 2 per hash)", lambda f, n: f.endswith("aes.py") and n == "__call__"),
]


def profile(circuit: Circuit, batch: int) -> str:
    """Where the time goes in one garble() and one evaluate(), by stage (cProfile tottime, CPU time).

    numpy ufuncs are wrapped (see :class:`_TimedNumpy`) so their time is
    separated from the Python code that calls them; "Python and numpy call
    overhead" is everything else (loop bodies, slicing, reshapes, wrappers).
    """
    rng = np.random.default_rng()
    bits = [rng.integers(0, 2, size=(batch, g.width)).astype(bool) for g in circuit.inputs]
    lines = []
    for role in ("garble", "evaluate"):
        buf = bytearray(32 * circuit.n_and * batch)
        # warm up: the table buffer (page faults of fresh memory) and the engine's pooled scratch/programs
        warm = Garbler(circuit, batch)
        Evaluator(circuit, batch).evaluate(warm.encode_all(bits), warm.garble(out=buf))
        g = Garbler(circuit, batch)
        active = g.encode_all(bits)
        gc = None if role == "garble" else g.garble(out=buf)
        ev = Evaluator(circuit, batch)
        pr = cProfile.Profile(time.process_time)  # CPU time: robust to other load on the machine
        with _TimedNumpy():
            pr.enable()
            t0 = time.perf_counter()
            if role == "garble":
                g.garble(out=buf)
            else:
                ev.evaluate(active, gc)
            wall = time.perf_counter() - t0
            pr.disable()
        st = pstats.Stats(pr).stats
        total = sum(v[2] for v in st.values())
        acc = {name: 0.0 for name, _ in _STAGES}
        other = 0.0
        for (fn, _ln, name), v in st.items():
            for stage, pred in _STAGES:
                if pred(fn, name):
                    acc[stage] += v[2]
                    break
            else:
                other += v[2]
        n = circuit.n_and * batch
        lines.append(
            f"{role} {circuit.name} B={batch}: {total * 1e3:.1f} ms CPU under cProfile "
            f"({wall * 1e3:.1f} ms wall), {total / n * 1e9:.1f} ns per AND gate"
        )
        for stage, t in list(acc.items()) + [("Python and numpy call overhead", other)]:
            lines.append(f"  {stage:<34} {t * 1e3:9.1f} ms  {100 * t / total:5.1f}%  {t / n * 1e9:7.2f} ns/AND")
        cum = {name: v[3] for (fn, _ln, name), v in st.items() if fn.endswith(os.path.join("garble", "kernels.py"))}
        ands = sum(cum.get(f, 0.0) for f in ("_garble_ands", "_eval_ands", "_garble_ands1", "_eval_ands1"))
        lines.append(
            f"  by gate kind: AND levels {100 * ands / total:.1f}%, XOR/INV levels and the rest "
            f"(inlined in the level loop; chunk setup, inputs/outputs) {100 * (total - ands) / total:.1f}%"
        )
    return "\n".join(lines)


def measure_two_process(spec: str, bits: int, batch: int) -> dict:
    """One SIMD execution of ``batch`` instances between a garbler and an evaluator process (both cores)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from twoparty import run_circuit

    opts = argparse.Namespace(first_reps=1, executions=1, simd=batch, cots=1024, frame_target=None, first_frame=None)
    res = run_circuit(spec, bits, opts, None, False)
    g, e = res["garbler"], res["evaluator"]
    wall = max(g["simd"]["seconds"], e["simd"]["seconds"])
    n_and = g["and_gates"] * batch
    return {
        "case": f"two-process {spec}{bits or ''}",
        "batch": batch,
        "and_gates": n_and,
        "seconds": wall,
        "mands": n_and / wall / 1e6,
        "correct": bool(e["simd"].get("check", True)),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller gini batch and AND layer")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--profile", action="store_true", help="print a cProfile breakdown instead")
    ap.add_argument(
        "--two-process",
        type=int,
        metavar="B",
        help="per-machine throughput with both cores: garbler and evaluator processes, B instances",
    )
    ap.add_argument("--streamed-child", nargs=2, metavar=("CIRCUIT", "BATCH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.streamed_child:
        print(json.dumps(_streamed_child(args.streamed_child[0], int(args.streamed_child[1]))))
        return 0
    if args.profile:
        for c, b in (
            (resolve_circuit("aes128"), 1024),
            (and_layer_circuit(1 << 20), 1),
            (resolve_circuit("aes128"), 1),
        ):
            print(profile(c, b), flush=True)
        return 0
    if args.two_process:
        rows = []
        for spec, bits, batch in (("aes128", 0, args.two_process), ("gini", 32, 10**5)):
            one = measure(resolve_circuit(spec, bits) if bits else resolve_circuit(spec), batch, 3)
            two = measure_two_process(spec, bits, batch)
            two["one_process_garble_eval_mands"] = two["and_gates"] / (one["garble_eval_ms"] / 1e3) / 1e6
            two["correct"] = two["correct"] and one["correct"]
            rows.append(two)
            if not args.json:
                print(
                    f"{two['case']:<22} B={batch:<7} two processes (garbler | evaluator over TCP, OT "
                    f"included) {two['mands']:7.2f} M AND/s ({1e3 * two['seconds']:9.1f} ms)   one process "
                    f"garble+eval {two['one_process_garble_eval_mands']:7.2f} M AND/s  ok={two['correct']}",
                    flush=True,
                )
        if args.json:
            print(json.dumps(rows, indent=1))
        return 0 if all(r["correct"] for r in rows) else 1
    rows = []
    for label, c, batch, repeat, thread_counts in cases(args.quick):
        for threads in thread_counts:
            r = measure(c, batch, repeat, threads)
            r["case"] = label
            rows.append(r)
            if not args.json:
                print(
                    f"{label:<16} {c.name:<14} B={batch:<7} T={threads} "
                    f"garble {r['garble_mands']:7.2f} M/s ({r['garble_ms']:9.1f} ms; {r['garble_cpu_mands']:7.2f} per CPU s, "
                    f"fresh {r['garble_fresh_mands']:6.2f} M/s)  "
                    f"eval {r['eval_mands']:7.2f} M/s ({r['eval_ms']:9.1f} ms; {r['eval_cpu_mands']:7.2f} per CPU s)  "
                    f"g+e {r['garble_eval_ms']:9.1f} ms  ok={r['correct']}",
                    flush=True,
                )
    for spec, batch in (("aes128", 2000 if args.quick else 10**4),):
        r = measure_streamed(spec, batch)
        c = resolve_circuit(spec)
        r["case"] = "(d) streamed"
        rows.append(r)
        if not args.json:
            print(
                f"(d) streamed     {c.name:<14} B={batch:<7} chunk={r['chunk']:<6} garble+eval in one pass "
                f"{r['garble_eval_mands']:7.2f} M/s ({r['garble_eval_ms']:9.1f} ms, cpu {r['garble_eval_cpu_ms']:9.1f}), "
                f"tables {r['table_bytes'] / 2**30:.2f} GiB streamed, peak RSS {r['peak_rss_mib']:.0f} MiB  ok={r['correct']}",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
