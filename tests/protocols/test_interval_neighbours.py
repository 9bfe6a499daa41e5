"""The published intervals are part of the DP release: their widths are identical on neighbouring datasets.

The privacy audit (``tests/protocols/test_privacy_audit.py``) already compares every
public key on D and D' (``interval_width``, ``interval_method`` and ``alpha``
among them); this file checks the intervals themselves: the published
interval is [estimate - below, estimate + above] with a width that does not
move when one record moves to an extreme of the public domain, for the 2PC
protocol (every statistic including variance and collision, a user kernel,
both designs and ``pairs_per_user="auto"``, whose choice must not move
either), Algorithm 1
and the shuffled histogram, and that a release without an honest interval
publishes none on both.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pairwise.cli import main
from pairwise.protocols.ustat import run_ustat

N = 16
_rng = np.random.default_rng(21)
X = np.round(_rng.uniform(10, 50, N))
Y = np.round(_rng.uniform(1, 4, N))
LAB = np.array([1, 0] * (N // 2))
BOUNDS = {
    "gini": dict(lower=0, upper=250),
    "auc": dict(lower=0, upper=250),
    "kendall": dict(lower=[0, 1], upper=[250, 5], decimals=[0, 0]),
    "variance": dict(lower=1, upper=5, decimals=0),
    "collision": dict(lower=1, upper=5, decimals=0),
}


def _neighbour():
    x2, y2 = X.copy(), Y.copy()
    x2[0], y2[0] = 250.0, 1.0
    return x2, y2


@pytest.mark.parametrize(
    "stat,design,P,alpha",
    [
        ("gini", "subsample", 1, 0.05),
        ("gini", "all", 1, 0.1),
        ("kendall", "subsample", 3, 0.05),
        ("kendall", "all", 1, 0.01),
        ("auc", "subsample", 2, 0.2),
        ("variance", "subsample", 1, 0.05),
        ("collision", "subsample", 2, 0.1),
        ("kendall", "subsample", "auto", 0.05),
        ("collision", "subsample", "auto", 0.05),
    ],
)
def test_ustat_interval_width_is_the_same_on_neighbours(stat, design, P, alpha):
    outs = []
    for x, y in ((X, Y), _neighbour()):
        r = run_ustat(
            stat,
            y if stat in ("variance", "collision") else x,  # the declared kernels on the ratings (small grid)
            y if stat == "kendall" else None,
            LAB if stat == "auc" else None,
            epsilon=1.0,
            design=design,
            pairs_per_user=P,
            alpha=alpha,
            rng=np.random.default_rng(3),
            **BOUNDS[stat],
        )
        outs.append(r.as_dict())
    a, b = outs
    assert a["exact"] != b["exact"]  # the neighbour really differs
    for d in (a, b):
        lo, hi = d["interval"]
        assert hi - lo == pytest.approx(d["interval_width"], rel=1e-12) and lo < d["estimate"] < hi
        assert d["alpha"] == alpha
    assert (a["interval_width"], a["interval_method"]) == (b["interval_width"], b["interval_method"])
    assert (a["pairs_per_user"], a["pairs_per_user_rule"]) == (b["pairs_per_user"], b["pairs_per_user_rule"])


def test_a_user_kernels_interval_width_is_the_same_on_neighbours(monkeypatch):
    """``--kernel MODULE:FUNCTION`` (docs/examples/wilcoxon_kernel.py): its width comes from its declared range."""
    from pathlib import Path

    from pairwise.circuits.kernel_spec import load_kernel

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "docs" / "examples"))
    spec = load_kernel("wilcoxon_kernel:walsh_positive")
    d = np.clip(np.round(np.random.default_rng(2).normal(1.0, 3, N)), -10, 10)
    d2 = d.copy()
    d2[0] = -10.0
    a, b = (
        run_ustat(spec, v, epsilon=1.0, lower=-10, upper=10, decimals=0, rng=np.random.default_rng(3)).as_dict()
        for v in (d, d2)
    )
    assert a["exact"] != b["exact"]
    assert (a["interval_width"], a["interval_method"]) == (b["interval_width"], b["interval_method"])


def test_ustat_interval_width_does_not_depend_on_the_values_at_all():
    """Stronger than neighbours: any two data sets of the same size and domain publish the same width."""
    widths = set()
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(0, 250, N)
        r = run_ustat(
            "gini", x, epsilon=2.0, rng=np.random.default_rng(seed), compute_theorem5=False, lower=0, upper=250
        )
        widths.add(r.as_dict()["interval_width"])
    assert len(widths) == 1


def _json(capsys, argv) -> dict:
    assert main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _csv(path, header, *cols) -> str:
    path.write_text(",".join(header) + "\n" + "".join(",".join(repr(float(v)) for v in r) + "\n" for r in zip(*cols)))
    return str(path)


M = 300
_l = np.random.default_rng(4)
S = np.round(_l.uniform(2, 8, M), 2)
L = (_l.uniform(size=M) < 0.4).astype(int)
G = _l.integers(1, 6, M).astype(float)
H = _l.integers(1, 5, M).astype(float)

LDP = {
    "ustat-gini": ["ldp", "ustat", "--kernel", "gini", "--columns", "s", "--lower", "0", "--upper", "10"],
    "ustat-auc": [
        "ldp",
        "ustat",
        "--kernel",
        "auc",
        "--columns",
        "s",
        "--label",
        "lab",
        "--lower",
        "0",
        "--upper",
        "10",
    ],
    "ustat-kendall": [
        "ldp",
        "ustat",
        "--kernel",
        "kendall",
        "--columns",
        "g,h",
        "--lower",
        "1,1",
        "--upper",
        "5,4",
        "--decimals",
        "0,0",
        "--alpha",
        "0.1",
    ],
    "auc": [
        "ldp",
        "auc",
        "--columns",
        "s",
        "--label",
        "lab",
        "--lower",
        "0",
        "--upper",
        "10",
        "--bits",
        "3",
        "--epsilon",
        "2",
    ],
    "qmle": ["ldp", "qmle", "--response", "s", "--covariates", "g", "--lower", "0", "--upper", "10", "--epsilon", "2"],
}


@pytest.mark.parametrize("case", sorted(LDP))
def test_ldp_interval_width_is_the_same_on_neighbours(case, tmp_path, capsys):
    s2, g2, h2 = S.copy(), G.copy(), H.copy()
    s2[0], g2[0], h2[0] = 10.0, 5.0, 1.0
    outs = []
    for tag, cols in (("D", (S, G, H)), ("E", (s2, g2, h2))):
        path = _csv(tmp_path / f"{tag}.csv", ["s", "g", "h", "lab"], *cols, L)
        argv = LDP[case] + ([] if "--epsilon" in LDP[case] else ["--epsilon", "2"])
        outs.append(_json(capsys, [*argv, "--data", path]))
    a, b = outs
    assert a["interval_method"] == b["interval_method"] and a["alpha"] == b["alpha"]
    if case in ("auc", "qmle"):  # no honest public-width interval: none on either, and the reason
        assert a["interval"] is None and b["interval"] is None and a["interval_method"].startswith("none:")
        return
    assert a["interval_width"] == b["interval_width"]
    for d in (a, b):
        lo, hi = d["interval"]
        assert hi - lo == pytest.approx(d["interval_width"], rel=1e-12)


def test_shuffle_histogram_band_is_the_same_on_neighbours(tmp_path, capsys):
    n = 20000
    v = np.random.default_rng(4).integers(2, 5, n).astype(float)
    v2 = v.copy()
    v2[0] = 6.0
    outs = [
        _json(
            capsys,
            [
                "ldp",
                "shuffle-histogram",
                "--data",
                _csv(tmp_path / f"{t}.csv", ["v"], c),
                "--columns",
                "v",
                "--lower",
                "1",
                "--upper",
                "6",
                "--epsilon",
                "1",
            ],
        )
        for t, c in (("D", v), ("E", v2))
    ]
    a, b = outs
    assert a["interval_width"] == b["interval_width"] and a["interval_method"] == b["interval_method"]
    for d in outs:
        assert len(d["interval"]) == 6
        assert all(hi - lo == pytest.approx(d["interval_width"], rel=1e-12) for lo, hi in d["interval"])
