"""Noise of the ECDF service (protocols.ecdf_noise): Polya shares and the two-server noisy-sum circuit.

References are independent: scipy.stats.nbinom and the closed-form discrete
Laplace pmf for the Polya sampler, Python-int arithmetic for the inverse-CDF
step, the exact gadget pmf of circuits.noise for the garbled noise, and the
circuit's plaintext evaluation for the garbled execution.  Statistical tests
draw from the OS CSPRNG (unseedable) and use chi-square goodness-of-fit with
alpha = 1e-6, so a correct sampler fails about once in a million runs while a
wrong law (wrong shape, wrong alpha, a sign error in the shares) fails at once.
"""

from __future__ import annotations

import threading
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from pairwise.dp.dyadic import discrete_laplace_pmf as gadget_pmf
from pairwise.mpc.channel import MemoryChannel
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession
from pairwise.protocols.ecdf.noise import (
    MAX_VALUE_EPSILON,
    NoiseSetupError,
    gc_noise_shares,
    gc_noisy_sum,
    locate,
    noise_share,
    noise_variance,
    noisy_sum_circuit,
    polya_guarantee,
    polya_shape,
    polya_table,
    sample_polya,
    value_epsilon,
    words_to_bits,
)
from pairwise.protocols.ecdf.shares import reduce_mod, to_signed

ALPHA = 1e-6


def chi2_pvalue(samples: np.ndarray, support: np.ndarray, pmf: np.ndarray) -> float:
    """Chi-square goodness of fit; cells with expected count < 5 are pooled (tails together)."""
    n = samples.size
    counts = np.array([(samples == v).sum() for v in support], dtype=float)
    other = n - counts.sum()
    exp = pmf * n
    keep = exp >= 5
    obs = list(counts[keep]) + [counts[~keep].sum() + other]
    ex = list(exp[keep]) + [exp[~keep].sum() + max(0.0, n - exp.sum())]
    if ex[-1] < 1e-9:
        obs, ex = obs[:-1], ex[:-1]
        assert other == 0 and counts[~keep].sum() == 0
    ex = np.array(ex) * (sum(obs) / sum(ex))
    return stats.chisquare(obs, ex).pvalue


# --------------------------------------------------------------------------- Polya tables
@pytest.mark.parametrize(
    "shape,eps,S",
    [
        (Fraction(1, 3), Fraction(1, 11), 1),
        (Fraction(1, 2), Fraction(1, 2), 1),
        (Fraction(1, 5), Fraction(1, 3), 4),
        (Fraction(1), Fraction(1, 4), 1),
    ],
)
def test_polya_table_matches_scipy_nbinom(shape, eps, S):
    t = polya_table(shape, eps, S)
    a = np.exp(-float(eps) / S)
    ref = stats.nbinom.pmf(np.arange(t.support), float(shape), 1 - a)
    assert np.abs(t.pmf() - ref).max() < 1e-14
    # tail beyond the table is below 2^-122 and the TV bound is tiny but positive
    assert 0 < t.tv_bound < 1e-30
    assert stats.nbinom.sf(t.support - 1, float(shape), 1 - a) < 1e-15


def test_polya_cdf_is_an_exact_rounded_cdf():
    t = polya_table(Fraction(1, 3), Fraction(1, 7), 1)
    c = t.cdf_int()
    assert c[-1] == 1 << 124
    assert all(b >= a for a, b in zip(c, c[1:]))
    assert t.cdf_hi.max() < (1 << 62) + 1 and t.cdf_lo.max() < (1 << 62)


def test_locate_resolves_ties_on_the_high_word():
    """The vectorized inverse-CDF step equals a Python-int reference, including u on the high words."""
    t = polya_table(Fraction(1, 2), Fraction(3), 1)
    c = t.cdf_int()
    us = []
    for v in c[:-1]:
        us += [v - 1, v, v + 1, (v >> 62) << 62, ((v >> 62) << 62) | ((1 << 62) - 1)]
    us = [u for u in us if 0 <= u < (1 << 124)]
    u_hi = np.array([u >> 62 for u in us], dtype=np.uint64)
    u_lo = np.array([u & ((1 << 62) - 1) for u in us], dtype=np.uint64)
    got = locate(t, u_hi, u_lo)
    want = [sum(1 for ck in c if ck <= u) for u in us]
    assert got.tolist() == want


def test_polya_sampler_goodness_of_fit():
    shape, eps = Fraction(1, 3), Fraction(1, 4)
    t = polya_table(shape, eps, 1)
    x = sample_polya(t, 60_000)
    a = np.exp(-0.25)
    support = np.arange(60)
    assert chi2_pvalue(x, support, stats.nbinom.pmf(support, 1 / 3, 1 - a)) > ALPHA


@pytest.mark.parametrize("m", [3, 4])
def test_sum_of_m_polya_shares_is_discrete_laplace(m):
    """m = 3, 4 servers, tolerate 0: sum_j (G_j - G'_j) with G ~ NB(1/m, a) is DL(a) (alpha 1e-6)."""
    eps = Fraction(1, 3)
    t = polya_table(polya_shape(m), eps, 1)
    z = sum(noise_share(t, 50_000) for _ in range(m))
    a = np.exp(-1 / 3)
    support = np.arange(-40, 41)
    dl = (1 - a) / (1 + a) * a ** np.abs(support)
    assert chi2_pvalue(z, support, dl) > ALPHA
    assert abs(z.var() / noise_variance(eps, 1) - 1) < 0.1


def test_tolerant_shares_sum_to_a_larger_negative_binomial_difference():
    """tolerate t: each share NB(1/(m-t)); m shares give NB(m/(m-t)) - NB(m/(m-t)) (here m=3, t=1)."""
    m, tol, eps = 3, 1, Fraction(1, 2)
    t = polya_table(polya_shape(m, tol), eps, 1)
    assert t.shape == Fraction(1, 2)
    a = np.exp(-0.5)
    g = sum(sample_polya(t, 40_000) for _ in range(m))
    support = np.arange(40)
    assert chi2_pvalue(g, support, stats.nbinom.pmf(support, 1.5, 1 - a)) > ALPHA
    # any m - t = 2 honest shares alone are exactly DL(a)
    z = noise_share(t, 40_000) + noise_share(t, 40_000)
    zs = np.arange(-30, 31)
    assert chi2_pvalue(z, zs, (1 - a) / (1 + a) * a ** np.abs(zs)) > ALPHA


def test_polya_parameter_errors_and_guarantee():
    with pytest.raises(NoiseSetupError, match="tolerate"):
        polya_shape(3, 3)
    with pytest.raises(NoiseSetupError, match="per-value epsilon"):
        polya_table(Fraction(1, 3), MAX_VALUE_EPSILON * 2, 1)
    with pytest.raises(NoiseSetupError, match="support points"):
        polya_table(Fraction(1, 3), Fraction(1, 10**7), 1)
    # the largest per-value epsilon still gives a meaningful delta (tail kept to 2^-122)
    t = polya_table(Fraction(1, 3), MAX_VALUE_EPSILON, 1)
    assert polya_guarantee(t, 3) < 1e-20
    assert value_epsilon(Fraction(10**4), 7) == MAX_VALUE_EPSILON
    assert value_epsilon(Fraction(1), 11) == Fraction(1, 11)


# --------------------------------------------------------------------------- garbled noise (m = 2)
def run_pair(fn_garbler, fn_evaluator):
    a, b = MemoryChannel.pair(timeout=120)
    res: dict = {}

    def ev():
        with EvaluatorSession(b, session_id=b"test-ecdf") as s:
            res["e"] = fn_evaluator(s)

    th = threading.Thread(target=ev, daemon=True)
    th.start()
    with GarblerSession(a, session_id=b"test-ecdf") as s:
        res["g"] = fn_garbler(s)
    th.join(timeout=120)
    assert not th.is_alive()
    return res["g"], res["e"]


def test_noisy_sum_circuit_plaintext_and_garbled_agree():
    nsc = noisy_sum_circuit(16, Fraction(1, 2), 1, 1)
    rng = np.random.default_rng(3)
    B = 40
    x = rng.integers(0, 1 << 16, B).astype(np.uint64)
    y = rng.integers(0, 1 << 16, B).astype(np.uint64)
    rx = rng.integers(0, 2, (B, nsc.random_width)).astype(bool)
    ry = rng.integers(0, 2, (B, nsc.random_width)).astype(bool)
    plain = nsc.circuit.evaluate_bits([words_to_bits(x, 16), words_to_bits(y, 16), rx, ry])[0]
    weights = np.uint64(1) << np.arange(16, dtype=np.uint64)
    plain_vals = (plain.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    noise = to_signed(reduce_mod(plain_vals - x - y, 16), 16)
    vals, _, _ = gadget_pmf(nsc.params)
    assert set(noise.tolist()) <= set(vals.tolist())  # noise within the gadget's support

    g, e = run_pair(
        lambda s: s.run(nsc.circuit, {"x": words_to_bits(x, 16), "rx": rx}),
        lambda s: s.run(nsc.circuit, {"y": words_to_bits(y, 16), "ry": ry}),
    )
    assert np.array_equal(np.asarray(g.outputs[0], dtype=np.uint64), plain_vals)
    assert np.array_equal(np.asarray(e.outputs[0], dtype=np.uint64), plain_vals)


def test_garbled_noise_shares_sum_to_the_gadget_distribution():
    """Masked mode: (out - r0) + (-r1) = Z; open mode: out - x - y = Z; both follow the exact gadget pmf."""
    nsc = noisy_sum_circuit(32, Fraction(1, 2), 1, 1)
    B = 3000
    counts = np.random.default_rng(1).integers(0, 1000, B).astype(np.uint64)
    x0 = np.random.default_rng(2).integers(0, 1 << 32, B).astype(np.uint64)
    x1 = reduce_mod(counts - x0, 32)

    def garbler(s):
        sh, _ = gc_noise_shares(s, nsc, B)
        out, _ = gc_noisy_sum(s, nsc, x0)
        return sh, out

    def evaluator(s):
        sh, _ = gc_noise_shares(s, nsc, B)
        out, _ = gc_noisy_sum(s, nsc, x1)
        return sh, out

    (s0, out_g), (s1, out_e) = run_pair(garbler, evaluator)
    assert np.array_equal(out_g, out_e)
    z_masked = to_signed(reduce_mod(s0 + s1, 32), 32)
    z_open = to_signed(reduce_mod(out_g - counts, 32), 32)
    vals, q, den = gadget_pmf(nsc.params)
    pmf = np.array([float(Fraction(int(v), den)) for v in q])
    for z in (z_masked, z_open):
        assert chi2_pvalue(z, vals, pmf) > ALPHA
    # the shares themselves are masked: neither server's share is concentrated near 0
    assert np.mean(np.abs(to_signed(s1, 32)) < 1000) < 0.01


def test_noisy_sum_circuit_guarantee_and_width_check():
    nsc = noisy_sum_circuit(32, Fraction(1, 11), 1, 11)
    assert nsc.guarantee.epsilon == pytest.approx(1 / 11)
    assert nsc.guarantee.delta <= 2.0**-40 / 11
    with pytest.raises(NoiseSetupError, match="does not fit"):
        noisy_sum_circuit(8, Fraction(1, 100), 1, 1)
