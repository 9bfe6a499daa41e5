"""The 2PC U-statistic protocol with worker processes (``mode='network'``) and ``python -m pairwise ustat``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pairwise.protocols.ustat.driver import prepare_data, run_ustat
from pairwise.protocols.ustat.stats import sample_pairs, sample_two_sample_pairs, u_statistic
from tests.support.ustat import BOUNDS, DATA, noiseless_reference


@pytest.mark.parametrize("statistic", ["gini", "kendall", "auc"])
@pytest.mark.parametrize("mode", ["simulate", "network"])
def test_garbled_protocol_computes_the_sampled_kernels(statistic, mode):
    """At eps = 60 per pair with a kernel range of 2, the discrete Laplace noise is nonzero with
    probability 2 e^-30 / (1 + e^-30) < 2e-13 per pair, so the garbled protocol's estimate must
    equal the plain average over the same sampled pairs."""
    x, y, lab = DATA[statistic]()
    seed = 11
    res = run_ustat(
        statistic,
        x,
        y,
        lab,
        epsilon=120.0,
        pairs_per_user=2,
        mode=mode,
        workers=2,
        rng=np.random.default_rng(seed),
        batch=64,
        **BOUNDS[statistic],
    )
    pd = prepare_data(statistic, x, y, lab, **BOUNDS[statistic])
    rng = np.random.default_rng(seed)
    if statistic == "auc":
        pairs = sample_two_sample_pairs(pd.x.size, pd.y.size, 2, rng)
    else:
        pairs = sample_pairs(pd.x.size, 2, rng)
    assert res.pairs == pairs.shape[0]
    assert res.estimate == pytest.approx(noiseless_reference(statistic, pd, pairs), abs=1e-12)
    assert res.bytes > 32 * res.and_gates  # tables alone are 32 bytes per AND gate
    exact_q = (
        u_statistic(statistic, pd.x * pd.scale, pd.y) if statistic != "kendall" else u_statistic("kendall", pd.x, pd.y)
    )
    assert res.extra["exact_quantized"] == pytest.approx(exact_q)
    assert res.exact == pytest.approx(exact_q)  # no value is clamped and the grids hold the data exactly
    assert res.extra["clamped"] == 0


def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "pairwise", *args], capture_output=True, text=True, timeout=timeout)


def test_cli_json_keys_on_default_data():
    r = _cli("ustat", "--statistic", "auc", "--epsilon", "1", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for k in (
        "statistic",
        "estimate",
        "interval",
        "interval_method",
        "epsilon",
        "delta",
        "n",
        "pairs",
        "and_gates",
        "bytes",
        "seconds",
    ):
        assert k in d
    # one release by default: no exact value, no predicted error, no second (baseline) release
    assert not {"exact", "exact_quantized", "sample_mse", "theorem5_mse", "rr_estimate", "rr_interval"} & set(d)
    r = _cli("ustat", "--statistic", "auc", "--epsilon", "1", "--json", "--compare")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["statistic"] == "auc" and d["n"] == 569 and d["exact"] == pytest.approx(0.9375, abs=1e-3)
    assert {"rr_estimate", "rr_estimate_clamped", "rr_interval", "sample_mse", "theorem5_mse"} <= set(d)


def test_the_text_report_is_one_release_with_its_interval_and_method(tmp_path, capsys):
    """Issue 25: the default text is one release, its interval and the interval's method; --compare adds the
    exact value and the RR baseline (a second release), each labelled."""
    from pairwise.cli import main

    path = tmp_path / "d.csv"
    x = np.random.default_rng(2).integers(1, 6, 40)
    path.write_text("a,b\n" + "".join(f"{v},{(v * 3) % 5 + 1}\n" for v in x))
    argv = ["ustat", "--statistic", "kendall", "--epsilon", "1", "--data", str(path), "--columns", "a,b"]
    argv += ["--lower", "1,1", "--upper", "5,5", "--decimals", "0,0"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "95% interval" in text and "interval method  Chernoff: Azuma-Hoeffding" in text, text
    assert "\n  exact " not in text and "baseline" not in text and "not private) " not in text, text
    assert main(argv + ["--compare"]) == 0
    text = capsys.readouterr().out
    assert "\n  exact " in text and "RR baseline" in text and "(2, 0)" in text, text


def test_cli_errors_name_row_and_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,x\n")
    r = _cli("ustat", "--statistic", "kendall", "--epsilon", "1", "--data", str(bad), "--columns", "a,b")
    assert r.returncode == 2 and "--lower" in r.stderr and "--upper" in r.stderr and "a, b" in r.stderr
    r = _cli(
        "ustat",
        "--statistic",
        "kendall",
        "--epsilon",
        "1",
        "--data",
        str(bad),
        "--columns",
        "a,b",
        "--lower",
        "0,0",
        "--upper",
        "5,5",
    )
    assert r.returncode == 2 and "row 2" in r.stderr and "'b'" in r.stderr
    rng = tmp_path / "rng.csv"
    rng.write_text("a\n1\n300\n")
    r = _cli(
        "ustat",
        "--statistic",
        "gini",
        "--epsilon",
        "1",
        "--data",
        str(rng),
        "--columns",
        "a",
        "--bits",
        "8",
        "--lower",
        "0",
        "--upper",
        "300",
        "--decimals",
        "0",
    )
    assert r.returncode == 2 and "needs 9 bits" in r.stderr  # from the public span, not from the values
    r = _cli(
        "ustat",
        "--statistic",
        "gini",
        "--epsilon",
        "1",
        "--data",
        str(rng),
        "--columns",
        "nope",
        "--lower",
        "0",
        "--upper",
        "1",
    )
    assert r.returncode == 2 and "nope" in r.stderr
