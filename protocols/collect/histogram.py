"""The shuffled-model histogram among real users: each user's sealed messages, the aggregator's analyzer.

What it does
    The protocol is P^hist of [BC20, Figure 2]
    (:class:`pairwise.protocols.ldp.shuffle.HistogramProtocol`), split
    between the parties who run it:

    * :func:`user_messages` (a user, holding one value): clamps the value
      into the public integer domain ``lower..upper`` (d = upper - lower + 1
      bins), runs the randomizer R^hist (for each bin j, ``[x == j] + z_j``
      messages labelled j, z_j ~ Bernoulli(p) from the OS CSPRNG) and seals
      every message separately to the aggregator's key
      (:mod:`pairwise.protocols.collect.sealed`), so the shuffler can
      separate them and the aggregator cannot link them.  A user sends
      1 + Bin(d, p) boxes of one fixed size, whatever its value.
    * the shuffler (:mod:`pairwise.protocols.collect.shuffler`) forwards a
      uniformly permuted batch of boxes from at least n users, with the
      number of users in it and nothing about who they are;
    * :func:`analyze` (the aggregator): opens every box, counts the labels
      (the analyzer's whole view), and computes c*_j = count_j / m - p with
      m the number of users in the batches, and A^hist (c*_j if c*_j > 1 - p,
      else 0).

    :class:`HistogramTask` validates the public parameters before any user
    randomizes (n at least 400 ln(4/delta) / epsilon^2, Theorem 3.2; at most
    :data:`MAX_BINS` bins).

Privacy
    Every user randomizes with p = p(n) for the task's n, so a batch of
    m >= n users is (eps, delta)-DP for its users; the shuffler never
    forwards fewer than n.  The argument, the unbiased analyzer and the error
    bound: ``docs/collect-relay-shuffler.md``, "The histogram, party by party".

Security model
    The aggregator sees the shuffled messages and m; the shuffler sees who
    sent how many boxes (independent of the value) but cannot open them.
    A box that does not open, carries a label outside [0, d), or repeats an
    earlier box's ephemeral key (a replay) is dropped and counted
    (``messages_rejected``): it cannot be traced to a user.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from pairwise.dp.bounds import PublicDomain, to_fixed_point
from pairwise.dp.errors import PrivacyParameterError
from pairwise.protocols.ldp.shuffle import HistogramProtocol

from . import sealed

__all__ = ["MAX_BINS", "PURPOSE", "HistogramTask", "user_messages", "analyze", "max_boxes", "box_bytes"]

#: Largest domain (bins) of a collect histogram: a user sends up to d + 1 boxes of 54 bytes.
MAX_BINS = 4096
#: The purpose string in every box's context (:func:`pairwise.protocols.collect.sealed.box_context`).
PURPOSE = "shuffle-histogram"


@dataclass(frozen=True)
class HistogramTask:
    """Public parameters of a shuffle-histogram task (validated on construction)."""

    epsilon: float
    delta: float
    lower: int
    upper: int
    min_users: int
    beta: float = 0.05

    def __post_init__(self) -> None:
        for name in ("lower", "upper", "min_users"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, np.integer))
                and not (isinstance(v, float) and v.is_integer())
            ):
                raise PrivacyParameterError(f"the histogram's {name} must be an integer, got {v!r}")
            object.__setattr__(self, name, int(v))
        if self.upper < self.lower:
            raise PrivacyParameterError(f"the histogram domain needs lower <= upper, got [{self.lower}, {self.upper}]")
        if self.bins > MAX_BINS:
            raise PrivacyParameterError(
                f"a domain of {self.bins} values is too large for a collect histogram "
                f"(at most {MAX_BINS} bins: each user sends up to d + 1 sealed messages)"
            )
        if not (isinstance(self.beta, (int, float)) and 0.0 < float(self.beta) < 1.0):
            raise PrivacyParameterError(f"beta must lie in (0, 1), got {self.beta!r}")
        self.protocol()  # epsilon <= 1, delta, n >= 400 ln(4/delta)/eps^2 (Theorem 3.2)

    @classmethod
    def from_spec(cls, spec: dict) -> HistogramTask:
        """From a ``shuffle-histogram`` task's spec (:mod:`pairwise.protocols.collect.tasks.shuffle_histogram`)."""
        lo, hi = spec["lower"], spec["upper"]
        return cls(
            epsilon=float(spec["epsilon"]),
            delta=float(spec["delta"]),
            lower=lo[0] if isinstance(lo, (list, tuple)) else lo,
            upper=hi[0] if isinstance(hi, (list, tuple)) else hi,
            min_users=int(spec["min_users"]),
            beta=float(spec.get("beta", 0.05)),
        )

    @property
    def bins(self) -> int:
        return self.upper - self.lower + 1

    def protocol(self) -> HistogramProtocol:
        """The randomizer's parameters, p = p(min_users) (raises PrivacyParameterError when invalid)."""
        return HistogramProtocol(float(self.epsilon), float(self.delta), self.min_users, self.bins)

    def as_dict(self) -> dict:
        return asdict(self)


def max_boxes(task: HistogramTask) -> int:
    """Most boxes an honest user sends: one per bin plus its own value's (d + 1)."""
    return task.bins + 1


def box_bytes() -> int:
    """The size of every box of this protocol."""
    return sealed.box_size(sealed.LABEL_BYTES)


def user_messages(value: float, task: HistogramTask, public_key: bytes, task_id: str) -> tuple[list[bytes], bool]:
    """One user's sealed messages for ``value`` (and whether it was clamped into the domain; private to the user).

    The labels are R^hist of the clamped, rounded value (OS CSPRNG); each
    is sealed on its own under the task's context.  The list is in label
    order; the shuffler permutes all users' boxes together.
    """
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"the value must be a finite number, got {value!r}")
    proto = task.protocol()
    k, clamped = to_fixed_point(np.array([v]), PublicDomain(task.lower, task.upper, 0))
    labels = proto.randomize(int(k[0]))
    ctx = sealed.box_context(task_id, PURPOSE)
    return [sealed.seal(sealed.pack_label(int(j)), public_key, ctx) for j in labels], bool(clamped)


def _error_bound(q: float, m: int, beta: float, d: int) -> float:
    """Theorem 3.1 ii with mean m q, union over min(m, d) bins (Theorem 3.2 iii)."""
    b = beta / min(m, d)
    mu = m * q
    L = math.log(2.0 / b)
    t = math.sqrt(3.0 * mu * L) if 3.0 * L <= mu else 3.0 * L
    return (mu + t) / m


def analyze(batches: list[tuple[int, list[bytes]]], task: HistogramTask, private_key: bytes, task_id: str) -> dict:
    """The aggregator's analyzer over the shuffler's batches ``[(users, boxes), ...]``.

    Returns the JSON payload of ``pairwise ldp shuffle-histogram`` (minus the
    non-private ``exact``/``max_error``/``clamped``, which no party of the
    deployment can compute) plus ``messages_rejected`` and ``batches``.
    Raises :class:`PrivacyParameterError` when a batch has fewer than the
    task's n users (a shuffler must never forward one).
    """
    proto = task.protocol()
    d = task.bins
    m = 0
    for users, _ in batches:
        if int(users) < task.min_users:
            raise PrivacyParameterError(
                f"a shuffled batch of {users} users is below the task's minimum of "
                f"{task.min_users}: its noise does not give the promised privacy"
            )
        m += int(users)
    if m == 0:
        raise PrivacyParameterError("no shuffled batch arrived: nothing to analyze")
    ctx = sealed.box_context(task_id, PURPOSE)
    counts = np.zeros(d, dtype=np.int64)
    rejected = 0
    seen: set[bytes] = set()
    for _, boxes in batches:
        for box in boxes:
            try:
                enc = sealed.enc_of(box)
            except sealed.SealedBoxError:
                rejected += 1
                continue
            if enc in seen:  # the same box twice (a replay): counted once
                rejected += 1
                continue
            seen.add(enc)
            try:
                label = sealed.unpack_label(sealed.open_box(box, private_key, ctx, message_bytes=sealed.LABEL_BYTES))
            except sealed.SealedBoxError:
                rejected += 1
                continue
            if label >= d:
                rejected += 1
                continue
            counts[label] += 1
    p, q = proto.inner.p, proto.inner.q
    raw = counts.astype(np.float64) / m - p
    thr = np.where(raw > q, raw, 0.0)
    return {
        "estimate": raw.tolist(),
        "estimate_clamped": np.clip(raw, 0.0, 1.0).tolist(),
        "estimate_thresholded": thr.tolist(),
        "epsilon": float(task.epsilon),
        "delta": float(task.delta),
        "n": m,
        "values": list(range(task.lower, task.upper + 1)),
        "d": d,
        "messages": int(counts.sum()),
        "messages_rejected": rejected,
        "zero_threshold": q,
        "error_bound": _error_bound(q, m, float(task.beta), d),
        "beta": float(task.beta),
        "bounds": [task.lower, task.upper],
        "bounds_from_data": False,
        "batches": len(batches),
        # no party of the deployment can compute these (the one-process command's non-private keys)
        "exact": None,
        "max_error": None,
        "clamped": None,
    }
