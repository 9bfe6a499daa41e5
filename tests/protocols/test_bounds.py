"""Public bounds (issue 11): clamping, the bound flags and their errors, validation before any noise or charge.

* ``dp.bounds`` known answers: fixed-point grid, default decimals, clamping counts.
* The shipped datasets' declared domains (``protocols/data/domains.json``).
* Clamping end to end: a value beyond the public domain gives exactly the
  release of the same value at the boundary (noise made negligible by a huge
  epsilon on a tiny range), and is reported in ``clamped`` only.
* Bound-flag errors name the flags.
* Validation before anything random: every rejected request is refused
  before the first byte of OS randomness is read (``os.urandom`` and the
  ``secrets`` source are replaced by a tripwire), and a rejected ECDF request
  leaves the servers' spent budget unchanged.

Tests that start processes are in tests/system/test_bounds_processes.py.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pairwise.cli import main
from pairwise.dp.bounds import (
    PublicDomain,
    clamp,
    clamp_estimate,
    default_decimals,
    grid_span,
    to_fixed_point,
    validate_bounds,
    validate_quantile_levels,
)
from pairwise.dp.errors import PrivacyParameterError
from pairwise.protocols.datasets import DataError, column_domain, dataset_domains, list_datasets, load_dataset
from pairwise.protocols.ustat.driver import UStatError, prepare_data, run_ustat
from tests.support.cli import cli_error

# ----------------------------------------------------------------------------- dp.bounds


def test_fixed_point_grid_known_answers():
    dom = PublicDomain(1.5, 4.0, 1)
    assert dom.span == 25 and dom.step == pytest.approx(0.1)
    k, moved = to_fixed_point([1.5, 1.54, 1.56, 4.0, -3.0, 99.0, 2.25], dom)
    assert k.tolist() == [0, 0, 1, 25, 0, 25, 8] and moved == 2  # round half to even: 7.5 -> 8
    assert default_decimals(1, 5) == 4 and default_decimals(0, 10**6) == 0 and default_decimals(0, 1) == 4
    assert PublicDomain(0, 1).span == 10**4  # decimals default from the public bounds only
    assert grid_span(0, 400, 0) == 400
    with pytest.raises(PrivacyParameterError, match="no grid step"):
        grid_span(0, 0.1, 0)
    with pytest.raises(PrivacyParameterError, match="2\\^62"):
        grid_span(0, 1e18, 12)


def test_clamp_and_validation():
    v, moved = clamp([-1.0, 0.5, 2.0, 7.0], 0.0, 2.0)
    assert v.tolist() == [0.0, 0.5, 2.0, 2.0] and moved == 2
    assert clamp_estimate(1.3, 0, 1) == 1.0 and clamp_estimate(-0.2, 0, 1) == 0.0 and clamp_estimate(0.4, 0, 1) == 0.4
    for lo, hi in ((1, 1), (2, 1), (0, math.inf), (math.nan, 1), ("0", 1), (True, 2)):
        with pytest.raises(PrivacyParameterError):
            validate_bounds(lo, hi)
    assert validate_quantile_levels([0.5, 1]) == [0.5, 1.0]
    for bad in ([0.0], [1.5], [math.nan], []):
        with pytest.raises(PrivacyParameterError):
            validate_quantile_levels(bad)
    with pytest.raises(PrivacyParameterError, match="decimals"):
        PublicDomain(0, 1, 13)


# ----------------------------------------------------------------------------- declared domains


def test_shipped_domains_are_declared_not_observed():
    seen = 0
    for name in list_datasets():
        data = load_dataset(name)
        for col, dom in dataset_domains(name).items():
            seen += 1
            v = data[col]
            assert dom.lower <= v.min() and v.max() <= dom.upper, (name, col)  # nothing shipped is clamped
            assert dom.source and dom.decimals is not None
            if "(declared:" in dom.source:  # a round bound, not the observed range
                assert (dom.lower, dom.upper) != (float(v.min()), float(v.max()))
                assert dom.lower == round(dom.lower) and dom.upper == round(dom.upper)
    assert seen >= 10
    assert column_domain("fair", "rate_marriage").upper == 5.0
    with pytest.raises(DataError, match="--lower/--upper"):
        column_domain("fair", "affairs")  # no published scale: the user must state one
    with pytest.raises(DataError, match="no column 'nope'"):
        column_domain("fair", "nope")


# ----------------------------------------------------------------------------- clamping end to end


def test_ustat_clamps_out_of_domain_values_like_the_boundary():
    """eps 120 per pair on a kernel range of 2: the noise is 0 except with probability < 2e-13 per pair."""
    x = np.arange(40.0) % 3
    out = x.copy()
    out[5] = 1e9
    edge = x.copy()
    edge[5] = 2.0
    kw = dict(epsilon=120.0, lower=0, upper=2, decimals=0, pairs_per_user=2, batch=64)
    a = run_ustat("gini", out, rng=np.random.default_rng(1), **kw)
    b = run_ustat("gini", edge, rng=np.random.default_rng(1), **kw)
    assert a.estimate == b.estimate and a.extra["exact_quantized"] == b.extra["exact_quantized"]
    assert (a.extra["clamped"], b.extra["clamped"]) == (1, 0)
    assert a.exact > b.exact  # the raw value is kept for evaluation (not private)
    assert (a.extra["bits"], a.extra["noise_variance_per_pair"]) == (
        b.extra["bits"],
        b.extra["noise_variance_per_pair"],
    )
    assert a.extra["estimate_clamped"] == min(max(a.estimate, 0.0), 2.0)


def test_prepare_data_takes_everything_from_the_bounds():
    pd = prepare_data("kendall", [1, 2, 9], [0, 4, 4], lower=[1, 1], upper=[5, 4], decimals=[0, 0])
    assert pd.x.tolist() == [0, 1, 4] and pd.y.tolist() == [0, 3, 3] and pd.clamped == 2 and pd.bits == 8
    pd = prepare_data("gini", [10.0, 20.0], lower=0, upper=1000, decimals=2)
    assert pd.range_ == 100000 and pd.bits == 32 and pd.scale == pytest.approx(0.01)
    with pytest.raises(UStatError, match="lower= and upper="):
        prepare_data("gini", [1.0, 2.0])
    with pytest.raises(UStatError, match="2 lower value"):
        prepare_data("kendall", [1, 2], [1, 2], lower=0, upper=5)


def test_ldp_shuffle_histogram_clamps(tmp_path, capsys):
    v = np.r_[np.full(9000, 2.0), np.full(9000, 3.0), [9.0, -4.0]]
    p = tmp_path / "v.csv"
    p.write_text("v\n" + "\n".join(str(x) for x in v) + "\n")
    assert (
        main(
            [
                "ldp",
                "shuffle-histogram",
                "--csv",
                str(p),
                "--column",
                "v",
                "--lower",
                "1",
                "--upper",
                "6",
                "--compare",
                "--json",
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["clamped"] == 2 and d["values"] == [1, 2, 3, 4, 5, 6]
    assert d["exact"][0] == d["exact"][-1] == 1 / v.size  # -4 went to 1, 9 went to 6
    assert all(0.0 <= f <= 1.0 for f in d["estimate_clamped"])


# ----------------------------------------------------------------------------- flag errors


def test_bound_flag_errors(tmp_path, capsys):
    p = tmp_path / "d.csv"
    p.write_text("a,b,y\n1,2,0\n3,4,1\n5,1,0\n2,2,1\n")
    base = ["ustat", "--statistic", "kendall", "--epsilon", "1", "--data", str(p), "--columns", "a,b"]
    err = cli_error(capsys, base)
    assert "--lower" in err and "--upper" in err and "not the data's min/max" in err
    assert "give both --lower and --upper" in cli_error(capsys, base + ["--lower", "0,0"])
    assert "one value per private column (2)" in cli_error(capsys, base + ["--lower", "0", "--upper", "5"])
    assert "lower < upper" in cli_error(capsys, base + ["--lower", "0,5", "--upper", "5,5"])
    assert "comma-separated numbers" in cli_error(capsys, base + ["--lower", "0,x", "--upper", "5,5"])
    assert "decimals" in cli_error(capsys, base + ["--lower", "0,0", "--upper", "5,5", "--decimals", "0,13"])
    assert "needs 9 bits" in cli_error(
        capsys,
        [
            "ustat",
            "--statistic",
            "gini",
            "--epsilon",
            "1",
            "--data",
            str(p),
            "--columns",
            "a",
            "--lower",
            "0",
            "--upper",
            "300",
            "--decimals",
            "0",
            "--bits",
            "8",
        ],
    )
    assert "--lower L --upper U" in cli_error(capsys, ["ldp", "auc", "--csv", str(p), "--score", "a", "--label", "y"])
    assert "declares no public domain" in cli_error(
        capsys, ["ldp", "ustat", "--kernel", "gini", "--dataset", "fair", "--columns", "affairs"]
    )
    err = cli_error(
        capsys,
        [
            "ecdf",
            "run",
            "--servers",
            "127.0.0.1:9,127.0.0.1:10",
            "--data",
            str(p),
            "--column",
            "a",
            "--epsilon",
            "1",
            "--range",
            "0,5",
            "--lower",
            "0",
        ],
    )
    assert "--range LO,HI is deprecated" in err and "not both" in err


# ----------------------------------------------------------------------------- validation before randomness


@pytest.fixture
def no_randomness(monkeypatch):
    """Any read of the OS CSPRNG (os.urandom, secrets) fails the test: validation must come first."""
    import os
    import random

    def tripwire(*_a, **_k):
        raise AssertionError("randomness was drawn before the request was validated")

    monkeypatch.setattr(os, "urandom", tripwire)
    monkeypatch.setattr(random, "_urandom", tripwire)


CSV = "s,r,y,v\n" + "".join(f"{i % 7},{(i * 3) % 10},{i % 2},{1 + i % 5}\n" for i in range(400))


@pytest.mark.parametrize(
    "argv,message",
    [
        (["ustat", "--statistic", "gini", "--epsilon", "1", "--pairs-per-user", "100000"], "exceeds n - 1"),
        (["ustat", "--statistic", "auc", "--epsilon", "1", "--pairs-per-user", "300"], "distinct partners"),
        (["ustat", "--statistic", "gini", "--epsilon", "0"], "epsilon"),
        (["ustat", "--statistic", "gini", "--epsilon", "1", "--batch", "0"], "batch"),
        (["ldp", "qmle", "--tau", "1.5"], "tau"),
        (["ldp", "qmle", "--sigma", "-1"], "sigma"),
        (["ldp", "auc", "--a", "0.5"], "a must be > 1"),
        (["ldp", "auc", "--epsilon", "nan"], "epsilon"),
        (["ldp", "auc", "--composition", "advanced"], "advanced composition"),
        (["ldp", "shuffle-histogram", "--beta", "2"], "beta"),
        (["ldp", "shuffle-histogram", "--epsilon", "3"], "epsilon <= 1"),
        (["ldp", "ustat", "--epsilon", "-1"], "epsilon"),
        (["noise", "sample", "--epsilon", "1", "--count", "0"], "--count"),
        (["noise", "sample", "--epsilon", "inf", "--count", "5"], "epsilon"),
        (["ecdf", "demo", "--epsilon", "inf"], "epsilon"),
        (["ecdf", "demo", "--epsilon", "1", "--servers-count", "1"], "servers-count"),
    ],
)
def test_rejected_before_any_randomness(argv, message, capsys, no_randomness):
    err = cli_error(capsys, argv)
    assert message in err and "randomness was drawn" not in err


def test_dp_layer_checks_before_noise(no_randomness):
    from pairwise.dp.ecdf import hosmer_lemeshow_dp, private_roc

    counts = np.ones(8, dtype=np.int64)
    with pytest.raises(PrivacyParameterError, match="smoothing"):
        private_roc(counts, counts, 1.0, smoothing=3)
    with pytest.raises(PrivacyParameterError, match="smoothing"):
        hosmer_lemeshow_dp(np.full(20, 0.5), np.ones(20), 1.0, L=4, Q=2, smoothing=0)
    with pytest.raises(PrivacyParameterError, match="min_expected"):
        hosmer_lemeshow_dp(np.full(20, 0.5), np.ones(20), 1.0, L=4, Q=2, min_expected=-1)
