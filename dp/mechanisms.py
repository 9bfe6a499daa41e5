"""Local and central DP mechanisms that carry their privacy guarantee as data.

What it does
    * :class:`RandomizedResponse` -- binary randomized response (Warner 1965)
      with its unbiased mean estimator;
    * :class:`KaryRandomizedResponse` -- k-ary randomized response of
      [BBGK20, Sec. 3, Algorithm 1 and Eq. 9], beta = k / (k + e^eps - 1),
      with its transition matrix, unbiased frequencies and the unbiased
      U-statistic estimate of Sec. 3;
    * :class:`KRREstimator` -- the one k-RR estimator in exact rationals,
      shared with the in-circuit k-RR of :mod:`pairwise.dp.dyadic`;
    * :class:`OneBitFlip` / :class:`OneBitFlipVector` -- the one-bit
      submission of Ding, Kulkarni and Yekhanin (NeurIPS 2017) as used in
      [OMH22, Sec. 2.1 and Eq. 6-8];
    * :class:`GeometricMechanism` -- integer query + discrete Laplace noise
      (Ghosh, Roughgarden, Sundararajan 2009; [CKS20] sampler);
    * :class:`SnappingLaplaceMechanism` -- Mironov's snapping mechanism
      ([Mir12]), its scale raised so the stated epsilon holds.

    How Eq. 9 is read (as printed it does not sum to one), the estimators'
    formulas and how each coin is drawn exactly: docs/dp.md, "Local and
    central mechanisms".

Exactness and randomness
    ``randomize``/``release`` use exact samplers on the OS CSPRNG; epsilon is
    rounded down to a multiple of 2^-40 (:func:`pairwise.dp.samplers.exact_epsilon`)
    and the estimators use the value actually sampled with.
    (:meth:`OneBitFlip.randomize_array` draws its data coin to within 2^-53;
    privacy holds for any coin.)  ``simulate`` methods take a seeded numpy
    generator and are for experiments only.

Security model
    Local mechanisms protect each user's record against the curator
    (pure epsilon-LDP); :class:`GeometricMechanism` is central epsilon-DP for
    queries whose value changes by at most ``sensitivity`` between neighbouring
    data sets.  Noise is secret and never logged.
"""

from __future__ import annotations

import math
import numbers
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .accounting import PrivacyGuarantee, basic_composition, validate_epsilon
from .errors import EmptyDataError, InvalidDataError, PrivacyParameterError
from .samplers import (
    SNAPPING_ETA,
    _check_rng,
    as_fraction,
    bernoulli_exp_array,
    conservative_scale,
    discrete_laplace_array,
    discrete_laplace_variance,
    exact_epsilon,
    sample_bernoulli_exp,
    sample_bernoulli_rational,
    sample_discrete_laplace,
    simulate_discrete_laplace,
    snapping_epsilon,
    snapping_laplace,
    snapping_laplace_array,
    uniform_int_array,
)
from .validate import check_int, is_int

__all__ = [
    "RandomizedResponse",
    "KaryRandomizedResponse",
    "KRREstimator",
    "OneBitFlip",
    "OneBitFlipVector",
    "GeometricMechanism",
    "SnappingLaplaceMechanism",
]


def _bits(values: object, name: str = "bits") -> np.ndarray:
    arr = np.asarray(values)
    if arr.size == 0:
        raise EmptyDataError(f"{name} is empty")
    if arr.dtype == bool:
        return arr.astype(np.int64).ravel()
    if not np.issubdtype(arr.dtype, np.integer) and not np.issubdtype(arr.dtype, np.floating):
        raise InvalidDataError(f"{name} must be an array of 0/1 values, got dtype {arr.dtype}")
    if not np.all((arr == 0) | (arr == 1)):
        raise InvalidDataError(f"{name} must contain only 0 and 1")
    return arr.astype(np.int64).ravel()


def _one_bit(bit: object) -> int:
    if isinstance(bit, (bool, np.bool_)):
        return int(bit)
    if isinstance(bit, numbers.Integral) and int(bit) in (0, 1):
        return int(bit)
    raise InvalidDataError(f"bit must be 0 or 1, got {bit!r}")


def _change_coin(eps: Fraction) -> int:
    """1 with probability exactly e^-eps / (1 + e^-eps) = 1 / (1 + e^eps)."""
    while True:
        if not secrets.randbits(1):
            return 0
        if sample_bernoulli_exp(eps):
            return 1


def _change_coins(eps: Fraction, n: int) -> np.ndarray:
    """n independent exact coins of probability 1 / (1 + e^eps) (bool array)."""
    out = np.zeros(n, dtype=bool)
    pending = np.arange(n)
    while pending.size:
        propose = uniform_int_array(2, pending.size).astype(bool)
        accept = np.ones(pending.size, dtype=bool)
        idx = np.flatnonzero(propose)
        accept[idx] = bernoulli_exp_array(eps, idx.size).astype(bool)
        out[pending[propose & accept]] = True
        pending = pending[~accept]
    return out


class RandomizedResponse:
    """Binary randomized response: epsilon-LDP for one bit.

    >>> rr = RandomizedResponse(1.0)
    >>> rr.guarantee.epsilon
    1.0
    """

    def __init__(self, epsilon: float) -> None:
        self.epsilon = validate_epsilon(epsilon)
        self.epsilon_exact = exact_epsilon(epsilon)
        self.guarantee = PrivacyGuarantee(self.epsilon)
        e = math.exp(float(self.epsilon_exact))
        #: probability of reporting the opposite bit, 1 / (1 + e^eps')
        self.flip_probability = 1.0 / (1.0 + e)

    def randomize(self, bit: int) -> int:
        """The randomized report of one bit (exact, OS CSPRNG)."""
        b = _one_bit(bit)
        return b ^ _change_coin(self.epsilon_exact)

    def randomize_array(self, bits: np.ndarray) -> np.ndarray:
        """Reports for an array of bits (exact, vectorized, os.urandom)."""
        b = _bits(bits)
        return b ^ _change_coins(self.epsilon_exact, b.size).astype(np.int64)

    def simulate(self, bits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """SIMULATION: reports drawn with a seeded numpy generator (float coins)."""
        b = _bits(bits)
        flips = _check_rng(rng).random(b.size) < self.flip_probability
        return b ^ flips.astype(np.int64)

    def estimate_mean(self, reports: np.ndarray) -> float:
        """Unbiased estimate of the mean of the true bits: (mean(r) - q) / (1 - 2q)."""
        r = _bits(reports, "reports")
        q = self.flip_probability
        return (float(r.mean()) - q) / (1.0 - 2.0 * q)

    def estimate_count(self, reports: np.ndarray) -> float:
        """Unbiased estimate of the number of true ones."""
        r = _bits(reports, "reports")
        return self.estimate_mean(r) * r.size


@dataclass(frozen=True)
class KRREstimator:
    """Unbiased per-report estimate of a k-valued quantity from its k-RR report, and its exact variance.

    The one k-RR estimator: the in-circuit gadgets (:func:`pairwise.dp.dyadic.krr_estimator`,
    phi = m / 2^a) and :class:`KaryRandomizedResponse` (:meth:`~KaryRandomizedResponse.estimator`,
    phi = beta (k - 1)/k) both build it with :meth:`for_krr`.  k-RR keeps the value with
    probability 1 - phi and reports each other value with phi / (k - 1); the report y of a true
    value f has E[y | f] = lam f + mu, lam = 1 - k phi / (k - 1), mu = phi sum(v) / (k - 1),
    so f^ = (y - mu) / lam = ``slope`` y + ``intercept`` is unbiased, and
    Var(f^ | f) = c0 + c1 f + c2 f^2 (``variance_coefficients``) with

        c2 = (1 - lam) / lam,   c1 = -2 mu / lam,   c0 = (phi Q / (k - 1) - mu^2) / lam^2,

    Q = sum(v^2) (derivation: E[y^2 | f] = lam f^2 + phi Q / (k - 1); [BBGK20, Eq. 9
    and Sec. 3]).  The additive mechanisms use the same record (:meth:`additive`) with no
    ``values``, slope 1, intercept -E Z and the constant variance Var Z.  Exact rationals.
    """

    values: tuple[int, ...]
    slope: Fraction
    intercept: Fraction
    variance_coefficients: tuple[Fraction, Fraction, Fraction]

    @classmethod
    def for_krr(cls, k: int, flip_probability: object, values: Sequence[int]) -> KRREstimator:
        """The estimator of k-RR with flip probability phi in [0, (k - 1)/k) for k distinct integer values."""
        k = check_int(k, "k", lo=2, error=PrivacyParameterError)
        phi = as_fraction(flip_probability, "flip_probability")
        if not 0 <= phi < Fraction(k - 1, k):
            raise PrivacyParameterError(
                f"flip_probability must lie in [0, (k-1)/k) = [0, {k - 1}/{k}), got {flip_probability!r}"
            )
        vals = tuple(values)
        if not all(is_int(v) for v in vals):
            raise InvalidDataError(f"k-RR values must be integers, got {values!r}")
        vals = tuple(int(v) for v in vals)
        if len(vals) != k or len(set(vals)) != k:
            raise InvalidDataError(f"k-RR with k={k} needs {k} distinct values, got {values!r}")
        lam = 1 - k * phi / (k - 1)
        mu = phi * sum(vals) / (k - 1)
        q = Fraction(sum(v * v for v in vals))
        coeffs = ((phi * q / (k - 1) - mu * mu) / (lam * lam), -2 * mu / lam, (1 - lam) / lam)
        return cls(vals, 1 / lam, -mu / lam, coeffs)

    @classmethod
    def additive(cls, mean: object, variance: object) -> KRREstimator:
        """The record of additive noise with mean E Z and variance Var Z: out - E Z, variance constant."""
        return cls(
            (), Fraction(1), -as_fraction(mean, "mean"), (as_fraction(variance, "variance"), Fraction(0), Fraction(0))
        )

    def variance(self, f: Fraction | int) -> Fraction:
        c0, c1, c2 = self.variance_coefficients
        f = Fraction(f)
        return c0 + c1 * f + c2 * f * f

    @property
    def max_variance(self) -> Fraction:
        if not self.values:
            return self.variance_coefficients[0]  # additive noise: constant variance
        return max(self.variance(v) for v in self.values)


class KaryRandomizedResponse:
    """k-ary randomized response with beta = k / (k + e^eps - 1) ([BBGK20, Eq. 9])."""

    def __init__(self, k: int, epsilon: float) -> None:
        self.k = check_int(k, "k", lo=2, error=PrivacyParameterError)
        self.epsilon = validate_epsilon(epsilon)
        self.epsilon_exact = exact_epsilon(epsilon)
        self.guarantee = PrivacyGuarantee(self.epsilon)
        e = math.exp(float(self.epsilon_exact))
        #: probability of replacing the value by a uniform draw from [k]
        self.beta = self.k / (self.k + e - 1.0)
        self.keep_probability = 1.0 - self.beta + self.beta / self.k

    # -- sampling ---------------------------------------------------------
    def _values(self, values: object) -> np.ndarray:
        arr = np.asarray(values)
        if arr.size == 0:
            raise EmptyDataError("values is empty")
        if not np.issubdtype(arr.dtype, np.integer):
            raise InvalidDataError(f"values must be integers in [0, {self.k}), got dtype {arr.dtype}")
        if arr.min() < 0 or arr.max() >= self.k:
            raise InvalidDataError(f"values must lie in [0, {self.k})")
        return arr.astype(np.int64).ravel()

    def randomize(self, v: int) -> int:
        """The report for one value v in [0, k) (exact, OS CSPRNG).

        Rejection: draw j uniform in [k]; return it if j == v, else accept it
        with probability e^-eps'.  Hence P[v] ~ 1 and P[j] ~ e^-eps' for each
        j != v, i.e. P[v] = e^eps'/(e^eps' + k - 1) = 1 - beta + beta/k.
        """
        v = check_int(v, "value", lo=0, hi=self.k - 1, error=InvalidDataError)
        while True:
            j = secrets.randbelow(self.k)
            if j == v or sample_bernoulli_exp(self.epsilon_exact):
                return j

    def randomize_array(self, values: np.ndarray) -> np.ndarray:
        """Reports for an array of values (exact, vectorized, os.urandom)."""
        vals = self._values(values)
        out = np.empty_like(vals)
        pending = np.arange(vals.size)
        while pending.size:
            j = uniform_int_array(self.k, pending.size)
            accept = j == vals[pending]
            other = np.flatnonzero(~accept)
            accept[other] = bernoulli_exp_array(self.epsilon_exact, other.size).astype(bool)
            out[pending[accept]] = j[accept]
            pending = pending[~accept]
        return out

    def simulate(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """SIMULATION: keep with probability 1 - beta, else a uniform value (seeded numpy)."""
        vals = self._values(values)
        g = _check_rng(rng)
        keep = g.random(vals.size) >= self.beta
        return np.where(keep, vals, g.integers(0, self.k, vals.size))

    # -- unbiasing --------------------------------------------------------
    @property
    def transition_matrix(self) -> np.ndarray:
        """P[i, j] = P[report j | value i] = (1 - beta) [i == j] + beta / k."""
        return (1.0 - self.beta) * np.eye(self.k) + self.beta / self.k

    @property
    def inverse_transition_matrix(self) -> np.ndarray:
        """P^-1 = (I - (beta/k) J) / (1 - beta); report frequencies times it are unbiased."""
        return (np.eye(self.k) - self.beta / self.k) / (1.0 - self.beta)

    def estimator(self, values: Sequence[int] | None = None) -> KRREstimator:
        """The exact debiasing of one report whose k values are ``values`` (default 0..k-1).

        Another value j != v is reported with probability beta/k each, so this is k-RR with
        flip probability phi = beta (k - 1)/k (``beta`` taken exactly as the double it is):
        slope (1 - beta)^-1 and intercept -(beta/k) sum(values) / (1 - beta), the scalar form
        of :meth:`debiased_onehot` (the same estimator on one-hot values, in float64).
        """
        phi = Fraction(self.beta) * (self.k - 1) / self.k
        return KRREstimator.for_krr(self.k, phi, range(self.k) if values is None else values)

    def report_counts(self, reports: np.ndarray) -> np.ndarray:
        """Histogram of the reports over [k]."""
        return np.bincount(self._values(reports), minlength=self.k)

    def estimate_frequencies(self, reports: np.ndarray) -> np.ndarray:
        """Unbiased estimate of the true value frequencies: (counts/n - beta/k) / (1 - beta)."""
        counts = self.report_counts(reports)
        return (counts / counts.sum() - self.beta / self.k) / (1.0 - self.beta)

    def estimate_counts(self, reports: np.ndarray) -> np.ndarray:
        """Unbiased estimate of the true value counts."""
        counts = self.report_counts(reports)
        n = counts.sum()
        return (counts - n * self.beta / self.k) / (1.0 - self.beta)

    def debiased_onehot(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimate of the one-hot true value: (e_R - b) / (1 - beta)."""
        r = self._values(reports)
        out = np.full((r.size, self.k), -self.beta / self.k)
        out[np.arange(r.size), r] += 1.0
        return out / (1.0 - self.beta)

    def estimate_ustatistic(self, reports: np.ndarray, kernel: np.ndarray) -> float:
        """Unbiased estimate of U = (n choose 2)^-1 sum_{i<j} A[x_i, x_j] ([BBGK20, Sec. 3]).

        ``kernel`` is the symmetric k x k matrix A[i, j] = f(i, j).  The estimate
        is the U-statistic with kernel (1 - beta)^-2 (e_Ri - b)^T A (e_Rj - b),
        computed in O(k^2) from the report histogram.
        """
        a = np.asarray(kernel, dtype=float)
        if a.shape != (self.k, self.k):
            raise InvalidDataError(f"kernel must be a {self.k}x{self.k} matrix, got shape {a.shape}")
        if not np.allclose(a, a.T):
            raise InvalidDataError("kernel matrix must be symmetric")
        counts = self.report_counts(reports).astype(float)
        n = counts.sum()
        if n < 2:
            raise EmptyDataError("a U-statistic of order 2 needs at least 2 reports")
        b = np.full(self.k, self.beta / self.k)
        total = counts - n * b  # sum over reports of (e_R - b)
        centered = np.eye(self.k) - b  # row r: e_r - b
        diag = np.einsum("ri,ij,rj->r", centered, a, centered)
        pair_sum = 0.5 * (total @ a @ total - counts @ diag)
        return float(pair_sum / (n * (n - 1) / 2) / (1.0 - self.beta) ** 2)


class OneBitFlip:
    """Truncation to [lower, upper] then the one-bit flip ([OMH22, Eq. 6-7])."""

    def __init__(self, epsilon: float, lower: float, upper: float) -> None:
        self.epsilon = validate_epsilon(epsilon)
        self.epsilon_exact = exact_epsilon(epsilon)
        self.guarantee = PrivacyGuarantee(self.epsilon)
        lo, hi = float(lower), float(upper)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise PrivacyParameterError(f"need finite lower < upper, got [{lower!r}, {upper!r}]")
        self.lower, self.upper = lo, hi
        e = math.exp(float(self.epsilon_exact))
        self._e = e

    def _values(self, y: object) -> np.ndarray:
        arr = np.asarray(y, dtype=float).ravel()
        if arr.size == 0:
            raise EmptyDataError("values is empty")
        if np.isnan(arr).any():
            raise InvalidDataError("values contain NaN")
        return arr

    def truncate(self, y: np.ndarray | float) -> np.ndarray:
        """Eq. 6: y~ = lower if y < lower, upper if y > upper, y otherwise."""
        return np.clip(np.asarray(y, dtype=float), self.lower, self.upper)

    def prob_one(self, y_truncated: np.ndarray | float) -> np.ndarray:
        """Eq. 7: P[z = 1 | y~] = 1/(e^eps+1) + (y~ - a)/(b - a) (e^eps - 1)/(e^eps + 1)."""
        w = (np.asarray(y_truncated, dtype=float) - self.lower) / (self.upper - self.lower)
        return (1.0 + w * (self._e - 1.0)) / (self._e + 1.0)

    def randomize(self, y: float) -> int:
        """One bit for the record y (exact, OS CSPRNG).

        w = (y~ - a)/(b - a) is an exact rational (y~ is a double); z is binary
        randomized response applied to a Bernoulli(w) bit, which gives Eq. 7.
        """
        yt = float(self.truncate(float(y)))
        if math.isnan(yt):
            raise InvalidDataError("value is NaN")
        w = (Fraction(yt) - Fraction(self.lower)) / (Fraction(self.upper) - Fraction(self.lower))
        bit = sample_bernoulli_rational(w.numerator, w.denominator)
        return bit ^ _change_coin(self.epsilon_exact)

    def randomize_array(self, y: np.ndarray) -> np.ndarray:
        """Bits for an array of records (vectorized, os.urandom).

        The e^eps coin is exact.  The Bernoulli(w) data coin compares a uniform
        53-bit integer with w 2^53, i.e. has probability ceil(w 2^53)/2^53,
        within 2^-53 of w (the rounding of w to a double is of the same size).
        Privacy does not depend on w: every w in [0, 1] gives
        P[z = 1] in [1/(e^eps + 1), e^eps/(e^eps + 1)].
        """
        vals = self.truncate(self._values(y))
        w = np.clip((vals - self.lower) / (self.upper - self.lower), 0.0, 1.0)
        r = (np.frombuffer(os.urandom(8 * vals.size), dtype=np.uint64) >> np.uint64(11)).astype(np.float64)
        bits = (r < w * 2.0**53).astype(np.int64)
        return bits ^ _change_coins(self.epsilon_exact, vals.size).astype(np.int64)

    def simulate(self, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """SIMULATION: bits drawn with a seeded numpy generator."""
        p = self.prob_one(self.truncate(self._values(y)))
        return (_check_rng(rng).random(p.size) < p).astype(np.int64)

    def debias(self, reports: np.ndarray) -> np.ndarray:
        """Per-report unbiased estimate of y~: a + (b - a)((e^eps + 1) z - 1)/(e^eps - 1)."""
        z = _bits(reports, "reports").astype(float)
        return self.lower + (self.upper - self.lower) * ((self._e + 1.0) * z - 1.0) / (self._e - 1.0)

    def estimate_mean(self, reports: np.ndarray) -> float:
        """Unbiased estimate of the mean of the truncated records (Ding et al. 2017)."""
        return float(self.debias(reports).mean())

    def log_likelihood(self, reports: np.ndarray, expected_truncated: np.ndarray) -> float:
        """Log-likelihood of the bits given model values E[y~ | x] (the QMLE objective).

        P[z = 1 | x] = prob_one(E[y~ | x]) because Eq. 7 is affine in y~.
        """
        z = _bits(reports, "reports").astype(float)
        mu = np.asarray(expected_truncated, dtype=float).ravel()
        if mu.shape != z.shape:
            raise InvalidDataError(f"expected_truncated has shape {mu.shape}, reports {z.shape}")
        p = self.prob_one(np.clip(mu, self.lower, self.upper))
        return float(np.sum(z * np.log(p) + (1.0 - z) * np.log1p(-p)))


class OneBitFlipVector:
    """Eq. 8: component-wise one-bit flips of a d-dimensional record.

    Component j uses budget epsilons[j] on [lowers[j], uppers[j]]; by basic
    composition the record is (sum epsilons)-LDP.
    """

    def __init__(self, epsilons: Sequence[float], lowers: Sequence[float], uppers: Sequence[float]):
        if not (len(epsilons) == len(lowers) == len(uppers)) or len(epsilons) == 0:
            raise PrivacyParameterError("epsilons, lowers and uppers must be non-empty and of equal length")
        self.components = [OneBitFlip(e, lo, hi) for e, lo, hi in zip(epsilons, lowers, uppers)]
        self.guarantee = basic_composition(c.guarantee for c in self.components)

    @classmethod
    def even_split(cls, epsilon: float, lowers: Sequence[float], uppers: Sequence[float]):
        """Budget epsilon split evenly over the components."""
        eps = validate_epsilon(epsilon)
        d = len(lowers)
        if d == 0:
            raise PrivacyParameterError("need at least one component")
        share = math.nextafter(eps / d, 0.0)  # round down so the sum stays <= epsilon
        return cls([share] * d, lowers, uppers)

    def _matrix(self, x: object) -> np.ndarray:
        arr = np.asarray(x, dtype=float)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] != len(self.components):
            raise InvalidDataError(f"records must have {len(self.components)} columns, got shape {arr.shape}")
        if arr.shape[0] == 0:
            raise EmptyDataError("no records")
        return arr

    def randomize_array(self, x: np.ndarray) -> np.ndarray:
        """Bits (n x d) for records x (n x d), exact."""
        arr = self._matrix(x)
        return np.stack([c.randomize_array(arr[:, j]) for j, c in enumerate(self.components)], axis=1)

    def simulate(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """SIMULATION: bits (n x d) with a seeded numpy generator."""
        arr = self._matrix(x)
        return np.stack([c.simulate(arr[:, j], rng) for j, c in enumerate(self.components)], axis=1)

    def estimate_mean(self, reports: np.ndarray) -> np.ndarray:
        """Unbiased per-component means of the truncated records."""
        z = np.asarray(reports)
        return np.array([c.estimate_mean(z[:, j]) for j, c in enumerate(self.components)])


class GeometricMechanism:
    """Integer query + discrete Laplace noise of scale >= sensitivity / epsilon (epsilon-DP)."""

    def __init__(self, epsilon: float, sensitivity: int = 1) -> None:
        self.epsilon = validate_epsilon(epsilon)
        self.sensitivity = check_int(sensitivity, "sensitivity", lo=1, error=PrivacyParameterError)
        #: exact noise scale: the smallest multiple of 2^-20 >= sensitivity/epsilon
        self.scale: Fraction = conservative_scale(self.sensitivity, self.epsilon)
        self.guarantee = PrivacyGuarantee(self.epsilon)

    @property
    def variance(self) -> float:
        """Variance of the noise, 2a/(1-a)^2 with a = exp(-1/scale)."""
        return discrete_laplace_variance(self.scale)

    @staticmethod
    def _ints(values: object) -> np.ndarray:
        arr = np.asarray(values)
        if arr.size == 0:
            raise EmptyDataError("values is empty")
        if not np.issubdtype(arr.dtype, np.integer):
            raise InvalidDataError(f"the geometric mechanism releases integers, got dtype {arr.dtype}")
        return arr.astype(np.int64)

    def release(self, value: int) -> int:
        """value + discrete Laplace noise (exact, OS CSPRNG)."""
        return check_int(value, "value", error=InvalidDataError) + sample_discrete_laplace(self.scale)

    def release_array(self, values: np.ndarray) -> np.ndarray:
        """values + independent discrete Laplace noise (exact, vectorized, os.urandom)."""
        arr = self._ints(values)
        return arr + discrete_laplace_array(self.scale, arr.size).reshape(arr.shape)

    def simulate(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """SIMULATION: values + float-sampled discrete Laplace noise (seeded numpy)."""
        arr = self._ints(values)
        return arr + simulate_discrete_laplace(self.scale, arr.shape, rng)


class SnappingLaplaceMechanism:
    """Real-valued query through Mironov's snapping mechanism, epsilon-DP overall.

    The query must take values in [lower, upper] (outside values are clamped) and
    change by at most ``sensitivity`` between neighbours.  The noise scale is the
    smallest that makes :func:`pairwise.dp.samplers.snapping_epsilon` <= epsilon.
    """

    def __init__(self, epsilon: float, sensitivity: float, lower: float, upper: float) -> None:
        self.epsilon = validate_epsilon(epsilon)
        sens = float(sensitivity)
        if not (math.isfinite(sens) and sens > 0):
            raise PrivacyParameterError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
        self.sensitivity, self.lower, self.upper = sens, float(lower), float(upper)
        if not self.lower < self.upper:
            raise PrivacyParameterError(f"need lower < upper, got [{lower!r}, {upper!r}]")
        half = (self.upper - self.lower) / 2.0 / sens
        eta = SNAPPING_ETA
        if self.epsilon <= 2 * eta:
            raise PrivacyParameterError(f"epsilon={epsilon!r} is too small for the snapping mechanism")
        lam = (1.0 + 12.0 * half * eta) / (self.epsilon - 2.0 * eta)
        scale = lam * sens
        for _ in range(64):  # absorb float rounding in the formula above
            if snapping_epsilon(scale, self.lower, self.upper, sens) <= self.epsilon:
                break
            scale = math.nextafter(scale, math.inf) * (1 + 1e-15)
        self.scale = scale
        self.guarantee = PrivacyGuarantee(snapping_epsilon(scale, self.lower, self.upper, sens))

    def release(self, value: float) -> float:
        """Snapped Laplace release of one value (OS CSPRNG)."""
        return snapping_laplace(value, self.scale, self.lower, self.upper, self.sensitivity)

    def release_array(self, values: np.ndarray) -> np.ndarray:
        """Snapped Laplace release of every entry (vectorized)."""
        return snapping_laplace_array(values, self.scale, self.lower, self.upper, self.sensitivity)
