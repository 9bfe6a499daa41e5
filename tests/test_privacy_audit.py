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
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pairwise.cli import main
from pairwise.commands import ecdf as ecdf_cmd
from pairwise.commands import ldp as ldp_cmd
from pairwise.commands import noise as noise_cmd
from pairwise.commands import ustat as ustat_cmd

# ----------------------------------------------------------------------------- comparison


def _drop(d, dotted: tuple[str, ...]):
    """A copy of ``d`` without the (dotted) keys."""
    out = dict(d)
    for key in dotted:
        head, _, rest = key.partition(".")
        if head in out:
            if rest and isinstance(out[head], dict):
                out[head] = _drop(out[head], (rest,))
            elif not rest:
                del out[head]
    return out


def _has(d, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return False
        d = d[part]
    return True


def _get(d, dotted: str):
    for part in dotted.split("."):
        d = d[part]
    return d


def assert_same_public(a: dict, b: dict, dp_keys, not_private, measured=(), tolerance=0):
    """Everything but DP outputs and documented non-private keys must be equal on D and D'."""
    for key in dp_keys:  # a noisy output is published on both or on neither (no data-dependent shape)
        assert _has(a, key) == _has(b, key), key
    assert any(_has(a, key) for key in dp_keys)
    pa = _drop(a, tuple(dp_keys) + tuple(not_private) + tuple(measured))
    pb = _drop(b, tuple(dp_keys) + tuple(not_private) + tuple(measured))
    diff = sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k))
    assert not diff, "published keys that depend on one record: " + ", ".join(
        f"{k}: {pa.get(k)!r} vs {pb.get(k)!r}" for k in diff)
    for key in measured:
        assert abs(_get(a, key) - _get(b, key)) <= tolerance, key


def run_json(capsys, argv) -> dict:
    code = main(list(argv) + ["--json"])
    out = capsys.readouterr()
    assert code == 0, out.err + out.out
    return json.loads(out.out.strip().splitlines()[-1])


def write_csv(path, header, *cols) -> str:
    path.write_text(",".join(header) + "\n" + "".join(",".join(repr(float(v)) for v in row) + "\n"
                                                      for row in zip(*cols)))
    return str(path)


def run_on_shipped_neighbours(capsys, monkeypatch, argv, column: str, value: float) -> tuple[dict, dict]:
    """``argv`` on the shipped data, then with row 0 of ``column`` moved to ``value`` (D and D')."""
    from pairwise.protocols import datasets

    real = datasets.load_dataset
    outs = []
    for moved in (False, True):
        def load(name, _moved=moved):
            d = real(name)
            if _moved:
                d[column] = d[column].copy()
                d[column][0] = value
            return d

        monkeypatch.setattr(datasets, "load_dataset", load)
        outs.append(run_json(capsys, argv))
    return outs[0], outs[1]


@pytest.fixture
def seeded_pairs(monkeypatch):
    """The same public pair design on D and D' (the aggregator's randomness, not the noise)."""
    monkeypatch.setattr("pairwise.protocols.ustat.driver.csprng_generator", lambda: np.random.default_rng(2024))


# ----------------------------------------------------------------------------- ustat

N = 12
_rng = np.random.default_rng(11)
X = np.round(_rng.uniform(10, 50, N))  # inside the public domain [0, 250]
Y = np.round(_rng.uniform(1, 4, N))  # inside [1, 5]
LAB = np.array([1, 0] * (N // 2))

USTAT_CASES = [(stat, design, mode) for stat in ("gini", "kendall", "auc") for design in ("subsample", "all")
               for mode in ("simulate", "network") if not (stat == "auc" and design == "all")]


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
        outs.append(run_json(capsys, ["ustat", "--statistic", stat, "--epsilon", "1", "--design", design,
                                      "--mode", mode, "--workers", "2", "--data", path, *_ustat_args(stat, path)]))
    a, b = outs
    a["data"] = b["data"]  # the file name is the caller's label
    assert a["exact"] != b["exact"]  # the neighbour really is different
    assert_same_public(a, b, ustat_cmd.DP_KEYS, ustat_cmd.NOT_PRIVATE_KEYS)


def test_ustat_gini_on_the_shipped_data_neighbours(capsys, monkeypatch, seeded_pairs):
    """The README's main job without flags: the diabetes progression data and its neighbour with one
    patient moved to the top of the declared domain [0, 400]. This is the case that failed before
    (sensitivity, decimals and width followed the data's own max - min)."""
    a, b = run_on_shipped_neighbours(capsys, monkeypatch, ["ustat", "--statistic", "gini", "--epsilon", "1"],
                                     "progression", 400.0)
    assert a["exact"] != b["exact"]
    assert_same_public(a, b, ustat_cmd.DP_KEYS, ustat_cmd.NOT_PRIVATE_KEYS)


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
    "auc-budget": ["auc", "--score", "s", "--label", "lab", "--lower", "0", "--upper", "10", "--bits", "3",
                   "--splitting", "budget"],
    "qmle": ["qmle", "--response", "r", "--covariates", "s", "--lower", "0", "--upper", "10"],
    "qmle-private-x": ["qmle", "--response", "r", "--covariates", "s", "--private-x", "--lower", "0,0",
                       "--upper", "10,10"],
    "ustat-gini": ["ustat", "--kernel", "gini", "--columns", "s", "--lower", "0", "--upper", "10"],
    "ustat-auc": ["ustat", "--kernel", "auc", "--columns", "s", "--label", "lab", "--lower", "0", "--upper", "10"],
    "ustat-kendall": ["ustat", "--kernel", "kendall", "--columns", "g", "h", "--lower", "1,1", "--upper", "5,4",
                      "--decimals", "0,0"],
    "ustat-kendall-bins": ["ustat", "--kernel", "kendall", "--columns", "s", "r", "--lower", "0,0",
                           "--upper", "10,10"],
}


@pytest.mark.parametrize("case", sorted(LDP_CASES))
def test_ldp_neighbours(case, tmp_path, capsys):
    argv = LDP_CASES[case]
    s2, r2, g2, h2 = SCORE.copy(), RESP.copy(), RATING.copy(), RATING2.copy()
    s2[0], r2[0], g2[0], h2[0] = 10.0, 10.0, 5.0, 1.0
    outs = []
    for tag, cols in (("D", (SCORE, RESP, RATING, RATING2)), ("D2", (s2, r2, g2, h2))):
        path = write_csv(tmp_path / f"{tag}.csv", ["s", "r", "g", "h", "lab"], *cols, LABEL)
        outs.append(run_json(capsys, ["ldp", *argv, "--csv", path]))
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
        outs.append(run_json(capsys, ["ldp", "shuffle-histogram", "--csv", path, "--column", "v",
                                      "--lower", "1", "--upper", "6"]))
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
        outs.append(run_json(capsys, ["ldp", "ustat", "--kernel", "gini"]))
    assert_same_public(*outs, ldp_cmd.DP_KEYS["ustat"], ldp_cmd.NOT_PRIVATE_KEYS)


# ----------------------------------------------------------------------------- noise sample


@pytest.mark.parametrize("garbled", [False, True])
def test_noise_sample_publishes_only_public_parameters(garbled, capsys):
    argv = ["noise", "sample", "--epsilon", "1", "--sensitivity", "3", "--count", "200"] + (["--garbled"] * garbled)
    a, b = run_json(capsys, argv), run_json(capsys, argv)
    assert_same_public(a, b, noise_cmd.DP_KEYS, noise_cmd.NOT_PRIVATE_KEYS)


# ----------------------------------------------------------------------------- ECDF service

K = 60
_erng = np.random.default_rng(8)
EV = np.round(_erng.uniform(5, 25, K), 2)  # public domain [0, 30]
EY = np.array([0, 1] * (K // 2))


@pytest.fixture(scope="module")
def ecdf_servers():
    from pairwise.protocols.ecdf.client import ServerProcesses

    with ServerProcesses(2, budget="1000000", timeout=60) as sp:
        yield sp


@pytest.mark.parametrize("mechanism,scheme", [("paper", "auto"), ("hierarchical", "auto"), ("paper", "pointwise")])
def test_ecdf_run_neighbours(mechanism, scheme, ecdf_servers, tmp_path, capsys):
    """ECDF, quantiles and ROC of ``ecdf run`` on D and D' (one client moved to the top of [0, 30])."""
    v2 = EV.copy()
    v2[0] = 30.0
    roc = ["--label", "y", "--roc"] if scheme != "pointwise" else []
    outs = []
    for tag, col in (("D", EV), ("E", v2)):
        path = write_csv(tmp_path / f"{tag}.csv", ["v", "y"], col, EY)
        outs.append(run_json(capsys, [
            "ecdf", "run", "--servers", ecdf_servers.servers, "--data", path, "--column", "v", *roc,
            "--quantiles", "0.25,0.5", "--epsilon", "50", "--lower", "0", "--upper", "30", "--domain-bits", "5",
            "--mechanism", mechanism, "--scheme", scheme, "--dataset", f"audit-{tag}-{mechanism}-{scheme}"]))
    a, b = outs
    a["dataset"] = b["dataset"]  # each upload needs a fresh id: the caller's label
    assert a["exact"] != b["exact"]
    assert_same_public(a, b, ecdf_cmd.DP_KEYS, ecdf_cmd.NOT_PRIVATE_KEYS, ecdf_cmd.MEASURED_KEYS, tolerance=256)


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
        upload(ecdf_servers.addresses, ds, quantize(probs, 0.0, 1.0, 5), labels=EY, probabilities=probs,
               domain_bits=5)
        r = q.hosmer_lemeshow(ds, 200.0, Q=4)
        e = r.ecdf
        pubs.append({"epsilon": r.epsilon, "epsilon_prime": r.epsilon_prime, "delta": r.delta,
                     "ecdf": {"epsilon": e.epsilon, "delta": e.delta, "n": e.n, "thresholds": e.thresholds.tolist(),
                              "grid_bits": e.grid_bits, "node_variance": e.node_variance, "noise": e.noise},
                     "groups": [len(r.o1), len(r.e1), len(r.o0), len(r.e0)]})
    assert pubs[0] == pubs[1]


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["paper", "hierarchical"])
def test_ecdf_demo_neighbours(mechanism, capsys, monkeypatch):
    """``ecdf demo`` on the shipped breast_cancer data and on it with one patient moved to 30."""
    a, b = run_on_shipped_neighbours(capsys, monkeypatch, ["ecdf", "demo", "--mechanism", mechanism,
                                                           "--epsilon", "4"], "mean_radius", 30.0)
    assert a["exact"] != b["exact"]
    assert_same_public(a, b, ecdf_cmd.DP_KEYS, ecdf_cmd.NOT_PRIVATE_KEYS, ecdf_cmd.MEASURED_KEYS, tolerance=256)
