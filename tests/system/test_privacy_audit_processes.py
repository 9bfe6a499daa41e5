"""The neighbouring-datasets audit of the entry points that start processes: ``ustat`` (both modes, network
with worker processes) and the ECDF service (real servers, ``ecdf run``, ``ecdf demo``).  The audit itself
and the in-process entry points are in tests/protocols/test_privacy_audit.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from pairwise.commands import ecdf as ecdf_cmd
from pairwise.commands import ustat as ustat_cmd
from tests.support.audit import assert_same_public, run_json, run_on_shipped_neighbours, write_csv


@pytest.fixture
def seeded_pairs(monkeypatch):
    """The same public pair design on D and D' (the aggregator's randomness, not the noise)."""
    monkeypatch.setattr("pairwise.protocols.ustat.driver.csprng_generator", lambda: np.random.default_rng(2024))


N = 12


_rng = np.random.default_rng(11)


X = np.round(_rng.uniform(10, 50, N))  # inside the public domain [0, 250]


Y = np.round(_rng.uniform(1, 4, N))  # inside [1, 5]


LAB = np.array([1, 0] * (N // 2))


USTAT_CASES = [
    (stat, design, mode)
    for stat in ("gini", "kendall", "auc")
    for design in ("subsample", "all")
    for mode in ("simulate", "network")
    if not (stat == "auc" and design == "all")
]


def _ustat_args(stat, path):
    if stat == "gini":
        return ["--columns", "x", "--lower", "0", "--upper", "250"]
    if stat == "kendall":
        return ["--columns", "x,y", "--lower", "0,1", "--upper", "250,5", "--decimals", "0,0"]
    return ["--columns", "x", "--label", "lab", "--lower", "0", "--upper", "250"]


@pytest.mark.parametrize("stat,design,mode", USTAT_CASES)
def test_ustat_neighbours(stat, design, mode, tmp_path, capsys, seeded_pairs):
    x2, y2 = X.copy(), Y.copy()
    x2[0], y2[0] = 250.0, 1.0  # one record moved to an extreme of the public domain
    outs = []
    for tag, (x, y) in (("D", (X, Y)), ("D2", (x2, y2))):
        path = write_csv(tmp_path / f"{tag}.csv", ["x", "y", "lab"], x, y, LAB)
        outs.append(
            run_json(
                capsys,
                [
                    "ustat",
                    "--statistic",
                    stat,
                    "--epsilon",
                    "1",
                    "--design",
                    design,
                    "--mode",
                    mode,
                    "--workers",
                    "2",
                    "--data",
                    path,
                    "--compare",
                    *_ustat_args(stat, path),
                ],
            )
        )
    a, b = outs
    a["data"] = b["data"]  # the file name is the caller's label
    assert a["exact"] != b["exact"]  # the neighbour really is different
    assert_same_public(a, b, ustat_cmd.DP_KEYS, ustat_cmd.NOT_PRIVATE_KEYS)


@pytest.mark.parametrize("stat", ["variance", "collision", "wilcoxon_kernel:walsh_positive"])
def test_ustat_declared_kernel_neighbours(stat, tmp_path, capsys, monkeypatch, seeded_pairs):
    """A declared kernel (shipped or the documented user kernel): its range, noise and interval come from the
    declaration and the public domain, not from the data (one record moved to an extreme of [0, 20]; a narrower
    domain than the other cases keeps the noise design of the variance kernel quick)."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "docs" / "examples"))
    x = np.round(X / 2.5)
    x2 = x.copy()
    x2[0] = 20.0
    pick = ["--kernel", stat] if ":" in stat else ["--statistic", stat, "--compare"]
    outs = []
    for tag, col in (("D", x), ("D2", x2)):
        path = write_csv(tmp_path / f"{tag}.csv", ["x"], col)
        argv = ["ustat", *pick, "--epsilon", "1", "--data", path, "--columns", "x", "--lower", "0", "--upper", "20"]
        outs.append(run_json(capsys, [*argv, "--decimals", "0"]))
    a, b = outs
    a["data"] = b["data"]
    assert a.get("exact") != b.get("exact") or ":" in stat  # the neighbour really differs (exact needs --compare)
    assert a["kernel_check"] == b["kernel_check"] == "exhaustive over the 441 grid pairs"
    assert_same_public(a, b, ustat_cmd.DP_KEYS, ustat_cmd.NOT_PRIVATE_KEYS)


def test_ustat_gini_on_the_shipped_data_neighbours(capsys, monkeypatch, seeded_pairs):
    """The README's main job without flags: the diabetes progression data and its neighbour with one
    patient moved to the top of the declared domain [0, 400]. This is the case that failed before
    (sensitivity, decimals and width followed the data's own max - min)."""
    a, b = run_on_shipped_neighbours(
        capsys, monkeypatch, ["ustat", "--statistic", "gini", "--epsilon", "1", "--compare"], "progression", 400.0
    )
    assert a["exact"] != b["exact"]
    assert_same_public(a, b, ustat_cmd.DP_KEYS, ustat_cmd.NOT_PRIVATE_KEYS)


K = 60


_erng = np.random.default_rng(8)


EV = np.round(_erng.uniform(5, 25, K), 2)  # public domain [0, 30]


EY = np.array([0, 1] * (K // 2))


@pytest.fixture(scope="module")
def ecdf_servers():
    from pairwise.protocols.ecdf.client import ServerProcesses

    with ServerProcesses(2, budget="1000000", timeout=60, extra_args=("--accept-unverified",)) as sp:
        yield sp


@pytest.mark.parametrize(
    "mechanism,scheme", [("paper", "auto"), ("hierarchical", "auto"), ("kary", "auto"), ("paper", "pointwise")]
)
def test_ecdf_run_neighbours(mechanism, scheme, ecdf_servers, tmp_path, capsys):
    """ECDF, quantiles and ROC of ``ecdf run`` on D and D' (one client moved to the top of [0, 30])."""
    v2 = EV.copy()
    v2[0] = 30.0
    roc = ["--label", "y", "--roc"] if scheme != "pointwise" else []
    outs = []
    for tag, col in (("D", EV), ("E", v2)):
        path = write_csv(tmp_path / f"{tag}.csv", ["v", "y"], col, EY)
        outs.append(
            run_json(
                capsys,
                [
                    "ecdf",
                    "run",
                    "--servers",
                    ecdf_servers.servers,
                    "--data",
                    path,
                    "--column",
                    "v",
                    *roc,
                    "--quantiles",
                    "0.25,0.5",
                    "--epsilon",
                    "50",
                    "--lower",
                    "0",
                    "--upper",
                    "30",
                    "--domain-bits",
                    "5",
                    "--mechanism",
                    mechanism,
                    "--scheme",
                    scheme,
                    "--dataset",
                    f"audit-{tag}-{mechanism}-{scheme}",
                    "--compare",  # the not-private aids too: the check below shows D and D' differ
                ],
            )
        )
    a, b = outs
    a["dataset"] = b["dataset"]  # each upload needs a fresh id: the caller's label
    assert a["exact"] != b["exact"]
    assert_same_public(a, b, ecdf_cmd.DP_KEYS, ecdf_cmd.NOT_PRIVATE_KEYS, ecdf_cmd.MEASURED_KEYS, tolerance=256)
    # the pointwise interval is the release +- a public radius, clipped to [0, 1]: where neither D's nor D''s
    # interval was clipped, the widths are the same
    (la, ua), (lb, ub) = (np.array([d["interval"]["lower"], d["interval"]["upper"]]) for d in (a, b))
    inside = (la > 0) & (ua < 1) & (lb > 0) & (ub < 1)
    assert inside.sum() >= 4, inside
    np.testing.assert_allclose((ua - la)[inside], (ub - lb)[inside], rtol=1e-9, atol=1e-12)
    assert a["interval_method"] == b["interval_method"]


def test_ecdf_hosmer_lemeshow_neighbours(ecdf_servers):
    """Algorithm 2 over the servers: cuts, counts and statistic are noisy; everything else is public."""
    from pairwise.protocols.ecdf.client import ECDFQuerier, upload
    from pairwise.protocols.ecdf.shares import quantize

    rng = np.random.default_rng(6)
    p = np.round(rng.uniform(0.1, 0.9, K), 3)  # predicted probabilities, public domain [0, 1]
    p2 = p.copy()
    p2[0] = 1.0
    q = ECDFQuerier(ecdf_servers.addresses, timeout=120)
    pubs = []
    for tag, probs in (("D", p), ("E", p2)):
        ds = f"audit-hl-{tag}"
        upload(ecdf_servers.addresses, ds, quantize(probs, 0.0, 1.0, 5), labels=EY, probabilities=probs, domain_bits=5)
        r = q.hosmer_lemeshow(ds, 200.0, Q=4)
        e = r.ecdf
        pubs.append(
            {
                "epsilon": r.epsilon,
                "epsilon_prime": r.epsilon_prime,
                "delta": r.delta,
                "ecdf": {
                    "epsilon": e.epsilon,
                    "delta": e.delta,
                    "n": e.n,
                    "thresholds": e.thresholds.tolist(),
                    "grid_bits": e.grid_bits,
                    "node_variance": e.node_variance,
                    "noise": e.noise,
                },
                "groups": [len(r.o1), len(r.e1), len(r.o0), len(r.e0)],
            }
        )
    assert pubs[0] == pubs[1]


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["paper", "hierarchical"])
def test_ecdf_demo_neighbours(mechanism, capsys, monkeypatch):
    """``ecdf demo`` on the shipped breast_cancer data and on it with one patient moved to 30."""
    a, b = run_on_shipped_neighbours(
        capsys,
        monkeypatch,
        ["ecdf", "demo", "--mechanism", mechanism, "--epsilon", "4", "--compare"],
        "mean_radius",
        30.0,
    )
    assert a["exact"] != b["exact"]
    assert_same_public(a, b, ecdf_cmd.DP_KEYS, ecdf_cmd.NOT_PRIVATE_KEYS, ecdf_cmd.MEASURED_KEYS, tolerance=256)
