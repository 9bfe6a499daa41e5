"""Benchmark of the semi-honest Yao runtime between two real processes over loopback TCP.

For each circuit (AES-128 from Bristol Fashion, the gini and kendall kernels at
32 bits) it starts a garbler and an evaluator process
(benchmarks/_twoparty_worker.py) and measures:

* first execution: connect-to-done wall time of a fresh session (handshake,
  OTs, one execution), median over ``--first-reps`` sessions, as the command
  line runs it (base OTs per COT for at most 128 evaluator input bits, else
  128 base OTs and a first IKNP batch) and with IKNP and the session's default
  batch (``ot_batch=None``: 1024 COTs first, growing);
* amortized: wall time per execution over ``--executions`` executions of one
  instance each in one session (after one warm-up execution), and one SIMD
  execution of ``--simd`` instances; the session's COT batches are its own
  (``--ot-batch session``: 1024 growing to 65536, as a long-running party), or
  the one-execution CLI's fixed batch (``--ot-batch cli``, 1024 for AES-128), or N;
* bytes and frames each way per execution, and the garbler's bytes per AND gate;
* the correlated-OT rate: ``COTSender.send_random`` of ``--cots`` COTs between
  the two processes (default batches of 65536);
* connect: the evaluator's ``TCPChannel.connect`` (TCP; with channel kind
  ``tls`` also the TLS 1.3 handshake and the admission step, throwaway CA).

EMP-toolkit, measured in the same run (issue 23): with ``--emp PATH`` (the
``emp_2pc`` driver of a local EMP-toolkit build, see benchmarks/RESULTS.md,
"Yao two-party runtime against EMP-toolkit") every round first runs EMP's two
parties on the same AES-128 Bristol file (``PATH 1 PORT FILE N --first-reps F``
and ``PATH 2 PORT FILE N --first-reps F``, N = executions + 1), then
pairwise's, and the report gives both sides' medians and the median of the
per-round ratios pairwise / EMP, with ``uptime`` before every run.  Without
``--emp`` no ratio is printed: a figure recorded elsewhere is no yardstick.
Issue 23's targets: AES-128 amortized at batch 1 <= 1.0x EMP in wall time and in
CPU per execution on each side; first execution <= 1.5x EMP.

Usage::

    python benchmarks/twoparty.py                      # full run (about a minute on 2 cores)
    python benchmarks/twoparty.py --quick              # fewer repetitions
    python benchmarks/twoparty.py --profile DIR        # also cProfile the amortized loop of both parties
    python benchmarks/twoparty.py --json               # one JSON object instead of the table
    python benchmarks/twoparty.py --emp /tmp/emp/driver/build/bin/emp_2pc --circuits aes128 \
        --channels unbuffered --first-reps 5 --executions 300 --simd 1 --cots 65536 --rounds 5
                                                       # against EMP-toolkit, interleaved (ABAB), 5 rounds
    python benchmarks/twoparty.py --circuits aes128 --channels unbuffered,tls --rounds 5
                                                       # plaintext vs mutual TLS, interleaved
    python benchmarks/twoparty.py --circuits aes128 --channels unbuffered --engines compiled,numpy --rounds 4
                                                       # compiled one-instance loops vs the numpy program

Workers load the compiled loops (:mod:`pairwise.mpc.jit`) at start, before any timer,
as a long-running party would; ``--engines numpy`` runs them with ``PAIRWISE_JIT=0``.

Timings are wall clock on a shared machine; they vary by tens of percent between runs.
Security model: none of its own (drives mpc.twopc, semi-honest Yao).
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import socket
import statistics
import subprocess
import sys
import tempfile
import time

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_twoparty_worker.py")
CIRCUITS = [("aes128", 0), ("gini", 32), ("kendall", 32)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_circuit(
    spec: str,
    bits: int,
    args,
    profile_dir: str | None,
    buffered: bool,
    tls_dir: str | None = None,
    engine: str = "compiled",
) -> dict:
    port = free_port()
    common = [
        spec,
        str(bits),
        str(int.from_bytes(os.urandom(4), "little")),
        str(args.first_reps),
        str(args.executions),
        str(args.simd),
        str(args.cots),
    ]
    procs = {}
    for role in ("garbler", "evaluator"):
        tag = (
            f"{spec}{bits if spec != 'aes128' else ''}{'-buffered' if buffered else ''}{'-tls' if tls_dir else ''}"
            f"{'-numpy' if engine == 'numpy' else ''}"
        )
        extra = ["--profile", os.path.join(profile_dir, f"{tag}-{role}.prof")] if profile_dir else []
        extra += ["--buffered"] if buffered else []
        extra += ["--tls", tls_dir] if tls_dir else []
        extra += ["--frame-target", str(args.frame_target)] if args.frame_target else []
        extra += ["--min-frame", str(args.min_frame)] if args.min_frame else []
        extra += ["--split", str(args.split)] if args.split else []
        extra += ["--ot-batch", args.ot_batch]
        env = dict(os.environ, PAIRWISE_JIT="0" if engine == "numpy" else "1")
        procs[role] = subprocess.Popen(
            [sys.executable, WORKER, role, str(port), *common, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        if role == "garbler":
            time.sleep(0.3)  # let it listen (the evaluator also retries)
    try:
        done = {role: p.communicate(timeout=1800) for role, p in procs.items()}
        failed = [
            f"{role} worker failed ({procs[role].returncode}): {se.strip()}"
            for role, (_, se) in done.items()
            if procs[role].returncode
        ]
        if failed:
            raise RuntimeError("\n".join(failed))
        out = {role: json.loads(so.strip().splitlines()[-1]) for role, (so, _) in done.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    return out


def summarize(res: dict) -> dict:
    g, e = res["garbler"], res["evaluator"]
    n_and = g["and_gates"]
    am_g, am_e = g["amortized"], e["amortized"]
    first_g, first_e = g["first"], e["first"]
    ideal = 32 * n_and  # the tables (the garbler's input bits cost nothing: the session's label stream)
    return {
        "circuit": g["circuit"],
        "channel": ("buffered" if g["buffered"] else "unbuffered") + (" + TLS" if g.get("tls") else ""),
        "engine": "compiled" if g["jit"] and e["jit"] else "numpy",
        "jit_warm_up_s": max(g["jit_warm_up_seconds"], e["jit_warm_up_seconds"]),
        "connect_ms": 1e3 * e["first"]["connect_seconds"],
        "and_gates": n_and,
        "first_ms": 1e3 * max(first_g["seconds"], first_e["seconds"]),
        "first_cpu_ms_garbler": 1e3 * first_g["cpu_seconds"],
        "first_cpu_ms_evaluator": 1e3 * first_e["cpu_seconds"],
        "first_setup_ms": 1e3 * max(first_g["setup_seconds"], first_e["setup_seconds"]),
        "first_cot": first_g.get("cot", "iknp"),
        "first_default_ot_ms": 1e3
        * max(g["first_default_ot_batch"]["seconds"], e["first_default_ot_batch"]["seconds"]),
        "first_default_ot_cpu_ms_garbler": 1e3 * g["first_default_ot_batch"]["cpu_seconds"],
        "first_default_ot_cpu_ms_evaluator": 1e3 * e["first_default_ot_batch"]["cpu_seconds"],
        "amortized_ms": 1e3 * max(am_g["seconds_per_execution"], am_e["seconds_per_execution"]),
        "cpu_ms_garbler": 1e3 * am_g["cpu_seconds_per_execution"],
        "cpu_ms_evaluator": 1e3 * am_e["cpu_seconds_per_execution"],
        "median_exec_ms": 1e3 * max(am_g["median_execution_seconds"], am_e["median_execution_seconds"]),
        "simd_batch": g["simd"]["batch"],
        "simd_ms_per_instance": 1e3 * max(g["simd"]["seconds"], e["simd"]["seconds"]) / g["simd"]["batch"],
        "g_to_e_bytes": am_g["bytes_sent_per_execution"],
        "g_to_e_frames": am_g["frames_sent_per_execution"],
        "e_to_g_frames": am_e["frames_sent_per_execution"],
        "e_to_g_bytes": am_e["bytes_sent_per_execution"],
        "bytes_per_and": am_g["bytes_sent_per_execution"] / n_and if n_and else float("nan"),
        "garbler_vs_ideal": am_g["bytes_sent_per_execution"] / ideal,
        "first_garbler_bytes": first_g["bytes_sent"],
        "first_garbler_vs_ideal_plus_ot": first_g["bytes_sent"] / (ideal + first_g["setup_bytes_sent"]),
        "first_evaluator_bytes": first_e["bytes_sent"],
        "cot_per_s": min(g["cot"]["per_second"], e["cot"]["per_second"]),
        "cot_bytes_per_ot": g["cot"]["bytes_received"] / g["cot"]["n"],
        "check": bool(e["amortized"].get("check")) and bool(e["simd"].get("check")),
    }


def _medians(a: list[dict], b: list[dict], keys) -> str:
    import statistics

    parts = []
    for key, label in keys:
        x = statistics.median(r[key] for r in a)
        y = statistics.median(r[key] for r in b)
        parts.append(f"{label} {x:.2f} -> {y:.2f} (x{y / x:.2f})")
    return "; ".join(parts)


_KEYS = (
    ("amortized_ms", "amortized ms/exec"),
    ("median_exec_ms", "median ms/exec"),
    ("cpu_ms_garbler", "garbler CPU ms/exec"),
    ("cpu_ms_evaluator", "evaluator CPU ms/exec"),
    ("first_ms", "first ms"),
    ("connect_ms", "connect ms"),
)


def _compare(rows: list[dict], within: str, split: str, before: str, after: str, title: str) -> None:
    """Per circuit and value of ``within``: medians over rounds of rows with ``split`` = before vs after."""
    for circ in dict.fromkeys(r["circuit"] for r in rows):
        for v in dict.fromkeys(r[within] for r in rows):
            mine = [r for r in rows if r["circuit"] == circ and r[within] == v]
            a = [r for r in mine if r[split] == before]
            b = [r for r in mine if r[split] == after]
            if a and b:
                print(
                    f"\n{title}, {circ} ({v}), median of {len(a)} {before} / {len(b)} {after} runs: "
                    + _medians(a, b, _KEYS)
                )


def tls_overhead(rows: list[dict]) -> None:
    """Per circuit and engine: plaintext (unbuffered) against TLS."""
    _compare(rows, "engine", "channel", "unbuffered", "unbuffered + TLS", "TLS overhead")


def engine_ab(rows: list[dict]) -> None:
    """Per circuit and channel: the numpy program against the compiled loops."""
    _compare(rows, "channel", "engine", "numpy", "compiled", "Engine A/B")


def profile_summary(path: str, top: int = 14) -> str:
    st = pstats.Stats(path)
    total = st.total_tt
    rows = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]  # by own time
    lines = [f"  total {total:.3f} s CPU; top functions by own CPU time:"]
    for (file, line, fn), (_cc, nc, tt, ct, _) in rows:
        where = f"{os.path.basename(file)}:{line}({fn})" if line else fn
        lines.append(f"    {tt:7.3f} s own {ct:7.3f} s cum {nc:7d} calls  {where}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- EMP-toolkit, same run


def load() -> str:
    """The 1-, 5- and 15-minute load averages (as ``uptime`` prints them)."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def bristol_file(spec: str, tmp: str) -> str | None:
    """A plain Bristol Fashion file for EMP's driver: the packaged AES-128 file unpacked, or the user's file."""
    import gzip
    from importlib import resources

    from pairwise.circuits.catalog import BUILTIN_FILES
    from pairwise.circuits.kernels import KERNELS

    if spec in KERNELS:
        return None  # a kernel has no Bristol file EMP could read
    if spec in BUILTIN_FILES:
        path = os.path.join(tmp, BUILTIN_FILES[spec].removesuffix(".gz"))
        if not os.path.exists(path):
            ref = resources.files("pairwise.circuits").joinpath("data", BUILTIN_FILES[spec])
            with resources.as_file(ref) as src, gzip.open(src, "rb") as fh, open(path, "wb") as out:
                out.write(fh.read())
        return path
    return spec if not spec.endswith(".gz") else None


def run_emp(binary: str, circuit_file: str, args) -> dict:
    """One EMP-toolkit session pair (garbler = party 1 listens, evaluator = party 2): its JSON per party."""
    port = free_port()
    common = [circuit_file, str(args.executions + 1), "--first-reps", str(args.first_reps)]
    g = subprocess.Popen([binary, "1", str(port), *common], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)  # let it listen (EMP's evaluator also retries)
    e = subprocess.Popen([binary, "2", str(port), *common], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = {}
        for role, p in (("garbler", g), ("evaluator", e)):
            so, se = p.communicate(timeout=1800)
            if p.returncode:
                raise RuntimeError(f"EMP {role} failed ({p.returncode}): {se.strip()}")
            out[role] = json.loads(so.strip().splitlines()[-1])
    finally:
        for p in (g, e):
            if p.poll() is None:
                p.kill()
    gd, ed = out["garbler"], out["evaluator"]
    return {
        "circuit": os.path.basename(circuit_file),
        "amortized_ms": max(gd["amortized_ms"], ed["amortized_ms"]),
        "median_exec_ms": max(gd["median_exec_ms"], ed["median_exec_ms"]),
        "cpu_ms_garbler": gd["cpu_ms_per_exec"],
        "cpu_ms_evaluator": ed["cpu_ms_per_exec"],
        "first_ms": max(gd["first_ms"], ed["first_ms"]),
        "first_cpu_ms_garbler": gd["first_cpu_ms"],
        "first_cpu_ms_evaluator": ed["first_cpu_ms"],
        "first_setup_ms": max(gd["setup_ms"], ed["setup_ms"]),
        "connect_ms": ed["connect_ms"],
        "g_to_e_bytes": gd["bytes_sent_per_exec"],
        "e_to_g_bytes": ed["bytes_sent_per_exec"],
        "check": _emp_check(gd, ed),
    }


def _emp_check(gd: dict, ed: dict) -> bool | None:
    """EMP's first execution against ``cryptography``'s AES-128 (None for other circuits)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key, pt, ct = gd.get("exec1_input_hex"), ed.get("exec1_input_hex"), ed.get("exec1_output_hex")
    if not (key and pt and ct) or len(key) != 32 or len(pt) != 32:
        return None
    enc = Cipher(algorithms.AES(bytes.fromhex(key)), modes.ECB()).encryptor()
    return enc.update(bytes.fromhex(pt)).hex() == ct


#: (pairwise key, EMP key, label) of the rows compared with EMP: time, CPU or bytes, smaller is better.
EMP_KEYS = (
    ("amortized_ms", "amortized_ms", "AES-128 2PC amortized wall / exec (max of parties), ms"),
    ("median_exec_ms", "median_exec_ms", "median single-execution wall, ms"),
    ("cpu_ms_garbler", "cpu_ms_garbler", "CPU / exec, garbler, ms"),
    ("cpu_ms_evaluator", "cpu_ms_evaluator", "CPU / exec, evaluator, ms"),
    ("first_ms", "first_ms", "first execution (setup + exec 1, max of parties; pairwise as the CLI runs it), ms"),
    ("first_default_ot_ms", "first_ms", "first execution, pairwise with 128 base OTs + IKNP, ms"),
    ("first_setup_ms", "first_setup_ms", "  of which setup (pairwise: handshake + label key + OTs before exec 1), ms"),
    ("first_cpu_ms_garbler", "first_cpu_ms_garbler", "first execution CPU, garbler, ms"),
    ("first_cpu_ms_evaluator", "first_cpu_ms_evaluator", "first execution CPU, evaluator, ms"),
    ("g_to_e_bytes", "g_to_e_bytes", "garbler -> evaluator bytes / exec"),
    ("e_to_g_bytes", "e_to_g_bytes", "evaluator -> garbler bytes / exec"),
)


def emp_ratios(rows: list[dict], emp_rows: list[dict]) -> list[dict]:
    """Per pairwise configuration (circuit, channel, engine) and metric: medians of both sides over the
    rounds and the median of the per-round ratios pairwise / EMP."""
    out = []
    for cfg in dict.fromkeys((r["spec"], r["channel"], r["engine"]) for r in rows):
        ours = {r["round"]: r for r in rows if (r["spec"], r["channel"], r["engine"]) == cfg}
        emp = {r["round"]: r for r in emp_rows if r["spec"] == cfg[0]}
        rounds = sorted(set(ours) & set(emp))
        if not rounds:
            continue
        for key, emp_key, label in EMP_KEYS:
            a = [emp[k][emp_key] for k in rounds]
            b = [ours[k][key] for k in rounds]
            out.append(
                {
                    "spec": cfg[0],
                    "channel": cfg[1],
                    "engine": cfg[2],
                    "metric": key,
                    "label": label,
                    "rounds": len(rounds),
                    "emp_median": statistics.median(a),
                    "emp_min": min(a),
                    "emp_max": max(a),
                    "pairwise_median": statistics.median(b),
                    "pairwise_min": min(b),
                    "pairwise_max": max(b),
                    "ratio_median": statistics.median(y / x for x, y in zip(a, b) if x),
                }
            )
    return out


def print_emp_comparison(rows: list[dict], emp_rows: list[dict], ratios: list[dict]) -> None:
    print(
        f"\nEMP-toolkit in the same run ({len(emp_rows)} sessions, interleaved: EMP then pairwise in every round); "
        f"EMP's first execution checked against cryptography's AES: "
        f"{[r['check'] for r in emp_rows]}"
    )
    print(
        "load (1/5/15 min) before each run: "
        + "; ".join(f"r{r['round']} EMP {r['load']}" for r in emp_rows)
        + "; "
        + "; ".join(f"r{r['round']} pairwise {r['load']}" for r in rows)
    )
    for cfg in dict.fromkeys((r["spec"], r["channel"], r["engine"]) for r in ratios):
        sel = [r for r in ratios if (r["spec"], r["channel"], r["engine"]) == cfg]
        print(f"\n{cfg[0]} ({cfg[1]}, {cfg[2]}), {sel[0]['rounds']} rounds")
        print(
            "| metric | EMP median [min-max] | pairwise median [min-max] | pairwise / EMP (median of per-round ratios) |"
        )
        print("|---|---|---|---|")
        for r in sel:
            print(
                f"| {r['label']} | {r['emp_median']:.3g} [{r['emp_min']:.3g}-{r['emp_max']:.3g}] "
                f"| {r['pairwise_median']:.3g} [{r['pairwise_min']:.3g}-{r['pairwise_max']:.3g}] "
                f"| {r['ratio_median']:.2f}x |"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (first-reps 3, executions 30, cots 1M)")
    ap.add_argument("--first-reps", type=int, default=7)
    ap.add_argument("--executions", type=int, default=100)
    ap.add_argument("--simd", type=int, default=100)
    ap.add_argument("--cots", type=int, default=1 << 22)
    ap.add_argument("--circuits", default=",".join(f"{c}:{b}" if b else c for c, b in CIRCUITS))
    ap.add_argument(
        "--channels",
        default="unbuffered,buffered,tls",
        help="TCP channel kinds to run: unbuffered (as the CLI), buffered (TCPChannel(buffered=True)), "
        "tls (unbuffered in mutual TLS 1.3, throwaway CA)",
    )
    ap.add_argument(
        "--engines",
        default="compiled",
        help="one-instance engine paths to run, interleaved: compiled (mpc.jit, loaded at worker start), "
        "numpy (PAIRWISE_JIT=0: the numpy program), e.g. compiled,numpy for an A/B in one run",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat every circuit x channel run this many times, interleaved (A/B on a noisy machine)",
    )
    ap.add_argument(
        "--frame-target",
        type=int,
        default=None,
        help="override mpc.twopc.wire.FRAME_TARGET (bytes per garbler frame) in both workers",
    )
    ap.add_argument(
        "--min-frame",
        type=int,
        default=None,
        help="override mpc.twopc.wire.MIN_FRAME (smallest frame of the garbler's stream) in both workers",
    )
    ap.add_argument(
        "--split",
        type=int,
        default=None,
        help="override mpc.twopc.wire.SPLIT (frames per garbler stream) in both workers",
    )
    ap.add_argument(
        "--ot-batch",
        default="session",
        help="COT batches of the amortized session: session (default: the session's own, ot_batch=None: "
        "1024 COTs first, each batch at least twice the last, up to 65536, as a long-running party "
        "runs), cli (a fixed batch sized to the evaluator's input, as the one-execution CLI: 1024 "
        "for AES-128; the default before 2026-11-27), or a number of COTs",
    )
    ap.add_argument(
        "--emp",
        metavar="PATH",
        default=None,
        help="EMP-toolkit's emp_2pc driver: run it interleaved with pairwise on the same Bristol "
        "circuits and print same-run ratios (no ratio without it)",
    )
    ap.add_argument("--profile", metavar="DIR", default=None, help="write cProfile stats of the amortized loop here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.first_reps, args.executions, args.cots = 3, 30, 1 << 20
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)

    from pairwise.mpc.tls import throwaway_credentials

    kinds = args.channels.split(",")
    for kind in kinds:
        if kind not in ("unbuffered", "buffered", "tls"):
            ap.error(f"unknown channel kind {kind!r}")
    engines = args.engines.split(",")
    for eng in engines:
        if eng not in ("compiled", "numpy"):
            ap.error(f"unknown engine {eng!r}")
    rows, emp_rows = [], []
    if args.emp and not os.access(args.emp, os.X_OK):
        ap.error(f"--emp {args.emp!r} is not an executable file (EMP-toolkit's emp_2pc driver)")
    with (
        throwaway_credentials([("garbler", "client"), ("evaluator", "client")]) as certs,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for rnd in range(args.rounds):
            for item in args.circuits.split(","):
                spec, _, b = item.partition(":")
                bits = int(b) if b else 0
                bristol = bristol_file(spec, tmp) if args.emp else None
                if bristol:  # A: EMP-toolkit, then B: pairwise, in every round
                    emp_rows.append(dict(run_emp(args.emp, bristol, args), round=rnd + 1, spec=spec, load=load()))
                for kind in kinds:
                    for eng in engines:
                        before = load()
                        res = run_circuit(
                            spec,
                            bits or 32,
                            args,
                            args.profile,
                            kind == "buffered",
                            certs if kind == "tls" else None,
                            eng,
                        )
                        rows.append(dict(summarize(res), round=rnd + 1, spec=spec, load=before))
    ratios = emp_ratios(rows, emp_rows) if emp_rows else []
    if args.json:
        print(json.dumps({"rows": rows, "emp_rows": emp_rows, "ratios": ratios, "args": vars(args)}))
        return 0
    print(
        f"two processes over loopback TCP; first = median of {args.first_reps} fresh sessions; "
        f"amortized over {args.executions} executions (batch 1) in one session"
    )
    hdr = (
        "| round | circuit | channel | engine | AND | connect ms | first ms | (setup ms) | first CPU ms G / E | first ms, default COT batch | amortized ms/exec | median ms/exec | CPU ms/exec G / E "
        f"| SIMD x{args.simd} ms/inst | frames/exec G->E / E->G | garbler->evaluator B/exec | evaluator->garbler B/exec | B/AND (garbler) "
        "| garbler / (32 AND) | first: garbler / (32 AND + base OT) | COT/s | ok |"
    )
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for r in rows:
        print(
            f"| {r['round']} | {r['circuit']} | {r['channel']} | {r['engine']} | {r['and_gates']} | {r['connect_ms']:.2f} | {r['first_ms']:.1f} | {r['first_setup_ms']:.1f} | {r['first_cpu_ms_garbler']:.0f} / {r['first_cpu_ms_evaluator']:.0f} "
            f"| {r['first_default_ot_ms']:.1f} | {r['amortized_ms']:.2f} | {r['median_exec_ms']:.2f} | {r['cpu_ms_garbler']:.1f} / {r['cpu_ms_evaluator']:.1f} "
            f"| {r['simd_ms_per_instance']:.3f} | {r['g_to_e_frames']:.1f} / {r['e_to_g_frames']:.2f} | {r['g_to_e_bytes']:.0f} | {r['e_to_g_bytes']:.0f} "
            f"| {r['bytes_per_and']:.2f} | {r['garbler_vs_ideal']:.4f} | {r['first_garbler_vs_ideal_plus_ot']:.4f} "
            f"| {r['cot_per_s'] / 1e6:.2f} M | {'yes' if r['check'] else 'NO'} |"
        )
    tls_overhead(rows)
    engine_ab(rows)
    if emp_rows:
        print_emp_comparison(rows, emp_rows, ratios)
    if args.profile:
        for name in sorted(os.listdir(args.profile)):
            if name.endswith(".prof"):
                print(f"\nprofile {name} (amortized loop):")
                print(profile_summary(os.path.join(args.profile, name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
