"""Source-level mutation run with cosmic-ray over dp/, the noise gadgets and the estimators (issue 25 item 6).

Unlike ``tests/mutation/run.py`` (deliberate faults patched in at the public
entry points), this mutates the source itself: cosmic-ray
(https://cosmic-ray.readthedocs.io) rewrites one operator, number or
condition of a module on disk, runs that module's test command, and counts
the mutant killed when the tests fail.  Not part of CI (hours for every
mutant); run it by hand after changing the modules below, in a checkout you
are not editing (files are rewritten in place and restored):

    .venv/bin/pip install cosmic-ray
    .venv/bin/python tests/mutation/source_mutants.py --per-module 12 --out /tmp/mutants.json

Operators: cosmic-ray's full set makes 11 replacements of every binary
operator (a + b -> a - b, a * b, a / b, a // b, a ** b, a % b, a << b, ...),
most of them killed by any test; we keep one natural mutation per site
(+ <-> -, * <-> /, // -> /, ** -> *, comparison boundaries < <-> <=,
> <-> >=, == <-> !=), numbers, ``not``, True/False, and/or, unary minus and
zero-iteration loops, then draw ``--per-module`` of them uniformly (seeded)
per module.  The score is killed / (killed + survived); timeouts count as
killed, as cosmic-ray does.  Survivors are written with their diffs to
``--out`` for review (benchmarks/RESULTS.md lists each with its fate);
``recheck_survivors.py`` re-applies them to the current source once tests are written.

The ECDF part of issue 25 adds dp/kary.py, dp/ecdf_intervals.py,
dp/ecdf.py, protocols/ecdf/estimates.py and protocols/ecdf/release.py, then
protocols/ecdf/ledger.py (its tests include the hypothesis state machine:
give ``--timeout 900``) and protocols/ecdf/noise.py (``--modules`` selects them).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTEST = f"{sys.executable} -m pytest -x -q -p no:cacheprovider"

#: module -> the tests that must notice a change in it
TARGETS = {
    "dp/concentration.py": "tests/dp/test_concentration.py",
    "protocols/ustat/interval.py": "tests/dp/test_concentration.py",
    "protocols/ldp/interval.py": "tests/dp/test_concentration.py tests/protocols/test_interval_neighbours.py",
    "protocols/ustat/planning.py": "tests/protocols/ustat/test_pairs_auto.py",
    "circuits/kernel_spec.py": "tests/circuits/test_kernel_spec.py",
    "circuits/noise.py": "tests/circuits/test_noise.py tests/dp/test_dp_dyadic.py",
    "dp/mechanisms.py": "tests/dp/test_dp_mechanisms.py",
    "dp/dyadic/params.py": "tests/dp/test_dp_dyadic.py tests/dp/test_dp_mechanisms.py",
    "dp/dyadic/guarantee.py": "tests/dp/test_dp_dyadic.py tests/circuits/test_noise.py",
    "dp/dyadic/search.py": "tests/dp/test_dp_dyadic.py tests/circuits/test_noise.py",
    "dp/samplers.py": "tests/statistical/test_dp_samplers.py",
    "dp/accounting.py": "tests/dp/test_dp_accounting.py",
    "dp/exact.py": "tests/dp/test_dp_dyadic.py tests/dp/test_dp_accounting.py",
    "dp/bounds.py": "tests/protocols/test_bounds.py",
    "dp/smoothing.py": "tests/dp/test_dp_ecdf.py",
    "protocols/ustat/stats.py": "tests/protocols/ustat/test_ustat.py",
    "protocols/ldp/ustat.py": "tests/protocols/ldp/test_ldp_ustat.py",
    # the ECDF part of issue 25
    "dp/kary.py": "tests/dp/test_kary.py",
    "dp/ecdf_intervals.py": "tests/dp/test_ecdf_intervals.py tests/statistical/test_ecdf_interval_coverage.py",
    "protocols/ecdf/estimates.py": "tests/protocols/ecdf/test_ecdf_estimates.py "
    "tests/statistical/test_ecdf_interval_coverage.py "
    "tests/protocols/ecdf/test_ecdf_handlers.py",
    "protocols/ecdf/release.py": "tests/protocols/ecdf/test_ecdf_handlers.py",
    "dp/ecdf.py": "tests/dp/test_dp_ecdf.py",
    # the ledger and the servers' noise (issue 25 item 6 names protocols/ecdf/{ledger,release,noise}.py)
    "protocols/ecdf/ledger.py": "tests/protocols/ecdf/test_ledger_mutants.py tests/protocols/ecdf/test_ecdf_ledger.py "
    "tests/protocols/ecdf/test_ecdf_handlers.py",
    "protocols/ecdf/noise.py": "tests/protocols/ecdf/test_noise_mutants.py tests/protocols/ecdf/test_ecdf_noise.py "
    "tests/protocols/ecdf/test_ecdf_handlers.py "
    "tests/statistical/test_noise_power_ecdf.py "
    + " ".join(
        f"tests/statistical/test_noise_ownership.py::{t}"
        for t in (
            "test_ecdf_noisy_sum_circuit_needs_both_servers",
            "test_masked_noise_shares_are_uniform_alone_and_discrete_laplace_together",
            "test_one_polya_share_is_a_part_of_the_noise_not_all_of_it",
        )
    ),
}

KEEP = re.compile(
    r"core/(ReplaceBinaryOperator_(Add_Sub|Sub_Add|Mul_Div|Div_Mul|FloorDiv_Div|Pow_Mul|Mod_FloorDiv)"
    r"|ReplaceComparisonOperator_(Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Eq_NotEq|NotEq_Eq)"
    r"|NumberReplacer|AddNot|ReplaceTrueWithFalse|ReplaceFalseWithTrue|ReplaceAndWithOr|ReplaceOrWithAnd"
    r"|ReplaceUnaryOperator_USub_UAdd|ReplaceUnaryOperator_Delete_USub|ZeroIterationForLoop)$"
)


def _config(module: str, tests: str, path: Path, timeout: float) -> None:
    path.write_text(f'''[cosmic-ray]
module-path = "{module}"
timeout = {timeout}
excluded-modules = []
test-command = "{PYTEST} {tests}"
[cosmic-ray.distributor]
name = "local"
''')


def _sample(db: Path, k: int, seed: int) -> int:
    con = sqlite3.connect(db)
    rows = con.execute(
        "select job_id, operator_name, start_pos_row, start_pos_col, occurrence from mutation_specs"
    ).fetchall()
    # job ids are random: order by what the mutant is, so the same seed draws the same mutants every run
    keep = [j for j, op, *pos in sorted(rows, key=lambda r: (r[1], r[2], r[3], r[4])) if KEEP.match(op)]
    chosen = set(random.Random(seed).sample(keep, min(k, len(keep))))
    drop = [(j,) for j, *_ in rows if j not in chosen]
    con.executemany("delete from mutation_specs where job_id = ?", drop)
    con.executemany("delete from work_items where job_id = ?", drop)
    con.commit()
    con.close()
    return len(keep)


def run(per_module: int, seed: int, modules: list[str], timeout: float, out_path: Path | None = None) -> dict:
    out = json.loads(out_path.read_text()) if out_path is not None and out_path.exists() else {}
    cr = str(Path(sys.executable).with_name("cosmic-ray"))
    for module in modules:
        if module in out:  # resumed run: done already
            continue
        tests = TARGETS[module]
        with tempfile.TemporaryDirectory() as tmp:
            cfg, db = Path(tmp) / "c.toml", Path(tmp) / "s.sqlite"
            _config(module, tests, cfg, timeout)
            subprocess.run([cr, "init", str(cfg), str(db)], cwd=ROOT, check=True, capture_output=True)
            eligible = _sample(db, per_module, seed)
            t0 = time.time()
            subprocess.run([cr, "exec", str(cfg), str(db)], cwd=ROOT, check=True, capture_output=True)
            dump = subprocess.run([cr, "dump", str(db)], cwd=ROOT, check=True, capture_output=True, text=True).stdout
        res = {
            "tests": tests,
            "eligible": eligible,
            "killed": 0,
            "survived": 0,
            "incompetent": 0,
            "survivors": [],
            "seconds": round(time.time() - t0, 1),
        }
        for line in dump.splitlines():
            item, result = json.loads(line)
            spec = (item.get("mutations") or [item])[0]
            outcome = (result or {}).get("test_outcome")
            if outcome == "killed" or (result or {}).get("worker_outcome") == "timeout":
                res["killed"] += 1
            elif outcome == "survived":
                res["survived"] += 1
                res["survivors"].append(
                    {
                        "operator": spec["operator_name"],
                        "line": (spec.get("start_pos") or [None])[0],
                        "function": spec.get("definition_name"),
                        "diff": result.get("diff"),
                    }
                )
            else:
                res["incompetent"] += 1
        out[module] = res
        if out_path is not None:
            out_path.write_text(json.dumps(out, indent=1))  # after every module, so a long run can resume
        print(
            f"{module}: {res['killed']} killed, {res['survived']} survived, {res['incompetent']} incompetent "
            f"(of {eligible} eligible; {res['seconds']} s)",
            flush=True,
        )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    if dirty.strip():
        raise SystemExit(f"the tree is not clean after the run:\n{dirty}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-module", type=int, default=12, help="mutants drawn per module (default 12)")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant's test command")
    ap.add_argument("--modules", nargs="*", default=sorted(TARGETS))
    ap.add_argument("--out", default="mutants.json", help="results (JSON); an existing file resumes the run")
    args = ap.parse_args()
    res = run(args.per_module, args.seed, args.modules, args.timeout, Path(args.out))
    killed = sum(r["killed"] for r in res.values())
    survived = sum(r["survived"] for r in res.values())
    print(f"score {killed}/{killed + survived} = {killed / max(1, killed + survived):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
