"""The garbling engine against EMP-toolkit in the same run: one-process garbling and evaluation rates.

Runs pairwise's side of issue 23's one-process comparison, in interleaved rounds:

- AES-128 (Bristol ``aes_128.txt``), one instance, best of 20 (garble into a reused buffer,
  evaluate from it), and AND gates per CPU second;
- AES-128 as a SIMD batch of 1024 instances and a layer of 2^20 independent AND gates, best
  of 3 / 5, per core (one engine thread, AND gates per CPU second) and per machine (every CPU
  of the process, AND gates per second of wall time).

With ``--emp PATH`` (the ``emp_garble_rate`` driver built from EMP-toolkit outside this
repository, or the directory holding it) each round first runs ``emp_garble_rate
aes_128.txt 20`` and ``emp_garble_rate and20 5`` and the table gets EMP's figures and the
ratio pairwise / EMP (the median of the per-round ratios; higher is faster for pairwise).
Without it, no ratio is printed: a ratio counts only against EMP measured in the same run.
EMP's rates are single-core (its garbler and evaluator run one after the other, one
thread); the issue's targets compare pairwise's per-machine rate on SIMD batches and the
layer with 1.5x EMP's single-core rate.  ``uptime`` is recorded before every round: on a
shared machine read the ratios and the per-CPU rows, not the times.

    .venv/bin/python benchmarks/garbling_vs_emp.py [--rounds 5] [--emp /tmp/emp/driver/build/bin] [--json]

The EMP driver's JSON keys (``garble_mem_and_per_s_best``, ``garble_and_per_cpu_s``, ...)
are those of the issue-23 anchor; nothing of EMP is in this repository.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from garbling import and_layer_circuit, measure  # noqa: E402

from pairwise.circuits.catalog import resolve_circuit  # noqa: E402
from pairwise.mpc.garble import fused, jit  # noqa: E402

AES_FILE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "circuits", "bristol_fashion", "aes_128.txt"
)

M = 1e6
#: (key, label, EMP value from (aes json, and20 json), pairwise value from the round's rows, target ratio or None)
ROWS = [
    (
        "aes1_garble_wall",
        "AES-128 B=1 garble, best wall (EMP: into memory)",
        lambda a, l: a["garble_mem_and_per_s_best"] / M,
        lambda r: r["aes1"]["garble_mands"],
        1.0,
    ),
    (
        "aes1_garble_wall_null",
        "AES-128 B=1 garble, best wall (EMP: NullIO, discards tables)",
        lambda a, l: a["garble_and_per_s_best"] / M,
        lambda r: r["aes1"]["garble_mands"],
        None,
    ),
    (
        "aes1_eval_wall",
        "AES-128 B=1 evaluate, best wall",
        lambda a, l: a["evaluate_and_per_s_best"] / M,
        lambda r: r["aes1"]["eval_mands"],
        1.0,
    ),
    (
        "aes1_garble_cpu",
        "AES-128 B=1 garble per CPU s (EMP: NullIO)",
        lambda a, l: a["garble_and_per_cpu_s"] / M,
        lambda r: r["aes1"]["garble_cpu_mands"],
        None,
    ),
    (
        "aes1_eval_cpu",
        "AES-128 B=1 evaluate per CPU s",
        lambda a, l: a["evaluate_and_per_cpu_s"] / M,
        lambda r: r["aes1"]["eval_cpu_mands"],
        None,
    ),
    (
        "aes1024_garble_core",
        "AES-128 garble per CPU s: pairwise B=1024 one thread vs EMP B=1",
        lambda a, l: a["garble_and_per_cpu_s"] / M,
        lambda r: r["aes1024_t1"]["garble_cpu_mands"],
        None,
    ),
    (
        "aes1024_eval_core",
        "AES-128 evaluate per CPU s: pairwise B=1024 one thread vs EMP B=1",
        lambda a, l: a["evaluate_and_per_cpu_s"] / M,
        lambda r: r["aes1024_t1"]["eval_cpu_mands"],
        None,
    ),
    (
        "aes1024_garble_machine",
        "AES-128 garble, best wall: pairwise B=1024 all CPUs vs EMP B=1 (into memory)",
        lambda a, l: a["garble_mem_and_per_s_best"] / M,
        lambda r: r["aes1024_tn"]["garble_mands"],
        1.5,
    ),
    (
        "aes1024_eval_machine",
        "AES-128 evaluate, best wall: pairwise B=1024 all CPUs vs EMP B=1",
        lambda a, l: a["evaluate_and_per_s_best"] / M,
        lambda r: r["aes1024_tn"]["eval_mands"],
        1.5,
    ),
    (
        "layer_garble_core",
        "2^20 AND layer garble per CPU s, one thread (EMP: NullIO)",
        lambda a, l: l["garble_and_per_cpu_s"] / M,
        lambda r: r["layer_t1"]["garble_cpu_mands"],
        None,
    ),
    (
        "layer_eval_core",
        "2^20 AND layer evaluate per CPU s, one thread",
        lambda a, l: l["evaluate_and_per_cpu_s"] / M,
        lambda r: r["layer_t1"]["eval_cpu_mands"],
        None,
    ),
    (
        "layer_garble_machine",
        "2^20 AND layer garble, best wall: pairwise all CPUs (EMP: into memory)",
        lambda a, l: l["garble_mem_and_per_s_best"] / M,
        lambda r: r["layer_tn"]["garble_mands"],
        1.5,
    ),
    (
        "layer_eval_machine",
        "2^20 AND layer evaluate, best wall: pairwise all CPUs",
        lambda a, l: l["evaluate_and_per_s_best"] / M,
        lambda r: r["layer_tn"]["eval_mands"],
        1.5,
    ),
]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def emp_binary(path: str) -> str:
    b = os.path.join(path, "emp_garble_rate") if os.path.isdir(path) else path
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        raise SystemExit(f"--emp: no executable emp_garble_rate at {path!r}")
    return b


def run_emp(binary: str, aes_file: str) -> tuple[dict, dict]:
    out = []
    for args in ([aes_file, "20"], ["and20", "5"]):
        res = subprocess.run([binary, *args], capture_output=True, text=True, timeout=900)
        if res.returncode:
            raise RuntimeError(f"{binary} {' '.join(args)} failed: {res.stderr.strip()[-500:]}")
        d = json.loads(res.stdout.strip().splitlines()[-1])
        if not d.get("correct", False):
            raise RuntimeError(f"EMP's own check failed: {d}")
        out.append(d)
    return out[0], out[1]


def run_pairwise(aes, layer, threads: int) -> dict:
    return {
        "aes1": measure(aes, 1, 20, 1),
        "aes1024_t1": measure(aes, 1024, 3, 1),
        "aes1024_tn": measure(aes, 1024, 3, threads),
        "layer_t1": measure(layer, 1, 5, 1),
        "layer_tn": measure(layer, 1, 5, threads),
    }


def summarize(rounds: list[dict], with_emp: bool) -> list[dict]:
    table = []
    for key, label, emp_f, pw_f, target in ROWS:
        pw = [pw_f(r["pairwise"]) for r in rounds]
        row = {"key": key, "metric": label, "unit": "M AND/s", "pairwise": pw, "target": target}
        if with_emp:
            emp = [emp_f(r["emp_aes"], r["emp_and20"]) for r in rounds]
            ratios = [p / e for p, e in zip(pw, emp)]
            row.update(emp=emp, ratio=float(np.median(ratios)), ratio_range=[min(ratios), max(ratios)])
            if target is not None:
                row["met"] = row["ratio"] >= target
        table.append(row)
    return table


def _fmt(v: list[float]) -> str:
    return f"{np.median(v):.3g} [{min(v):.3g}-{max(v):.3g}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--emp", metavar="PATH", help="EMP-toolkit's emp_garble_rate driver (or its directory)")
    ap.add_argument("--aes-file", default=AES_FILE, help="Bristol aes_128.txt for EMP (default ../shared/...)")
    ap.add_argument("--threads", type=int, default=fused.THREADS, help="threads of the per-machine rows")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    binary = emp_binary(args.emp) if args.emp else None
    if not jit.warm_up():
        print("warning: the compiled loops are off; pairwise runs its numpy program", file=sys.stderr)
    aes = resolve_circuit("aes128")
    layer = and_layer_circuit(1 << 20)
    rounds = []
    for i in range(args.rounds):
        rec: dict = {"round": i, "uptime": uptime(), "path": jit.path()}
        t0 = time.time()
        if binary:
            rec["emp_aes"], rec["emp_and20"] = run_emp(binary, args.aes_file)
        rec["pairwise"] = run_pairwise(aes, layer, args.threads)
        rec["seconds"] = time.time() - t0
        if not all(v["correct"] for v in rec["pairwise"].values()):
            raise SystemExit("pairwise's check against plaintext evaluation failed")
        rounds.append(rec)
        print(f"round {i}: {rec['uptime']}", file=sys.stderr, flush=True)
    table = summarize(rounds, binary is not None)
    if args.json:
        print(json.dumps({"rounds": rounds, "table": table, "threads": args.threads, "emp": binary}))
        return 0
    print(
        f"{args.rounds} interleaved rounds; pairwise path {jit.path()}, per-machine rows on {args.threads} threads; "
        f"loads: " + ", ".join(r["uptime"].split("load average:")[-1].strip() for r in rounds)
    )
    if binary:
        print(
            "| metric | EMP median [min-max] | pairwise median [min-max] | pairwise / EMP (median of rounds) | target |"
        )
        print("|---|---|---|---|---|")
        for row in table:
            tgt = f">= {row['target']}x: {'met' if row['met'] else 'not met'}" if row["target"] else ""
            print(
                f"| {row['metric']} | {_fmt(row['emp'])} | {_fmt(row['pairwise'])} | {row['ratio']:.2f}x "
                f"[{row['ratio_range'][0]:.2f}-{row['ratio_range'][1]:.2f}] | {tgt} |"
            )
    else:
        print("| metric | pairwise median [min-max] |")
        print("|---|---|")
        for row in table:
            print(f"| {row['metric']} | {_fmt(row['pairwise'])} |")
        print("(no EMP driver given (--emp PATH): no ratio)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
