"""Client validation, with against without: the ECDF service end to end, interleaved A/B on this machine.

Usage (repository root, project venv; BASE: a checkout of the code before validation)::

    git archive <base-commit> | tar -x -C /tmp/ecdf-base
    .venv/bin/python benchmarks/ecdf_validation_ab.py --base-tree /tmp/ecdf-base --rounds 4 --n 100000

Each round runs ``benchmarks/ecdf_service.py --part e2e --only dcf10`` (n
clients, m = 2, domain and grid 2^10: key generation, upload, release of the
whole ECDF) once from each tree, in a rotating order, each in its own
process whose ``pairwise`` package (and its server processes') is that tree:
a ``sitecustomize`` shim points the editable install's package map at
``--base-tree`` when ``PAIRWISE_TREE`` is set.  Printed per run: ``uptime``
load, total / keygen / upload / release seconds; for the validated tree the
upload throughput (keys per second and server: the servers check the keys
while they receive them) and the bytes the servers exchanged for the check
per client.  The ratios (new / base) are per round, so the shared
machine's drifting load cancels as far as it can.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SHIM = """
import os, sys
tree = os.environ.get("PAIRWISE_TREE")
if tree:
    for finder in list(sys.meta_path):
        mod = sys.modules.get(getattr(finder, "__module__", ""))
        mapping = getattr(mod, "MAPPING", None)
        if isinstance(mapping, dict) and "pairwise" in mapping:
            root = os.path.dirname(mapping["pairwise"])
            for k, v in list(mapping.items()):
                mapping[k] = os.path.join(tree, os.path.relpath(v, root))
"""


def load() -> str:
    return open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"


def run(tree: Path, n: int, shim: str, base: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=shim)
    if base:
        env["PAIRWISE_TREE"] = str(tree)
    else:
        env.pop("PAIRWISE_TREE", None)
    before = load()
    out = subprocess.run(
        [
            sys.executable,
            str(tree / "benchmarks" / "ecdf_service.py"),
            "--part",
            "e2e",
            "--n",
            str(n),
            "--only",
            "dcf10",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=7200,
    )
    if out.returncode:
        raise RuntimeError(f"{tree}: {out.stderr[-3000:]}")
    row = next(ast.literal_eval(line) for line in out.stdout.splitlines() if line.startswith("{'n'"))
    row["load"] = f"{before}-{load()}"
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-tree", required=True, type=Path, help="a checkout of the code without validation")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--n", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as shim:
        Path(shim, "sitecustomize.py").write_text(SHIM)
        rows = []
        for r in range(args.rounds):
            order = [("base", args.base_tree), ("new", ROOT)]
            if r % 2:
                order.reverse()
            got = {}
            for name, tree in order:
                got[name] = run(tree, args.n, shim, base=name == "base")
                g = got[name]
                print(
                    f"round {r + 1} {name}: load {g['load']}, total {g['total_s']:.2f} s, keygen {g['keygen_s']:.2f},"
                    f" upload {g['upload_s']:.2f}, release {g['release_s']:.2f}"
                    + (
                        f", {g['keys_per_s_per_server']:.0f} keys/s/server, {g['check_bytes'] / args.n:.1f} check "
                        f"bytes/client"
                        if "check_bytes" in g
                        else ""
                    ),
                    flush=True,
                )
            rows.append((r + 1, [n for n, _ in order], got))
    print(
        "\n| round | order | load | base total s | new total s | new / base | base upload s | new upload s | "
        "base release s | new release s | new keys/s/server | check bytes/client |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for r, order, g in rows:
        b, nw = g["base"], g["new"]
        ratios.append(nw["total_s"] / b["total_s"])
        print(
            f"| {r} | {' '.join(order)} | {b['load']} / {nw['load']} | {b['total_s']:.2f} | {nw['total_s']:.2f} | "
            f"{ratios[-1]:.2f} | {b['upload_s']:.2f} | {nw['upload_s']:.2f} | {b['release_s']:.2f} | "
            f"{nw['release_s']:.2f} | {nw['keys_per_s_per_server']:.0f} | {nw['check_bytes'] / args.n:.1f} |"
        )
    print(f"\nmedian new / base: {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
