"""``ldp-ustat``: [BBGK20, Algorithm 1] among real users (quantization + k-ary randomized response).

What it does
    The public parameters are those of ``pairwise ldp ustat`` (kernel gini,
    kendall or auc; the public domain of each column; k bins per coordinate,
    or the discrete grid itself; the quantized kernel of Eq. 14 or 15), and
    the protocol is built by the same function
    (:func:`pairwise.protocols.ldp.ustat.from_domains`).  Each user clamps its
    value into the domain, quantizes it into one of K cells and sends one
    k-RR report (Eq. 9) drawn from the OS CSPRNG; the aggregator refuses a
    report outside [0, K) and, once registration closes, computes the
    unbiased estimate from the histogram of reports (Lemma 1), two-sample
    with the users' public labels for the AUC.

Security model
    Local DP: one report per user is eps-LDP (k-RR, Theorem 2), whatever the
    aggregator does.  The user stores its report in its own ledger before
    sending it, so a retry re-sends the same report, never a fresh one.
"""

from __future__ import annotations

import numpy as np

from .base import BadReport, CollectError, LocalProtocol, bounds_lists, domains, number, one_of, take

__all__ = ["LDPUStat"]


def _proto(spec: dict):
    from pairwise.protocols.ldp.ustat import from_domains

    names = ("x", "y") if spec["kernel"] == "kendall" else ("x",)
    doms = domains(spec["lower"], spec["upper"], spec["decimals"], names)
    try:
        return from_domains(
            spec["kernel"],
            doms,
            spec["epsilon"],
            k=spec["k"],
            discrete=spec["discrete"],
            quantized_kernel=spec["quantized_kernel"],
        )
    except ValueError as exc:
        raise CollectError(str(exc)) from None


class LDPUStat(LocalProtocol):
    name = "ldp-ustat"
    summary = "Algorithm 1 of the ustats paper: each user sends one k-RR report of its quantized value"

    def validate(self, params: dict, epsilon: float, min_users: int) -> dict:
        kernel = one_of(take(params, "kernel", "gini"), ("gini", "kendall", "auc"), "--kernel")
        k = 2 if kernel == "kendall" else 1
        lower, upper, decs = bounds_lists(params, k)
        spec = {
            "kernel": kernel,
            "lower": lower,
            "upper": upper,
            "decimals": decs,
            "k": number(take(params, "k", 8), "--k", lo=1, integer=True),
            "discrete": bool(take(params, "discrete", False)),
            "quantized_kernel": one_of(
                take(params, "quantized_kernel", "midpoint"), ("midpoint", "average"), "--quantized-kernel"
            ),
        }
        proto, discrete = _proto(dict(spec, epsilon=epsilon))
        doms = domains(lower, upper, decs, ("x", "y")[:k])
        spec.update(
            {
                "discrete": discrete,
                "cells": proto.cells,
                "beta": proto.beta,
                "decimals": [d.scale_decimals for d in doms],
            }
        )
        return spec

    def values(self, spec: dict) -> int:
        return 2 if spec["kernel"] == "kendall" else 1

    def needs_label(self, spec: dict) -> bool:
        return spec["kernel"] == "auc"

    def describe(self, spec: dict) -> str:
        grid = "; ".join(f"[{lo:g}, {hi:g}]" for lo, hi in zip(spec["lower"], spec["upper"]))
        how = "the discrete grid" if spec["discrete"] else f"{spec['k']} bins per coordinate"
        return (
            f"{spec['kernel']} by Algorithm 1: one k-ary randomized response over {spec['cells']} cells "
            f"({how}, beta {spec['beta']:.4f}), public domain {grid}"
        )

    def randomize(self, spec: dict, assignment: dict, value, value2, label) -> dict:
        from pairwise.dp.bounds import clamp

        proto, _ = _proto(spec)
        vals = [value] if spec["kernel"] != "kendall" else [value, value2]
        point = [float(clamp([v], lo, hi)[0][0]) for v, lo, hi in zip(vals, spec["lower"], spec["upper"])]
        data = np.asarray(point[:1] if len(point) == 1 else [point], dtype=np.float64)
        cell = proto.encode(data)
        return {"cell": int(proto.randomize(cell)[0])}

    def check_report(self, spec: dict, assignment: dict, label, report) -> dict:
        cell = report.get("cell") if isinstance(report, dict) else None
        if isinstance(cell, bool) or not isinstance(cell, int) or not 0 <= cell < spec["cells"] or len(report) != 1:
            raise BadReport(f'an ldp-ustat report is {{"cell": c}} with c in [0, {spec["cells"]}); got {report!r}')
        return {"cell": cell}

    def finish(self, spec: dict, rows: list) -> dict:
        from pairwise.dp.bounds import clamp_estimate
        from pairwise.protocols.ldp.interval import alg1_interval, alg1_kernel_range

        proto, discrete = _proto(spec)
        alpha = spec.get("alpha", 0.05)  # tasks created before intervals: today's default
        cells = np.asarray([r["cell"] for _, _, r in rows], dtype=np.int64)
        if spec["kernel"] == "auc":
            lab = np.asarray([lab for lab, _, _ in rows])
            if not ((lab == 1).any() and (lab == 0).any()):
                raise CollectError("the AUC needs at least one positive and one negative report")
            est = proto.estimate_two_sample(cells[lab == 1], cells[lab == 0])
            iw = alg1_interval(proto.beta, 1.0, n_pos=int((lab == 1).sum()), n_neg=int((lab == 0).sum()), alpha=alpha)
            natural = (0.0, 1.0)
        else:
            if cells.size < 2:
                raise CollectError(f"a U-statistic needs at least 2 reports, got {cells.size}")
            est = proto.estimate(cells)
            iw = alg1_interval(
                proto.beta, alg1_kernel_range((proto.matrix + proto.matrix.T) / 2), n=int(cells.size), alpha=alpha
            )
            natural = (-1.0, 1.0) if spec["kernel"] == "kendall" else (0.0, spec["upper"][0] - spec["lower"][0])
        return {
            "estimate": float(est),
            "estimate_clamped": clamp_estimate(est, *natural),
            "natural_range": list(natural),
            "exact": None,
            "exact_quantized": None,
            "epsilon": spec["epsilon"],
            "delta": 0.0,
            "n": int(cells.size),
            "kernel": spec["kernel"],
            "cells": proto.cells,
            "beta": proto.beta,
            "quantized_kernel": None if discrete else spec["quantized_kernel"],
            "columns": None,
            "bounds": [spec["lower"], spec["upper"]],
            "decimals": spec["decimals"] if discrete else None,
            "bounds_from_data": False,
            "clamped": None,
            "interval": iw.around(est),
            "interval_clamped": [clamp_estimate(v, *natural) for v in iw.around(est)],
            "interval_method": iw.method,
            "interval_width": iw.width,
            "alpha": alpha,
        }
