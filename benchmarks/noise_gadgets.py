"""AND gates, random bits, variance and exact (eps, delta) of the in-circuit noise, before and after (same run).

Run: .venv/bin/python benchmarks/noise_gadgets.py [--markdown] [--wire] [--garble N]

Table 1 (gadgets alone): for eps in {0.1, 1, 10} and sensitivities S in {1, 2, 321, 65535, 2^32-1},
the discrete Laplace with the earlier rule (``uniform``: one precision for all digits, rigorous bound
and TV to the ideal both <= 2^-40) and with the designed per-digit coins (``designed``: certified delta
<= 2^-40, exact variance within 2^-12 of the ideal), the designed signed geometric where its extra 1/4
of variance fits that tolerance, and 3-ary randomized response.  ``var/ideal`` is the gadget's exact
noise variance (worst case over the values for k-RR) over the ideal discrete Laplace's
2 alpha/(1 - alpha)^2; ``delta`` is the exact stated delta with its method (``exact`` from the pmf,
``certified`` by the ratio certificates, ``bound``, ``pure``).

Table 2 (the ustat main job at eps = 1, P = 1 on the shipped data): the circuit that main built before
this change (discrete Laplace, uniform precision, per-pair delta 2^-40 / #pairs) and the one built now
(``auto``: k-RR for kendall and auc, signed geometric for gini; per-pair delta 2^-40).
``--wire`` also runs every pair of the default data through real 2PC (simulation mode: garbling, IKNP
OT, bytes counted on the in-memory channel) for both circuits and for the kernel alone, and splits the
bytes: garbled tables (32 B per AND), and random-input bytes = bytes(kernel + noise) - bytes(kernel)
- 32 (AND difference), i.e. what the random bits rx (garbler labels) and ry (evaluator OTs) cost today;
``wire w/o rand`` is what remains when they are derived from a seed and random COTs (issue 13 item 1).
``--garble N`` times garbling + evaluation of N samples of the designed discrete Laplace (S = 1).
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

from pairwise.circuits.kernels import build_kernel
from pairwise.circuits.noise import discrete_laplace_gadget, krr_gadget, noisy_kernel
from pairwise.dp.dyadic import choose_discrete_laplace, choose_krr, ideal_discrete_laplace_variance, krr_estimator
from pairwise.dp.errors import NoiseParameterError

EPSILONS = (0.1, 1, 10)
SENSITIVITIES = (1, 2, 321, 2**16 - 1, 2**32 - 1)


def _delta(g) -> str:
    return f"{g.delta:.2e} ({g.method})" if g.delta else f"0 (eps'={g.epsilon:.5g})"


def gadget_rows():
    for eps in EPSILONS:
        for s in SENSITIVITIES:
            ideal = float(ideal_discrete_laplace_variance(eps, s)[0])
            for label, kw in (
                ("DL uniform (before)", dict(precision="uniform")),
                ("DL designed", {}),
                ("signed designed", dict(construction="signed")),
            ):
                t = time.perf_counter()
                try:
                    p = choose_discrete_laplace(eps, s, **kw)
                except NoiseParameterError:
                    continue  # the signed shape's extra 1/4 exceeds the tolerance at small S / large eps
                sel = time.perf_counter() - t
                nc = discrete_laplace_gadget(p)
                yield {
                    "gadget": label,
                    "eps": eps,
                    "S": s,
                    "K": p.bits,
                    "max acc": p.acc,
                    "and": nc.circuit.n_and,
                    "rand_bits": nc.random_width,
                    "var/ideal": f"{float(p.noise_variance) / ideal:.5f}",
                    "delta": _delta(nc.guarantee),
                    "select_s": f"{sel:.2f}",
                }
        q = choose_krr(eps, 3)
        nc = krr_gadget(q)
        worst = float(krr_estimator(q, (-1, 0, 1)).max_variance)
        yield {
            "gadget": "3-RR designed",
            "eps": eps,
            "S": 2,
            "K": "-",
            "max acc": q.acc,
            "and": nc.circuit.n_and,
            "rand_bits": nc.random_width,
            "var/ideal": f"{worst / float(ideal_discrete_laplace_variance(eps, 2)[0]):.5f}",
            "delta": _delta(nc.guarantee),
            "select_s": "-",
        }


def _main_job():
    """(statistic, prepared data, pairs at P = 1) of `pairwise ustat` on its default data."""
    from pairwise.commands.ustat import DEFAULTS
    from pairwise.protocols.datasets import column_domain, load_dataset
    from pairwise.protocols.ustat.driver import prepare_data

    for stat in ("kendall", "auc", "gini"):
        name, cols, label = DEFAULTS[stat]
        d = load_dataset(name)
        doms = [column_domain(name, c) for c in cols]  # the declared public domains, as `pairwise ustat` uses them
        pd = prepare_data(
            stat,
            d[cols[0]],
            d[cols[1]] if stat == "kendall" else None,
            d[label] if label else None,
            lower=[x.lower for x in doms],
            upper=[x.upper for x in doms],
            decimals=[x.scale_decimals for x in doms],
        )
        pairs = min(pd.x.size, pd.y.size) if stat == "auc" else pd.x.size // 2
        yield stat, pd, pairs


def _circuits(stat, pd, pairs, eps=1):
    before = noisy_kernel(
        stat,
        pd.bits,
        epsilon=eps,
        sensitivity=pd.range_,
        noise=choose_discrete_laplace(eps, pd.range_, precision="uniform", lam=40, n_samples=pairs),
    )
    after = noisy_kernel(stat, pd.bits, epsilon=eps, sensitivity=pd.range_)
    return before, after


def _measure_bytes(circuit, g_inputs, e_inputs, batch=4096) -> int:
    """Bytes on the wire of SIMD executions of ``circuit`` (real garbling and IKNP OT, in-memory channel)."""
    from pairwise.mpc.channel import MemoryChannel
    from pairwise.mpc.twopc import EvaluatorSession, GarblerSession

    n = len(next(iter(g_inputs.values())))
    a, b = MemoryChannel.pair(timeout=600)
    err = []

    def evaluator():
        try:
            s = EvaluatorSession(b, session_id=b"bench-noise")
            for s0 in range(0, n, batch):
                s.run(circuit, {k: v[s0 : s0 + batch] for k, v in e_inputs.items()}, output="evaluator")
        except BaseException as exc:  # noqa: BLE001 - reported below
            err.append(exc)
            b.close()

    th = threading.Thread(target=evaluator, daemon=True)
    th.start()
    g = GarblerSession(a, session_id=b"bench-noise")
    for s0 in range(0, n, batch):
        g.run(circuit, {k: v[s0 : s0 + batch] for k, v in g_inputs.items()}, output="evaluator")
    th.join(600)
    if err:
        raise err[0]
    st = a.stats()
    a.close()
    return st["bytes_sent"] + st["bytes_received"]


def main_job_rows(wire: bool):
    from pairwise.protocols.ustat.driver import _pair_inputs
    from pairwise.protocols.ustat.stats import sample_pairs, sample_two_sample_pairs

    for stat, pd, m in _main_job():
        before, after = _circuits(stat, pd, m)
        kernel_and = build_kernel(stat, pd.bits).n_and
        conv = {"gini": pd.scale, "kendall": 1.0, "auc": 0.5}[stat] ** 2
        measured = {}
        if wire:
            rng = np.random.default_rng(1)
            pairs = (
                sample_two_sample_pairs(pd.x.size, pd.y.size, 1, rng)
                if stat == "auc"
                else sample_pairs(pd.x.size, 1, rng)
            )
            gx, ey = _pair_inputs(pd, pairs)
            gx, ey = list(map(int, gx)), list(map(int, ey))
            k_bytes = _measure_bytes(build_kernel(stat, pd.bits), {"x": gx}, {"y": ey})
            for tag, nc in (("before", before), ("after", after)):
                rx, ry = nc.random_inputs(len(gx))
                measured[tag] = _measure_bytes(nc.circuit, {"x": gx, "rx": rx}, {"y": ey, "ry": ry})
            measured["kernel"] = k_bytes
        for tag, nc in (("before", before), ("after", after)):
            row = {
                "statistic": f"{stat} ({pd.bits}-bit, S={pd.range_})",
                "circuit": tag,
                "noise": nc.mechanism,
                "kernel_and": kernel_and,
                "noise_and": nc.noise_and_gates,
                "total_and": nc.circuit.n_and,
                "rand_bits": nc.random_width,
                "table_B": 32 * nc.circuit.n_and,
                "var/pair": f"{float(nc.max_estimate_variance) * conv:.4g}",
                "delta/pair": _delta(nc.guarantee),
            }
            if wire:
                total = measured[tag] / m
                rand = (measured[tag] - measured["kernel"]) / m - 32 * (nc.circuit.n_and - kernel_and)
                row.update(
                    {"bytes/pair": f"{total:.0f}", "rand_B/pair": f"{rand:.0f}", "wire w/o rand": f"{total - rand:.0f}"}
                )
            yield row


def show(rows, markdown: bool) -> None:
    rows = list(rows)
    cols = list(rows[0])
    if markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for r in rows:
            print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    else:
        wid = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
        print("  ".join(c.rjust(wid[c]) for c in cols))
        for r in rows:
            print("  ".join(str(r.get(c, "")).rjust(wid[c]) for c in cols))
    print()


def garble_rate(n: int) -> None:
    from pairwise.circuits.noise import decode_output
    from pairwise.mpc.garble import garble_and_evaluate

    nc = discrete_laplace_gadget(choose_discrete_laplace(1, 1))
    rx, ry = nc.random_inputs(n)
    t = time.perf_counter()
    out = decode_output(nc, garble_and_evaluate(nc.circuit, [rx, ry])[0])
    dt = time.perf_counter() - t
    print(
        f"garbled {n} discrete Laplace samples (S=1, eps=1, {nc.circuit.n_and} ANDs each) in {dt:.2f} s: "
        f"{n / dt:.0f} samples/s, {n * nc.circuit.n_and / dt / 1e6:.2f} M AND/s; mean {out.mean():+.4f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--wire", action="store_true", help="also measure bytes on the wire of the main job's circuits")
    ap.add_argument("--garble", type=int, default=0, metavar="N", help="also time N garbled discrete Laplace samples")
    args = ap.parse_args()
    show(gadget_rows(), args.markdown)
    show(main_job_rows(args.wire), args.markdown)
    if args.garble:
        garble_rate(args.garble)


if __name__ == "__main__":
    main()
