"""Noise power of every mechanism class and tree release in ``pairwise.dp``: the right noise, not 2x off.

Each test draws noise through a public entry point (the CSPRNG path and, where
one exists, the seeded ``simulate`` path) at a realistic epsilon and compares
its full distribution with a closed form computed here from public parameters
(epsilon, sensitivity, bounds, L), never with the ``scale``, ``variance`` or
``beta`` the object reports about itself:

==========================  ====================================================
GeometricMechanism          DL: P[z] ~ a^|z|, a = exp(-eps / S)
RandomizedResponse          report != bit with probability 1 / (1 + e^eps)
KaryRandomizedResponse      P[report = v] = e^eps / (e^eps + k - 1), else 1 / (e^eps + k - 1)
OneBitFlip (+ Vector)       P[z = 1] = (1 + w (e^eps - 1)) / (e^eps + 1), w = clip((y - a)/(b - a)); Eq. 7
SnappingLaplaceMechanism    clamp_B(round_Lambda(x + Laplace(S / eps))), Lambda = 2^ceil(log2(S/eps))
tree_mechanism (paper)      cumulative errors = path sums of i.i.d. node noise of scale (L + 1)/eps
hierarchical_mechanism      released node errors i.i.d., scale 2L / eps (root = n exact)
tree_mechanism "laplace"    node values d snapped with lambda ~ (2L + 1)/eps, clamped to [0, n]
==========================  ====================================================

Statistics (:mod:`noise_power`): Pearson chi-square goodness of fit for i.i.d.
reports and noise, the Mahalanobis quadratic form for tree releases.  Every
test uses alpha = 1e-5 and asserts, before sampling, power >= 0.99 against
the same mechanism with the noise scale x2 and x1/2 (epsilon / 2 and 2 epsilon
for the epsilon-parametrized mechanisms); the smallest computed powers of this
file are 0.99987 (k-RR at eps/2) and 0.99992 (binary RR at eps/2); the others
are > 0.99999.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pairwise.dp.ecdf import hierarchical_mechanism, tree_mechanism
from pairwise.dp.mechanisms import (
    GeometricMechanism,
    KaryRandomizedResponse,
    OneBitFlip,
    OneBitFlipVector,
    RandomizedResponse,
    SnappingLaplaceMechanism,
)
from tests.support.noise_power import (
    GofTest,
    QuadraticFormTest,
    bernoulli,
    categorical,
    discrete_laplace,
    laplace,
    path_matrix,
    scale_alternatives,
    snapped_laplace,
)

EPS = 1.0


def _alts(make):
    """Alternatives for a one-group test: {name: [law]}."""
    return {k: [v] for k, v in scale_alternatives(make).items()}


def _reports(mech, path: str, values: np.ndarray, scalar=int) -> np.ndarray:
    """Reports of a local randomizer through one of its three public paths."""
    if path == "randomize_array":
        return np.asarray(mech.randomize_array(values))
    if path == "randomize":
        return np.array([mech.randomize(scalar(v)) for v in values])
    return np.asarray(mech.simulate(values, np.random.default_rng()))


# --------------------------------------------------------------------------- GeometricMechanism
GEO_S, GEO_N = 3, 400


def _geo_law(f: float = 1.0):
    return discrete_laplace(alpha=math.exp(-EPS / (GEO_S * f)))


@pytest.mark.parametrize("path", ["release_array", "release", "simulate"])
def test_geometric_mechanism_noise_is_discrete_laplace(path):
    """GeometricMechanism(eps=1, S=3): noise ~ DL(exp(-1/3)); alpha 1e-5, power >= 0.99 (computed: 1.0 and 1.0)."""
    test = GofTest([(_geo_law(), GEO_N)])
    test.require_power(_alts(_geo_law))
    mech = GeometricMechanism(EPS, GEO_S)
    values = np.arange(GEO_N, dtype=np.int64) - 100
    if path == "release_array":
        out = mech.release_array(values)
    elif path == "release":
        out = np.array([mech.release(int(v)) for v in values])
    else:
        out = mech.simulate(values, np.random.default_rng())
    test.check([np.asarray(out) - values], f"GeometricMechanism.{path}")


# --------------------------------------------------------------------------- randomized response
RR_N = 600


def _rr_laws(eps: float):
    q = 1.0 / (1.0 + math.exp(eps))
    return [bernoulli(q), bernoulli(1 - q)]  # reports of 0-bits, of 1-bits


@pytest.mark.parametrize("path", ["randomize_array", "randomize", "simulate"])
def test_randomized_response_flip_rate(path):
    """RandomizedResponse(eps=1): flip probability 1/(1+e); alpha 1e-5, power >= 0.99 (eps/2: 0.99992, 2 eps: 1.0)."""
    test = GofTest([(law, RR_N) for law in _rr_laws(EPS)])
    test.require_power({k: _rr_laws(EPS / f) for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))})
    out = _reports(RandomizedResponse(EPS), path, np.repeat([0, 1], RR_N))
    test.check([out[:RR_N], out[RR_N:]], f"RandomizedResponse.{path}")


K_RR, KRR_N = 5, 400


def _krr_laws(eps: float):
    e = math.exp(eps)
    laws = []
    for v in range(K_RR):
        p = np.full(K_RR, 1.0 / (e + K_RR - 1))
        p[v] = e / (e + K_RR - 1)
        laws.append(categorical(p, f"kRR(v={v}, eps={eps:g})"))
    return laws


@pytest.mark.parametrize("path", ["randomize_array", "randomize", "simulate"])
def test_kary_randomized_response_report_law(path):
    """KaryRandomizedResponse(k=5, eps=1): report law of Eq. 9 per true value; alpha 1e-5, power >= 0.99 (0.99987)."""
    test = GofTest([(law, KRR_N) for law in _krr_laws(EPS)])
    test.require_power({k: _krr_laws(EPS / f) for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))})
    values = np.repeat(np.arange(K_RR), KRR_N)
    out = _reports(KaryRandomizedResponse(K_RR, EPS), path, values)
    test.check([out[values == v] for v in range(K_RR)], f"KaryRandomizedResponse.{path}")


# --------------------------------------------------------------------------- one-bit flip (QMLE's randomizer)
OBF_LO, OBF_HI = -2.0, 8.0
OBF_Y = np.array([-5.0, -2.0, 0.5, 3.0, 8.0, 20.0])  # below, at and inside the bounds, above
OBF_N = 500


def obf_laws(eps: float, y=OBF_Y, lo=OBF_LO, hi=OBF_HI):
    """Eq. 7 per record: P[z = 1] = (1 + w (e^eps - 1)) / (e^eps + 1), w = clip((y - lo)/(hi - lo), 0, 1)."""
    e = math.exp(eps)
    w = np.clip((np.asarray(y, float) - lo) / (hi - lo), 0.0, 1.0)
    return [bernoulli((1 + wi * (e - 1)) / (e + 1)) for wi in w]


@pytest.mark.parametrize("path", ["randomize_array", "randomize", "simulate"])
def test_one_bit_flip_rate_is_eq7(path):
    """OneBitFlip(eps=1, [-2, 8]): P[z=1] of Eq. 7 at six records; alpha 1e-5, power >= 0.99."""
    test = GofTest([(law, OBF_N) for law in obf_laws(EPS)])
    test.require_power({k: obf_laws(EPS / f) for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))})
    out = _reports(OneBitFlip(EPS, OBF_LO, OBF_HI), path, np.repeat(OBF_Y, OBF_N), float).reshape(OBF_Y.size, OBF_N)
    test.check(list(out), f"OneBitFlip.{path}")


def test_one_bit_flip_vector_splits_the_budget_evenly():
    """OneBitFlipVector.even_split(eps=1, d=2): each column is Eq. 7 at eps/2; alpha 1e-5, power >= 0.99."""
    n = 1500
    lows, highs = [0.0, -1.0], [1.0, 1.0]
    rows = np.array([[0.0, 1.0], [1.0, -1.0]])

    def laws(e):
        return [law for r in rows for (law,) in zip(obf_laws(e, r[:1], 0.0, 1.0))] + [
            law for r in rows for (law,) in zip(obf_laws(e, r[1:], -1.0, 1.0))
        ]

    test = GofTest([(law, n) for law in laws(EPS / 2)])
    test.require_power({k: laws(EPS / 2 / f) for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))})
    vec = OneBitFlipVector.even_split(EPS, lows, highs)
    x = np.repeat(rows, n, axis=0)
    bits = np.asarray(vec.randomize_array(x))
    groups = [bits[i * n : (i + 1) * n, 0] for i in range(2)] + [bits[i * n : (i + 1) * n, 1] for i in range(2)]
    test.check(groups, "OneBitFlipVector.randomize_array")


# --------------------------------------------------------------------------- snapping Laplace
SNAP_N = 600
SNAP_EPS, SNAP_S, SNAP_LO, SNAP_HI = 0.7, 1.0, -40.0, 40.0


def _snap_law(x: float, f: float = 1.0):
    # eps-DP snapping: lambda = S / eps up to (1 + 12 B eta) / (1 - 2 eta / eps), a 1e-13 relative change
    return snapped_laplace(x, SNAP_S / SNAP_EPS * f, SNAP_LO, SNAP_HI)


def test_snapping_laplace_mechanism_law():
    """SnappingLaplaceMechanism(eps=0.7, S=1, [-40, 40]): snapped Laplace(1/0.7) at x = 0, 3, 39 (clamped tail).

    alpha 1e-5, power >= 0.99 against lambda x2 and x1/2 (the rounding grid Lambda follows lambda).
    """
    xs = [0.0, 3.0, 39.0]
    test = GofTest([(_snap_law(x), SNAP_N) for x in xs])
    test.require_power({k: [_snap_law(x, f) for x in xs] for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))})
    mech = SnappingLaplaceMechanism(SNAP_EPS, SNAP_S, SNAP_LO, SNAP_HI)
    out = np.asarray(mech.release_array(np.repeat(xs, SNAP_N))).reshape(len(xs), SNAP_N)
    test.check(list(out), "SnappingLaplaceMechanism.release_array")


# --------------------------------------------------------------------------- tree mechanisms
TREE_L = 8


def _tree_counts(seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 40, 1 << TREE_L)


@pytest.mark.parametrize("noise,seeded", [("discrete_laplace", False), ("discrete_laplace", True), ("laplace", True)])
def test_tree_mechanism_paper_noise_is_theorem31(noise, seeded):
    """tree_mechanism (L=8, eps=1): errors = path sums of i.i.d. nodes of scale (L+1)/eps = 9 (Theorem 3.1).

    Mahalanobis quadratic form over the 256 thresholds (rank 256); alpha 1e-5,
    power >= 0.99 against node scale 18 and 4.5 (computed: 1.0 and 1.0).
    """
    scale = (TREE_L + 1) / EPS
    law = (
        (lambda f=1.0: discrete_laplace(scale * f))
        if noise == "discrete_laplace"
        else (lambda f=1.0: laplace(scale * f))
    )
    test = QuadraticFormTest(path_matrix(TREE_L), law())
    test.require_power(scale_alternatives(law))
    counts = _tree_counts()
    rel = tree_mechanism(counts, EPS, noise=noise, rng=np.random.default_rng() if seeded else None)
    test.check(np.asarray(rel.cumulative, float) - np.cumsum(counts), f"tree_mechanism({noise}, seeded={seeded})")


def test_tree_mechanism_snapped_laplace_nodes():
    """tree_mechanism(noise="laplace") on the CSPRNG: every node value d (path decomposition) is snapped.

    Closed form per node: clamp_[0, n](round_Lambda(d + Laplace(lambda))),
    lambda = (2L + 1)/eps = 17 (a replaced record changes 2L + 1 node values),
    Lambda = 32; the cumulative counts are the path sums of the snapped values.
    Heteroscedastic quadratic form (node laws differ by d and clamping);
    alpha 1e-5, power >= 0.99 against lambda x2 and x1/2.
    """
    counts = _tree_counts()
    n = int(counts.sum())
    L = TREE_L
    # path decomposition of the prefix counts (dp-ecdf Sec. 3.1): leaf = own count + left sibling's if a right
    # child, internal right child = its left sibling's count, left children and the root = 0
    nodes, d = [counts.astype(float)], []
    while nodes[-1].size > 1:
        nodes.append(nodes[-1][0::2] + nodes[-1][1::2])
    for lv in range(L + 1):
        v = np.zeros(1 << (L - lv))
        if lv < L:
            v[1::2] = nodes[lv][0::2]
        if lv == 0:
            v += nodes[0]
        d.append(v)
    d = np.concatenate(d)
    W = path_matrix(L)
    assert np.array_equal(W @ d, np.cumsum(counts))

    def laws(f: float = 1.0):
        lam = (2 * L + 1) / EPS * f
        half = max(n / 2, 2 * lam)
        cache = {}
        return [cache.setdefault(x, snapped_laplace(x, lam, n / 2 - half, n / 2 + half)) for x in d]

    test = QuadraticFormTest(W, laws())
    test.require_power(scale_alternatives(laws))
    rel = tree_mechanism(counts, EPS, noise="laplace")
    test.check(np.asarray(rel.cumulative, float), "tree_mechanism(laplace, snapped)")


@pytest.mark.parametrize("seeded", [False, True])
def test_hierarchical_mechanism_node_noise(seeded):
    """hierarchical_mechanism (L=8, eps=1): released node counts below the root carry i.i.d. DL(2L/eps = 16).

    510 nodes, full goodness of fit; alpha 1e-5, power >= 0.99 against scale 32 and 8.
    """
    counts = _tree_counts()
    scale = 2 * TREE_L / EPS
    m = (2 << TREE_L) - 2
    test = GofTest([(discrete_laplace(scale), m)])
    test.require_power(_alts(lambda f: discrete_laplace(scale * f)))
    rel = hierarchical_mechanism(counts, EPS, rng=np.random.default_rng() if seeded else None)
    true = [counts]
    while true[-1].size > 1:
        true.append(true[-1][0::2] + true[-1][1::2])
    noisy = [np.asarray(v, float) for v in rel.node_values]
    assert noisy[-1].tolist() == [counts.sum()]  # the root is the public n, exact
    err = np.concatenate([noisy[lv] - true[lv] for lv in range(TREE_L)])
    test.check([err], f"hierarchical_mechanism(seeded={seeded}) nodes")


@pytest.mark.parametrize("seeded", [False, True])
def test_kary_mechanism_node_noise(seeded):
    """kary_mechanism (L=8, eps=1, radices 16 x 16): nodes below the root carry i.i.d. DL(2h/eps = 4).

    272 nodes, full goodness of fit; alpha 1e-5, power >= 0.99 against scale 8 and 2.
    """
    from pairwise.dp.kary import kary_mechanism, node_counts, tree_radices

    counts = _tree_counts()
    rad = tree_radices(TREE_L)
    scale = 2 * len(rad) / EPS
    exact = node_counts(counts, rad)
    m = sum(v.size for v in exact[:-1])
    test = GofTest([(discrete_laplace(scale), m)])
    test.require_power(_alts(lambda f: discrete_laplace(scale * f)))
    rel = kary_mechanism(counts, EPS, rng=np.random.default_rng() if seeded else None)
    noisy = [np.asarray(v, float) for v in rel.node_values]
    assert noisy[-1].tolist() == [counts.sum()]  # the root is the public n, exact
    test.check([np.concatenate([noisy[lv] - exact[lv] for lv in range(len(rad))])], f"kary_mechanism(seeded={seeded})")


# --------------------------------------------------------------------------- ROC and Hosmer-Lemeshow (dp.ecdf)
def test_private_roc_noise_is_two_half_budget_trees():
    """private_roc(eps=1, L=8): pos and neg trees at eps/2, node scale (L+1)/(eps/2) = 18; paper layout.

    Stacked quadratic form over 2 x 256 thresholds; alpha 1e-5, power >= 0.99 against scale 36 and 9.
    """
    from pairwise.dp.ecdf import private_roc

    scale = (TREE_L + 1) / (EPS / 2)
    law = lambda f=1.0: discrete_laplace(scale * f)  # noqa: E731
    test = QuadraticFormTest(QuadraticFormTest.stack([path_matrix(TREE_L)] * 2), law())
    test.require_power(scale_alternatives(law))
    pos, neg = _tree_counts(4), _tree_counts(5)
    rel = private_roc(pos, neg, EPS, smoothing=None)
    err = np.concatenate([rel.positives.cumulative - np.cumsum(pos), rel.negatives.cumulative - np.cumsum(neg)])
    test.check(err, "private_roc trees")


def test_private_roc_hierarchical_node_noise():
    """private_roc(eps=1, mechanism="hierarchical"): node noise DL(2L/(eps/2) = 32) in both classes.

    2 x 510 released nodes, goodness of fit; alpha 1e-5, power >= 0.99 against scale 64 and 16.
    """
    from pairwise.dp.ecdf import private_roc

    scale = 2 * TREE_L / (EPS / 2)
    m = (2 << TREE_L) - 2
    test = GofTest([(discrete_laplace(scale), 2 * m)])
    test.require_power(_alts(lambda f: discrete_laplace(scale * f)))
    pos, neg = _tree_counts(4), _tree_counts(5)
    rel = private_roc(pos, neg, EPS, smoothing=None, mechanism="hierarchical")
    errs = []
    for counts, r in ((pos, rel.positives), (neg, rel.negatives)):
        true = [counts]
        while true[-1].size > 1:
            true.append(true[-1][0::2] + true[-1][1::2])
        errs += [np.asarray(r.node_values[lv], float) - true[lv] for lv in range(TREE_L)]
    test.check([np.concatenate(errs)], "private_roc hierarchical nodes")


@pytest.mark.parametrize("seeded", [False, True])
def test_hosmer_lemeshow_dp_noise_is_algorithm2(seeded):
    """hosmer_lemeshow_dp(eps=4, Q=128, L=8): eps' = eps/(L+9); ECDF nodes and group statistics at scale 1/eps'.

    Line 5: path sums of DL(1/eps') (quadratic form, 256 thresholds).  Lines
    7-9: O1, O0 get DL(1/eps'); E1, E0 get DL(2^16/eps') on the 2^-16 grid.
    Both parts alpha 1e-5 and power >= 0.99 against scale x2 and x1/2.
    """
    from pairwise.dp.ecdf import hosmer_lemeshow_dp

    eps, Q, L = 4.0, 128, TREE_L
    scale = (L + 9) / eps
    grid = 1 << 16
    tree = QuadraticFormTest(path_matrix(L), discrete_laplace(scale))
    tree.require_power(scale_alternatives(lambda f: discrete_laplace(scale * f)))
    laws = lambda f=1.0: [discrete_laplace(scale * f)] * 2 + [discrete_laplace(grid * scale * f)] * 2  # noqa: E731
    groups = GofTest([(law, Q) for law in laws()])
    groups.require_power({k: laws(f) for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))})

    rng = np.random.default_rng(8)
    n = 4000
    p = rng.beta(2, 3, n)
    y = (rng.random(n) < p).astype(int)
    rel = hosmer_lemeshow_dp(p, y, eps, Q=Q, L=L, smoothing=None, rng=np.random.default_rng() if seeded else None)
    bins = np.minimum(np.floor(p * (1 << L)).astype(int), (1 << L) - 1)
    tree.check(rel.ecdf.cumulative - np.cumsum(np.bincount(bins, minlength=1 << L)), "Hosmer-Lemeshow ECDF")
    g = np.searchsorted(np.sort(rel.cut_bins), bins, side="left")
    pg = np.rint(p * grid)
    o1 = np.bincount(g, weights=y, minlength=Q)
    o0 = np.bincount(g, weights=1 - y, minlength=Q)
    e1 = np.bincount(g, weights=pg, minlength=Q)
    e0 = np.bincount(g, weights=grid - pg, minlength=Q)
    groups.check(
        [rel.o1 - o1, rel.o0 - o0, np.rint(rel.e1 * grid) - e1, np.rint(rel.e0 * grid) - e0],
        "Hosmer-Lemeshow group statistics",
    )
