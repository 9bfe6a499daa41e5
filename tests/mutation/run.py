"""Noise mutation check: every deliberate noise fault must make the noise-power tests fail (issue 17).

Usage (from the repository root, after the test suite passed)::

    .venv/bin/python tests/mutation/run.py            # all faults, 2 at a time
    .venv/bin/python tests/mutation/run.py --list     # the fault table
    .venv/bin/python tests/mutation/run.py --only ecdf-gc-eps-x4 --jobs 1
    .venv/bin/python tests/mutation/run.py --baseline # first check the selections pass without faults

What it does
    For each row of :data:`faults.FAULTS` it runs the row's test selections in
    a fresh ``python -m pytest`` with ``tests/mutation/inject`` first on
    PYTHONPATH and PAIRWISE_FAULT set, so the fault is monkeypatched into the
    pytest process and every Python process the tests start (servers, workers,
    the ``pairwise`` command).  A fault is

    * CAUGHT when the run fails and every name fragment in the row's
      ``expect`` matches at least one failing test;
    * SURVIVED when the tests pass (or some expected test did not fail) --
      "never called" is added when the patched code never ran;
    * BROKEN when the patch target is missing or its signature changed (a
      refactor renamed it: update the row; this never counts as caught);
    * ERROR when pytest itself could not run (collection error, timeout).

    The check exits 1 unless every fault is CAUGHT, and prints the table
    "fault -> caught by which tests".  Before running, it collects the test
    ids once and fails if an ``expect`` fragment matches no test at all.

Adding faults
    See the docstring of ``tests/mutation/faults.py``: one ``Fault(...)`` row
    per fault (noise scale x2, x1/2, zero, and one party only for multi-party
    noise), pointing at the public entry point to patch and at the tests that
    must catch it.

Cost: about 70 pytest runs of a few seconds each; ``--jobs 2`` (the default)
keeps it to a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import faults as table  # noqa: E402

TIMEOUT = 900  # seconds per pytest run


@dataclass
class Outcome:
    fault: table.Fault
    status: str = "ERROR"
    failed: list[str] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _selection_args(sel: str) -> list[str]:
    path, *rest = sel.split("::-k::")
    return [path] + (["-k", rest[0]] if rest else [])


def _pytest(args: list[str], env: dict, junit: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        f"--junitxml={junit}",
        *args,
    ]
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True
    )


def _junit_failures(path: str) -> dict[str, str]:
    out = {}
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, FileNotFoundError):
        return out
    for case in root.iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is None:
            continue
        cls = case.get("classname", "")
        test_id = f"{cls.replace('.', '/')}.py::{case.get('name')}"
        out[test_id] = (bad.get("message") or "").splitlines()[0][:160] if bad.get("message") else bad.tag
    return out


def run_fault(fault: table.Fault) -> Outcome:
    res = Outcome(fault)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pairwise-mutation-") as tmp:
        log = os.path.join(tmp, "fault.log")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE / "inject"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["PAIRWISE_FAULT"] = fault.name
        env["PAIRWISE_TEST_WARMUP"] = "0"  # the suite before this check filled numba's cache (tests/conftest.py)
        env["PAIRWISE_FAULT_LOG"] = log
        any_failed, errors = False, []
        for i, sel in enumerate(fault.tests):
            junit = os.path.join(tmp, f"junit{i}.xml")
            try:
                proc = _pytest(_selection_args(sel), env, junit)
            except subprocess.TimeoutExpired:
                errors.append(f"{sel}: timed out after {TIMEOUT} s")
                continue
            fails = _junit_failures(junit)
            res.messages.update(fails)
            if proc.returncode == 1 and fails:
                any_failed = True
            elif proc.returncode not in (0, 1):
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
                errors.append(f"{sel}: pytest exit {proc.returncode}: {' | '.join(tail)}")
        lines = Path(log).read_text().splitlines() if os.path.exists(log) else []
    res.seconds = time.monotonic() - t0
    res.failed = sorted(res.messages)
    broken = [ln for ln in lines if ln.startswith("BROKEN")]
    if broken:
        res.status = "BROKEN"
        res.notes.append(broken[0])
        return res
    if not any(ln.startswith("APPLIED") for ln in lines):
        res.status = "ERROR"
        res.notes.append(
            f"the fault was never installed: no test imported {fault.target.partition(':')[0]} "
            "(or tests/mutation/inject is not on PYTHONPATH)"
        )
        return res
    if errors:
        res.status = "ERROR"
        res.notes.extend(errors)
        return res
    res.missing = [e for e in fault.expect if not any(e in t for t in res.failed)]
    if any_failed and not res.missing:
        res.status = "CAUGHT"
    else:
        res.status = "SURVIVED"
        if not any(ln.startswith("CALLED") for ln in lines):
            res.notes.append("never called: the tests do not reach the patched code")
    return res


def collect_ids(faults: list[table.Fault]) -> list[str]:
    files = sorted({_selection_args(s)[0] for f in faults for s in f.tests})
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *files]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    if proc.returncode != 0:
        raise SystemExit(f"mutation check: cannot collect the noise tests:\n{proc.stdout}\n{proc.stderr}")
    return [ln.strip() for ln in proc.stdout.splitlines() if "::" in ln]


def check_expectations(faults: list[table.Fault], ids: list[str]) -> list[str]:
    problems = []
    for f in faults:
        for e in f.expect:
            if not any(e in t for t in ids):
                problems.append(f"{f.name}: expected test fragment {e!r} matches no collected test")
    return problems


def _short(test_id: str) -> str:
    return test_id.split("::", 1)[-1]


def report(outcomes: list[Outcome]) -> str:
    rows = ["| fault | status | caught by | s |", "|---|---|---|---|"]
    for o in outcomes:
        if o.status == "CAUGHT":
            shown = [_short(t) for t in o.failed]
            what = ", ".join(shown[:4]) + (f" (+{len(shown) - 4} more)" if len(shown) > 4 else "")
        else:
            what = "; ".join(o.notes + [f"expected to fail but passed: {m}" for m in o.missing]) or "-"
        rows.append(f"| {o.fault.name} | {o.status} | {what} | {o.seconds:.0f} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="faults run in parallel (default 2)")
    ap.add_argument("--only", nargs="*", help="fault names to run (default: all)")
    ap.add_argument("--list", action="store_true", help="print the fault table and exit")
    ap.add_argument("--baseline", action="store_true", help="first run every selection without a fault")
    args = ap.parse_args(argv)
    faults = table.FAULTS
    if args.only:
        unknown = [n for n in args.only if n not in table.BY_NAME]
        if unknown:
            print(f"unknown faults: {unknown}", file=sys.stderr)
            return 2
        faults = [table.BY_NAME[n] for n in args.only]
    if args.list:
        for f in faults:
            print(f"{f.name:28s} {f.target:64s} {f.description}")
        return 0
    problems = check_expectations(faults, collect_ids(faults))
    if problems:
        print("mutation check: the fault table names tests that do not exist:\n  " + "\n  ".join(problems))
        return 1
    if args.baseline:
        sels = sorted({s for f in faults for s in f.tests})
        for s in sels:
            with tempfile.TemporaryDirectory() as tmp:
                proc = _pytest(_selection_args(s), dict(os.environ), os.path.join(tmp, "j.xml"))
            if proc.returncode != 0:
                print(f"baseline failed without any fault: {s}\n{proc.stdout[-2000:]}")
                return 1
        print(f"baseline: {len(sels)} selections pass without faults")
    t0 = time.monotonic()
    done: dict[str, Outcome] = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_fault, f): f for f in faults}
        for fut in as_completed(futures):
            o = fut.result()
            done[o.fault.name] = o
            print(f"[{len(done)}/{len(faults)}] {o.fault.name}: {o.status} ({o.seconds:.0f} s)", flush=True)
    outcomes = [done[f.name] for f in faults]
    print(report(outcomes))
    bad = [o for o in outcomes if o.status != "CAUGHT"]
    print(f"\n{len(outcomes) - len(bad)} of {len(outcomes)} faults caught in {time.monotonic() - t0:.0f} s")
    if bad:
        print("mutation check FAILED: " + ", ".join(f"{o.fault.name} ({o.status})" for o in bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
