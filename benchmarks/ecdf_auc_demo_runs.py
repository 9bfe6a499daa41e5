"""How often the real ``pairwise ecdf demo`` prints an AUC interval that contains the exact AUC.

Each run is the shipped command as a user types it (``pairwise ecdf demo
--json --compare``: ``auc_exact`` is printed only with ``--compare``): real server processes, real key uploads, the servers' in-circuit
noise.  The script tallies, per epsilon, how many runs' printed ``auc_interval``
contain the (not private) ``auc_exact``, the mean error of ``auc`` (the
plug-in) and of ``auc_smoothed`` (the service's AUC before issue 25), and the
mean interval width.  Runs are sequential (one demo at a time); the machine
load is recorded before and after.  Usage::

    python benchmarks/ecdf_auc_demo_runs.py --runs 20 --eps 1,4 [--mechanism paper] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def one_run(eps: float, mechanism: str, timeout: float) -> dict:
    exe = Path(sys.executable).with_name("pairwise")
    cmd = [str(exe), "ecdf", "demo", "--json", "--compare", "--epsilon", f"{eps:g}", "--mechanism", mechanism]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    out = json.loads(r.stdout)
    return {
        "auc": out["auc"],
        "interval": out["auc_interval"],
        "smoothed": out["auc_smoothed"],
        "exact": out["auc_exact"],
        "seconds": time.monotonic() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--eps", default="1")
    ap.add_argument("--mechanism", default="paper")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    report = {"load_before": os.getloadavg(), "rows": []}
    for eps in (float(e) for e in a.eps.split(",")):
        runs = []
        for i in range(a.runs):
            runs.append(one_run(eps, a.mechanism, a.timeout))
            print(f"eps {eps:g} run {i + 1}/{a.runs}: {runs[-1]}", file=sys.stderr, flush=True)
        inside = sum(r["interval"] is not None and r["interval"][0] <= r["exact"] <= r["interval"][1] for r in runs)
        n = len(runs)
        row = {
            "eps": eps,
            "runs": n,
            "inside": inside,
            "mean_error_plugin": sum(r["auc"] - r["exact"] for r in runs) / n,
            "mean_abs_error_plugin": sum(abs(r["auc"] - r["exact"]) for r in runs) / n,
            "mean_error_smoothed": sum(r["smoothed"] - r["exact"] for r in runs) / n,
            "mean_width": sum(r["interval"][1] - r["interval"][0] for r in runs if r["interval"]) / n,
            "exact": runs[0]["exact"],
            "mean_seconds": sum(r["seconds"] for r in runs) / n,
            "runs_detail": runs,
        }
        report["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "runs_detail"}), flush=True)
    report["load_after"] = os.getloadavg()
    print(json.dumps({"load_before": report["load_before"], "load_after": report["load_after"]}))
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
