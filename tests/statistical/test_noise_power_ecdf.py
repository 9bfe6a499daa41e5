"""Noise power of the multi-server ECDF service: garbled (m = 2) and Polya (m = 3) noise, every release kind.

Real server processes (:class:`ServerProcesses`), real uploads, the querier's
public methods, at realistic epsilon.  The data are n = 1000 clients on the 8-bit
domain (grid g = L = 8: 256 thresholds, tau_i = i), with labels and predicted
probabilities, so one dataset serves the ECDF, ROC and Hosmer-Lemeshow
releases.  References are computed here from the public parameters only:

* paper mechanism (Theorem 3.1, Eq. 2): each released cumulative count is the
  exact count plus the sum of the L + 1 node noises on its path, nodes i.i.d.
  discrete Laplace with a = exp(-eps / ((L + 1) S)), S the series weight;
* hierarchical (Hay et al.): every node below the root gets DL with
  a = exp(-eps / (2 L S)), the root is n; the querier's consistent prefix sums
  are a public linear map W of the node noise (the least-squares projection,
  applied here to unit vectors);
* k-ary (issue 25): the same with radices 16 x 16, a = exp(-eps / (2 h S)),
  h = 2, through a numpy least-squares map built here;
* counts (Algorithm 2, lines 7-9): each group value gets DL with
  a = exp(-eps_v / S) (S = 1 for pos / neg, 2^8 for the e1 / e0 weights);
* ROC: the pos and neg ECDFs at eps / 2 each; Hosmer-Lemeshow: the ECDF of
  the probability bins with (L + 1) eps', then the group counts with eps',
  eps' = eps / (L + 9) (Theorem 5.1);
* m = 3 with ``tolerate = 1``: each server draws NB(1/2) - NB(1/2), so the
  total is NB(3/2, a) - NB(3/2, a) (pmf from scipy's nbinom, convolved).

No reported variance, delta or scale is used.  Tree releases are tested with
the Mahalanobis quadratic form through the public path map (256 thresholds),
counts with the chi-square goodness of fit; alpha = 1e-5 per test, and each
test asserts power >= 0.99 against node scale x2 and x1/2 before it spends
budget (computed: >= 0.9999 for the trees, >= 0.999 for the counts).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pairwise.dp.tree import consistent_prefix_sums
from pairwise.protocols.ecdf.client import ECDFQuerier, ServerProcesses, upload
from tests.support.noise_power import (
    GofTest,
    QuadraticFormTest,
    discrete_laplace,
    from_atoms,
    path_matrix,
    scale_alternatives,
)

NB = 8  # domain bits = grid bits = L
L = NB
N = 1 << NB
NCLIENTS = 1000  # enough that the noisy class totals of the ROC stay positive (6 sd)
PROB_SCALE = 1 << 8  # weight grid of e1 / e0 (DEFAULT_PROB_BITS)
DATASET = "power"


def _data():
    rng = np.random.default_rng(17)
    x = rng.integers(0, N, NCLIENTS)
    p = (x + 0.5) / N
    y = (rng.random(NCLIENTS) < p).astype(int)
    return x, y, p


@pytest.fixture(scope="module", params=[2, 3], ids=["gc-m2", "polya-m3"])
def servers(request):
    with ServerProcesses(
        request.param,
        budget="100000",
        timeout=60,
        extra_args=("--accept-unverified",) if request.param > 2 else (),  # three servers: mshare keys
    ) as sp:
        x, y, p = _data()
        upload(sp.addresses, DATASET, x, labels=y, probabilities=p, domain_bits=NB)
        yield sp, request.param


def _querier(sp) -> ECDFQuerier:
    return ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10)


def _cum(x, w=None) -> np.ndarray:
    """Exact weighted cumulative counts at tau_i = i."""
    w = np.ones(len(x)) if w is None else np.asarray(w, float)
    return np.cumsum(np.bincount(x, weights=w, minlength=N))


def _dl(eps_v: float, S: int = 1, f: float = 1.0):
    return discrete_laplace(alpha=math.exp(-eps_v / (S * f)))


def _tree_test(eps_node: float, blocks: int = 1) -> QuadraticFormTest:
    W = path_matrix(L) if blocks == 1 else QuadraticFormTest.stack([path_matrix(L)] * blocks)
    test = QuadraticFormTest(W, _dl(eps_node))
    test.require_power(scale_alternatives(lambda f: _dl(eps_node, 1, f)))
    return test


# --------------------------------------------------------------------------- ECDF, paper layout
def test_paper_ecdf_noise_is_theorem31(servers):
    """Paper release, eps = 1: path sums of i.i.d. DL(exp(-1/9)); alpha 1e-5, power >= 0.99 (x2 and x1/2: 1.0)."""
    sp, m = servers
    eps = 1.0
    test = _tree_test(eps / (L + 1))
    rel = _querier(sp).ecdf(DATASET, eps, smoothing=None)
    x, _, _ = _data()
    assert rel.thresholds.tolist() == list(range(N)) and rel.n == NCLIENTS
    test.check(rel.cumulative - _cum(x), f"paper ECDF (m={m})")


@pytest.mark.parametrize("servers", [3], indirect=True, ids=["polya-m3"])
def test_tolerant_polya_noise_is_the_larger_negative_binomial_difference(servers):
    """m = 3, tolerate = 1: node noise NB(3/2, a) - NB(3/2, a), a = exp(-1/9); alpha 1e-5, power >= 0.99.

    Polya servers only (``tolerate`` applies to m > 2): the test is parametrized
    with m = 3 alone instead of running, and skipping, on the garbled pair.
    """
    sp, m = servers
    assert m == 3
    eps = 1.0

    def law(f: float = 1.0):
        a = math.exp(-eps / (L + 1) / f)
        k = np.arange(int(60 / (1 - a)) + 60)
        pmf = stats.nbinom.pmf(k, 1.5, 1 - a)
        diff = np.convolve(pmf, pmf[::-1])
        return from_atoms(np.arange(-k[-1], k[-1] + 1), diff, f"NB(3/2)-NB(3/2), a={a:.4g}")

    test = QuadraticFormTest(path_matrix(L), law())
    test.require_power(scale_alternatives(law))
    rel = _querier(sp).ecdf(DATASET, eps, smoothing=None, tolerate=1)
    x, _, _ = _data()
    test.check(rel.cumulative - _cum(x), "paper ECDF (m=3, tolerate=1)")


# --------------------------------------------------------------------------- ECDF, hierarchical layout
def _consistency_map() -> np.ndarray:
    """The querier's post-processing as a matrix: node noise (levels 0..L-1) -> consistent prefix sums."""
    sizes = [N >> lv for lv in range(L)]
    k = sum(sizes)
    W = np.zeros((N, k))
    variances = [1.0] * L + [0.0]  # equal variance per level; the root (n) is exact
    for j in range(k):
        e = np.zeros(k)
        e[j] = 1.0
        levels, start = [], 0
        for s in sizes:
            levels.append(e[start : start + s])
            start += s
        levels.append(np.zeros(1))
        W[:, j] = consistent_prefix_sums(levels, variances)
    return W


def test_hierarchical_ecdf_noise_is_hay_et_al(servers):
    """Hierarchical release, eps = 2: nodes DL(exp(-2/16)) through the consistency map; alpha 1e-5, power >= 0.99."""
    sp, m = servers
    eps = 2.0
    eps_node = eps / (2 * L)
    test = QuadraticFormTest(_consistency_map(), _dl(eps_node))
    test.require_power(scale_alternatives(lambda f: _dl(eps_node, 1, f)))
    rel = _querier(sp).ecdf(DATASET, eps, mechanism="hierarchical", smoothing=None)
    x, _, _ = _data()
    test.check(rel.cumulative - _cum(x), f"hierarchical ECDF (m={m})")


def _kary_gls_map(radices) -> np.ndarray:
    """Node noise -> error of the least-squares prefix sums of a mixed-radix tree with the public root n.

    Independent of the querier's two passes (:mod:`pairwise.dp.kary`): numpy least squares on the explicit
    design matrix A (every node below the root, one row each, equal variances), constrained to sum n:
    x = (I - G 1 1^T / 1^T G 1) G A^T y with G = (A^T A)^-1, then the prefix sums."""
    rows, width = [np.eye(N)], 1
    for k in radices[:-1]:  # the levels below the root: leaves, then blocks of width k_1, k_1 k_2, ...
        width *= k
        rows.append(np.kron(np.eye(N // width), np.ones(width)))
    A = np.vstack(rows)
    G = np.linalg.inv(A.T @ A)
    one = np.ones(N)
    g1 = G @ one
    M = (np.eye(N) - np.outer(g1, one) / (one @ g1)) @ G @ A.T
    return np.cumsum(M, axis=0)


def test_kary_ecdf_noise_is_eps_over_2h(servers):
    """k-ary release (issue 25), eps = 2 on 2^8 thresholds (radices 16 x 16, h = 2): the 272 nodes below the
    public root carry DL(exp(-eps / 2h)) through the least-squares map; alpha 1e-5, power >= 0.99.

    The service-level check of the noise the servers draw for ``--mechanism kary`` (before it, only the
    library's kary_mechanism had a noise-power test and the servers only the law they state); mutation rows
    ecdf-kary-scale-x2 and ecdf-kary-scale-x1/2."""
    from pairwise.dp.kary import tree_radices

    sp, m = servers
    eps = 2.0
    rad = tree_radices(L)
    eps_node = eps / (2 * len(rad))
    test = QuadraticFormTest(_kary_gls_map(rad), _dl(eps_node))
    test.require_power(scale_alternatives(lambda f: _dl(eps_node, 1, f)))
    rel = _querier(sp).ecdf(DATASET, eps, mechanism="kary", smoothing=None)
    assert rel.noise_map.radices == rad == (16, 16)
    x, _, _ = _data()
    test.check(rel.cumulative - _cum(x), f"k-ary ECDF (m={m})")


# --------------------------------------------------------------------------- group counts
def _group_truth(cuts, series: str) -> np.ndarray:
    x, y, p = _data()
    w = {"pos": y, "neg": 1 - y, "e1": np.rint(p * PROB_SCALE), "e0": PROB_SCALE - np.rint(p * PROB_SCALE)}[series]
    group = np.searchsorted(np.asarray(cuts), x, side="left")  # group q: grid indices (b_{q-1}, b_q]
    return np.bincount(group, weights=w, minlength=len(cuts) + 1)


SERIES_WEIGHT = {"pos": 1, "neg": 1, "e1": PROB_SCALE, "e0": PROB_SCALE}


def test_group_counts_noise(servers):
    """counts(eps_v = 0.5, 4 series x 256 groups): DL(exp(-0.5 / S)); alpha 1e-5, power >= 0.99."""
    sp, m = servers
    eps_v = 0.5
    cuts = list(range(N - 1))  # 255 cuts: one group per grid index
    names = list(SERIES_WEIGHT)
    groups = len(cuts) + 1
    test = GofTest([(_dl(eps_v, SERIES_WEIGHT[s]), groups) for s in names])
    test.require_power(
        {k: [_dl(eps_v, SERIES_WEIGHT[s], f) for s in names] for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))}
    )
    cr = _querier(sp).counts(DATASET, cuts, eps_v, names)
    test.check([cr.values[s] - _group_truth(cuts, s) for s in names], f"group counts (m={m})")


# --------------------------------------------------------------------------- applications
def test_roc_noise_is_two_half_budget_trees(servers):
    """roc(eps = 1): pos and neg ECDFs with eps/2 each, nodes DL(exp(-0.5/9)); alpha 1e-5, power >= 0.99."""
    sp, m = servers
    eps = 1.0
    test = _tree_test(eps / 2 / (L + 1), blocks=2)
    roc = _querier(sp).roc(DATASET, eps, smoothing=None)
    x, y, _ = _data()
    err = np.concatenate([roc.positives.cumulative - _cum(x, y), roc.negatives.cumulative - _cum(x, 1 - y)])
    test.check(err, f"ROC pos/neg ECDFs (m={m})")


def test_hosmer_lemeshow_noise_is_algorithm2(servers):
    """hosmer_lemeshow(eps = 8, Q = 256): eps' = 8/17; ECDF nodes DL(exp(-eps')), groups DL(exp(-eps'/S)).

    Two tests on one release, each alpha 1e-5 and power >= 0.99 against scale
    x2 and x1/2: the ECDF part (quadratic form, 256 thresholds) and the 4 x 256
    group statistics (goodness of fit, e1/e0 in 2^-8 units).
    """
    sp, m = servers
    eps = 8.0
    eps_p = eps / (L + 9)
    tree = _tree_test(eps_p)
    Q = 256
    names = ["pos", "neg", "e1", "e0"]
    counts = GofTest([(_dl(eps_p, SERIES_WEIGHT[s]), Q) for s in names])
    counts.require_power(
        {k: [_dl(eps_p, SERIES_WEIGHT[s], f) for s in names] for k, f in (("scale x2", 2.0), ("scale x1/2", 0.5))}
    )
    hl = _querier(sp).hosmer_lemeshow(DATASET, eps, Q=Q, smoothing=None)
    x, _, _ = _data()
    tree.check(hl.ecdf.cumulative - _cum(x), f"Hosmer-Lemeshow ECDF (m={m})")
    released = {"pos": hl.o1, "neg": hl.o0, "e1": hl.e1 * PROB_SCALE, "e0": hl.e0 * PROB_SCALE}
    counts.check([released[s] - _group_truth(hl.cuts, s) for s in names], f"Hosmer-Lemeshow groups (m={m})")
