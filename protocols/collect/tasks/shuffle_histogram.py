"""``shuffle-histogram``: the shuffled-model histogram of Balcer and Cheu (Figure 2) among real users.

What it does
    The public parameters are those of ``pairwise ldp shuffle-histogram``
    (the integer domain lower..upper, epsilon <= 1, delta, beta), validated by
    the same constructor (:class:`pairwise.protocols.ldp.shuffle.HistogramProtocol`)
    with n = ``min_users``: the randomizer's noise rate depends on n, so the
    task fixes it in advance and registration closes at that many users.
    A user's messages are :meth:`ShuffleHistogram.messages` (R^hist, OS
    CSPRNG); they travel sealed to the aggregator's key through a shuffler
    process that drops the senders and permutes the batch (the shuffler and
    the sealed box plug in here: :meth:`ShuffleHistogram.finish` is the
    analyzer A^hist the aggregator runs on the opened messages).

Security model
    (eps, delta)-DP in the shuffle model (Theorem 3.2) against the aggregator,
    provided the shuffler hides who sent which message and the aggregator
    alone can open them.
"""

from __future__ import annotations

import numpy as np

from .base import CollectError, TaskProtocol, bounds_lists, number, take

__all__ = ["ShuffleHistogram"]


def _proto(spec: dict):
    from pairwise.dp.errors import PrivacyParameterError
    from pairwise.protocols.ldp.shuffle import HistogramProtocol

    try:
        return HistogramProtocol(spec["epsilon"], spec["delta"], spec["min_users"], spec["d"])
    except (ValueError, PrivacyParameterError) as exc:
        raise CollectError(str(exc)) from None


class ShuffleHistogram(TaskProtocol):
    name = "shuffle-histogram"
    model = "shuffle"
    summary = "shuffled-model histogram (Balcer-Cheu): messages sealed to the aggregator, mixed by a shuffler"

    def validate(self, params: dict, epsilon: float, min_users: int) -> dict:
        lower, upper, _ = bounds_lists(params, 1, decimals=False, integer=True)
        d = upper[0] - lower[0] + 1
        if d < 1 or d > 1 << 20:
            raise CollectError(f"the histogram domain lower..upper must hold 1..2^20 values, got {d}")
        spec = {"lower": lower, "upper": upper, "d": d,
                "delta": number(take(params, "delta", 1e-5), "--delta", lo=0.0, open_lo=True),
                "beta": number(take(params, "beta", 0.05), "--beta", lo=0.0, hi=1.0, open_lo=True)}
        _proto(dict(spec, epsilon=epsilon, min_users=min_users))
        return spec

    def delta(self, spec: dict) -> float:
        return spec["delta"]

    def describe(self, spec: dict) -> str:
        return (f"histogram of {spec['lower'][0]}..{spec['upper'][0]} in the shuffle model: each user sends its "
                f"value plus noise messages, sealed to the aggregator, through a shuffler")

    def messages(self, spec: dict, value) -> np.ndarray:
        """R^hist(x) of one user: its rounded, clamped value's message plus noise messages (OS CSPRNG)."""
        from pairwise.dp.bounds import PublicDomain, to_fixed_point

        lo, hi = spec["lower"][0], spec["upper"][0]
        k, _ = to_fixed_point([float(value)], PublicDomain(lo, hi, 0))
        return _proto(spec).randomize(int(k[0]))

    def finish(self, spec: dict, messages: np.ndarray) -> dict:
        """A^hist on the opened, shuffled messages (labels in [0, d))."""
        proto = _proto(spec)
        counts = proto.label_counts(np.asarray(messages, dtype=np.int64))
        est = proto.raw_frequencies(counts)
        return {
            "estimate": est.tolist(), "estimate_clamped": np.clip(est, 0.0, 1.0).tolist(),
            "estimate_thresholded": proto.analyze_counts(counts).tolist(), "exact": None,
            "epsilon": spec["epsilon"], "delta": spec["delta"], "n": proto.n, "max_error": None,
            "values": list(range(spec["lower"][0], spec["upper"][0] + 1)), "d": spec["d"],
            "messages": int(np.asarray(messages).size), "zero_threshold": proto.inner.q,
            "error_bound": proto.simultaneous_error_bound(spec["beta"]), "beta": spec["beta"],
            "bounds": [spec["lower"][0], spec["upper"][0]], "bounds_from_data": False, "clamped": None,
        }
