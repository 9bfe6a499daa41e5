"""``--alpha`` and the display of (1 - alpha) intervals, shared by the commands that publish one.

What it does
    :func:`add_alpha` adds ``--alpha A`` (default 0.05: a 95% interval),
    validated while the command line is parsed; :func:`interval_line` formats
    an interval for the text report.  Every interval's width is a function of
    public parameters only (``docs/intervals.md``), so it is part of the DP
    release: it can be published next to the estimate.

Security model
    None of its own: parsing and display only.
"""

from __future__ import annotations

import argparse
import math

__all__ = ["add_alpha", "alpha_type", "interval_line", "DEFAULT_ALPHA"]

DEFAULT_ALPHA = 0.05


def alpha_type(text: str) -> float:
    """An interval's miss probability: a number in (0, 0.5]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(v) and 0 < v <= 0.5):
        raise argparse.ArgumentTypeError(f"alpha must lie in (0, 0.5] (0.05 gives a 95% interval), got {text}")
    return v


def add_alpha(p) -> None:
    """``--alpha A``: the published interval covers the target with probability >= 1 - A."""
    p.add_argument(
        "--alpha",
        type=alpha_type,
        default=DEFAULT_ALPHA,
        metavar="A",
        help="the (1 - A) interval published with the estimate (default 0.05: 95%%); its width "
        "depends on public parameters only",
    )


def interval_line(
    interval, alpha: float | None = None, clamp: tuple[float, float] | None = None, fmt: str = ".6g"
) -> str:
    """``[lo, hi]``, clamped to the statistic's natural range if given, then `` (95%)`` if ``alpha`` is given."""
    lo, hi = interval
    if clamp is not None:
        lo, hi = min(max(lo, clamp[0]), clamp[1]), min(max(hi, clamp[0]), clamp[1])
    return f"[{lo:{fmt}}, {hi:{fmt}}]" + ("" if alpha is None else f" ({100 * (1 - alpha):g}%)")
