"""Two-sided noise-power tests: closed-form noise laws, goodness of fit and quadratic forms, with power.

What it does
    Helpers for the tests that must fail when a mechanism adds the wrong amount
    of DP noise (issue 17).  Each test

    1. states the noise law the mechanism must produce as an independent closed
       form built from public parameters only (epsilon, sensitivity, P, L, ...),
       never from a value the code reports about itself;
    2. states its alternatives: the same mechanism with the noise scale
       multiplied by 2 and by 1/2 (:func:`scale_alternatives`), i.e. a 2x error
       in either direction;
    3. computes, *before* sampling, the power of its test against both
       alternatives at its false-alarm probability alpha and asserts that it is
       at least :data:`POWER` (so shrinking a sample size below what is needed
       makes the test fail loudly instead of silently losing power);
    4. draws the samples through the public entry point and asserts
       p-value > alpha.

    Three test statistics are provided.

    * :class:`GofTest`: Pearson's chi-square goodness of fit of one or more
      groups of i.i.d. samples against their closed-form laws (the "full
      distribution" test).  Bins are contiguous intervals chosen from the null
      law's quantiles and merged until every expected count is >= 5; the
      statistic is referred to chi2(df), df = sum over groups of (bins - 1).
      Power against an alternative law uses the same bins and the noncentral
      chi-square with noncentrality lambda = sum_g n_g sum_b (p1 - p0)^2 / p0
      (Cohen 1988, Sec. 7; the standard large-sample power of Pearson's test).
    * :class:`QuadraticFormTest`: for noise that the protocol only releases
      through a known linear map, e = W eta with eta independent (tree paths,
      the least-squares consistent tree), the Mahalanobis statistic
      T = (e - W mu0)^T (W D0 W^T)^+ (e - W mu0), mu0 and D0 the null means and
      variances (one law for all variables, or one per variable, e.g. snapped
      and clamped node values).  Its exact mean and variance under any laws of
      eta follow from their first four moments (formula in the class), and T
      is referred to the scaled chi-square c chi2(nu) with the same two
      moments (Satterthwaite 1946; Box 1954), for the null and for each
      alternative, which gives both the two-sided p-value and the power.
      (Checked by simulation: the tree statistics' p-values are uniform.)
    * :class:`NormalVarianceTest`: the two-sided chi-square test of a variance
      about a known mean, sum (x - mu)^2 / var0, for R repetitions of an
      approximately normal estimate, scaled for an excess-kurtosis allowance;
      power against (var1, mean1) from the (noncentral) chi-square.

Laws
    :class:`Law` holds a CDF, a lattice (1 for integers, 0 for continuous laws
    and laws given by atoms), and its moments (given, or summed over its
    lattice or atoms).  Constructors: :func:`discrete_laplace`,
    :func:`signed_geometric` (the in-circuit X XOR sign noise),
    :func:`kary_rr`, :func:`laplace`, :func:`categorical`, :func:`binomial`,
    :func:`bernoulli`, :func:`from_atoms`, :func:`snapped_laplace`
    (Mironov's snapping mechanism at one input) and :meth:`Law.shift` for h + Z.

Logging
    With NOISE_POWER_LOG set, every power computation and p-value is appended
    to that file (JSON lines): the power table of the report and the
    uniformity check of the p-values over repeated runs come from it.

Alpha and multiplicity
    The default alpha is 1e-5 per test; with the ~85 noise-power tests of the
    suite the chance of any false alarm in one CI run is below 1e-3.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

#: Default false-alarm probability of one noise-power test.
ALPHA = 1e-5
#: Required power against a 2x noise-scale error in either direction.
POWER = 0.99
#: Smallest expected count per chi-square bin.
MIN_EXPECTED = 5.0


def _record(powers: dict[str, float] | None, alpha: float, pvalue: float | None = None) -> None:
    """Append the powers (or a p-value) of the running test to $NOISE_POWER_LOG (JSON lines).

    Used to tabulate the powers and to check, over repeated runs, that the
    p-values of correct code are uniform (the closed forms match the code).
    """
    path = os.environ.get("NOISE_POWER_LOG")
    if path:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"test": test, "alpha": alpha, "power": powers, "p": pvalue}) + "\n")


# --------------------------------------------------------------------------- laws
@dataclass(frozen=True)
class Law:
    """A one-dimensional law given by its CDF (vectorized, right-continuous).

    ``lattice`` > 0: the law lives on ``offset + lattice * Z`` (bins are cut
    half-way between lattice points); 0: continuous.  ``lo``/``hi`` bracket
    essentially all of its mass (used to search quantiles).
    """

    name: str
    cdf: Callable[[np.ndarray], np.ndarray]
    lattice: float
    lo: float
    hi: float
    offset: float = 0.0
    moments: tuple[float, float, float] | None = field(default=None, compare=False)
    atoms: tuple[np.ndarray, np.ndarray] | None = field(default=None, compare=False, repr=False)

    # -- derived laws
    def shift(self, h: float) -> Law:
        """The law of h + X."""
        if self.atoms is not None:
            return from_atoms(self.atoms[0] + h, self.atoms[1], f"{h:+g} + {self.name}")
        m = None if self.moments is None else (self.moments[0] + h, self.moments[1], self.moments[2])
        return Law(
            f"{h:+g} + {self.name}",
            lambda x, f=self.cdf: f(np.asarray(x, float) - h),
            self.lattice,
            self.lo + h,
            self.hi + h,
            self.offset + h,
            m,
        )

    # -- moments
    def stats(self) -> tuple[float, float, float]:
        """(mean, variance, excess kurtosis), from ``moments`` or summed over the lattice."""
        if self.moments is not None:
            return self.moments
        if self.atoms is not None:
            mu, v, _, m4 = self.central_moments()
            return mu, v, m4 / v**2 - 3.0
        if self.lattice <= 0:
            raise ValueError(f"{self.name}: a continuous law needs its moments")
        x, p = self._lattice_atoms()
        mu = float(p @ x)
        d = x - mu
        v = float(p @ d**2)
        return mu, v, float(p @ d**4) / v**2 - 3.0

    def central_moments(self) -> tuple[float, float, float, float]:
        """(mean, variance, third and fourth central moments)."""
        if self.atoms is not None:
            x, p = self.atoms
            mu = float(p @ x)
            d = x - mu
            return mu, float(p @ d**2), float(p @ d**3), float(p @ d**4)
        mu, v, k = self.stats()
        if self.moments is None and self.lattice > 0:
            x, p = self._lattice_atoms()
            d = x - mu
            return mu, v, float(p @ d**3), (k + 3) * v * v
        return mu, v, 0.0, (k + 3) * v * v  # given moments: symmetric laws

    def _lattice_atoms(self) -> tuple[np.ndarray, np.ndarray]:
        k = np.arange(
            math.floor((self.lo - self.offset) / self.lattice) - 1,
            math.ceil((self.hi - self.offset) / self.lattice) + 2,
        )
        x = self.offset + k * self.lattice
        p = np.diff(self.cdf(np.concatenate([[x[0] - self.lattice / 2], x + self.lattice / 2])))
        return x, p / p.sum()

    def quantile(self, q: float) -> float:
        """Smallest x with cdf(x) >= q, by bisection between lo and hi."""
        a, b = self.lo, self.hi
        for _ in range(200):
            m = (a + b) / 2
            if float(self.cdf(np.array([m]))[0]) >= q:
                b = m
            else:
                a = m
            if b - a <= max(1e-12, self.lattice / 4):
                break
        return b


def _dl_cdf(a: float) -> Callable[[np.ndarray], np.ndarray]:
    """CDF of P[Z = z] = (1 - a)/(1 + a) a^|z| on the integers."""

    def cdf(x):
        k = np.floor(np.asarray(x, dtype=float))
        with np.errstate(over="ignore"):
            neg = np.power(a, np.maximum(-k, 0.0)) / (1 + a)
            pos = 1.0 - np.power(a, np.maximum(k + 1, 0.0)) / (1 + a)
        return np.where(k < 0, neg, pos)

    return cdf


def discrete_laplace(scale: float | None = None, *, alpha: float | None = None) -> Law:
    """Discrete Laplace, P[Z = z] ~ a^|z|, a = exp(-1/scale) (or a = ``alpha``)."""
    a = math.exp(-1.0 / scale) if alpha is None else float(alpha)
    if not 0 < a < 1:
        raise ValueError(f"discrete Laplace needs 0 < a < 1, got {a}")
    var = 2 * a / (1 - a) ** 2
    kurt = (1 + 10 * a + a * a) / (2 * a) - 3  # E Z^4 / Var^2 - 3 for the two-sided geometric
    reach = math.ceil(40 / -math.log(a)) + 2  # a^reach < e^-40
    return Law(f"DL(a={a:.6g})", _dl_cdf(a), 1.0, -reach, reach, 0.0, (0.0, var, kurt))


def signed_geometric(scale: float | None = None, *, alpha: float | None = None) -> Law:
    """Signed geometric: Z = X or -(X + 1) with probability 1/2 each, P[X = x] = (1 - a) a^x on x >= 0.

    The in-circuit "X XOR sign" noise (a discrete Laplace centred at -1/2):
    P[Z = z] = (1 - a)/2 a^z for z >= 0 and (1 - a)/2 a^(-z-1) for z < 0, so
    P[Z <= k] = 1 - a^(k+1)/2 (k >= 0) and a^(-k-1)/2 (k < 0); E Z = -1/2,
    Var Z = 2 a / (1 - a)^2 + 1/4.  a = exp(-1/scale) (or ``alpha``).
    """
    a = math.exp(-1.0 / scale) if alpha is None else float(alpha)
    if not 0 < a < 1:
        raise ValueError(f"signed geometric needs 0 < a < 1, got {a}")

    def cdf(x):
        k = np.floor(np.asarray(x, dtype=float))
        with np.errstate(over="ignore"):
            neg = np.power(a, np.maximum(-k - 1, 0.0)) / 2
            pos = 1.0 - np.power(a, np.maximum(k + 1, 0.0)) / 2
        return np.where(k < 0, neg, pos)

    reach = math.ceil(40 / -math.log(a)) + 2
    return Law(f"SG(a={a:.6g})", cdf, 1.0, -reach - 1, reach, 0.0)


def kary_rr(values: Sequence[int], true_value: int, epsilon: float) -> Law:
    """k-ary randomized response of ``true_value`` over the consecutive integers ``values`` (k of them).

    P[report = true_value] = e^eps / (e^eps + k - 1), every other value
    1 / (e^eps + k - 1) (Kairouz, Oh, Viswanath 2014; ustats Eq. 9).
    """
    vals = sorted(int(v) for v in values)
    k = len(vals)
    if vals != list(range(vals[0], vals[0] + k)) or true_value not in vals:
        raise ValueError(
            f"k-RR law needs consecutive integer values containing the true value, got {values}, {true_value}"
        )
    e = math.exp(epsilon)
    p = np.full(k, 1.0 / (e + k - 1))
    p[vals.index(true_value)] = e / (e + k - 1)
    law = categorical(p, f"kRR(k={k}, v={true_value}, eps={epsilon:.6g})")
    return law.shift(vals[0]) if vals[0] else law


def laplace(scale: float) -> Law:
    """Continuous Laplace(0, scale)."""
    b = float(scale)
    return Law(
        f"Laplace({b:g})",
        lambda x: stats.laplace.cdf(np.asarray(x, float), scale=b),
        0.0,
        -45 * b,
        45 * b,
        0.0,
        (0.0, 2 * b * b, 3.0),
    )


def categorical(probs: Sequence[float], name: str = "categorical") -> Law:
    """Law on 0..k-1 with the given probabilities."""
    p = np.asarray(probs, dtype=float)
    if abs(p.sum() - 1) > 1e-9 or (p < 0).any():
        raise ValueError(f"probabilities must sum to 1, got {p}")
    c = np.cumsum(p)

    def cdf(x):
        k = np.floor(np.asarray(x, dtype=float))
        idx = np.clip(k, -1, p.size - 1).astype(int)
        return np.where(idx < 0, 0.0, c[np.maximum(idx, 0)])

    return Law(name, cdf, 1.0, -1.0, float(p.size), 0.0)


def from_atoms(values: Sequence[float], probs: Sequence[float], name: str = "atoms") -> Law:
    """A law with finitely many atoms (values need not lie on a lattice)."""
    x = np.asarray(values, dtype=float)
    p = np.asarray(probs, dtype=float)
    order = np.argsort(x)
    x, p = x[order], p[order]
    keep = p > 0
    x, p = x[keep], p[keep] / p[keep].sum()
    c = np.cumsum(p)

    def cdf(t):
        i = np.searchsorted(x, np.asarray(t, dtype=float), side="right")
        return np.where(i == 0, 0.0, c[np.maximum(i - 1, 0)])

    span = max(1.0, float(x[-1] - x[0]))
    return Law(name, cdf, 0.0, float(x[0]) - span, float(x[-1]) + span, 0.0, None, (x, p))


def snapped_laplace(x: float, lam: float, lower: float, upper: float) -> Law:
    """Mironov's snapping mechanism at input x: clamp_B(round_Lambda(clamp_B(x) + Laplace(lam))).

    B = [lower, upper], Lambda the smallest power of two >= lam (Mironov 2012,
    Sec. 5.2); the Laplace draw is modelled exactly (the mechanism's LN(U*) is
    a correctly rounded double, whose deviation is far below any test's
    resolution).  Atoms: the multiples of Lambda inside B, plus the clamped ends.
    """
    Lam = 2.0 ** math.ceil(math.log2(lam))
    xc = min(max(float(x), lower), upper)
    k_lo = math.floor((max(lower, xc - 60 * lam)) / Lam) - 1
    k_hi = math.ceil((min(upper, xc + 60 * lam)) / Lam) + 1
    k = np.arange(k_lo, k_hi + 1)
    v = k * Lam
    F = lambda t: stats.laplace.cdf(t, scale=lam)  # noqa: E731
    p = F(v + Lam / 2 - xc) - F(v - Lam / 2 - xc)
    p[0] += F(v[0] - Lam / 2 - xc)  # everything further out rounds beyond the range and is clamped
    p[-1] += 1.0 - F(v[-1] + Lam / 2 - xc)
    v = np.clip(v, lower, upper)
    uniq, inv = np.unique(v, return_inverse=True)
    return from_atoms(uniq, np.bincount(inv, weights=p), f"snap(x={x:g}, lam={lam:.6g}, [{lower:g}, {upper:g}])")


def bernoulli(p: float) -> Law:
    return categorical([1 - p, p], f"Bernoulli({p:.6g})")


def binomial(n: int, p: float) -> Law:
    sd = math.sqrt(n * p * (1 - p)) + 1
    return Law(
        f"Bin({n}, {p:.6g})",
        lambda x: stats.binom.cdf(np.floor(np.asarray(x, float)), n, p),
        1.0,
        max(-1.0, n * p - 40 * sd),
        min(n + 1.0, n * p + 40 * sd),
        0.0,
    )


def scale_alternatives(make: Callable[[float], object]) -> dict[str, object]:
    """The two alternatives of every test: ``make(2)`` (noise scale x2) and ``make(0.5)`` (x1/2).

    ``make(f)`` builds the closed form with the noise scale multiplied by f
    (for an epsilon-parametrized mechanism: epsilon divided by f).
    """
    return {"scale x2": make(2.0), "scale x1/2": make(0.5)}


# --------------------------------------------------------------------------- goodness of fit
@dataclass
class _Group:
    law: Law
    n: int
    edges: np.ndarray  # interior bin edges (bins: (-inf, e0], (e0, e1], ..., (e_last, inf))
    p0: np.ndarray


def _bin_probs(law: Law, edges: np.ndarray) -> np.ndarray:
    c = np.concatenate([[0.0], law.cdf(edges), [1.0]])
    return np.clip(np.diff(c), 0.0, None)


def _edges(law: Law, n: int, max_bins: int) -> np.ndarray:
    """Interior edges between lattice points at the null's quantiles, merged to expected counts >= 5."""
    bins = int(max(2, min(max_bins, n // 10)))
    raw = [law.quantile(j / bins) for j in range(1, bins)]
    if law.lattice > 0:
        step = law.lattice
        raw = [law.offset + (math.floor((r - law.offset) / step + 1e-9) + 0.5) * step for r in raw]
    edges = np.unique(np.asarray(raw, dtype=float))
    # merge bins whose expected count is below MIN_EXPECTED (drop the edge next to the smallest bin)
    while edges.size:
        p = _bin_probs(law, edges)
        i = int(np.argmin(p))
        if p[i] * n >= MIN_EXPECTED:
            break
        j = i - 1 if i == p.size - 1 or (i > 0 and p[i - 1] < p[i + 1]) else i
        edges = np.delete(edges, j)
    return edges


class GofTest:
    """Pearson chi-square goodness of fit of several groups of i.i.d. samples (module docstring).

    ``groups``: (law, sample size) per group; a group's bins are fixed here,
    from its null law and size, before any sample is drawn.
    """

    def __init__(self, groups: Sequence[tuple[Law, int]], alpha: float = ALPHA, max_bins: int = 24):
        self.alpha = float(alpha)
        self.groups = []
        for law, n in groups:
            e = _edges(law, int(n), max_bins)
            self.groups.append(_Group(law, int(n), e, _bin_probs(law, e)))
        self.df = sum(g.p0.size - 1 for g in self.groups)
        if self.df < 1:
            raise ValueError("the test has no degree of freedom: increase the sample size")
        self.critical = float(stats.chi2.isf(self.alpha, self.df))

    def power(self, alternatives: Sequence[Law]) -> float:
        """Power against the alternative laws (one per group, same order)."""
        lam = 0.0
        for g, alt in zip(self.groups, alternatives, strict=True):
            p1 = _bin_probs(alt, g.edges)
            lam += g.n * float(np.sum((p1 - g.p0) ** 2 / g.p0))
        return float(stats.ncx2.sf(self.critical, self.df, lam))

    def statistic(self, samples: Sequence[np.ndarray]) -> float:
        chi = 0.0
        for g, x in zip(self.groups, samples, strict=True):
            x = np.asarray(x, dtype=float).ravel()
            if x.size != g.n:
                raise AssertionError(f"group {g.law.name}: expected {g.n} samples, got {x.size}")
            obs = np.bincount(np.searchsorted(g.edges, x, side="left"), minlength=g.p0.size)
            exp = g.n * g.p0
            chi += float(np.sum((obs - exp) ** 2 / exp))
        return chi

    def pvalue(self, samples: Sequence[np.ndarray]) -> float:
        return float(stats.chi2.sf(self.statistic(samples), self.df))

    def require_power(self, alternatives: dict[str, Sequence[Law]]) -> dict[str, float]:
        """Assert power >= POWER against every named alternative; return the powers."""
        out = {k: self.power(v) for k, v in alternatives.items()}
        _record(out, self.alpha)
        weak = {k: v for k, v in out.items() if v < POWER}
        assert not weak, f"too few samples: power {weak} < {POWER} at alpha {self.alpha}"
        return out

    def check(self, samples: Sequence[np.ndarray], what: str = "noise") -> float:
        p = self.pvalue(samples)
        _record(None, self.alpha, p)
        assert p > self.alpha, (
            f"{what}: the samples do not follow the closed-form law(s) "
            f"{[g.law.name for g in self.groups]} (chi-square p = {p:.3g} <= alpha {self.alpha}, df {self.df})"
        )
        return p


# --------------------------------------------------------------------------- quadratic forms
def _satterthwaite(mean: float, var: float) -> tuple[float, float]:
    """(c, nu) of the scaled chi-square c chi2(nu) with this mean and variance."""
    c = var / (2 * mean)
    return c, 2 * mean * mean / var


def _law_vector(laws: Law | Sequence[Law], k: int) -> tuple[np.ndarray, ...]:
    """(mean, var, third central moment, fourth central moment) arrays of k noise variables."""
    if isinstance(laws, Law):
        laws = [laws] * k
    if len(laws) != k:
        raise ValueError(f"need {k} laws (one per noise variable), got {len(laws)}")
    cache: dict[int, tuple[float, float, float, float]] = {}
    rows = []
    for law in laws:
        key = id(law)
        if key not in cache:
            cache[key] = law.central_moments()
        rows.append(cache[key])
    return tuple(np.array(c, dtype=float) for c in zip(*rows))


class QuadraticFormTest:
    """Mahalanobis test of e = W eta, eta independent with the null laws (module docstring).

    ``W`` (m x k) maps the k noise variables to the m released values;
    ``null`` is one law for all k variables or one law per variable (they may
    differ in mean and variance, e.g. snapped and clamped node values).  With
    null means mu0 and variances D0, T = (e - W mu0)^T (W D0 W^T)^+ (e - W mu0).
    For any laws of eta (means mu1, variances D1, third and fourth central
    moments m3, m4; delta = mu1 - mu0, A = W^T (W D0 W^T)^+ W):
        E T = tr(A D1) + delta^T A delta,
        Var T = 2 tr(A D1 A D1) + sum_i (m4_i - 3 D1_i^2) A_ii^2
                + 4 delta^T A D1 A delta + 4 sum_i m3_i A_ii (A delta)_i,
    and T is referred to the scaled chi-square with these two moments.
    Stacking independent releases is block-diagonal (:meth:`stack`).
    """

    def __init__(self, W: np.ndarray, null: Law | Sequence[Law], alpha: float = ALPHA):
        W = np.asarray(W, dtype=float)
        self.W = W
        self.alpha = float(alpha)
        self.null = null
        self.mu0, self.v0, _, _ = _law_vector(null, W.shape[1])
        G = (W * self.v0) @ W.T
        self.Ginv = np.linalg.pinv(G, rcond=1e-10, hermitian=True)
        self.A = W.T @ self.Ginv @ W
        self.rank = float(round(float(np.sum(np.diag(self.A) * self.v0))))
        c, nu = self._approx(null)
        self.lo = c * float(stats.chi2.ppf(self.alpha / 2, nu))
        self.hi = c * float(stats.chi2.isf(self.alpha / 2, nu))

    def moments(self, laws: Law | Sequence[Law]) -> tuple[float, float]:
        """(E T, Var T) when eta follows ``laws``."""
        mu, v, m3, m4 = _law_vector(laws, self.W.shape[1])
        A, a = self.A, np.diag(self.A)
        d = mu - self.mu0
        Ad = A @ d
        mean = float(a @ v + d @ Ad)
        var = float(
            2 * v @ (A * A) @ v + np.sum((m4 - 3 * v * v) * a * a) + 4 * Ad @ (v * Ad) + 4 * np.sum(m3 * a * Ad)
        )
        return mean, var

    def _approx(self, laws) -> tuple[float, float]:
        return _satterthwaite(*self.moments(laws))

    def statistic(self, e: np.ndarray) -> float:
        r = np.asarray(e, dtype=float).ravel() - self.W @ self.mu0
        return float(r @ self.Ginv @ r)

    def power(self, alt: Law | Sequence[Law]) -> float:
        c, nu = self._approx(alt)
        return float(stats.chi2.cdf(self.lo / c, nu) + stats.chi2.sf(self.hi / c, nu))

    def pvalue(self, e: np.ndarray) -> float:
        c, nu = self._approx(self.null)
        t = self.statistic(e) / c
        return float(min(1.0, 2 * min(stats.chi2.cdf(t, nu), stats.chi2.sf(t, nu))))

    def require_power(self, alternatives: dict[str, Law | Sequence[Law]]) -> dict[str, float]:
        out = {k: self.power(v) for k, v in alternatives.items()}
        _record(out, self.alpha)
        weak = {k: v for k, v in out.items() if v < POWER}
        assert not weak, f"too few noise variables: power {weak} < {POWER} at alpha {self.alpha}"
        return out

    def check(self, e: np.ndarray, what: str = "noise") -> float:
        p = self.pvalue(e)
        _record(None, self.alpha, p)
        t = self.statistic(e)
        mean, var = self.moments(self.null)
        name = self.null.name if isinstance(self.null, Law) else f"{len(self.null)} closed-form node laws"
        assert p > self.alpha, (
            f"{what}: the released errors are not {name} through the public linear map "
            f"(T = {t:.4g}, expected {mean:.4g} +- {math.sqrt(var):.3g}; p = {p:.3g} <= alpha {self.alpha})"
        )
        return p

    @staticmethod
    def stack(blocks: Sequence[np.ndarray]) -> np.ndarray:
        """Block-diagonal W of independent releases."""
        from scipy.linalg import block_diag

        return block_diag(*[np.asarray(b, dtype=float) for b in blocks])


# --------------------------------------------------------------------------- normal variance test
class NormalVarianceTest:
    """Two-sided test of Var = var0 for R i.i.d. values with known mean (chi-square, or scaled chi-square).

    T = sum (x - mean0)^2 / var0 has mean R and variance R (2 + k) for values
    of excess kurtosis k; it is referred to c chi2(nu) with c = (2 + k)/2,
    nu = 2R/(2 + k) (k = 0: the textbook chi2(R) test for normal values).
    Under an alternative (var1, mean1) the same approximation with
    noncentrality R (mean1 - mean0)^2 / var1 gives the power.
    """

    def __init__(self, reps: int, mean0: float, var0: float, alpha: float = ALPHA, kurtosis: float = 0.0):
        self.reps, self.mean0, self.var0, self.alpha = int(reps), float(mean0), float(var0), float(alpha)
        self.c = (2.0 + kurtosis) / 2.0
        self.nu = self.reps / self.c
        self.lo = float(stats.chi2.ppf(self.alpha / 2, self.nu))
        self.hi = float(stats.chi2.isf(self.alpha / 2, self.nu))

    def power(self, var1: float, mean1: float | None = None) -> float:
        r = var1 / self.var0
        if mean1 is None or mean1 == self.mean0:
            return float(stats.chi2.cdf(self.lo / r, self.nu) + stats.chi2.sf(self.hi / r, self.nu))
        nc = self.nu * (mean1 - self.mean0) ** 2 / var1
        return float(stats.ncx2.cdf(self.lo / r, self.nu, nc) + stats.ncx2.sf(self.hi / r, self.nu, nc))

    def require_power(self, alternatives: dict[str, float | tuple[float, float]]) -> dict[str, float]:
        """Alternatives: a variance, or (variance, mean)."""
        out = {k: self.power(*(v if isinstance(v, tuple) else (v,))) for k, v in alternatives.items()}
        _record(out, self.alpha)
        weak = {k: v for k, v in out.items() if v < POWER}
        assert not weak, f"too few repetitions: power {weak} < {POWER} at alpha {self.alpha}"
        return out

    def check(self, x: np.ndarray, what: str = "estimate") -> float:
        x = np.asarray(x, dtype=float).ravel()
        assert x.size == self.reps
        t = float(np.sum((x - self.mean0) ** 2)) / self.var0
        p = float(min(1.0, 2 * min(stats.chi2.cdf(t / self.c, self.nu), stats.chi2.sf(t / self.c, self.nu))))
        _record(None, self.alpha, p)
        assert p > self.alpha, (
            f"{what}: empirical variance {t * self.var0 / self.reps:.4g} (about the known mean {self.mean0:.4g}) "
            f"vs closed form {self.var0:.4g} (chi-square p = {p:.3g} <= alpha {self.alpha})"
        )
        return p


# --------------------------------------------------------------------------- tree maps
def path_matrix(L: int, thresholds: np.ndarray | None = None) -> np.ndarray:
    """Theorem 3.1 (dp-ecdf Eq. 2): row i sums the L+1 nodes eta_{ceil(i/2^l), l}, l = 0..L.

    Nodes are ordered level by level (level 0 = the 2^L leaves, ..., level L =
    the root); with 0-based threshold index i the level-l node is i >> l.
    Built here from the paper's definition, independently of the library.
    """
    N = 1 << L
    rows = np.arange(N) if thresholds is None else np.asarray(thresholds, dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum([N >> l for l in range(L + 1)])])
    W = np.zeros((rows.size, int(offs[-1])))
    for l in range(L + 1):
        W[np.arange(rows.size), offs[l] + (rows >> l)] = 1.0
    return W
