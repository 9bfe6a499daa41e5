"""``ustat-2pc``: the 2PC subsampling U-statistic among real users ([BBGK20, Sec. 5]).

What it does
    The public parameters are those of ``pairwise ustat`` (statistic gini,
    kendall or auc; the public domain of each private column; pairs per user
    P; the in-circuit noise and the delta of one pair's release), validated
    by the same functions (:mod:`pairwise.protocols.ustat.public`).  Then:

    1. when registration closes, the aggregator samples P independent
       permutations of the registered users with the OS CSPRNG and cuts each
       into pairs (for the AUC, P matchings of positives with negatives;
       :func:`pairwise.protocols.ustat.stats.sample_pairs`,
       :func:`~pairwise.protocols.ustat.stats.sample_two_sample_pairs`), so no
       user is in more than P pairs (Sec. 5, step 1);
    2. in every pair the first user garbles and the second evaluates the
       kernel-plus-noise circuit of :func:`pairwise.protocols.ustat.public.build_noisy_kernel`
       (eps / P per release, sensitivity the kernel's public range), each
       feeding its own clamped value and its own CSPRNG noise bits; the
       evaluator reports the noisy value to the aggregator (step 2);
    3. the aggregator averages the completed pairs
       (:func:`pairwise.protocols.ustat.public.estimate_from_sum`, step 3).

    Pairs whose users drop out are not replaced: the average is over the
    completed pairs, which are a subset chosen by who stayed (not by the
    data), and the result reports pairs planned, completed and dropped.

Security model
    Semi-honest users and aggregator, computational DP per user as in
    ``pairwise ustat``: each user is in at most P pairs, each pair's release
    is (eps/P, delta_pair)-DP in the user's value, so a user's whole
    participation is (eps, P delta_pair)-DP.  The aggregator sees who is
    paired with whom, byte counts and the noisy values.
"""

from __future__ import annotations

import threading
from fractions import Fraction

import numpy as np

from .base import BadReport, CollectError, PairProtocol, number, one_of, take

__all__ = ["UStat2PC"]

_CIRCUITS: dict = {}
_CIRCUITS_LOCK = threading.Lock()


def _public(spec: dict):
    from pairwise.protocols.ustat.public import public_params

    return public_params(
        spec["statistic"], lower=spec["lower"], upper=spec["upper"], decimals=spec["decimals"], bits=spec["bits"]
    )


class UStat2PC(PairProtocol):
    name = "ustat-2pc"
    summary = "DP U-statistic (gini, kendall, auc) by 2PC between sampled pairs of users (ustats Sec. 5)"

    def validate(self, params: dict, epsilon: float, min_users: int) -> dict:
        from pairwise.protocols.ustat.public import (
            DEFAULT_PAIR_DELTA,
            UStatError,
            check_parameters,
            per_pair_epsilon,
            public_params,
        )

        statistic = one_of(take(params, "statistic", required=True), ("gini", "kendall", "auc"), "--statistic")
        P = number(take(params, "pairs_per_user", 1), "--pairs-per-user", lo=1, integer=True)
        noise = take(params, "noise", "auto")
        pair_delta = number(take(params, "pair_delta", DEFAULT_PAIR_DELTA), "--pair-delta")
        bits = take(params, "bits")
        k = 2 if statistic == "kendall" else 1

        def as_list(v, key):
            if v is None:
                return None
            vals = list(v) if isinstance(v, (list, tuple)) else [v]
            if len(vals) != k:
                raise CollectError(f"--{key} needs one value per private column ({k}), got {len(vals)}")
            return vals

        lower = as_list(take(params, "lower", required=True), "lower")
        upper = as_list(take(params, "upper", required=True), "upper")
        decimals = as_list(take(params, "decimals"), "decimals")
        try:
            check_parameters(statistic, epsilon, P, noise=noise, pair_delta=pair_delta)
            pp = public_params(statistic, lower=lower, upper=upper, decimals=decimals, bits=bits)
            if statistic != "auc" and P > min_users - 1:
                raise UStatError(
                    f"pairs per user P = {P} exceeds n - 1 = {min_users - 1} for the minimum of "
                    f"{min_users} users: raise --min-users or lower --pairs-per-user"
                )
        except (UStatError, ValueError) as exc:
            raise CollectError(str(exc)) from None
        spec = {
            "statistic": statistic,
            "lower": [d.lower for d in pp.domains],
            "upper": [d.upper for d in pp.domains],
            "decimals": [d.scale_decimals for d in pp.domains],
            "bits": pp.bits,
            "pairs_per_user": P,
            "noise": noise,
            "pair_delta": pair_delta,
            "pair_channel": take(params, "pair_channel", "tls"),
        }
        one_of(spec["pair_channel"], ("plain", "tls"), "pair channel")
        eps_pair, _ = per_pair_epsilon(epsilon, "subsample", P, 0, 0.0)
        spec["epsilon_per_pair"] = float(eps_pair)
        spec["epsilon_per_pair_exact"] = str(eps_pair)  # eps / P exactly: every party builds the same circuit
        nc = self._build(dict(spec, epsilon=epsilon))  # a noise that cannot be built is refused here
        g = nc.guarantee
        spec.update(
            {
                "mechanism": nc.mechanism,
                "and_gates_per_pair": nc.circuit.n_and,
                "circuit_hash": nc.circuit.content_hash,
                "noise_delta_per_pair": float(g.delta) if g is not None else 0.0,
            }
        )
        return spec

    def delta(self, spec: dict) -> float:
        return min(1.0, spec["pairs_per_user"] * spec["noise_delta_per_pair"])

    def values(self, spec: dict) -> int:
        return 2 if spec["statistic"] == "kendall" else 1

    def needs_label(self, spec: dict) -> bool:
        return spec["statistic"] == "auc"

    def describe(self, spec: dict) -> str:
        cols = ", ".join(
            f"[{lo:g}, {hi:g}] ({d} decimals)" for lo, hi, d in zip(spec["lower"], spec["upper"], spec["decimals"])
        )
        return (
            f"{spec['statistic']} by 2PC between paired users: {spec['pairs_per_user']} pair(s) per user, "
            f"eps {spec['epsilon_per_pair']:.4g} per pair ({spec['mechanism']} noise in the circuit, "
            f"{spec['and_gates_per_pair']} AND gates), public domain {cols}"
        )

    # ------------------------------------------------------------------ the circuit
    def _build(self, spec: dict):
        from pairwise.protocols.ustat.public import UStatError, build_noisy_kernel

        key = (
            spec["statistic"],
            tuple(spec["lower"]),
            tuple(spec["upper"]),
            tuple(spec["decimals"]),
            spec["bits"],
            spec["epsilon_per_pair_exact"],
            spec["noise"],
            spec["pair_delta"],
        )
        with _CIRCUITS_LOCK:
            nc = _CIRCUITS.get(key)
        if nc is None:
            try:
                nc = build_noisy_kernel(
                    _public(spec), Fraction(spec["epsilon_per_pair_exact"]), Fraction(spec["pair_delta"]), spec["noise"]
                )
            except (UStatError, ValueError) as exc:
                raise CollectError(str(exc)) from None
            with _CIRCUITS_LOCK:
                _CIRCUITS[key] = nc
        return nc

    def circuit(self, spec: dict):
        nc = self._build(spec)
        if "circuit_hash" in spec and nc.circuit.content_hash != spec["circuit_hash"]:
            raise CollectError(
                "this pairwise builds a different circuit for the task than the aggregator announced "
                "(another pairwise version?); both users of a pair must run the same release"
            )
        return nc

    def encode(self, spec: dict, value, value2, label) -> int:
        from pairwise.protocols.ustat.public import UStatError, encode_input

        try:
            word, _ = encode_input(_public(spec), value, value2)
        except UStatError as exc:
            raise CollectError(str(exc)) from None
        return word

    def check_value(self, spec: dict, value) -> int:
        from pairwise.protocols.ustat.public import valid_output

        if not valid_output(self.circuit(spec), value):
            raise BadReport(f"{value!r} is not an output of this task's circuit")
        return int(value)

    # ------------------------------------------------------------------ pairing (Sec. 5, step 1)
    def pair(self, spec: dict, users: list[tuple[str, int | None]], rng) -> list[tuple[str, str, int]]:
        from pairwise.protocols.ustat.stats import sample_pairs, sample_two_sample_pairs

        P = spec["pairs_per_user"]
        if spec["statistic"] == "auc":
            pos = [u for u, lab in users if lab == 1]
            neg = [u for u, lab in users if lab == 0]
            if not pos or not neg:
                raise CollectError(
                    f"the AUC needs at least one positive and one negative user; "
                    f"{len(pos)} positive and {len(neg)} negative joined"
                )
            if P > min(len(pos), len(neg)):
                raise CollectError(
                    f"pairs per user P = {P} exceeds the {min(len(pos), len(neg))} distinct partners "
                    f"the smaller class offers ({len(pos)} positive, {len(neg)} negative users)"
                )
            idx = sample_two_sample_pairs(len(pos), len(neg), P, rng)
            per_round = min(len(pos), len(neg))
            return [(pos[int(i)], neg[int(j)], k // per_round) for k, (i, j) in enumerate(idx)]
        names = [u for u, _ in users]
        if len(names) < 2:
            raise CollectError(f"{spec['statistic']} needs at least 2 users to form a pair; {len(names)} joined")
        if P > len(names) - 1:
            raise CollectError(f"pairs per user P = {P} exceeds n - 1 = {len(names) - 1}, the number of other users")
        idx = sample_pairs(len(names), P, rng)
        per_round = len(names) // 2
        return [(names[int(i)], names[int(j)], k // per_round) for k, (i, j) in enumerate(idx)]

    # ------------------------------------------------------------------ step 3
    def finish(self, spec: dict, values: list[int], stats: dict) -> dict:
        from pairwise.protocols.ustat.interval import ustat_interval
        from pairwise.protocols.ustat.public import estimate_from_sum, natural_range

        nc = self.circuit(spec)
        pp = _public(spec)
        if not values:
            raise CollectError(
                f"no pair completed ({stats['pairs_planned']} planned, {stats['pairs_dropped']} "
                "dropped): there is nothing to average"
            )
        total = int(nc.reported_values(np.asarray(values, dtype=np.int64)).astype(object).sum())
        estimate = estimate_from_sum(nc, pp, total, len(values))
        lo_nat, hi_nat = natural_range(pp)
        g = nc.guarantee
        conv = {"gini": pp.scale, "kendall": 1.0, "auc": 0.5}[pp.statistic]
        m = len(values)
        # the (1 - alpha) interval of today's ustat, from the public design: users paired (AUC: positives garble,
        # negatives evaluate), P, the pairs averaged, the circuit
        auc = pp.statistic == "auc"
        n_rows = stats.get("garblers", stats["users_paired"]) if auc else stats["users_paired"]
        n_cols = stats.get("evaluators", stats["users_paired"]) if auc else stats["users_paired"]
        alpha = spec.get("alpha", 0.05)
        iw = ustat_interval(
            nc,
            R=pp.range_,
            design="subsample",
            two_sample=auc,
            n_rows=n_rows,
            n_cols=n_cols,
            P=spec["pairs_per_user"],
            pairs=m,
            alpha=alpha,
            to_natural=float(nc.unit) * conv,
        )
        interval = iw.around(float(estimate))
        return {
            "statistic": spec["statistic"],
            "estimate": float(estimate),
            "exact": None,
            "epsilon": spec["epsilon"],
            "delta": self.delta(spec),
            "n": stats["users_paired"],
            "pairs": m,
            "pairs_per_user": spec["pairs_per_user"],
            "and_gates": nc.circuit.n_and * m,
            "bytes": stats["bytes"],
            "seconds": stats["seconds"],
            "mode": "collect",
            "executions": m,
            "theorem5_mse": None,
            "estimate_clamped": min(max(float(estimate), lo_nat), hi_nat),
            "natural_range": [lo_nat, hi_nat],
            "exact_quantized": None,
            "clamped": None,
            "domain": [d.as_dict() for d in pp.domains],
            "and_gates_per_pair": nc.circuit.n_and,
            "bits": pp.bits,
            "noise_delta_per_pair": float(g.delta) if g is not None else 0.0,
            "epsilon_per_pair": spec["epsilon_per_pair"],
            "design": "subsample",
            "noise_variance_per_pair": float(nc.max_estimate_variance) * (float(nc.unit) * conv) ** 2,
            "noise": nc.mechanism,
            "bytes_per_pair": stats["bytes"] / m,
            "noise_and_gates_per_pair": nc.noise_and_gates,
            "random_bits_per_pair": nc.random_width,
            "noise_epsilon_per_pair": float(g.epsilon) if g is not None else None,
            "noise_delta_method": g.method if g is not None else None,
            "pair_delta": spec["pair_delta"],
            "sample_mse": None,
            "cluster": None,
            "rr_estimate": None,
            "rr_estimate_clamped": None,
            "data": None,
            "columns": None,
            "interval": interval,
            "interval_clamped": [min(max(v, lo_nat), hi_nat) for v in interval],
            "interval_method": iw.method,
            "interval_width": iw.width,
            "alpha": alpha,
            "kernel_check": None,
            "pairs_per_user_rule": None,
        }
