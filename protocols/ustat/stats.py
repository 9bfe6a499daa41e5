"""Pair sampling, estimators and error formulas of the 2PC subsampling U-statistic protocol.

What it does
    Pure functions (no cryptography, no network) used by the protocol driver
    :mod:`pairwise.protocols.ustat.driver` and by the benchmarks:

    - :func:`sample_pairs`: step 1 of the protocol of [BBGK20, Sec. 5]: P independent uniform permutations sigma_1..sigma_P of the n users,
      each cut into n/2 consecutive pairs, P n / 2 pairs in total (with n odd, the
      last user of each permutation sits that round out).  Every user is in at
      most P pairs, which is what the privacy analysis needs.
    - :func:`sample_two_sample_pairs`: the same idea for two-sample kernels (AUC):
      each round permutes the positives and the negatives and matches them
      index by index, so every example is in at most P pairs.
    - :func:`all_pairs`: the paper's baseline that uses all n(n-1)/2 pairs.
    - :func:`u_statistic`: the exact (complete) U-statistic, Eq. (1)-(2), and the
      paper's statistics: Gini mean difference (Eq. 4), Kendall's tau-a (Eq. 6),
      AUC with ties counting 1/2 (Eq. 7).
    - :func:`zetas`: zeta_1 = Var(f(x1, X2) | x1) averaged and zeta_2 = Var f(X1, X2),
      Eq. (3), for the empirical distribution of the data (exact, O(n^2)).
    - :func:`theorem5_mse`: MSE of the subsampled, noised estimate (Theorem 5):

          MSE = 2/(P n) [ 2(P-1)(1 - 1/(n-1)) zeta_1 + (1 + (P-1)/(n-1)) zeta_2 ] + Var(noise) * 2/(P n)

      The first term is Blom's (1976) variance of the incomplete U-statistic
      (App. C.1, Eq. 25) for this design; we re-derived it (expected numbers of
      pairs of sampled pairs sharing one or two users) and it matches the paper.
      The second term is the variance of the average of the P n/2 independent
      noise variables.  With eta ~ Lap(P/eps), Var(eta) = 2 P^2 / eps^2 and the
      term is 4P/(n eps^2); the extracted text of Theorem 5 reads 2P/(n eps^2),
      which is what Var(Lap(b)) = b^2 would give.  Our benchmarks check the
      formula against the empirical MSE, and the noise term is computed from
      the exact variance of the noise actually used (discrete Laplace in the
      circuit), not assumed.

Security model
    The pair sampling is done by the aggregator and is public (it reveals no
    data); protocol paths pass a CSPRNG-backed generator (:func:`csprng_generator`),
    simulations pass a seeded one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = [
    "csprng_generator",
    "sample_pairs",
    "sample_two_sample_pairs",
    "all_pairs",
    "kernel_matrix",
    "u_statistic",
    "zetas",
    "theorem5_mse",
    "incomplete_variance",
    "Zetas",
    "KernelSums",
    "TwoSampleZetas",
    "kernel_sums",
    "zetas_from_sums",
    "two_sample_zetas",
    "expected_noise_variance",
    "two_sample_mse",
    "fixed_sample_mse",
]


def csprng_generator() -> np.random.Generator:
    """A numpy Generator seeded with 256 bits from the OS CSPRNG (protocol paths)."""
    return np.random.Generator(np.random.PCG64(int.from_bytes(os.urandom(32), "little")))


def sample_pairs(n: int, P: int, rng: np.random.Generator) -> np.ndarray:
    """P permutations of range(n) cut into consecutive pairs: (P * (n // 2), 2) int array."""
    if n < 2:
        raise ValueError(f"need at least 2 users to form pairs, got n={n}")
    if P < 1:
        raise ValueError(f"pairs per user P must be >= 1, got {P}")
    half = n // 2
    out = np.empty((P, half, 2), dtype=np.int64)
    for p in range(P):
        perm = rng.permutation(n)
        out[p] = perm[: 2 * half].reshape(half, 2)
    return out.reshape(-1, 2)


def sample_two_sample_pairs(n_pos: int, n_neg: int, P: int, rng: np.random.Generator) -> np.ndarray:
    """P rounds matching a permutation of the positives with one of the negatives.

    Returns (P * min(n_pos, n_neg), 2) pairs (positive index, negative index);
    every example appears in at most P pairs and each pair is a uniformly
    random (positive, negative) pair, so the average is unbiased for the AUC.
    """
    if n_pos < 1 or n_neg < 1:
        raise ValueError(f"need at least one positive and one negative example, got {n_pos} and {n_neg}")
    if P < 1:
        raise ValueError(f"pairs per user P must be >= 1, got {P}")
    m = min(n_pos, n_neg)
    out = np.empty((P, m, 2), dtype=np.int64)
    for p in range(P):
        out[p, :, 0] = rng.permutation(n_pos)[:m]
        out[p, :, 1] = rng.permutation(n_neg)[:m]
    return out.reshape(-1, 2)


def all_pairs(n: int) -> np.ndarray:
    """All n(n-1)/2 pairs i < j."""
    i, j = np.triu_indices(n, k=1)
    return np.stack([i, j], axis=1).astype(np.int64)


def kernel_matrix(name: str, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """h(z_i, z_j) for all i, j, in the kernel's natural units.

    gini: |x_i - x_j|; kendall: sign(x_i - x_j) sign(y_i - y_j) (y = second
    column); auc: [s_i > s_j] + [s_i = s_j]/2 with x = positive scores (rows)
    and y = negative scores (columns).
    """
    x = np.asarray(x, dtype=np.float64)
    if name == "gini":
        return np.abs(x[:, None] - x[None, :])
    if name == "kendall":
        y = np.asarray(y, dtype=np.float64)
        return np.sign(x[:, None] - x[None, :]) * np.sign(y[:, None] - y[None, :])
    if name == "auc":
        y = np.asarray(y, dtype=np.float64)
        return (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    raise ValueError(f"unknown statistic {name!r}")


def u_statistic(name: str, x: np.ndarray, y: np.ndarray | None = None) -> float:
    """Exact U-statistic: the mean of h over all pairs i != j (AUC: all positive x negative pairs).

    Small inputs use the full kernel matrix; large ones (over 4000 points) use
    O(n log n) identities: Gini via sorted values (sum_{i<j} |x_i - x_j| =
    sum_k x_(k) (2k - n - 1)), AUC via average ranks (Mann-Whitney U), Kendall's
    tau-a = (C - D) / (n(n-1)/2) with C - D recovered from scipy's tau-b and the
    tie counts.
    """
    size = np.asarray(x).size * (np.asarray(y).size if name == "auc" else np.asarray(x).size)
    if size > 4000 * 4000:
        return _u_statistic_fast(name, x, y)
    k = kernel_matrix(name, x, y)
    if name == "auc":
        return float(k.mean())
    n = k.shape[0]
    return float((k.sum() - np.trace(k)) / (n * (n - 1)))


def _u_statistic_fast(name: str, x, y) -> float:
    from scipy import stats

    x = np.asarray(x, dtype=np.float64)
    if name == "gini":
        n = x.size
        xs = np.sort(x)
        k = np.arange(1, n + 1, dtype=np.float64)
        return float(2.0 * np.dot(xs, 2 * k - n - 1) / (n * (n - 1)))
    if name == "auc":
        y = np.asarray(y, dtype=np.float64)
        r = stats.rankdata(np.concatenate([x, y]))
        u = r[: x.size].sum() - x.size * (x.size + 1) / 2
        return float(u / (x.size * y.size))
    if name == "kendall":
        y = np.asarray(y, dtype=np.float64)
        n = x.size
        n0 = n * (n - 1) / 2

        def ties(v):
            _, c = np.unique(v, return_counts=True)
            return float((c * (c - 1) / 2).sum())

        tb = stats.kendalltau(x, y, variant="b").statistic
        return float(tb * np.sqrt((n0 - ties(x)) * (n0 - ties(y))) / n0)
    raise ValueError(f"unknown statistic {name!r}")


@dataclass(frozen=True)
class Zetas:
    """zeta_1, zeta_2 of Eq. (3) for a distribution, and its parameter U_f = E h(X1, X2)."""

    zeta1: float
    zeta2: float
    mean: float


def zetas(name: str, x: np.ndarray, y: np.ndarray | None = None, scale: float = 1.0) -> Zetas:
    """zeta_1, zeta_2 of the empirical distribution of the data (X1, X2 iid from it).

    ``scale`` divides the kernel first (to map it into [0, 1] as Theorem 5
    assumes).  For one-sample kernels, X1 and X2 are iid draws from the n data
    points (so i = j has probability 1/n); this is the population that a
    bootstrap experiment samples from, which makes the comparison with
    Theorem 5 exact.
    """
    k = kernel_matrix(name, x, y) / scale
    mean = float(k.mean())
    zeta2 = float(((k - mean) ** 2).mean())
    zeta1 = float(((k.mean(axis=1) - mean) ** 2).mean())
    return Zetas(zeta1, zeta2, mean)


def incomplete_variance(n: int, P: int, zeta1: float, zeta2: float) -> float:
    """Blom's variance of the incomplete U-statistic on the P-permutation design (App. C.1)."""
    return 2.0 / (P * n) * (2 * (P - 1) * (1 - 1 / (n - 1)) * zeta1 + (1 + (P - 1) / (n - 1)) * zeta2)


def theorem5_mse(n: int, P: int, zeta1: float, zeta2: float, noise_variance: float) -> float:
    """Theorem 5: incomplete U-statistic variance plus the variance of the averaged noise.

    ``noise_variance`` is Var(eta) per pair in the kernel's [0, 1] units
    (2 P^2 / eps^2 for Lap(P / eps)).
    """
    return incomplete_variance(n, P, zeta1, zeta2) + 2.0 * noise_variance / (P * n)


# ----------------------------------------------------------------------------- error predictions
# Every function below is a deterministic function of the data: the predictions it returns are
# evaluation diagnostics (not private) and are documented as such wherever they are published.
@dataclass(frozen=True)
class KernelSums:
    """Sums of a kernel matrix h[i, j] (rows x columns), computed in row blocks (bounded memory).

    ``total`` = sum h, ``total_sq`` = sum h^2, ``rows`` / ``cols`` = row / column
    sums, ``diag`` = the values h[i, i] (one-sample kernels; None for two-sample).
    """

    n_rows: int
    n_cols: int
    total: float
    total_sq: float
    rows: np.ndarray
    cols: np.ndarray
    diag: np.ndarray | None = None


def kernel_sums(name: str, x: np.ndarray, y: np.ndarray | None = None, block: int = 512) -> KernelSums:
    """:class:`KernelSums` of :func:`kernel_matrix` (same arguments), ``block`` rows at a time."""
    x = np.asarray(x, dtype=np.float64)
    y = None if y is None else np.asarray(y, dtype=np.float64)
    two = name == "auc"
    n_rows = x.size
    n_cols = y.size if two else x.size
    rows = np.zeros(n_rows)
    cols = np.zeros(n_cols)
    diag = None if two else np.zeros(n_rows)
    tot = tot_sq = 0.0
    for s0 in range(0, n_rows, block):
        s1 = min(n_rows, s0 + block)
        if name == "gini":
            k = np.abs(x[s0:s1, None] - x[None, :])
        elif name == "kendall":
            k = np.sign(x[s0:s1, None] - x[None, :]) * np.sign(y[s0:s1, None] - y[None, :])
        elif name == "auc":
            k = (x[s0:s1, None] > y[None, :]) + 0.5 * (x[s0:s1, None] == y[None, :])
        else:
            raise ValueError(f"unknown statistic {name!r}")
        rows[s0:s1] = k.sum(axis=1)
        cols += k.sum(axis=0)
        tot += float(rows[s0:s1].sum())
        tot_sq += float(np.square(k).sum())
        if diag is not None:
            diag[s0:s1] = k[np.arange(s1 - s0), np.arange(s0, s1)]
    return KernelSums(n_rows, n_cols, tot, tot_sq, rows, cols, diag)


@dataclass(frozen=True)
class TwoSampleZetas:
    """zeta_10 = Var E[h | X], zeta_01 = Var E[h | Y], zeta_11 = Var h(X, Y), and U = E h, for X ~ the
    positives and Y ~ the negatives (their empirical distributions)."""

    zeta10: float
    zeta01: float
    zeta11: float
    mean: float


def zetas_from_sums(s: KernelSums) -> Zetas:
    """zeta_1, zeta_2 and U of the empirical distribution (X1, X2 iid, i = j allowed), as :func:`zetas`."""
    n = s.n_rows
    mean = s.total / (n * n)
    zeta2 = s.total_sq / (n * n) - mean * mean
    zeta1 = float(np.mean(np.square(s.rows / n))) - mean * mean
    return Zetas(max(zeta1, 0.0), max(zeta2, 0.0), mean)


def two_sample_zetas(s: KernelSums) -> TwoSampleZetas:
    n1, n0 = s.n_rows, s.n_cols
    mean = s.total / (n1 * n0)
    return TwoSampleZetas(
        max(0.0, float(np.mean(np.square(s.rows / n0))) - mean * mean),
        max(0.0, float(np.mean(np.square(s.cols / n1))) - mean * mean),
        max(0.0, s.total_sq / (n1 * n0) - mean * mean),
        mean,
    )


def expected_noise_variance(coeffs, mean: float, second_moment: float) -> float:
    """E[c0 + c1 f + c2 f^2] = c0 + c1 E f + c2 E f^2 for a per-pair estimate variance that is quadratic in f."""
    c0, c1, c2 = (float(c) for c in coeffs)
    return c0 + c1 * mean + c2 * second_moment


def two_sample_mse(
    n_pos: int, n_neg: int, P: int, zeta10: float, zeta01: float, zeta11: float, noise_variance: float
) -> float:
    """MSE against the population AUC of the two-sample design (:func:`sample_two_sample_pairs`).

    With m = min(n1, n0) pairs per round, P independent rounds and
    U^ = 1/(P m) sum of the P m noisy kernel values:

        MSE = zeta_11 / (P m)
              + (P - 1)/P [ zeta_11/(n1 n0) + (1 - 1/n0) zeta_10 / n1 + (1 - 1/n1) zeta_01 / n0 ]
              + E Var(noise) / (P m).

    Derivation (the two-sample analogue of App. C.1): Cov(h(X_a, Y_b),
    h(X_a', Y_b')) is zeta_11, zeta_10, zeta_01 or 0 as (a, b) shares both, the
    positive only, the negative only, or neither.  Within a round the pairs
    share nothing.  For two distinct rounds, each pair is uniform over the
    n1 n0 positive-negative pairs and a positive sits in a round with
    probability m / n1 with a uniform partner, so the expected numbers of
    (pair of round r, pair of round r') sharing both, only the positive, only
    the negative are m^2 / (n1 n0), (m^2 / n1)(1 - 1/n0), (m^2 / n0)(1 - 1/n1);
    there are P(P - 1) ordered pairs of rounds and P m diagonal terms.  The
    noise terms are independent with mean 0 given the data.
    """
    m = min(n_pos, n_neg)
    cross = zeta11 / (n_pos * n_neg) + (1 - 1 / n_neg) * zeta10 / n_pos + (1 - 1 / n_pos) * zeta01 / n_neg
    return zeta11 / (P * m) + (P - 1) / P * cross + noise_variance / (P * m)


def fixed_sample_mse(s: KernelSums, design: str, P: int, noise_coeffs) -> float:
    """E[(U^ - U_n)^2] for this data set: U_n is the exact U-statistic (the printed ``exact``); the
    randomness is the pair sampling and the noise.  ``noise_coeffs`` (c0, c1, c2): per-pair estimate
    variance c0 + c1 h + c2 h^2 given the kernel value h.

    One-sample permutation design: a round is a uniform perfect matching of the users (n odd: of the
    users and a dummy whose kernel values are 0, whose partner sits out).  On n' vertices an edge is in
    the matching with probability p = 1/(n' - 1) and two disjoint edges with probability
    1/((n' - 1)(n' - 3)); edges sharing a vertex never both.  So the round sum S has
    Var S = T2 (p - p^2) + D (1/((n'-1)(n'-3)) - p^2) - A p^2 with T1 = sum_{i<j} h, T2 = sum_{i<j} h^2,
    A = sum_i r_i^2 - 2 T2 (ordered pairs of edges sharing a vertex, r_i = sum_{j != i} h_ij) and
    D = T1^2 - T2 - A (ordered disjoint pairs); U^ averages P independent rounds of floor(n/2) pairs.

    Two-sample design: a round is a uniform injection of the smaller class into the larger, i.e. a
    uniform permutation of the larger class against the smaller one padded with zero rows, whose sum
    has Hoeffding's (1951) variance sum_ij d_ij^2 / (N - 1), d the doubly centred padded matrix.

    ``all`` design: every pair once, so only the noise remains.  In every design each sampled pair is
    uniform over all pairs, so the noise adds mean(c0 + c1 h + c2 h^2) / (number of pairs).
    """
    c0, c1, c2 = (float(c) for c in noise_coeffs)
    if s.diag is None:
        n1, n0 = s.n_rows, s.n_cols
        m, big = min(n1, n0), max(n1, n0)
        mean, mean_sq = s.total / (n1 * n0), s.total_sq / (n1 * n0)
        small_sums, big_sums = (s.rows, s.cols) if n1 <= n0 else (s.cols, s.rows)
        # the padded big x big matrix has the same total, square sum and big-side sums; its other
        # sums are the small side's plus zeros
        dsq = (
            s.total_sq
            - (float(np.square(small_sums).sum()) + float(np.square(big_sums).sum())) / big
            + s.total**2 / big**2
        )
        var_round = max(0.0, dsq) / (big - 1) if big > 1 else 0.0
        return var_round / (P * m * m) + (c0 + c1 * mean + c2 * mean_sq) / (P * m)
    n = s.n_rows
    n_pairs = n * (n - 1) / 2
    r = s.rows - s.diag
    t1 = float(r.sum()) / 2
    t2 = (s.total_sq - float(np.square(s.diag).sum())) / 2
    noise = c0 + c1 * t1 / n_pairs + c2 * t2 / n_pairs
    if design == "all":
        return noise / n_pairs
    nv = n + (n % 2)
    p = 1.0 / (nv - 1)
    p2 = 1.0 / ((nv - 1) * (nv - 3)) if nv >= 4 else 0.0
    shared = float(np.square(r).sum()) - 2 * t2
    disjoint = t1 * t1 - t2 - shared
    var_round = max(0.0, t2 * (p - p * p) + disjoint * (p2 - p * p) - shared * p * p)
    m = n // 2
    return var_round / (P * m * m) + noise / (P * m)
