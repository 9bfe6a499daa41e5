"""Peak memory of ``pairwise ecdf upload`` against the number of CSV rows (issue 22, item 6).

The upload connects to every server first, then makes and sends the keys
chunk by chunk (:func:`pairwise.protocols.ecdf.client.upload_source`), so
its resident memory should not grow with the file.  For each row count this
writes a CSV of that many rows (scores of a gamma distribution, 3 decimals),
starts two real ``ecdf serve`` processes with SQLite state in a temporary
directory, runs ``python -m pairwise ecdf upload`` on it as a child process
and reads the child's peak resident set (``ru_maxrss`` from ``wait4``, which
is VmHWM).  Prints one JSON line per row count, with the wall time and the
machine load (``os.getloadavg``) before and after.

    .venv/bin/python benchmarks/ecdf_upload_memory.py --rows 1000000 10000000

``--python`` runs another checkout's interpreter for the upload (e.g. main
before this change, for a comparison in the same run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pairwise.protocols.ecdf.client import ServerProcesses


def write_csv(path: Path, rows: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write("score\n")
        for c0 in range(0, rows, 1 << 20):
            v = np.round(rng.gamma(3.0, 2.0, min(1 << 20, rows - c0)), 3)
            f.write("\n".join(f"{a:.3f}" for a in v))
            f.write("\n")


def _run_child(cmd: list[str]) -> tuple[int, bytes, bytes, object]:
    """Run ``cmd``; (return code, stdout, stderr, rusage of that child alone)."""
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        p = subprocess.Popen(cmd, stdout=o, stderr=e, cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        return p.returncode, o.read(), e.read(), usage


def measure(rows: int, python: str, domain_bits: int, workdir: Path) -> dict:
    csv = workdir / f"scores-{rows}.csv"
    if not csv.exists():
        write_csv(csv, rows)
    load_before = os.getloadavg()
    state = tempfile.mkdtemp(prefix=f"state-{rows}-", dir=workdir)
    with ServerProcesses(2, budget="10", timeout=3600, state_dir=state) as sp:
        cmd = [
            python,
            "-m",
            "pairwise",
            "ecdf",
            "upload",
            "--servers",
            sp.servers,
            "--data",
            str(csv),
            "--columns",
            "score",
            "--lower",
            "0",
            "--upper",
            "40",
            "--domain-bits",
            str(domain_bits),
            "--dataset",
            f"bench-{rows}",
            "--timeout",
            "3600",
            "--json",
        ]
        t0 = time.perf_counter()
        code, out, err, usage = _run_child(cmd)
        seconds = time.perf_counter() - t0
    if code != 0:
        return {
            "rows": rows,
            "python": python,
            "failed": code,
            "stderr": err.decode()[-500:],
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "seconds": round(seconds, 1),
        }
    rep = json.loads(out)
    return {
        "rows": rows,
        "accepted": rep["accepted"],
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "seconds": round(seconds, 1),
        "clients_per_second": round(rows / seconds),
        "csv_mib": round(csv.stat().st_size / 2**20, 1),
        "upload_bytes": rep["upload_bytes"],
        "domain_bits": domain_bits,
        "python": python,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10**6, 10**7])
    ap.add_argument("--domain-bits", type=int, default=10)
    ap.add_argument(
        "--python",
        nargs="+",
        default=[sys.executable],
        help="interpreters to run the upload with, interleaved per row count (default: this one)",
    )
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ecdf-upload-mem-", dir=a.dir) as d:
        for rows in a.rows:
            for py in a.python:
                print(json.dumps(measure(rows, py, a.domain_bits, Path(d))), flush=True)


if __name__ == "__main__":
    main()
