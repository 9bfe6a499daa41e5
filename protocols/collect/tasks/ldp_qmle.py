"""``ldp-qmle``: the one-bit locally private quasi-MLE of quantile regression among real users.

What it does
    The public parameters are those of ``pairwise ldp qmle`` (the public
    response domain [lower, upper] of Eq. 6, tau, the ALD scale sigma, and
    with ``private_x`` the covariate's domain), validated by the same
    constructor (:class:`pairwise.protocols.ldp.qmle.BitModel`).  A user holds
    its response y (``--value``) and one covariate x (``--value2``):

    * public covariate (Sec. 3.1): the user truncates y (Eq. 6) and sends one
      flipped bit (Eq. 7, OS CSPRNG) together with x in the clear;
    * private covariate (Sec. 3.2, Eq. 8): one bit for y and one for x, at
      eps/2 each.

    The aggregator refuses anything but bits (and a finite x), then fits the
    QMLE (:func:`~pairwise.protocols.ldp.qmle.fit_qmle_public`,
    :func:`~pairwise.protocols.ldp.qmle.fit_qmle_private`) once registration closes.

Security model
    Local DP for the private variables (one bit per private variable, whose
    bits together are eps-LDP); a public covariate is, as the paper assumes,
    public.
"""

from __future__ import annotations

import math

import numpy as np

from .base import BadReport, CollectError, LocalProtocol, number, optional_number, take

__all__ = ["LDPQMLE"]


class LDPQMLE(LocalProtocol):
    name = "ldp-qmle"
    summary = "one-bit LDP quasi-MLE of tau-quantile regression of a response on one covariate"

    def validate(self, params: dict, epsilon: float, min_users: int) -> dict:
        from pairwise.dp.errors import PrivacyParameterError
        from pairwise.protocols.ldp.qmle import BitModel

        private_x = bool(take(params, "private_x", False))
        k = 2 if private_x else 1

        def as_list(v, key):
            vals = list(v) if isinstance(v, (list, tuple)) else [v]
            if len(vals) != k:
                raise CollectError(
                    f"--{key} needs {k} value(s): the response"
                    + (", then the covariate (--private-x)" if private_x else "")
                    + f"; got {len(vals)}"
                )
            return [number(x, f"--{key}") for x in vals]

        lower = as_list(take(params, "lower", required=True), "lower")
        upper = as_list(take(params, "upper", required=True), "upper")
        tau = number(take(params, "tau", 0.5), "--tau")
        sigma = optional_number(take(params, "sigma"), "--sigma")
        if sigma is None:
            sigma = (upper[0] - lower[0]) / 10.0
        try:
            BitModel(lower[0], upper[0], epsilon, tau, sigma)  # epsilon, bounds, tau, sigma
            if private_x:
                BitModel(lower[1], upper[1], epsilon, tau, 1.0)  # the covariate's bounds
        except (ValueError, PrivacyParameterError) as exc:
            raise CollectError(str(exc)) from None
        return {"lower": lower, "upper": upper, "tau": tau, "sigma": sigma, "private_x": private_x}

    def values(self, spec: dict) -> int:
        return 2

    def describe(self, spec: dict) -> str:
        x = (
            f"the covariate is private too (one bit on [{spec['lower'][1]:g}, {spec['upper'][1]:g}], eps/2 each)"
            if spec["private_x"]
            else "the covariate (--value2) is sent in the clear: it is public"
        )
        return (
            f"{spec['tau']}-quantile regression by one-bit LDP QMLE: the response (--value) truncated to "
            f"[{spec['lower'][0]:g}, {spec['upper'][0]:g}] and sent as one flipped bit; {x}"
        )

    def randomize(self, spec: dict, assignment: dict, value, value2, label) -> dict:
        from pairwise.protocols.ldp.qmle import submit_private_x, submit_public_x

        y = np.array([float(value)])
        if spec["private_x"]:
            z, w = submit_private_x(
                y,
                np.array([[float(value2)]]),
                (spec["lower"][0], spec["upper"][0]),
                [(spec["lower"][1], spec["upper"][1])],
                spec["epsilon"],
            )
            return {"z": int(z[0]), "w": [int(w[0, 0])]}
        z = submit_public_x(y, spec["lower"][0], spec["upper"][0], spec["epsilon"])
        return {"z": int(z[0]), "x": [float(value2)]}

    def check_report(self, spec: dict, assignment: dict, label, report) -> dict:
        ok = isinstance(report, dict) and report.get("z") in (0, 1) and not isinstance(report.get("z"), bool)
        key = "w" if spec["private_x"] else "x"
        vals = report.get(key) if isinstance(report, dict) else None
        if ok and isinstance(vals, list) and len(vals) == 1 and set(report) == {"z", key}:
            v = vals[0]
            if spec["private_x"] and v in (0, 1) and not isinstance(v, bool):
                return {"z": int(report["z"]), "w": [int(v)]}
            if not spec["private_x"] and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                return {"z": int(report["z"]), "x": [float(v)]}
        raise BadReport(
            f'an ldp-qmle report is {{"z": bit, "{key}": [{"bit" if spec["private_x"] else "x"}]}}; got {report!r}'
        )

    def finish(self, spec: dict, rows: list) -> dict:
        from pairwise.protocols.ldp.interval import NO_INTERVAL
        from pairwise.protocols.ldp.qmle import fit_qmle_private, fit_qmle_public

        if len(rows) < 3:
            raise CollectError(f"the QMLE needs at least 3 reports, got {len(rows)}")
        z = np.asarray([r["z"] for _, _, r in rows], dtype=np.int64)
        lo, hi = spec["lower"][0], spec["upper"][0]
        if spec["private_x"]:
            w = np.asarray([r["w"] for _, _, r in rows], dtype=np.int64)
            xb = [(spec["lower"][1], spec["upper"][1])]
            res = fit_qmle_private(z, w, (lo, hi), xb, spec["epsilon"], spec["tau"], spec["sigma"])
        else:
            xb = None
            x = np.asarray([r["x"] for _, _, r in rows], dtype=np.float64)
            res = fit_qmle_public(z, x, lo, hi, spec["epsilon"], spec["tau"], spec["sigma"])
        return {
            "estimate": res.theta.tolist(),
            "exact": None,
            "epsilon": spec["epsilon"],
            "delta": 0.0,
            "n": int(z.size),
            "coefficients": ["intercept", "x"],
            "std_errors": res.std_errors.tolist(),
            "covariance": res.covariance.tolist(),
            "tau": spec["tau"],
            "sigma": res.sigma,
            "bounds": [lo, hi],
            "covariate_bounds": xb,
            "private_x": spec["private_x"],
            "bounds_from_data": False,
            "clamped": None,
            "converged": res.converged,
            "loglik": res.loglik,
            "interval": None,
            "interval_method": NO_INTERVAL["qmle"],
            "alpha": spec.get("alpha", 0.05),
        }
