"""Tests of Algorithm 1 (protocols.ldp_ustat): kernels, exact unbiasedness, Theorem 1, CSPRNG path."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from pairwise.dp.errors import PrivacyParameterError
from pairwise.dp.mechanisms import KaryRandomizedResponse
from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ldp.ustat import (
    QuantizedUStatistic,
    Quantizer,
    exact_auc,
    exact_ustatistic,
    ldp_ustatistic,
    simulate_ldp_ustatistic,
    theorem1_variance_bound,
)
from tests.support.noise_power import NormalVarianceTest

# --------------------------------------------------------------------------- quantization


def test_uniform_quantizer_simple_rounding_and_clipping():
    q = Quantizer.uniform(0.0, 1.0, 4)
    cells = q.encode(np.array([-5.0, 0.0, 0.24, 0.25, 0.5, 0.99, 1.0, 7.0]))
    np.testing.assert_array_equal(cells, [0, 0, 0, 1, 2, 3, 3, 3])
    np.testing.assert_allclose(q.axes[0].representatives(), [0.125, 0.375, 0.625, 0.875])
    q2 = Quantizer.uniform([0, 10], [1, 20], 2)
    np.testing.assert_array_equal(q2.encode(np.array([[0.1, 19.0], [0.9, 10.0]])), [1, 2])
    assert q2.cells == 4


def test_discrete_quantizer_and_errors():
    q = Quantizer.discrete([[1, 2, 3], [10, 20]])
    np.testing.assert_array_equal(q.encode(np.array([[1, 10], [3, 20], [2, 20]])), [0, 5, 3])
    # owners map a value to the nearest declared level: outside the domain means clamped, never an error
    np.testing.assert_array_equal(q.encode(np.array([[4, 10], [-7, 99], [1.4, 15], [2.6, 14.9]])), [4, 1, 0, 4])
    with pytest.raises(ValueError, match="lower < upper"):
        Quantizer.uniform(1.0, 1.0, 3)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        Quantizer.uniform(0.0, 1.0, 0)
    with pytest.raises(ValueError, match="shape"):
        Quantizer.uniform(0.0, 1.0, 3).encode(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="not finite"):
        Quantizer.uniform(0.0, 1.0, 3).encode(np.array([0.5, np.nan]))


# --------------------------------------------------------------------------- kernel matrices (App. A.2)


def test_gini_midpoint_and_average_closed_forms_against_brute_force():
    q = Quantizer.uniform(0.0, 2.0, 5)
    w = 0.4
    for mode in ("midpoint", "average"):
        named = QuantizedUStatistic("gini", q, 1.0, mode).matrix
        dense = QuantizedUStatistic(lambda x, y: np.abs(x - y), q, 1.0, mode, grid=201).matrix
        # Midpoint uses bin endpoints (exact for |x - y|); average a midpoint rule.
        np.testing.assert_allclose(named, dense, atol=1e-5 if mode == "average" else 1e-12)
        assert named[1, 1] == pytest.approx(w / 2 if mode == "midpoint" else w / 3)
        assert named[0, 3] == pytest.approx(3 * w)


def test_average_kernel_matches_numerical_integration():
    """Eq. (15): A_ab = mean of f over bin a x bin b (Lebesgue), vs scipy dblquad."""
    f = lambda x, y: np.exp(-((x - y) ** 2))  # noqa: E731
    q = Quantizer.uniform(-1.0, 1.0, 4)
    a = QuantizedUStatistic(f, q, 1.0, "average", grid=64).matrix
    edges = np.linspace(-1, 1, 5)
    for i, j in [(0, 0), (0, 3), (1, 2)]:
        val, _ = scipy.integrate.dblquad(
            lambda y, x: math.exp(-((x - y) ** 2)), edges[i], edges[i + 1], edges[j], edges[j + 1]
        )
        assert a[i, j] == pytest.approx(val / 0.25, abs=1e-4)


def test_kendall_and_auc_matrices():
    q = Quantizer.discrete([[1, 2], [5, 6, 7]])
    a = QuantizedUStatistic("kendall", q, 1.0).matrix
    pts = [(y, z) for y in (1, 2) for z in (5, 6, 7)]
    for (i, p), (j, r) in itertools.product(enumerate(pts), repeat=2):
        assert a[i, j] == np.sign(p[0] - r[0]) * np.sign(p[1] - r[1])
    au = QuantizedUStatistic("auc", Quantizer.discrete([0, 1, 2]), 1.0).matrix
    np.testing.assert_array_equal(au, [[0.5, 0, 0], [1, 0.5, 0], [1, 1, 0.5]])


# --------------------------------------------------------------------------- exact references


def test_exact_ustatistics_against_independent_references():
    rng = np.random.default_rng(0)
    x = rng.normal(size=300).round(1)  # with ties
    brute = np.abs(x[:, None] - x[None, :]).sum() / (x.size * (x.size - 1))
    assert exact_ustatistic(x, "gini") == pytest.approx(brute, rel=1e-12)

    y, z = rng.integers(0, 5, 400), rng.integers(0, 4, 400)
    tau_a = exact_ustatistic(np.column_stack([y, z]), "kendall")
    # scipy gives tau-b = (C - D)/sqrt((n0 - n1)(n0 - n2)); convert to tau-a = (C - D)/n0.
    tau_b = scipy.stats.kendalltau(y, z).statistic
    n0 = 400 * 399 / 2
    n1 = sum(c * (c - 1) / 2 for c in np.unique(y, return_counts=True)[1])
    n2 = sum(c * (c - 1) / 2 for c in np.unique(z, return_counts=True)[1])
    assert tau_a == pytest.approx(tau_b * math.sqrt((n0 - n1) * (n0 - n2)) / n0, rel=1e-10)
    sgn = np.sign(y[:, None] - y[None, :]) * np.sign(z[:, None] - z[None, :])
    assert tau_a == pytest.approx(sgn.sum() / (400 * 399), rel=1e-10)  # brute force over all pairs
    assert exact_ustatistic(np.column_stack([y, np.ones(400)]), "kendall") == 0.0

    s, lab = rng.integers(0, 10, 500).astype(float), rng.integers(0, 2, 500)
    u = scipy.stats.mannwhitneyu(s[lab == 1], s[lab == 0]).statistic
    assert exact_auc(s[lab == 1], s[lab == 0]) == pytest.approx(u / ((lab == 1).sum() * (lab == 0).sum()))
    f = lambda a, b: (a - b) ** 2 / 2  # noqa: E731 - the variance kernel
    assert exact_ustatistic(x, f) == pytest.approx(np.var(x, ddof=1), rel=1e-10)


# --------------------------------------------------------------------------- unbiasedness, exactly


def _expectation_by_enumeration(proto: QuantizedUStatistic, cells: np.ndarray) -> float:
    """E[estimate] summed over every report vector, weighted by the k-RR transition matrix."""
    P = proto.mechanism.transition_matrix
    K = proto.cells
    total = 0.0
    for reports in itertools.product(range(K), repeat=cells.size):
        w = np.prod([P[c, r] for c, r in zip(cells, reports)])
        total += w * proto.estimate(np.array(reports))
    return total


def test_estimator_is_exactly_unbiased_one_sample():
    q = Quantizer.uniform(0.0, 3.0, 3)
    proto = QuantizedUStatistic("gini", q, 0.7, "average")
    cells = np.array([0, 2, 2, 1])
    assert _expectation_by_enumeration(proto, cells) == pytest.approx(proto.exact_quantized(cells), abs=1e-10)


def test_estimator_is_exactly_unbiased_two_sample_auc():
    proto = QuantizedUStatistic("auc", Quantizer.discrete([0, 1, 2]), 0.9)
    P = proto.mechanism.transition_matrix
    pos, neg = np.array([2, 1]), np.array([0, 1])
    total = 0.0
    for rp in itertools.product(range(3), repeat=2):
        for rn in itertools.product(range(3), repeat=2):
            w = np.prod([P[c, r] for c, r in zip(pos, rp)]) * np.prod([P[c, r] for c, r in zip(neg, rn)])
            total += w * proto.estimate_two_sample(np.array(rp), np.array(rn))
    assert total == pytest.approx(proto.exact_quantized_two_sample(pos, neg), abs=1e-12)
    assert proto.exact_quantized_two_sample(pos, neg) == pytest.approx(exact_auc(pos, neg))


def test_estimate_agrees_with_dp_kary_ustatistic():
    """Cross-check with the independent implementation in dp.mechanisms."""
    rng = np.random.default_rng(3)
    q = Quantizer.discrete(list(range(6)))
    proto = QuantizedUStatistic(lambda x, y: (x == y).astype(float), q, 1.3)
    reports = rng.integers(0, 6, 200)
    ref = KaryRandomizedResponse(6, 1.3).estimate_ustatistic(reports, proto.matrix)
    assert proto.estimate(reports) == pytest.approx(ref, rel=1e-12)


# --------------------------------------------------------------------------- statistical


def collision_estimate_moments(data: np.ndarray, K: int, eps: float) -> tuple[float, float]:
    """(mean, variance) of Algorithm 1's estimate with the collision kernel A = I on K levels, from public parameters.

    Report R_i ~ k-RR row p_v (Eq. 9: e^eps / (e^eps + K - 1) on the true value v,
    1 / (e^eps + K - 1) elsewhere), beta = K / (K + e^eps - 1), b = beta / K.
    With u_i = (e_{R_i} - b) / (1 - beta) (E u_i = e_{v_i}, Cov u_i = S_v =
    (diag p_v - p_v p_v^T) / (1 - beta)^2) the estimate is U / (n choose 2),
    U = sum_{i<j} u_i^T A u_j, whose linear and quadratic parts in the centred
    u_i are uncorrelated: Var U = sum_i w_i^T S_{v_i} w_i + sum_{i<j} tr(A S_{v_i} A S_{v_j}),
    w_i = A sum_{j != i} e_{v_j}.  E = sum_v n_v (n_v - 1) / (n (n - 1)).
    """
    A = np.eye(K)
    e = math.exp(eps)
    beta = K / (K + e - 1)
    n = data.size
    counts = np.bincount(data, minlength=K).astype(float)
    P = np.full((K, K), 1 / (e + K - 1))
    np.fill_diagonal(P, e / (e + K - 1))
    S = [(np.diag(P[v]) - np.outer(P[v], P[v])) / (1 - beta) ** 2 for v in range(K)]
    W = [A @ (counts - np.eye(K)[v]) for v in range(K)]
    linear = sum(counts[v] * W[v] @ S[v] @ W[v] for v in range(K))
    T = np.array([[np.trace(A @ S[v] @ A @ S[w]) for w in range(K)] for v in range(K)])
    quadratic = 0.5 * (counts @ T @ counts - counts @ np.diag(T))
    return float(counts @ (counts - 1) / (n * (n - 1))), float((linear + quadratic) / (n * (n - 1) / 2) ** 2)


def test_simulated_estimate_mean_and_variance_are_the_closed_form():
    """Seeded simulation (collision kernel, 5 levels, n = 400, eps = 1, 400 runs) against
    :func:`collision_estimate_moments`, computed here from public parameters (not proto.beta).

    Mean: two-sided z-test with the closed-form sd, alpha 1e-5 (|z| < 4.42).
    Variance: two-sided chi-square test about the known mean (noise_power.NormalVarianceTest),
    alpha 1e-5, with an excess-kurtosis allowance of 6 (the estimate is skewed: 20000 simulated
    runs measured excess kurtosis 3.0, skewness 1.4, variance 1.03 +- 0.016 x the closed form, which
    exact enumeration confirms on small cases);
    power >= 0.99 asserted against eps / 2 (variance x25.5) and 2 eps (x0.034), computed 1.0 for both.
    The closed form must also lie under Theorem 1's bound (it is 90x below it: that bound alone
    could not tell the right noise from none).
    """
    rng = np.random.default_rng(11)
    K, n, eps, reps = 5, 400, 1.0, 400
    data = rng.integers(0, K, n)
    collision = lambda x, y: (x == y).astype(float)  # noqa: E731 - kernel in [0, 1]
    mean, var = collision_estimate_moments(data, K, eps)
    beta = K / (K + math.exp(eps) - 1)
    assert var <= theorem1_variance_bound(n, beta)
    test = NormalVarianceTest(reps, mean, var, kurtosis=6.0)
    test.require_power(
        {
            name: collision_estimate_moments(data, K, eps / f)[1]
            for name, f in (("scale x2 (eps / 2)", 2.0), ("scale x1/2 (2 eps)", 0.5))
        }
    )
    levels = list(range(K))
    proto = QuantizedUStatistic(collision, Quantizer.discrete(levels), eps)
    assert proto.exact_quantized(proto.encode(data)) == pytest.approx(mean, rel=1e-12)
    est = np.array([simulate_ldp_ustatistic(data, collision, None, eps, rng, levels=levels) for _ in range(reps)])
    assert abs(est.mean() - mean) < 4.42 * math.sqrt(var / reps)
    test.check(est, "Algorithm 1 (collision, simulated) estimate")


def test_csprng_path_on_fair_kendall_is_centred():
    """CSPRNG (unseeded): 12 runs on the shipped ratings; alpha about 1e-6 (|z| < 5)."""
    fair = load_dataset("fair")
    data = np.column_stack([fair["rate_marriage"], fair["religious"]])
    levels = [list(range(1, 6)), list(range(1, 5))]
    exact = exact_ustatistic(data, "kendall")
    proto = QuantizedUStatistic("kendall", Quantizer.discrete(levels), 2.0)
    # Kendall's kernel is in [-1, 1]: (f + 1)/2 is in [0, 1], so Var <= 4 * Theorem 1.
    sd = math.sqrt(4 * theorem1_variance_bound(data.shape[0], proto.beta))
    runs = [ldp_ustatistic(data, "kendall", None, 2.0, levels=levels) for _ in range(12)]
    assert abs(np.mean(runs) - exact) < 5 * sd / math.sqrt(12)
    assert proto.exact_quantized(proto.encode(data)) == pytest.approx(exact)


def test_auc_on_breast_cancer_converges_with_epsilon():
    bc = load_dataset("breast_cancer")
    x, y = bc["mean_radius"], bc["malignant"].astype(int)
    rng = np.random.default_rng(5)
    lo, hi = 5.0, 30.0  # the declared public domain of mean_radius (protocols/data/domains.json)
    proto = QuantizedUStatistic("auc", Quantizer.uniform(lo, hi, 16), 8.0)
    target = proto.exact_quantized_two_sample(proto.encode(x[y == 1]), proto.encode(x[y == 0]))
    est = [simulate_ldp_ustatistic(x, "auc", 16, 8.0, rng, labels=y, bounds=(lo, hi)) for _ in range(100)]
    assert abs(np.mean(est) - target) < 4.42 * np.std(est) / 10
    assert abs(target - exact_ustatistic(x, "auc", y)) < 0.02  # quantization error with 16 bins of [5, 30]


# --------------------------------------------------------------------------- validation


def test_parameter_validation():
    x = np.arange(10.0)
    B = (0.0, 10.0)
    with pytest.raises(ValueError, match="public quantization bounds"):
        ldp_ustatistic(x, "gini", 4, 1.0)  # never a default from the data
    with pytest.raises(ValueError, match="unknown kernel"):
        ldp_ustatistic(x, "nope", 4, 1.0, bounds=B)
    with pytest.raises(ValueError, match="needs 2-d data"):
        ldp_ustatistic(x, "kendall", 4, 1.0, bounds=B)
    with pytest.raises(ValueError, match="needs public labels"):
        ldp_ustatistic(x, "auc", 4, 1.0, bounds=B)
    with pytest.raises(ValueError, match="labels are only used by the AUC"):
        ldp_ustatistic(x, "gini", 4, 1.0, bounds=B, labels=np.zeros(10))
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        ldp_ustatistic(x, "auc", 4, 1.0, bounds=B, labels=np.full(10, 2))
    with pytest.raises(ValueError, match="at least one positive and one negative"):
        ldp_ustatistic(x, "auc", 4, 1.0, bounds=B, labels=np.zeros(10))
    with pytest.raises(ValueError, match="give the number of bins"):
        ldp_ustatistic(x, "gini", None, 1.0)
    with pytest.raises(ValueError, match="quantized_kernel"):
        ldp_ustatistic(x, "gini", 4, 1.0, bounds=B, quantized_kernel="max")
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        ldp_ustatistic(x, "gini", 4, -1.0, bounds=B)
    with pytest.raises(PrivacyParameterError):
        ldp_ustatistic(x, "gini", 1, 1.0, bounds=B)  # k-RR needs at least 2 cells
    with pytest.raises(TypeError, match="Generator"):
        simulate_ldp_ustatistic(x, "gini", 4, 1.0, 42, bounds=B)
    proto = QuantizedUStatistic("gini", Quantizer.uniform(0, 1, 4), 1.0)
    with pytest.raises(ValueError, match=r"cells in \[0, 4\)"):
        proto.estimate(np.array([0, 4]))
    with pytest.raises(ValueError, match="two-sample"):
        QuantizedUStatistic("auc", Quantizer.uniform(0, 1, 4), 1.0).estimate(np.array([0, 1]))
    with pytest.raises(ValueError, match="too many"):
        QuantizedUStatistic("gini", Quantizer.uniform(0, 1, 10000), 1.0)
