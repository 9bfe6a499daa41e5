"""Locally private AUC from hierarchical histograms ([BBGK20, Sec. 4, App. B]).

What it does
    Scores are integers in [0, 2^alpha) (continuous scores are first
    discretized, :func:`quantize_scores`); class labels are public
    ([BBGK20, Sec. 4 (ii)]).  Each class's scores are summarized by a locally
    private hierarchical histogram, whose nodes a Hadamard frequency oracle
    estimates from ONE randomized-response bit per user
    (:class:`HadamardFrequencyOracle`, App. B.2.1, Algorithms 2 and 3), with
    the users (``"users"``) or the budget (``"budget"``) split across the
    alpha levels (:class:`PrivateHierarchicalHistogram`, App. B.2.2).  The
    AUC is then estimated by the private recursion of Eq. (10)
    (:func:`private_uauc`, ``discarded="zero"`` for the variant of
    Corollary 5; ``ties="half"`` counts ties one half), with the default
    ``a`` minimizing the MSE bound of Theorem 3 (Corollary 4).  App. D.1's
    synthetic datasets and the comparison with Algorithm 1 are in
    :func:`run_experiment_auc_domain`.  The estimators, their variances,
    the splitting strategies, the recursion and how the formulas lost in the
    paper's text extraction were read: docs/ldp.md, "Locally private AUC
    from hierarchical histograms".

Security model
    Local differential privacy against an untrusted server.  A user's bits
    are eps-LDP: one RR bit ("users") or alpha RR bits at eps/alpha
    ("budget", basic composition), or (eps, delta)-LDP with advanced
    composition.  Indices and level assignments are public randomness drawn
    by the server.  Randomized response, indices and assignments use the OS
    CSPRNG in :func:`ldp_auc`.  Functions named ``simulate_*`` and
    ``run_experiment_*`` take a seeded generator and are for experiments
    only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pairwise.dp.accounting import PrivacyGuarantee, advanced_composition
from pairwise.dp.errors import PrivacyParameterError
from pairwise.dp.mechanisms import RandomizedResponse
from pairwise.dp.samplers import uniform_int_array
from pairwise.dp.validate import no_more_keywords, with_legacy

from .errors import LDPDataError, LDPParameterError, ReportError, UnknownKernel
from .shuffle import secure_permutation

__all__ = [
    "c_epsilon",
    "HadamardFrequencyOracle",
    "OracleSums",
    "PrivateHierarchicalHistogram",
    "AUCOptions",
    "AUCResult",
    "private_uauc",
    "check_recursion_options",
    "exact_uauc",
    "default_a",
    "theorem3_mse_bound",
    "ldp_auc",
    "simulate_ldp_auc",
    "quantize_scores",
    "synthetic_auc_dataset",
    "run_experiment_auc_domain",
]

SPLITTINGS = ("users", "budget")


def c_epsilon(epsilon: float) -> float:
    """(e^eps + 1) / (e^eps - 1), the scale of the one-bit frequency oracle."""
    return (math.exp(epsilon) + 1.0) / math.expm1(epsilon)


def _parity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """<a, b> mod 2 for non-negative integers (bitwise inner product over F_2)."""
    return (np.bitwise_count(np.bitwise_and(a.astype(np.uint64), b.astype(np.uint64))) & 1).astype(np.int8)


@dataclass(frozen=True)
class OracleSums:
    """What the server keeps for one frequency oracle: signed sums per distinct index."""

    indices: np.ndarray  # distinct public indices j (uint64)
    sums: np.ndarray  # sum over users with index j of (-1)^bit (float64)
    n: int  # number of users that answered


class HadamardFrequencyOracle:
    """One-bit Hadamard frequency oracle on [0, 2^bits) (App. B.2.1, Algorithms 2 and 3)."""

    def __init__(self, bits: int, epsilon: float):
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 0 <= bits <= 62:
            raise LDPParameterError(f"oracle domain must be 2^bits with integer bits in 0..62, got {bits!r}")
        self.bits = int(bits)
        self.domain = 1 << self.bits
        self.rr = RandomizedResponse(epsilon)
        self.epsilon = float(epsilon)
        self.c = c_epsilon(self.epsilon)

    # ----- server: public randomness
    def assign_indices(self, n: int) -> np.ndarray:
        """Uniform public indices in [0, D) for ``n`` users, from the OS CSPRNG."""
        return uniform_int_array(self.domain, n).astype(np.uint64)

    def simulate_assign_indices(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Simulation only: indices from a seeded generator."""
        return rng.integers(0, self.domain, size=n, dtype=np.uint64)

    # ----- user: Algorithm 2
    def _check_values(self, values: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = np.asarray(values)
        j = np.asarray(indices)
        if v.shape != j.shape or v.ndim != 1:
            raise LDPDataError("values and indices must be 1-d arrays of the same length")
        if v.size and (v.min() < 0 or v.max() >= self.domain):
            raise LDPDataError(f"values must lie in [0, {self.domain})")
        return v.astype(np.uint64), j.astype(np.uint64)

    def hadamard_bits(self, values: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """The unperturbed bit <v, j> mod 2 of each user (H[v, j] = (-1)^bit)."""
        v, j = self._check_values(values, indices)
        return _parity(v, j).astype(np.uint8)

    def randomize(self, values: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """Algorithm 2: one randomized-response bit per user (OS CSPRNG)."""
        bits = self.hadamard_bits(values, indices)
        return np.asarray(self.rr.randomize_array(bits), dtype=np.uint8)

    def simulate_randomize(self, values: np.ndarray, indices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Simulation only: Algorithm 2 with a seeded generator."""
        bits = self.hadamard_bits(values, indices)
        return np.asarray(self.rr.simulate(bits, rng), dtype=np.uint8)

    # ----- server: Algorithm 3
    def aggregate(self, indices: np.ndarray, reports: np.ndarray) -> OracleSums:
        """Signed sums of the reports per distinct index (O(min(n, D)) space)."""
        j = np.asarray(indices).astype(np.uint64)
        b = np.asarray(reports)
        if j.shape != b.shape or j.ndim != 1:
            raise ReportError("indices and reports must be 1-d arrays of the same length")
        if b.size and not np.isin(b, (0, 1)).all():
            raise ReportError("reports must be bits (0/1)")
        if j.size and int(j.max()) >= self.domain:
            raise ReportError(f"indices must lie in [0, {self.domain})")
        uniq, inv = np.unique(j, return_inverse=True)
        signed = 1.0 - 2.0 * b.astype(np.float64)
        sums = np.bincount(inv, weights=signed, minlength=uniq.size)
        return OracleSums(uniq, sums, int(j.size))

    def estimate(self, state: OracleSums, nodes: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
        """Algorithm 3: unbiased count estimates f_hat(u) for each ``u`` in ``nodes``."""
        u = np.asarray(nodes).astype(np.uint64).reshape(-1)
        out = np.empty(u.size, dtype=np.float64)
        if u.size == 0:
            return out
        m = max(1, state.indices.size)
        step = max(1, chunk // m)
        for s in range(0, u.size, step):
            uu = u[s : s + step]
            par = _parity(uu[:, None], state.indices[None, :])
            signs = 1.0 - 2.0 * par
            out[s : s + step] = self.c * (signs @ state.sums)
        return out

    def mse_bound(self, n: int) -> float:
        """Lemma 5 (Eq. 23): E (f_hat(u) - f(u))^2 <= n c_eps^2."""
        return n * self.c**2


def _level_epsilon(epsilon: float, alpha: int, splitting: str, composition: str, delta: float) -> float:
    if splitting == "users":
        return epsilon
    if composition == "basic":
        return epsilon / alpha
    # advanced: largest eps0 with advanced_composition(eps0, 0, alpha, delta).epsilon <= epsilon
    lo, hi = epsilon / alpha, epsilon
    for _ in range(80):
        mid = (lo + hi) / 2
        if advanced_composition(mid, 0.0, alpha, delta).epsilon <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


class PrivateHierarchicalHistogram:
    """The LDP hierarchical histogram h_hat of one class (App. B.2), levels 1..alpha.

    Root ``h_hat(lambda)`` is the public class size. Level ``l`` is answered
    by a :class:`HadamardFrequencyOracle` on ``l``-bit prefixes.
    """

    def __init__(
        self,
        alpha: int,
        epsilon: float,
        n: int,
        splitting: str = "users",
        composition: str = "basic",
        delta: float = 0.0,
    ):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, np.integer)) or not 1 <= alpha <= 62:
            raise LDPParameterError(
                f"alpha (number of levels, domain 2^alpha) must be an integer in 1..62, got {alpha!r}"
            )
        if splitting not in SPLITTINGS:
            raise LDPParameterError(f"splitting must be one of {SPLITTINGS}, got {splitting!r}")
        if composition not in ("basic", "advanced"):
            raise LDPParameterError(f"composition must be 'basic' or 'advanced', got {composition!r}")
        if (
            not isinstance(epsilon, (int, float))
            or isinstance(epsilon, bool)
            or not math.isfinite(epsilon)
            or epsilon <= 0
        ):
            raise PrivacyParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
        if not 0.0 <= delta < 1.0:
            raise PrivacyParameterError(f"delta must lie in [0, 1), got {delta!r}")
        if composition == "advanced":
            if splitting != "budget":
                raise LDPParameterError("advanced composition applies to budget splitting only")
            if delta <= 0.0:
                raise PrivacyParameterError("advanced composition needs delta > 0")
        elif delta != 0.0:
            raise PrivacyParameterError("delta > 0 is only used with splitting='budget', composition='advanced'")
        n = int(n)
        if splitting == "users" and n < alpha:
            raise LDPDataError(f"splitting users across {alpha} levels needs at least {alpha} users per class, got {n}")
        if n < 1:
            raise LDPDataError("a class needs at least one user")
        self.alpha = int(alpha)
        self.n = n
        self.splitting = splitting
        self.composition = composition
        self.delta = float(delta)
        self.level_epsilon = _level_epsilon(float(epsilon), self.alpha, splitting, composition, self.delta)
        self.epsilon = float(epsilon)
        self.oracles = [HadamardFrequencyOracle(l, self.level_epsilon) for l in range(self.alpha + 1)]
        c2 = self.oracles[1].c ** 2
        if splitting == "users":
            m_min = n // self.alpha
            # (n/m)^2 [m c^2 + hypergeometric subsampling variance] <= (n^2/m)(c^2 + 1/4)
            self.variance_bound = n * n / m_min * (c2 + 0.25)
        else:
            self.variance_bound = n * c2
        self._states: list[OracleSums | None] = [None] * (self.alpha + 1)
        self._scale = np.ones(self.alpha + 1)

    @property
    def C(self) -> float:
        """The constant of v = C n alpha (Theorem 3)."""
        return self.variance_bound / (self.n * self.alpha)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        if self.composition == "advanced":
            return advanced_composition(self.level_epsilon, 0.0, self.alpha, self.delta)
        return PrivacyGuarantee(self.epsilon, 0.0)

    def _groups(self, perm: np.ndarray) -> list[np.ndarray]:
        if self.splitting == "budget":
            return [np.arange(self.n)] * self.alpha
        return np.array_split(perm, self.alpha)

    def collect(self, values: np.ndarray) -> None:
        """Run the protocol for this class with the OS CSPRNG (users and server)."""
        self._collect(values, None)

    def simulate_collect(self, values: np.ndarray, rng: np.random.Generator) -> None:
        """Simulation only: the protocol with a seeded generator."""
        self._collect(values, rng)

    def _collect(self, values: np.ndarray, rng: np.random.Generator | None) -> None:
        v = np.asarray(values)
        if v.ndim != 1 or v.size != self.n:
            raise LDPDataError(f"expected {self.n} scores, got shape {v.shape}")
        if not np.issubdtype(v.dtype, np.integer):
            if not np.all(np.floor(v) == v):
                raise LDPDataError("scores must be integers in [0, 2^alpha); quantize them first")
            v = v.astype(np.int64)
        if v.min() < 0 or v.max() >= (1 << self.alpha):
            bad = int(np.flatnonzero((v < 0) | (v >= (1 << self.alpha)))[0])
            raise LDPDataError(f"score {int(v[bad])} at position {bad + 1} is outside [0, 2^{self.alpha})")
        v = v.astype(np.uint64)
        if self.splitting == "users":
            perm = secure_permutation(self.n) if rng is None else rng.permutation(self.n)
        else:
            perm = np.arange(self.n)
        levels, indices, reports = [], [], []
        for level, members in enumerate(self._groups(perm), start=1):
            oracle = self.oracles[level]
            prefixes = v[members] >> np.uint64(self.alpha - level)
            if rng is None:
                idx = oracle.assign_indices(members.size)
                rep = oracle.randomize(prefixes, idx)
            else:
                idx = oracle.simulate_assign_indices(members.size, rng)
                rep = oracle.simulate_randomize(prefixes, idx, rng)
            levels.append(np.full(members.size, level))
            indices.append(idx)
            reports.append(rep)
        self.load_reports(np.concatenate(levels), np.concatenate(indices), np.concatenate(reports))

    def load_reports(self, levels: np.ndarray, indices: np.ndarray, reports: np.ndarray) -> None:
        """Server side (Algorithm 3's input): the bits the users sent, each for its (level, public index).

        ``levels[i]`` in 1..alpha and ``indices[i]`` in [0, 2^level) are the
        public assignment of report i, ``reports[i]`` its randomized bit.  With
        ``"users"`` splitting every user sent one report, with ``"budget"`` one
        per level; either way level l's estimates are scaled by n / (reports at
        level l), so the split need not be exactly even (users who never
        answered are simply absent).  For ``"users"`` the variance bound v is
        recomputed from the smallest level (a public count, not data).
        """
        lv = np.asarray(levels)
        j = np.asarray(indices)
        b = np.asarray(reports)
        if not (lv.shape == j.shape == b.shape) or lv.ndim != 1:
            raise ReportError("levels, indices and reports must be 1-d arrays of the same length")
        if lv.size and (lv.min() < 1 or lv.max() > self.alpha):
            raise ReportError(f"levels must lie in 1..{self.alpha}")
        counts = np.bincount(lv.astype(np.int64), minlength=self.alpha + 1)[1:]
        if (counts == 0).any():
            raise ReportError(
                f"level {int(np.flatnonzero(counts == 0)[0]) + 1} has no report: each of the "
                f"{self.alpha} levels needs at least one user"
            )
        for level in range(1, self.alpha + 1):
            mask = lv == level
            self._states[level] = self.oracles[level].aggregate(j[mask], b[mask])
            self._scale[level] = self.n / int(counts[level - 1])
        if self.splitting == "users":
            c2 = self.oracles[1].c ** 2
            self.variance_bound = self.n * self.n / int(counts.min()) * (c2 + 0.25)

    def estimate(self, level: int, nodes: np.ndarray) -> np.ndarray:
        """h_hat at ``nodes`` (l-bit prefixes) of ``level``; the root is the class size."""
        nodes = np.asarray(nodes)
        if level == 0:
            return np.full(nodes.size, float(self.n))
        state = self._states[level]
        if state is None:
            raise RuntimeError("collect() must run before estimate()")
        return self._scale[level] * self.oracles[level].estimate(state, nodes)


@dataclass
class RecursionStats:
    """Per-level node counts of one run of Eq. (10)."""

    recursed: list[int] = field(default_factory=list)
    discarded: list[int] = field(default_factory=list)


def private_uauc(
    est_pos: Callable[[int, np.ndarray], np.ndarray],
    est_neg: Callable[[int, np.ndarray], np.ndarray],
    alpha: int,
    v_pos: float,
    v_neg: float,
    a: float,
    discarded: str = "half",
    ties: str = "zero",
) -> tuple[float, RecursionStats]:
    """The private UAUC recursion of Eq. (10), level by level (breadth first).

    ``est_pos(level, nodes)`` / ``est_neg`` return h_hat at the given nodes
    (level 0: the root, the class size). ``discarded="half"`` is Eq. (10),
    ``"zero"`` the variant of Corollary 5. ``ties="zero"`` makes leaves
    contribute 0 (Eq. 10); ``"half"`` adds half the leaf products.
    """
    if discarded not in ("half", "zero"):
        raise LDPParameterError(f"discarded must be 'half' (Eq. 10) or 'zero' (Corollary 5), got {discarded!r}")
    if ties not in ("zero", "half"):
        raise LDPParameterError(f"ties must be 'zero' (Eq. 10) or 'half', got {ties!r}")
    if not a > 1.0:
        raise LDPParameterError(f"the threshold parameter a must be > 1, got {a!r}")
    tau = a * math.sqrt(v_pos * v_neg)
    floor_p = math.sqrt(a * v_pos) / 2.0
    floor_n = math.sqrt(a * v_neg) / 2.0
    nodes = np.zeros(1, dtype=np.uint64)
    hp = est_pos(0, nodes)
    hn = est_neg(0, nodes)
    total = 0.0
    stats = RecursionStats()
    for m in range(alpha):
        if nodes.size == 0:
            stats.recursed.append(0)
            stats.discarded.append(0)
            continue
        recurse = np.maximum(hp, floor_p) * np.maximum(hn, floor_n) >= tau
        need = nodes if discarded == "half" else nodes[recurse]
        if need.size:
            ch = np.concatenate((need << np.uint64(1), (need << np.uint64(1)) | np.uint64(1)))
            cp = est_pos(m + 1, ch)
            cn = est_neg(m + 1, ch)
            k = need.size
            p0, p1, n0, n1 = cp[:k], cp[k:], cn[:k], cn[k:]
            rec_mask = recurse if discarded == "half" else np.ones(k, dtype=bool)
            total += float(np.sum(p1[rec_mask] * n0[rec_mask]))
            if discarded == "half":
                d = ~rec_mask
                total += 0.5 * float(np.sum((p0[d] + p1[d]) * (n0[d] + n1[d])))
            r = need[rec_mask]
            nodes = np.concatenate((r << np.uint64(1), (r << np.uint64(1)) | np.uint64(1)))
            hp = np.concatenate((p0[rec_mask], p1[rec_mask]))
            hn = np.concatenate((n0[rec_mask], n1[rec_mask]))
        else:
            nodes = np.zeros(0, dtype=np.uint64)
            hp = hn = np.zeros(0)
        stats.recursed.append(int(recurse.sum()))
        stats.discarded.append(int((~recurse).sum()))
    if ties == "half" and nodes.size:
        total += 0.5 * float(np.sum(hp * hn))
    return total, stats


def exact_uauc(pos: np.ndarray, neg: np.ndarray, ties: str = "zero") -> float:
    """Non-private UAUC of integer scores: #{s+ > s-} (+ half the ties)."""
    s = np.sort(np.asarray(neg))
    p = np.asarray(pos)
    lt = np.searchsorted(s, p, side="left").sum()
    if ties == "zero":
        return float(lt)
    le = np.searchsorted(s, p, side="right").sum()
    return float(lt + 0.5 * (le - lt))


def default_a(n_pos: int, n_neg: int, alpha: int, C: float, discarded: str = "half") -> float:
    """The a minimizing the MSE bound of Theorem 3 (Corollary 4) or its variant (Corollary 5)."""
    n = n_pos + n_neg
    k = math.sqrt(2.0 * n * C * alpha)
    m = min(n_pos, n_neg)
    if discarded == "half":
        return 1.0 + math.sqrt(21.0 * k / (4.0 * m))
    return 1.0 + math.sqrt(k / (8.0 * m))


def theorem3_mse_bound(n_pos: int, n_neg: int, alpha: int, C: float, a: float, discarded: str = "half") -> float:
    """Theorem 3's MSE bound on UAUC (as read from the extracted text; see module docstring)."""
    n = n_pos + n_neg
    m = min(n_pos, n_neg)
    k = math.sqrt(2.0 * n * C * alpha)
    if discarded == "half":
        inner = 2 * n + (4 * a + 1) * m + 21.0 * k / (a - 1)
    else:
        inner = 2 * n + 2 * (4 * a + 1) * m + k / (a - 1)
    return C * n_neg * n_pos * alpha**2 * inner


@dataclass
class AUCResult:
    """Outcome of one run of the locally private AUC protocol."""

    estimate: float
    exact: float  # non-private AUC of the same integer scores (same ties rule)
    n_pos: int
    n_neg: int
    alpha: int
    epsilon: float
    delta: float
    splitting: str
    a: float
    tau: float
    level_epsilon: float
    recursed: list[int]
    discarded: list[int]


def check_recursion_options(a: float | None, discarded: str, ties: str) -> None:
    """Refuse a bad threshold ``a`` (None: the default of Corollary 4/5), ``discarded`` or ``ties`` option."""
    if discarded not in ("half", "zero"):
        raise LDPParameterError(f"discarded must be 'half' (Eq. 10) or 'zero' (Corollary 5), got {discarded!r}")
    if ties not in ("zero", "half"):
        raise LDPParameterError(f"ties must be 'zero' (Eq. 10) or 'half', got {ties!r}")
    if a is not None and not (isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a) and a > 1.0):
        raise LDPParameterError(f"the threshold parameter a must be > 1 (and finite), got {a!r}")


@dataclass(frozen=True)
class AUCOptions:
    """The options of :func:`ldp_auc` and :func:`simulate_ldp_auc` (module docstring): the budget
    ``splitting`` (``users`` or ``budget``), the recursion's threshold ``a`` (None: Corollary 4/5's
    default), the ``discarded`` and ``ties`` rules, the level ``composition`` and its ``delta``.
    The recursion options are checked on construction."""

    splitting: str = "users"
    a: float | None = None
    discarded: str = "half"
    ties: str = "half"
    composition: str = "basic"
    delta: float = 0.0

    def __post_init__(self) -> None:
        check_recursion_options(self.a, self.discarded, self.ties)


def _run_auc(
    pos: np.ndarray, neg: np.ndarray, alpha: int, epsilon: float, o: AUCOptions, rng: np.random.Generator | None
) -> AUCResult:
    splitting, a, discarded, ties, composition, delta = o.splitting, o.a, o.discarded, o.ties, o.composition, o.delta
    pos = np.asarray(pos)
    neg = np.asarray(neg)
    if pos.ndim != 1 or neg.ndim != 1 or pos.size == 0 or neg.size == 0:
        raise LDPDataError("need non-empty 1-d arrays of positive and negative scores")
    # Every parameter is checked here, before any user randomizes anything.
    check_recursion_options(a, discarded, ties)
    hpos = PrivateHierarchicalHistogram(alpha, epsilon, pos.size, splitting, composition, delta)
    hneg = PrivateHierarchicalHistogram(alpha, epsilon, neg.size, splitting, composition, delta)
    for name, v in (("positive", pos), ("negative", neg)):
        if not np.issubdtype(v.dtype, np.integer) or (v < 0).any() or (v >= (1 << int(alpha))).any():
            raise LDPDataError(
                f"{name} scores must be integers in [0, 2^alpha); quantize them first "
                "(quantize_scores clamps into the public bounds)"
            )
    if a is None:
        a = default_a(pos.size, neg.size, alpha, max(hpos.C, hneg.C), discarded)
    if rng is None:
        hpos.collect(pos)
        hneg.collect(neg)
    else:
        hpos.simulate_collect(pos, rng)
        hneg.simulate_collect(neg, rng)
    uauc, stats = private_uauc(
        hpos.estimate, hneg.estimate, alpha, hpos.variance_bound, hneg.variance_bound, a, discarded, ties
    )
    denom = float(pos.size) * float(neg.size)
    return AUCResult(
        estimate=uauc / denom,
        exact=exact_uauc(pos, neg, ties) / denom,
        n_pos=int(pos.size),
        n_neg=int(neg.size),
        alpha=int(alpha),
        epsilon=float(epsilon),
        delta=float(delta),
        splitting=splitting,
        a=float(a),
        tau=float(a * math.sqrt(hpos.variance_bound * hneg.variance_bound)),
        level_epsilon=hpos.level_epsilon,
        recursed=stats.recursed,
        discarded=stats.discarded,
    )


def ldp_auc(
    pos: np.ndarray,
    neg: np.ndarray,
    alpha: int,
    epsilon: float,
    *,
    options: AUCOptions | None = None,
    **legacy: object,
) -> AUCResult:
    """Locally private AUC of integer scores in [0, 2^alpha), OS CSPRNG throughout.

    ``pos``/``neg``: scores of the positive and negative class (labels
    are public). See the module docstring for the parameters; ``options``:
    an :class:`AUCOptions` (or its fields as keywords).
    """
    o = with_legacy(options, AUCOptions, legacy, "ldp_auc")
    no_more_keywords(legacy, "ldp_auc")
    return _run_auc(pos, neg, alpha, epsilon, o, None)


def simulate_ldp_auc(
    pos: np.ndarray,
    neg: np.ndarray,
    alpha: int,
    epsilon: float,
    rng: np.random.Generator,
    *,
    options: AUCOptions | None = None,
    **legacy: object,
) -> AUCResult:
    """Simulation of :func:`ldp_auc` with a seeded generator (experiments only)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator")
    o = with_legacy(options, AUCOptions, legacy, "simulate_ldp_auc")
    no_more_keywords(legacy, "simulate_ldp_auc")
    return _run_auc(pos, neg, alpha, epsilon, o, rng)


# --------------------------------------------------------------------------- data and experiments


def quantize_scores(scores: np.ndarray, alpha: int, lower: float, upper: float) -> np.ndarray:
    """fp(s, d): map scores on [lower, upper] to integers in [0, 2^alpha) (floor, clipped)."""
    if not (math.isfinite(lower) and math.isfinite(upper)) or not lower < upper:
        raise LDPParameterError(f"score bounds must be finite with lower < upper, got [{lower}, {upper}]")
    s = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(s).all():
        raise LDPDataError("scores must be finite")
    d = 1 << int(alpha)
    t = np.floor((s - lower) / (upper - lower) * d)
    return np.clip(t, 0, d - 1).astype(np.int64)


def synthetic_auc_dataset(name: str, n: int, rng: np.random.Generator, digit: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """App. D.1's synthetic scores in [0, 1) with ``n`` points per class: (pos, neg).

    * ``auc_one``: all negatives at 0 and all positives at 1 - 2^-30 (AUC 1).
    * ``ur``: both classes uniform on [0, 1) (AUC about 1/2).
    * ``ithdigit``: negatives at 0, positives at 2^-digit. They differ only
      in the ``digit``-th binary digit, so quantizing to fewer than
      ``digit`` bits puts every score in bin 0 (AUC 1 before quantization).
    """
    if name == "auc_one":
        return np.full(n, 1.0 - 2.0**-30), np.zeros(n)
    if name == "ur":
        return rng.random(n), rng.random(n)
    if name == "ithdigit":
        return np.full(n, 2.0**-digit), np.zeros(n)
    raise UnknownKernel(f"unknown synthetic dataset {name!r}; use auc_one, ur or ithdigit")


def run_experiment_auc_domain(
    dataset: str,
    n_per_class: int,
    alphas: list[int],
    epsilon: float,
    reps: int,
    rng: np.random.Generator,
    digit: int = 8,
    splitting: str = "users",
) -> list[dict]:
    """App. D.1: error against domain size 2^alpha, this protocol vs Algorithm 1.

    For each alpha, ``reps`` runs of both protocols on scores quantized to
    2^alpha bins. The error is measured against the AUC of the raw
    (unquantized) scores, so it includes the quantization error, as in the
    paper's Figures 5 and 6. Algorithm 1 uses k = 2^alpha bins and the
    unbiased two-sample k-RR estimate.

    ``hh_*`` and ``rr_*`` (mean, std) are the errors of the raw estimates,
    which are unbiased but not confined to [0, 1] (Algorithm 1's reach 10^4
    at d = 2^16).  ``*_clipped_*`` are the errors of the estimates clipped
    to [0, 1], the estimate one would publish (post-processing, so the
    privacy guarantee is unchanged): mean and std, at most 1.
    """
    from .ustat import QuantizedUStatistic, Quantizer, exact_auc

    pos, neg = synthetic_auc_dataset(dataset, n_per_class, rng, digit)
    true_auc = exact_auc(pos, neg)
    rows = []
    for alpha in alphas:
        qp = quantize_scores(pos, alpha, 0.0, 1.0)
        qn = quantize_scores(neg, alpha, 0.0, 1.0)
        hh_err, rr_err, hh_clip, rr_clip = [], [], [], []
        alg1 = QuantizedUStatistic("auc", Quantizer.discrete(np.arange(1 << alpha)), epsilon)
        for _ in range(reps):
            res = simulate_ldp_auc(qp, qn, alpha, epsilon, rng, splitting=splitting)
            hh_err.append(abs(res.estimate - true_auc))
            hh_clip.append(abs(min(1.0, max(0.0, res.estimate)) - true_auc))
            est = alg1.estimate_two_sample(alg1.simulate_randomize(qp, rng), alg1.simulate_randomize(qn, rng))
            rr_err.append(abs(est - true_auc))
            rr_clip.append(abs(min(1.0, max(0.0, est)) - true_auc))
        rows.append(
            {
                "dataset": dataset,
                "alpha": alpha,
                "domain": 1 << alpha,
                "true_auc": true_auc,
                "quantized_auc": exact_uauc(qp, qn, "half") / (qp.size * qn.size),
                "hh_mean": float(np.mean(hh_err)),
                "hh_std": float(np.std(hh_err)),
                "rr_mean": float(np.mean(rr_err)),
                "rr_std": float(np.std(rr_err)),
                "hh_clipped_mean": float(np.mean(hh_clip)),
                "hh_clipped_std": float(np.std(hh_clip)),
                "rr_clipped_mean": float(np.mean(rr_clip)),
                "rr_clipped_std": float(np.std(rr_clip)),
            }
        )
    return rows
