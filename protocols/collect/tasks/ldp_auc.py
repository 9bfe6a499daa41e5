"""``ldp-auc``: the locally private AUC from hierarchical histograms among real users ([BBGK20, Sec. 4, App. B]).

What it does
    The public parameters are those of ``pairwise ldp auc`` (alpha = bits,
    the public score domain, the users or budget splitting, the composition,
    the threshold a, the Eq. 10 options), validated by the same constructors
    (:class:`pairwise.protocols.ldp.auc.PrivateHierarchicalHistogram`).  When
    a user joins with its public label, the aggregator draws its public
    assignment with the OS CSPRNG and stores it: with ``users`` splitting one
    level l (levels are dealt in blocks of alpha, a random permutation per
    block and class, so the split stays even) and a uniform Hadamard index
    j in [0, 2^l); with ``budget`` splitting an index for every level.  The
    user quantizes its clamped score, takes the l-bit prefix and sends the
    randomized Hadamard bit <prefix, j> (Algorithm 2, one bit per level it
    answers).  The aggregator refuses anything but bits, then runs the
    frequency oracle (Algorithm 3) and the private recursion of Eq. (10)
    (:meth:`~pairwise.protocols.ldp.auc.PrivateHierarchicalHistogram.load_reports`,
    :func:`~pairwise.protocols.ldp.auc.private_uauc`).

Security model
    Local DP against the aggregator: a user's bits are eps-LDP (one RR bit at
    eps, or alpha bits at eps/alpha; advanced composition on request).
    Assignments and labels are public.
"""

from __future__ import annotations

import secrets

import numpy as np

from .base import BadReport, CollectError, LocalProtocol, bounds_lists, number, one_of, optional_number, take

__all__ = ["LDPAUC"]


def _histogram(spec: dict, n: int):
    from pairwise.dp.errors import PrivacyParameterError
    from pairwise.protocols.ldp.auc import PrivateHierarchicalHistogram

    try:
        return PrivateHierarchicalHistogram(
            spec["bits"], spec["epsilon"], n, spec["splitting"], spec["composition"], spec["delta"]
        )
    except (ValueError, PrivacyParameterError) as exc:
        raise CollectError(str(exc)) from None


class LDPAUC(LocalProtocol):
    name = "ldp-auc"
    summary = "locally private AUC from hierarchical histograms: one randomized Hadamard bit per level answered"

    def validate(self, params: dict, epsilon: float, min_users: int) -> dict:
        from pairwise.protocols.ldp.auc import check_recursion_options

        bits = number(take(params, "bits", 4), "--bits", lo=1, hi=24, integer=True)
        lower, upper, _ = bounds_lists(params, 1, decimals=False)
        spec = {
            "bits": bits,
            "lower": lower,
            "upper": upper,
            "splitting": one_of(take(params, "splitting", "users"), ("users", "budget"), "--splitting"),
            "composition": one_of(take(params, "composition", "basic"), ("basic", "advanced"), "--composition"),
            "delta": number(take(params, "delta", 0.0), "--delta", lo=0.0),
            "a": optional_number(take(params, "a"), "--a"),
            "discarded": take(params, "discarded", "half"),
            "ties": take(params, "ties", "half"),
        }
        try:
            check_recursion_options(spec["a"], spec["discarded"], spec["ties"])
        except ValueError as exc:
            raise CollectError(str(exc)) from None
        if not lower[0] < upper[0]:
            raise CollectError(f"the score domain must satisfy lower < upper, got [{lower[0]:g}, {upper[0]:g}]")
        h = _histogram(dict(spec, epsilon=epsilon), bits)  # epsilon, delta, splitting, composition
        spec["level_epsilon"] = h.level_epsilon
        return spec

    def delta(self, spec: dict) -> float:
        return spec["delta"]

    def needs_label(self, spec: dict) -> bool:
        return True

    def describe(self, spec: dict) -> str:
        per = "one level" if spec["splitting"] == "users" else f"all {spec['bits']} levels"
        return (
            f"AUC from hierarchical histograms: scores on 2^{spec['bits']} bins of the public domain "
            f"[{spec['lower'][0]:g}, {spec['upper'][0]:g}], each user answers {per} with one randomized "
            f"Hadamard bit at eps {spec['level_epsilon']:.4g}"
        )

    def assign(self, spec: dict, label, previous: list[dict]) -> dict:
        from pairwise.protocols.ldp.shuffle import secure_permutation

        alpha = spec["bits"]
        if spec["splitting"] == "budget":
            levels = list(range(1, alpha + 1))
        else:  # deal the levels in blocks of alpha: a fresh random order per block of this class's users
            start = len(previous) - len(previous) % alpha
            used = {a["levels"][0] for a in previous[start:]}
            left = [lv for lv in (secure_permutation(alpha) + 1).tolist() if lv not in used]
            levels = [int(left[0])]
        return {"levels": levels, "indices": [secrets.randbelow(1 << lv) for lv in levels]}

    def randomize(self, spec: dict, assignment: dict, value, value2, label) -> dict:
        from pairwise.dp.bounds import clamp
        from pairwise.protocols.ldp.auc import HadamardFrequencyOracle, quantize_scores

        lo, hi = spec["lower"][0], spec["upper"][0]
        score = clamp([float(value)], lo, hi)[0]
        q = int(quantize_scores(score, spec["bits"], lo, hi)[0])
        bits = []
        for lv, j in zip(assignment["levels"], assignment["indices"]):
            oracle = HadamardFrequencyOracle(lv, spec["level_epsilon"])
            bits.append(int(oracle.randomize(np.array([q >> (spec["bits"] - lv)]), np.array([j]))[0]))
        return {"bits": bits}

    def check_report(self, spec: dict, assignment: dict, label, report) -> dict:
        bits = report.get("bits") if isinstance(report, dict) else None
        if (
            not isinstance(bits, list)
            or len(report) != 1
            or len(bits) != len(assignment["levels"])
            or any(b not in (0, 1) or isinstance(b, bool) for b in bits)
        ):
            raise BadReport(
                f'an ldp-auc report is {{"bits": [...]}} with one 0/1 bit per assigned level '
                f"({len(assignment['levels'])}); got {report!r}"
            )
        return {"bits": [int(b) for b in bits]}

    def finish(self, spec: dict, rows: list) -> dict:
        from pairwise.dp.bounds import clamp_estimate
        from pairwise.protocols.ldp.auc import default_a, private_uauc
        from pairwise.protocols.ldp.interval import NO_INTERVAL

        hists = {}
        for cls in (1, 0):
            mine = [(a, r) for lab, a, r in rows if lab == cls]
            if not mine:
                raise CollectError("the AUC needs at least one positive and one negative report")
            h = _histogram(spec, len(mine))
            levels = np.concatenate([a["levels"] for a, _ in mine])
            indices = np.concatenate([a["indices"] for a, _ in mine]).astype(np.uint64)
            bits = np.concatenate([r["bits"] for _, r in mine]).astype(np.uint8)
            try:
                h.load_reports(levels, indices, bits)
            except ValueError as exc:
                raise CollectError(f"{'positive' if cls else 'negative'} class: {exc}") from None
            hists[cls] = h
        hp, hn = hists[1], hists[0]
        a = (
            spec["a"]
            if spec["a"] is not None
            else default_a(hp.n, hn.n, spec["bits"], max(hp.C, hn.C), spec["discarded"])
        )
        uauc, st = private_uauc(
            hp.estimate,
            hn.estimate,
            spec["bits"],
            hp.variance_bound,
            hn.variance_bound,
            a,
            spec["discarded"],
            spec["ties"],
        )
        est = uauc / (float(hp.n) * float(hn.n))
        return {
            "estimate": est,
            "estimate_clamped": clamp_estimate(est, 0.0, 1.0),
            "exact": None,
            "exact_quantized": None,
            "epsilon": spec["epsilon"],
            "delta": spec["delta"],
            "n": hp.n + hn.n,
            "n_pos": hp.n,
            "n_neg": hn.n,
            "bits": spec["bits"],
            "domain": 1 << spec["bits"],
            "splitting": spec["splitting"],
            "level_epsilon": hp.level_epsilon,
            "a": float(a),
            "tau": float(a * (hp.variance_bound * hn.variance_bound) ** 0.5),
            "recursed_per_level": st.recursed,
            "discarded_per_level": st.discarded,
            "bounds": [spec["lower"][0], spec["upper"][0]],
            "bounds_from_data": False,
            "clamped": None,
            "score": None,
            "label": None,
            "interval": None,
            "interval_method": NO_INTERVAL["auc"],
            "alpha": spec.get("alpha", 0.05),
        }
