"""Tests of ``pairwise ldp ...`` (pairwise.commands.ldp) through pairwise.cli.main."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pairwise.cli import main
from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ldp.ustat import exact_ustatistic


def run_json(capsys, *argv):
    """``ldp ARGV --compare --json``: the exact values these tests compare with come with --compare."""
    code = main(["ldp", *argv, "--compare", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


KEYS = {"estimate", "exact", "epsilon", "delta", "n"}


def test_auc_default_data(capsys):
    r = run_json(capsys, "auc")
    assert KEYS <= set(r)
    assert r["exact"] == pytest.approx(0.9375165160403784)  # scikit-learn roc_auc_score
    assert (r["n"], r["n_pos"], r["n_neg"]) == (569, 212, 357)
    assert r["epsilon"] == 2.0 and r["delta"] == 0.0
    assert math.isfinite(r["estimate"]) and r["bounds_from_data"] is False
    assert r["bounds"] == [5.0, 30.0] and r["clamped"] == 0  # the declared domain (protocols/data/domains.json)
    assert 0.0 <= r["estimate_clamped"] <= 1.0


def test_auc_budget_advanced(capsys):
    r = run_json(
        capsys,
        "auc",
        "--splitting",
        "budget",
        "--composition",
        "advanced",
        "--delta",
        "1e-6",
        "--bits",
        "3",
        "--epsilon",
        "4",
    )
    assert r["delta"] == 1e-6 and r["splitting"] == "budget" and len(r["recursed_per_level"]) == 3


def test_qmle_default_data(capsys):
    r = run_json(capsys, "qmle")
    assert KEYS <= set(r)
    np.testing.assert_allclose(r["exact"], [81.48224784, 0.56018055], rtol=1e-6)
    assert len(r["estimate"]) == 2 and len(r["std_errors"]) == 2 and r["n"] == 235
    r = run_json(capsys, "qmle", "--private-x", "--epsilon", "4", "--tau", "0.25")
    assert r["private_x"] is True and r["tau"] == 0.25


def test_shuffle_histogram_default_data(capsys):
    r = run_json(capsys, "shuffle-histogram")
    assert KEYS | {"max_error"} <= set(r)
    fair = load_dataset("fair")["rate_marriage"]
    np.testing.assert_allclose(r["exact"], np.bincount(fair.astype(int) - 1, minlength=5) / fair.size)
    thr = np.array(r["estimate_thresholded"])  # A^hist: c* where c* > q, else 0
    assert r["max_error"] == pytest.approx(np.max(np.abs(thr - r["exact"])))
    raw = np.array(r["estimate"])  # c* itself, unthresholded (unbiased)
    assert np.array_equal(thr, np.where(raw > r["zero_threshold"], raw, 0.0))
    assert np.array_equal(np.array(r["estimate_clamped"]), np.clip(raw, 0, 1))
    assert r["values"] == [1, 2, 3, 4, 5] and r["n"] == 6366 and r["epsilon"] == 1.0


def test_ustat_kernels(capsys):
    r = run_json(capsys, "ustat", "--kernel", "kendall")
    fair = load_dataset("fair")
    assert r["exact"] == pytest.approx(
        exact_ustatistic(np.column_stack([fair["rate_marriage"], fair["religious"]]), "kendall")
    )
    assert r["cells"] == 20
    r = run_json(capsys, "ustat", "--kernel", "gini", "--k", "16")
    assert r["exact"] == pytest.approx(exact_ustatistic(load_dataset("breast_cancer")["mean_radius"], "gini"))
    r = run_json(capsys, "ustat", "--kernel", "auc")
    assert r["exact"] == pytest.approx(0.9375165160403784)


def test_csv_input(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 6000
    v = rng.choice([0, 1, 2], size=n, p=[0.6, 0.3, 0.1])
    score = rng.normal(size=n) + v
    lab = (v > 0).astype(int)
    p = tmp_path / "data.csv"
    p.write_text("v,score,lab\n" + "\n".join(f"{a},{float(b)!r},{c}" for a, b, c in zip(v, score, lab)) + "\n")
    r = run_json(capsys, "shuffle-histogram", "--csv", str(p), "--column", "v", "--lower", "0", "--upper", "2")
    np.testing.assert_allclose(r["exact"], np.bincount(v) / n)
    assert r["n"] == n
    r = run_json(
        capsys,
        "auc",
        "--csv",
        str(p),
        "--score",
        "score",
        "--label",
        "lab",
        "--bits",
        "5",
        "--lower",
        "-5",
        "--upper",
        "7",
    )
    assert r["n"] == n and r["n_pos"] == int(lab.sum())
    p2 = tmp_path / "small.csv"
    p2.write_text("\n".join(p.read_text().splitlines()[:501]) + "\n")
    r = run_json(
        capsys, "qmle", "--csv", str(p2), "--response", "score", "--covariates", "v", "--lower", "-5", "--upper", "7"
    )
    assert r["n"] == 500


COMMANDS = [
    ["auc", "--epsilon", "2"],
    ["qmle", "--epsilon", "2"],
    ["shuffle-histogram", "--epsilon", "1"],
    ["ustat", "--kernel", "kendall", "--epsilon", "2"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[a[0] for a in COMMANDS])
def test_one_release_by_default_and_the_exact_value_only_with_compare(argv, capsys):
    """Issue 25 item 3: pasted default output is one DP release; the not-private aids come with --compare."""
    from pairwise.commands.ldp import COMPARE_ONLY_KEYS

    assert main(["ldp", *argv, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert not set(COMPARE_ONLY_KEYS) & set(plain), sorted(set(COMPARE_ONLY_KEYS) & set(plain))
    assert {"estimate", "interval", "interval_method", "alpha", "clamped"} <= set(plain)
    assert main(["ldp", *argv]) == 0
    text = capsys.readouterr().out
    assert "exact" not in text.replace("exact binomial", "") and "not private" not in text, text
    assert plain["interval_method"] in text  # the text names the interval's method (or why there is none)
    compared = run_json(capsys, *argv)
    assert set(plain) | {"exact"} <= set(compared)  # the same keys, plus the aids
    assert main(["ldp", *argv, "--compare"]) == 0
    text = capsys.readouterr().out
    assert "exact" in text.replace("exact binomial", "") and "(not private)" in text


def test_errors_are_reported(tmp_path, capsys):
    code = main(["ldp", "shuffle-histogram", "--epsilon", "2", "--json"])
    out = capsys.readouterr()
    assert code == 2 and "epsilon <= 1" in out.err and json.loads(out.out)["error"]
    code = main(["ldp", "auc", "--score", "nope"])
    assert code == 2 and "no column 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("s,y\n1,0\n2,x\n")
    code = main(["ldp", "auc", "--csv", str(bad), "--score", "s", "--label", "y", "--lower", "0", "--upper", "9"])
    assert code == 2 and "data row 2), column 'y': non-numeric value 'x'" in capsys.readouterr().err
    small = tmp_path / "small.csv"
    small.write_text("v\n" + "\n".join(["1"] * 50) + "\n")
    code = main(["ldp", "shuffle-histogram", "--csv", str(small), "--column", "v", "--lower", "0", "--upper", "3"])
    assert code == 2 and "users" in capsys.readouterr().err
    code = main(["ldp", "shuffle-histogram", "--upper", "3"])
    assert code == 2 and "give both --lower and --upper" in capsys.readouterr().err
    code = main(["ldp", "qmle", "--covariates", "foodexp"])
    assert code == 2 and "cannot also be a covariate" in capsys.readouterr().err
    code = main(["ldp", "auc", "--epsilon", "-1"])
    assert code == 2 and "epsilon" in capsys.readouterr().err
