"""Shuffled-model binary sums and histograms ([BC20]).

What it does
    :class:`BinarySumProtocol` is P^flip of [BC20, Figure 1] (each user sends
    x + z one-bit messages, z ~ Bernoulli(p); (eps, delta)-DP by Theorem 3.1),
    :class:`HistogramProtocol` is P^hist of [BC20, Figure 2] (P^flip with
    (eps/2, delta/2) on each one-hot coordinate; simultaneous error
    independent of d, Theorem 3.2), :func:`shuffle` is the trusted shuffler
    (a CSPRNG permutation) and :func:`krr_histogram` the local-model
    baseline.  Parameters are checked (eps <= 1, n >= 100 ln(2/delta)/eps^2
    for sums, n >= 400 ln(4/delta)/eps^2 for histograms; our reconstruction
    of constants the paper's text lost), p is rounded so that z is drawn
    exactly, and the error bounds follow Theorems 3.1-3.2.  The
    constraints, error bounds and the exact sampling argument: docs/ldp.md,
    "Shuffled-model binary sums and histograms".

Security model
    Shuffled model: users trust the shuffler to hide which user sent which
    message, and the analyzer sees only the shuffled multiset. Users'
    noise bits and the shuffler's permutation come from the OS CSPRNG
    (:mod:`pairwise.dp.samplers`, :func:`os.urandom`). Functions named
    ``simulate_*`` and ``run_experiment_*`` use seeded generators and are
    for experiments only (:func:`simulate_label_counts` samples the
    analyzer's view directly, with the same distribution).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from pairwise.dp.accounting import PrivacyGuarantee
from pairwise.dp.errors import PrivacyParameterError
from pairwise.dp.mechanisms import KaryRandomizedResponse
from pairwise.dp.samplers import bernoulli_rational_array

from .errors import LDPDataError, LDPParameterError, ReportError

__all__ = [
    "secure_permutation",
    "shuffle",
    "simulate_shuffle",
    "BinarySumProtocol",
    "HistogramProtocol",
    "HistogramResult",
    "shuffled_histogram",
    "simulate_shuffled_histogram",
    "simulate_label_counts",
    "krr_histogram",
    "simulate_krr_histogram",
    "run_experiment_histogram_domain",
]

_P_DENOMINATOR = 1 << 32


def secure_permutation(n: int) -> np.ndarray:
    """A uniformly random permutation of range(n) from the OS CSPRNG.

    Sorts 64-bit random keys from :func:`os.urandom`. If two keys collide
    (probability below n^2 / 2^65), all keys are redrawn. The sorting
    order of distinct i.i.d. keys is exactly uniform, and so is the result.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise LDPParameterError(f"permutation size must be a non-negative integer, got {n!r}")
    n = int(n)
    while True:
        keys = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        order = np.argsort(keys)
        k = keys[order]
        if n < 2 or not np.any(k[1:] == k[:-1]):
            return order.astype(np.int64)


def shuffle(messages: np.ndarray) -> np.ndarray:
    """The shuffler: a uniformly random permutation of all messages (OS CSPRNG)."""
    m = np.asarray(messages)
    return m[secure_permutation(m.shape[0])]


def simulate_shuffle(messages: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Simulation only: shuffle with a seeded generator."""
    m = np.asarray(messages)
    return m[rng.permutation(m.shape[0])]


def _check_eps_delta(epsilon: float, delta: float, what: str) -> tuple[float, float]:
    for name, v in (("epsilon", epsilon), ("delta", delta)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not math.isfinite(v):
            raise PrivacyParameterError(f"{what}: {name} must be a finite real number, got {v!r}")
    if not 0.0 < epsilon <= 1.0:
        raise PrivacyParameterError(f"{what} needs 0 < epsilon <= 1 (Theorem 3.1), got epsilon={epsilon!r}")
    if not 0.0 < delta < 1.0:
        raise PrivacyParameterError(f"{what} needs 0 < delta < 1, got delta={delta!r}")
    return float(epsilon), float(delta)


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise PrivacyParameterError(f"the number of users n must be an integer >= 1, got {n!r}")
    return int(n)


class BinarySumProtocol:
    """P^flip_{eps,delta} of Figure 1: normalized binary sums in the shuffled model."""

    def __init__(self, epsilon: float, delta: float, n: int):
        self.epsilon, self.delta = _check_eps_delta(epsilon, delta, "shuffled binary sum")
        self.n = _check_n(n)
        need = 100.0 * math.log(2.0 / self.delta) / self.epsilon**2
        if self.n < need:
            raise PrivacyParameterError(
                f"shuffled binary sum with epsilon={self.epsilon}, delta={self.delta} needs "
                f"n >= 100 ln(2/delta)/epsilon^2 = {math.ceil(need)} users (Theorem 3.1); got n={self.n}"
            )
        q = 50.0 * math.log(2.0 / self.delta) / (self.epsilon**2 * self.n)  # 1 - p (<= 1/2)
        self._q_num = min(_P_DENOMINATOR // 2, math.ceil(q * _P_DENOMINATOR))
        self.q = self._q_num / _P_DENOMINATOR  # 1 - p', rounded up (see module docstring)
        self.p = 1.0 - self.q

    @property
    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee(self.epsilon, self.delta)

    # ----- randomizer R^flip
    def noise_bits(self, size: int) -> np.ndarray:
        """z ~ Bernoulli(p') for ``size`` users, exactly, from the OS CSPRNG."""
        return bernoulli_rational_array(_P_DENOMINATOR - self._q_num, _P_DENOMINATOR, size).astype(np.int64)

    def simulate_noise_bits(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Simulation only: z ~ Bernoulli(p') from a seeded generator."""
        return (rng.random(size) >= self.q).astype(np.int64)

    def randomize(self, x: int) -> np.ndarray:
        """R^flip(x): a vector of x + z one-bit messages, all equal to 1 (OS CSPRNG)."""
        if x not in (0, 1):
            raise LDPDataError(f"a binary-sum input must be 0 or 1, got {x!r}")
        z = int(self.noise_bits(1)[0])
        return np.ones(int(x) + z, dtype=np.uint8)

    def randomize_all(self, bits: np.ndarray) -> np.ndarray:
        """Concatenated messages of all users, in user order (input to the shuffler)."""
        x = self._check_bits(bits)
        return np.ones(int(x.sum() + self.noise_bits(x.size).sum()), dtype=np.uint8)

    def _check_bits(self, bits: np.ndarray) -> np.ndarray:
        x = np.asarray(bits)
        if x.ndim != 1 or x.size != self.n:
            raise LDPDataError(f"expected {self.n} input bits, got shape {x.shape}")
        if not np.isin(x, (0, 1)).all():
            raise LDPDataError("binary-sum inputs must be 0 or 1")
        return x.astype(np.int64)

    # ----- analyzer A^flip
    def analyze_count(self, messages: int) -> float:
        """A^flip from the number of messages: c* = m/n - p; output c* if c* > 1 - p, else 0."""
        c_star = messages / self.n - self.p
        return float(c_star) if c_star > self.q else 0.0

    def analyze(self, messages: np.ndarray) -> float:
        """A^flip on the shuffled messages (each must be the bit 1)."""
        m = np.asarray(messages)
        if m.size and not np.all(m == 1):
            raise ReportError("binary-sum messages must all be 1")
        return self.analyze_count(int(m.size))

    # ----- Theorem 3.1 ii
    def error_bound(self, beta: float) -> float:
        """alpha with |output - mean(x)| <= alpha with probability >= 1 - beta."""
        if not 0.0 < beta < 1.0:
            raise LDPParameterError(f"failure probability beta must lie in (0, 1), got {beta!r}")
        mu = self.n * self.q
        L = math.log(2.0 / beta)
        t = math.sqrt(3.0 * mu * L) if 3.0 * L <= mu else 3.0 * L
        return (mu + t) / self.n


@dataclass
class HistogramResult:
    """Outcome of one shuffled or local histogram run (normalized frequencies)."""

    estimate: np.ndarray
    exact: np.ndarray
    n: int
    d: int
    epsilon: float
    delta: float
    messages: int
    #: The unthresholded frequencies c*_j = messages_j / n - p (unbiased, can leave [0, 1]); ``estimate`` is
    #: the analyzer A^hist, which reports c*_j <= q as 0 (Figure 2). None where the run does not compute it.
    raw: np.ndarray | None = None

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.estimate - self.exact)))


class HistogramProtocol:
    """P^hist_{eps,delta} of Figure 2: one P^flip_{eps/2,delta/2} per bin, one shuffle."""

    def __init__(self, epsilon: float, delta: float, n: int, d: int):
        eps, dlt = _check_eps_delta(epsilon, delta, "shuffled histogram")
        n = _check_n(n)
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise LDPParameterError(f"the domain size d must be an integer >= 1, got {d!r}")
        need = 400.0 * math.log(4.0 / dlt) / eps**2
        if n < need:
            raise PrivacyParameterError(
                f"shuffled histogram with epsilon={eps}, delta={dlt} needs "
                f"n >= 400 ln(4/delta)/epsilon^2 = {math.ceil(need)} users (Theorem 3.2); got n={n}"
            )
        self.epsilon, self.delta, self.n, self.d = eps, dlt, n, int(d)
        self.inner = BinarySumProtocol(eps / 2.0, dlt / 2.0, n)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee(self.epsilon, self.delta)

    def _check_values(self, values: np.ndarray) -> np.ndarray:
        v = np.asarray(values)
        if v.ndim != 1 or v.size != self.n:
            raise LDPDataError(f"expected {self.n} values, got shape {v.shape}")
        if not np.issubdtype(v.dtype, np.integer):
            if not np.all(np.floor(v) == v):
                raise LDPDataError("histogram values must be integers in [0, d)")
            v = v.astype(np.int64)
        if v.size and (v.min() < 0 or v.max() >= self.d):
            i = int(np.flatnonzero((v < 0) | (v >= self.d))[0])
            raise LDPDataError(f"value {int(v[i])} of user {i + 1} is outside the domain [0, {self.d})")
        return v.astype(np.int64)

    def randomize(self, x: int) -> np.ndarray:
        """R^hist(x): for each bin j, (x == j) + z_j messages labelled j (OS CSPRNG)."""
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= x < self.d:
            raise LDPDataError(f"value must be an integer in [0, {self.d}), got {x!r}")
        z = self.inner.noise_bits(self.d)
        counts = z.copy()
        counts[int(x)] += 1
        return np.repeat(np.arange(self.d, dtype=np.int64), counts)

    def randomize_all(self, values: np.ndarray) -> np.ndarray:
        """All users' message vectors concatenated in user order (OS CSPRNG)."""
        return self._messages(self._check_values(values), None)

    def simulate_randomize_all(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Simulation only: :meth:`randomize_all` with a seeded generator."""
        return self._messages(self._check_values(values), rng)

    def _messages(self, v: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
        # Users in blocks, so memory stays bounded for large n*d.
        parts = []
        block = max(1, (1 << 22) // self.d)
        labels = np.arange(self.d, dtype=np.int64)
        for s in range(0, self.n, block):
            vb = v[s : s + block]
            m = vb.size * self.d
            z = self.inner.noise_bits(m) if rng is None else self.inner.simulate_noise_bits(m, rng)
            z = z.reshape(vb.size, self.d)
            z[np.arange(vb.size), vb] += 1
            parts.append(np.repeat(np.tile(labels, vb.size), z.reshape(-1)))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def raw_frequencies(self, counts: np.ndarray) -> np.ndarray:
        """c*_j = counts_j / n - p: unbiased for the true frequencies (each label gets Bin(n, p) noise
        messages), before A^hist's threshold; can be negative or above 1."""
        return np.asarray(counts, dtype=np.float64) / self.n - self.inner.p

    def analyze_counts(self, counts: np.ndarray) -> np.ndarray:
        """A^hist from the number of messages per label."""
        c_star = self.raw_frequencies(counts)
        return np.where(c_star > self.inner.q, c_star, 0.0)

    def label_counts(self, messages: np.ndarray) -> np.ndarray:
        """The number of shuffled messages with each label (the analyzer's whole view)."""
        m = np.asarray(messages)
        if m.size and (m.min() < 0 or m.max() >= self.d):
            raise ReportError(f"message labels must lie in [0, {self.d})")
        return np.bincount(m.astype(np.int64), minlength=self.d)

    def analyze(self, messages: np.ndarray) -> np.ndarray:
        """A^hist on the shuffled labels: one A^flip per label."""
        return self.analyze_counts(self.label_counts(messages))

    def per_query_error_bound(self, beta: float) -> float:
        """Theorem 3.2 ii: per-bin error bound at failure probability beta."""
        return self.inner.error_bound(beta)

    def simultaneous_error_bound(self, beta: float) -> float:
        """Theorem 3.2 iii: max-error bound, union over the <= min(n, d) non-empty bins."""
        if not 0.0 < beta < 1.0:
            raise LDPParameterError(f"failure probability beta must lie in (0, 1), got {beta!r}")
        return self.inner.error_bound(beta / min(self.n, self.d))


def _exact_hist(v: np.ndarray, d: int) -> np.ndarray:
    return np.bincount(v, minlength=d).astype(np.float64) / v.size


def shuffled_histogram(values: np.ndarray, d: int, epsilon: float, delta: float) -> HistogramResult:
    """Run P^hist end to end: randomizers, CSPRNG shuffler, analyzer."""
    proto = HistogramProtocol(epsilon, delta, int(np.asarray(values).size), d)
    v = proto._check_values(values)
    shuffled = shuffle(proto.randomize_all(v))
    counts = proto.label_counts(shuffled)
    return HistogramResult(
        proto.analyze_counts(counts),
        _exact_hist(v, d),
        proto.n,
        d,
        epsilon,
        delta,
        int(shuffled.size),
        raw=proto.raw_frequencies(counts),
    )


def simulate_shuffled_histogram(
    values: np.ndarray, d: int, epsilon: float, delta: float, rng: np.random.Generator
) -> HistogramResult:
    """Simulation only: P^hist with materialized messages and a seeded shuffle."""
    proto = HistogramProtocol(epsilon, delta, int(np.asarray(values).size), d)
    v = proto._check_values(values)
    shuffled = simulate_shuffle(proto.simulate_randomize_all(v, rng), rng)
    counts = proto.label_counts(shuffled)
    return HistogramResult(
        proto.analyze_counts(counts),
        _exact_hist(v, d),
        proto.n,
        d,
        epsilon,
        delta,
        int(shuffled.size),
        raw=proto.raw_frequencies(counts),
    )


def simulate_label_counts(
    values: np.ndarray, d: int, epsilon: float, delta: float, rng: np.random.Generator
) -> HistogramResult:
    """Simulation only: the analyzer's view sampled directly.

    The shuffled output of P^hist is determined, as a multiset, by the
    number of messages with each label j. That number is count_j +
    Bin(n, p'), independently across labels. This function samples those
    counts instead of materializing n*d messages. The distribution of the
    analyzer's view is the same.
    """
    proto = HistogramProtocol(epsilon, delta, int(np.asarray(values).size), d)
    v = proto._check_values(values)
    true = np.bincount(v, minlength=d)
    counts = true + rng.binomial(proto.n, proto.inner.p, size=d)
    return HistogramResult(
        proto.analyze_counts(counts),
        true / proto.n,
        proto.n,
        d,
        epsilon,
        delta,
        int(counts.sum()),
        raw=proto.raw_frequencies(counts),
    )


def _krr_frequencies(mech: KaryRandomizedResponse, reports: np.ndarray, d: int, n: int) -> np.ndarray:
    est = np.asarray(mech.estimate_frequencies(reports), dtype=np.float64)
    if est.shape != (d,):
        raise RuntimeError(f"k-RR frequency estimate has shape {est.shape}, expected ({d},)")
    return est


def krr_histogram(values: np.ndarray, d: int, epsilon: float) -> HistogramResult:
    """Local-model baseline: k-ary randomized response, unbiased frequencies (OS CSPRNG)."""
    v = np.asarray(values, dtype=np.int64)
    mech = KaryRandomizedResponse(d, epsilon)
    reports = mech.randomize_array(v)
    return HistogramResult(
        _krr_frequencies(mech, reports, d, v.size), _exact_hist(v, d), v.size, d, epsilon, 0.0, v.size
    )


def simulate_krr_histogram(values: np.ndarray, d: int, epsilon: float, rng: np.random.Generator) -> HistogramResult:
    """Simulation only: :func:`krr_histogram` with a seeded generator."""
    v = np.asarray(values, dtype=np.int64)
    mech = KaryRandomizedResponse(d, epsilon)
    reports = mech.simulate(v, rng)
    return HistogramResult(
        _krr_frequencies(mech, reports, d, v.size), _exact_hist(v, d), v.size, d, epsilon, 0.0, v.size
    )


def run_experiment_histogram_domain(
    values: np.ndarray,
    domain_sizes: list[int],
    epsilon: float,
    delta: float,
    reps: int,
    rng: np.random.Generator,
) -> list[dict]:
    """Simultaneous error vs domain size: shuffled P^hist against local k-RR.

    ``values`` (integers in [0, d0)) are embedded unchanged in each larger
    domain [0, d). The data's support stays fixed while d grows, which
    isolates the effect of d. The shuffled protocol runs on the same
    (eps, delta), k-RR on eps (pure).
    """
    v = np.asarray(values, dtype=np.int64)
    rows = []
    for d in domain_sizes:
        if v.max() >= d:
            raise LDPParameterError(f"domain size {d} is smaller than the data's largest value {int(v.max())}")
        proto = HistogramProtocol(epsilon, delta, v.size, d)
        sh = [simulate_label_counts(v, d, epsilon, delta, rng).max_error for _ in range(reps)]
        kr = [simulate_krr_histogram(v, d, epsilon, rng).max_error for _ in range(reps)]
        rows.append(
            {
                "d": d,
                "shuffle_mean": float(np.mean(sh)),
                "shuffle_std": float(np.std(sh)),
                "shuffle_bound": proto.simultaneous_error_bound(0.05),
                "krr_mean": float(np.mean(kr)),
                "krr_std": float(np.std(kr)),
            }
        )
    return rows
