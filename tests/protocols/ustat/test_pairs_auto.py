"""``pairs_per_user="auto"``: P from Theorem 5's bound with worst-case variances, from public quantities only."""

from __future__ import annotations

import numpy as np
import pytest

from pairwise.protocols.ustat import UStatConfig, UStatError, prepare_data, run_ustat
from pairwise.protocols.ustat.planning import choose_pairs_per_user, theorem5_bound
from pairwise.protocols.ustat.stats import theorem5_mse, two_sample_mse


@pytest.mark.parametrize("n,P,R,V", [(100, 1, 1.0, 2.0), (442, 3, 400.0, 5e4), (6366, 7, 2.0, 4.9)])
def test_the_bound_is_theorem5_at_the_worst_case_degenerate_variance(n, P, R, V):
    assert theorem5_bound(n, n, False, P, R, V) == pytest.approx(theorem5_mse(n, P, 0.0, R * R / 4, V), rel=1e-12)
    assert theorem5_bound(n, n + 50, True, P, R, V) == pytest.approx(
        two_sample_mse(n, n + 50, P, 0.0, 0.0, R * R / 4, V), rel=1e-12
    )


def _choice(stat, eps, x, y=None, lab=None, **b):
    pd = prepare_data(stat, x, y, lab, **b)
    return choose_pairs_per_user(UStatConfig(stat, eps, pairs_per_user="auto", **b), pd)


def test_low_budgets_take_one_pair_and_high_budgets_more():
    x = np.arange(442.0) % 400
    low, high = (
        _choice("gini", 1.0, x, lower=0, upper=400, decimals=0),
        _choice("gini", 8.0, x, lower=0, upper=400, decimals=0),
    )
    assert low.pairs_per_user == 1 and high.pairs_per_user > 1
    assert low.bounds[1] < low.bounds[2] < low.bounds[3]  # the survey's observation: more pairs, more error
    assert sorted(low.bounds) == [1, 2, 3, 4]  # the search stops after three rises in a row
    assert "P=6:" in high.reason and "P=7:" not in high.reason  # the reason shows the first six bounds
    assert min(high.bounds.values()) == high.bounds[high.pairs_per_user] and "Theorem 5" in high.reason


def test_the_choice_is_a_function_of_public_quantities_only():
    rng = np.random.default_rng(0)
    picks = {
        _choice(
            "kendall",
            6.0,
            rng.integers(1, 6, 300).astype(float),
            rng.integers(1, 5, 300).astype(float),
            lower=[1, 1],
            upper=[5, 4],
            decimals=[0, 0],
        ).pairs_per_user
        for _ in range(3)
    }
    assert len(picks) == 1


def test_run_ustat_and_the_cli_report_the_rule(capsys):
    r = run_ustat(
        "gini",
        np.arange(442.0) % 400,
        epsilon=8.0,
        pairs_per_user="auto",
        lower=0,
        upper=400,
        decimals=0,
        rng=np.random.default_rng(1),
        compute_theorem5=False,
    ).as_dict()
    assert r["pairs_per_user"] > 1 and r["pairs_per_user_rule"].startswith("Theorem 5")
    with pytest.raises(UStatError, match="auto"):
        run_ustat("gini", np.arange(10.0), epsilon=1.0, pairs_per_user="auto", design="all", lower=0, upper=10)
    with pytest.raises(UStatError, match="'auto'"):
        run_ustat("gini", np.arange(10.0), epsilon=1.0, pairs_per_user="many", lower=0, upper=10)
    import json

    from pairwise.cli import main

    assert main(["ustat", "--statistic", "kendall", "--epsilon", "1", "--pairs-per-user", "auto", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["pairs_per_user"] == 1 and "grows with P" in d["pairs_per_user_rule"]
