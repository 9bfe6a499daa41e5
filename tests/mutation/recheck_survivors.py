"""Re-check the survivors of a source-level mutation run against the current source (issue 25 item 6).

``source_mutants.py --out FILE`` writes every surviving mutant with its diff.  After tests were written
for them, this applies each diff again to the current checkout (``patch``, which finds a site that has
moved a few lines; ``--fuzz 3`` also tolerates changed context lines; where the code was reformatted since,
so that the mutated line no longer exists as such, :func:`transplant` finds the mutated text with any
whitespace and line breaks and makes the same one-site change there), runs
``tests/dp/test_source_mutants.py`` (first, so a kill by it is quick) and the module's own tests
(``TARGETS``) with ``-x``, records killed (by which test) or survived, and restores the file with
``git checkout``.  Run it in a checkout you are not editing, at low priority:

    nice -n 19 .venv/bin/python tests/mutation/recheck_survivors.py /tmp/mutants.json --fuzz 3 --out /tmp/recheck.json

Survivors are numbered 1.. in the file's order (module, then draw); ``--ids`` re-checks a few.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from source_mutants import ROOT, TARGETS  # noqa: E402


def transplant(module: str, diff: str) -> str | None:
    """Re-apply a one-line mutant to reformatted code; returns what was done, or None if not exactly one site.

    The mutant changes ``old`` into ``new`` between a common prefix and suffix.  The changed part, with
    growing context from the old line on both sides, is searched in the current file with every run of
    whitespace allowed to be any run of whitespace (line breaks included, as a formatter splits lines);
    the first context that matches exactly once is changed in place.
    """
    old = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    new = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    if len(old) != 1 or len(new) != 1:
        return None
    a, b = old[0].strip(), new[0].strip()
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    q = 0
    while q < min(len(a), len(b)) - p and a[len(a) - 1 - q] == b[len(b) - 1 - q]:
        q += 1
    path = ROOT / module
    text = path.read_text()

    def pattern(s: str) -> str:
        return r"\s+".join(re.escape(w) for w in s.split()) if s.strip() else ""

    for k in range(0, max(len(a), 1) + 1, 4):
        lo, hi = max(0, p - k), min(len(a), len(a) - q + k)
        before, mid, after = a[lo:p], a[p : len(a) - q], a[len(a) - q : hi]
        # keep the whitespace at the joins exact-or-any: a pattern per part, joined by optional whitespace
        pat = "(" + pattern(before) + (r"\s*" if before[-1:].isspace() else "") + ")"
        pat += "(" + re.escape(mid) + ")" + "(" + (r"\s*" if after[:1].isspace() else "") + pattern(after) + ")"
        hits = list(re.finditer(pat, text))
        if len(hits) == 1:
            h = hits[0]
            path.write_text(text[: h.start(2)] + b[p : len(b) - q] + text[h.end(2) :])
            return f"transplanted {mid!r} -> {b[p : len(b) - q]!r} with {hi - lo - len(mid)} context characters"
        if not hits:
            return None
    return None


def recheck(survivors: dict, ids: set[int] | None, fuzz: int, timeout: float) -> list[dict]:
    out: list[dict] = []
    i = 0
    for module, res in survivors.items():
        for s in res["survivors"]:
            i += 1
            if ids and i not in ids:
                continue
            rec = {"id": i, "module": module, "line": s["line"], "function": s["function"], "operator": s["operator"]}
            diff = s["diff"].split("\n", 1)[1] + "\n"  # drop cosmic-ray's "--- mutation diff ---" banner
            p = subprocess.run(
                ["patch", "-p1", f"-F{fuzz}", "--no-backup-if-mismatch", "-r", "-"],
                input=diff,
                text=True,
                cwd=ROOT,
                capture_output=True,
            )
            rec["patch"] = (p.stdout + p.stderr).strip()
            if p.returncode != 0:
                subprocess.run(["git", "checkout", "--", module], cwd=ROOT, check=True)
                done = transplant(module, diff)
                if done is not None:
                    rec["patch"] += "\n" + done
                    p = subprocess.CompletedProcess(p.args, 0)
            if p.returncode != 0:
                rec["outcome"] = "site gone"
            else:
                tests = "tests/dp/test_source_mutants.py " + TARGETS[module]
                t0 = time.time()
                try:
                    r = subprocess.run(
                        f"{sys.executable} -m pytest -x -q -p no:cacheprovider {tests}",
                        shell=True,
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=timeout,
                    )
                    rc, stdout = r.returncode, r.stdout
                except subprocess.TimeoutExpired:
                    rc, stdout = -1, ""
                finally:
                    subprocess.run(["git", "checkout", "--", module], cwd=ROOT, check=True)
                rec["seconds"] = round(time.time() - t0, 1)
                rec["outcome"] = "survived" if rc == 0 else "killed"
                if rc != 0:
                    rec["by"] = re.findall(r"^(?:FAILED|ERROR) (\S+)", stdout, re.M)[:3] or [
                        "timeout" if rc == -1 else stdout[-300:]
                    ]
            print({k: v for k, v in rec.items() if k != "patch"}, flush=True)
            out.append(rec)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("survivors", type=Path, help="the --out file of source_mutants.py")
    ap.add_argument("--ids", type=int, nargs="*", help="re-check only these survivors (1-based, file order)")
    ap.add_argument("--fuzz", type=int, default=0, help="patch's fuzz factor (context lines that may differ)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant (a timeout counts as killed)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    out = recheck(json.loads(a.survivors.read_text()), set(a.ids or ()), a.fuzz, a.timeout)
    if a.out:
        a.out.write_text(json.dumps(out, indent=1))
    left = [r["id"] for r in out if r["outcome"] != "killed"]
    print(f"{len(out) - len(left)} of {len(out)} killed; not killed: {left}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
