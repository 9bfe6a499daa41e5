"""``shuffle-histogram``: the shuffled-model histogram of Balcer and Cheu (Figure 2) among real users.

What it does
    The public parameters are those of ``pairwise ldp shuffle-histogram``
    (the integer domain lower..upper, epsilon <= 1, delta, beta), validated by
    the same constructor (:class:`pairwise.protocols.ldp.shuffle.HistogramProtocol`)
    with n = ``min_users``: the randomizer's noise rate depends on n, so the
    task fixes it in advance and registration closes at that many users.
    A user's messages are R^hist (:meth:`ShuffleHistogram.messages`, OS
    CSPRNG), each sealed on its own to the task's public key
    (``seal_public_key``, made by the aggregator with the task) and sent to
    the shuffler named by ``--shuffler HOST:PORT`` (and ``--shuffler-name``,
    its certificate name, which users pin and from which alone the
    aggregator accepts batches); :mod:`pairwise.protocols.collect.histogram`
    splits the protocol between the parties and
    :mod:`pairwise.protocols.collect.shuffler` is the shuffler.
    :meth:`ShuffleHistogram.finish` is the analyzer A^hist over the
    shuffler's batches.  A user sends up to d + 1 boxes, so d is at most
    :data:`pairwise.protocols.collect.histogram.MAX_BINS`.

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
        from pairwise.mpc.tls import CertificateError, check_name

        from ..histogram import MAX_BINS
        from ..wire import parse_address

        lower, upper, _ = bounds_lists(params, 1, decimals=False, integer=True)
        d = upper[0] - lower[0] + 1
        if d < 1 or d > MAX_BINS:
            raise CollectError(
                f"the histogram domain lower..upper must hold 1..{MAX_BINS} values (each user sends "
                f"up to d + 1 sealed messages), got {d}"
            )
        shuffler = take(params, "shuffler", required=True)
        try:
            parse_address(shuffler)
        except ValueError as exc:
            raise CollectError(f"--shuffler: {exc}") from None
        shuffler_name = take(params, "shuffler_name")
        if shuffler_name is not None:
            try:
                check_name(shuffler_name)
            except CertificateError as exc:
                raise CollectError(f"--shuffler-name: {exc}") from None
        spec = {
            "lower": lower,
            "upper": upper,
            "d": d,
            "delta": number(take(params, "delta", 1e-5), "--delta", lo=0.0, open_lo=True),
            "beta": number(take(params, "beta", 0.05), "--beta", lo=0.0, hi=1.0, open_lo=True),
            "shuffler": str(shuffler),
            "shuffler_name": shuffler_name,
        }
        _proto(dict(spec, epsilon=epsilon, min_users=min_users))
        return spec

    def delta(self, spec: dict) -> float:
        return spec["delta"]

    def describe(self, spec: dict) -> str:
        return (
            f"histogram of {spec['lower'][0]}..{spec['upper'][0]} in the shuffle model: each user sends its "
            f"value plus noise messages, sealed to the aggregator, through the shuffler at {spec['shuffler']}"
        )

    def messages(self, spec: dict, value) -> np.ndarray:
        """R^hist(x) of one user: its rounded, clamped value's message plus noise messages (OS CSPRNG)."""
        from pairwise.dp.bounds import PublicDomain, to_fixed_point

        lo, hi = spec["lower"][0], spec["upper"][0]
        k, _ = to_fixed_point([float(value)], PublicDomain(lo, hi, 0))
        return _proto(spec).randomize(int(k[0]))

    def finish(self, spec: dict, batches: list[tuple[int, list[bytes]]], private_key: bytes, task_id: str) -> dict:
        """A^hist on the shuffler's batches, opened with the task's key (:func:`pairwise.protocols.collect.histogram.analyze`)."""
        from pairwise.dp.errors import PrivacyParameterError
        from pairwise.protocols.ldp.interval import histogram_band

        from ..histogram import HistogramTask, analyze

        task = HistogramTask.from_spec(spec)
        try:
            out = analyze(batches, task, private_key, task_id)
        except PrivacyParameterError as exc:
            raise CollectError(str(exc)) from None
        # today's band, from public values only: the m users analyzed, d, the randomizer's p, alpha
        alpha = spec.get("alpha", 0.05)
        below, above, method = histogram_band(out["n"], out["d"], task.protocol().inner.p, alpha)
        est = out["estimate"]
        out.update(
            {
                "interval": [[e - below, e + above] for e in est],
                "interval_clamped": [[min(max(e - below, 0.0), 1.0), min(max(e + above, 0.0), 1.0)] for e in est],
                "interval_method": method,
                "interval_width": below + above,
                "alpha": alpha,
            }
        )
        return out
