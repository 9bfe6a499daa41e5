"""Neighbouring-datasets audit of every DP entry point (issue 11).

For each entry point we run the release on a dataset D and on D', which
differs from D in one record moved to an extreme of the public domain, and
assert that everything published is identical except the noisy values and
the keys each command documents as not private (``DP_KEYS`` /
``NOT_PRIVATE_KEYS`` in its module). A sensitivity, bit width, grid, bin or
any other parameter computed from the data would differ between D and D'
and fail the audit, which is what happened before (``ustat --statistic
gini`` published ``noise_variance_per_pair``, ``bits`` and the AND-gate count
of the data's own range).

The aggregator's pair sampling is public randomness; it is seeded the same
way on D and D' so that the pair design (and with it ``executions`` and
``bytes``) is comparable. Noise always comes from the OS CSPRNG.

Kept lean for CI: a dozen users for ustat, 2 workers in network mode, one
shared pair of ECDF server processes, small domains.

The ustat and ECDF entry points (worker and server processes) are audited in
tests/system/test_privacy_audit_processes.py, with the comparison of tests/support/audit.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from pairwise.commands import ldp as ldp_cmd
from pairwise.commands import noise as noise_cmd
from tests.support.audit import assert_same_public, run_json, write_csv

# ----------------------------------------------------------------------------- ldp

M = 300  # users of the LDP runs
_lrng = np.random.default_rng(3)
SCORE = np.round(_lrng.uniform(2, 8, M), 2)  # public domain [0, 10]
LABEL = (_lrng.uniform(size=M) < 0.4).astype(int)
RESP = np.round(2 + 0.5 * SCORE + _lrng.normal(0, 0.5, M), 2)  # public domain [0, 10]
RATING = _lrng.integers(1, 6, M).astype(float)  # 1..5
RATING2 = _lrng.integers(1, 5, M).astype(float)  # 1..4

LDP_CASES = {
    "auc": ["auc", "--score", "s", "--label", "lab", "--lower", "0", "--upper", "10", "--bits", "3"],
    "auc-budget": [
        "auc",
        "--score",
        "s",
        "--label",
        "lab",
        "--lower",
        "0",
        "--upper",
        "10",
        "--bits",
        "3",
        "--splitting",
        "budget",
    ],
    "qmle": ["qmle", "--response", "r", "--covariates", "s", "--lower", "0", "--upper", "10"],
    "qmle-private-x": [
        "qmle",
        "--response",
        "r",
        "--covariates",
        "s",
        "--private-x",
        "--lower",
        "0,0",
        "--upper",
        "10,10",
    ],
    "ustat-gini": ["ustat", "--kernel", "gini", "--columns", "s", "--lower", "0", "--upper", "10"],
    "ustat-auc": ["ustat", "--kernel", "auc", "--columns", "s", "--label", "lab", "--lower", "0", "--upper", "10"],
    "ustat-kendall": [
        "ustat",
        "--kernel",
        "kendall",
        "--columns",
        "g",
        "h",
        "--lower",
        "1,1",
        "--upper",
        "5,4",
        "--decimals",
        "0,0",
    ],
    "ustat-kendall-bins": ["ustat", "--kernel", "kendall", "--columns", "s", "r", "--lower", "0,0", "--upper", "10,10"],
}


@pytest.mark.parametrize("case", sorted(LDP_CASES))
def test_ldp_neighbours(case, tmp_path, capsys):
    argv = LDP_CASES[case]
    s2, r2, g2, h2 = SCORE.copy(), RESP.copy(), RATING.copy(), RATING2.copy()
    s2[0], r2[0], g2[0], h2[0] = 10.0, 10.0, 5.0, 1.0
    outs = []
    for tag, cols in (("D", (SCORE, RESP, RATING, RATING2)), ("D2", (s2, r2, g2, h2))):
        path = write_csv(tmp_path / f"{tag}.csv", ["s", "r", "g", "h", "lab"], *cols, LABEL)
        outs.append(run_json(capsys, ["ldp", *argv, "--csv", path, "--compare"]))
    a, b = outs
    assert a["exact"] != b["exact"]
    assert_same_public(a, b, ldp_cmd.DP_KEYS[argv[0]], ldp_cmd.NOT_PRIVATE_KEYS)


def test_ldp_shuffle_histogram_neighbours(tmp_path, capsys):
    n = 20000  # Theorem 3.2 needs n >= 400 ln(4/delta) / eps^2 users
    v = np.random.default_rng(4).integers(2, 5, n).astype(float)
    v2 = v.copy()
    v2[0] = 6.0  # the top of the public domain 1..6
    outs = []
    for tag, col in (("D", v), ("D2", v2)):
        path = write_csv(tmp_path / f"{tag}.csv", ["v"], col)
        outs.append(
            run_json(
                capsys,
                [
                    "ldp",
                    "shuffle-histogram",
                    "--csv",
                    path,
                    "--column",
                    "v",
                    "--lower",
                    "1",
                    "--upper",
                    "6",
                    "--compare",
                ],
            )
        )
    a, b = outs
    assert a["exact"] != b["exact"]
    assert_same_public(a, b, ldp_cmd.DP_KEYS["shuffle-histogram"], ldp_cmd.NOT_PRIVATE_KEYS)


def test_ldp_default_data_neighbours(capsys, monkeypatch):
    """Shipped data without flags: the declared domains, not the data's min/max, shape the mechanism."""
    from pairwise.protocols import datasets

    real = datasets.load_csv
    outs = []
    for moved in (False, True):

        def load(path, columns, label=None, _moved=moved):
            d = real(path, columns, label)
            if _moved and "mean_radius" in d:
                d["mean_radius"] = d["mean_radius"].copy()
                d["mean_radius"][3] = 30.0
            return d

        monkeypatch.setattr(ldp_cmd, "load_csv", load)
        outs.append(run_json(capsys, ["ldp", "ustat", "--kernel", "gini", "--compare"]))
    assert_same_public(*outs, ldp_cmd.DP_KEYS["ustat"], ldp_cmd.NOT_PRIVATE_KEYS)


# ----------------------------------------------------------------------------- noise sample


@pytest.mark.parametrize("garbled", [False, True])
def test_noise_sample_publishes_only_public_parameters(garbled, capsys):
    argv = ["noise", "sample", "--epsilon", "1", "--sensitivity", "3", "--count", "200"] + (["--garbled"] * garbled)
    a, b = run_json(capsys, argv), run_json(capsys, argv)
    assert_same_public(a, b, noise_cmd.DP_KEYS, noise_cmd.NOT_PRIVATE_KEYS)
