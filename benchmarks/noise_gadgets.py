"""AND gates of the in-circuit noise gadgets and of kernel + noise circuits.

Run: .venv/bin/python benchmarks/noise_gadgets.py [--markdown] [--garble N]

Table 1: the discrete Laplace gadget alone for sensitivities 1, 2, 2^16-1,
2^32-1 and randomized response, for eps in {0.1, 1, 10} (delta target 2^-40,
one release).  Table 2: kernel + noise circuits for widths 16 and 32: every
kernel in natural units with discrete Laplace noise of sensitivity = the
kernel's range; ``variance`` in fixed point with 16 bits (its natural range
is 2^(2w-1)); the binary kernels with randomized response.  Gate counts are
exact (counted in the built circuits); ``delta`` is the stated delta
(``exact`` from the exact pmf or a rigorous ``bound``).  ``--garble N``
additionally times garbling + evaluation of N discrete Laplace samples
(S = 1, eps = 1) in one process.
"""

from __future__ import annotations

import argparse
import time

from pairwise.circuits.kernels import build_kernel
from pairwise.circuits.noise import (
    choose_discrete_laplace,
    choose_randomized_response,
    discrete_laplace_gadget,
    noisy_binary_kernel,
    noisy_kernel,
    randomized_response_gadget,
)

EPSILONS = (0.1, 1, 10)
WIDTHS = (16, 32)


def gadget_rows():
    for eps in EPSILONS:
        for s in (1, 2, 2**16 - 1, 2**32 - 1):
            t = time.perf_counter()
            p = choose_discrete_laplace(eps, s)
            sel = time.perf_counter() - t
            nc = discrete_laplace_gadget(p)
            g = nc.guarantee
            yield {
                "gadget": "discrete Laplace", "eps": eps, "S": s, "K": p.bits, "acc": p.acc,
                "and": nc.circuit.n_and, "rand_bits": nc.random_width, "delta": f"{g.delta:.2e} ({g.method})",
                "tv": f"{g.tv_to_ideal:.1e}", "select_s": f"{sel:.2f}",
            }
        rr = choose_randomized_response(eps)
        nc = randomized_response_gadget(rr)
        yield {
            "gadget": "randomized response", "eps": eps, "S": 1, "K": "-", "acc": rr.acc,
            "and": nc.circuit.n_and, "rand_bits": nc.random_width, "delta": f"0 (eps'={nc.guarantee.epsilon:.5g})",
            "tv": f"{nc.guarantee.tv_to_ideal:.1e}", "select_s": "-",
        }


def kernel_rows():
    for w in WIDTHS:
        for eps in EPSILONS:
            for name, fp in (("gini", None), ("auc", None), ("kendall", None), ("collision", None), ("variance", 16)):
                nc = noisy_kernel(name, w, epsilon=eps, fixed_point_bits=fp)
                k = build_kernel(name, w).n_and
                yield {
                    "kernel": name + (f" (fp {fp})" if fp else ""), "w": w, "eps": eps, "noise": "DL", "S": nc.sensitivity,
                    "K": nc.params.bits, "acc": nc.params.acc, "kernel_and": k, "noise_and": nc.params.and_gates,
                    "total_and": nc.circuit.n_and, "out_bits": nc.circuit.outputs[0].width,
                    "delta": f"{nc.guarantee.delta:.2e} ({nc.guarantee.method})",
                }
            for name in ("collision", "greater"):
                nc = noisy_binary_kernel(name, w, epsilon=eps)
                k = (build_kernel("collision", w).n_and if name == "collision" else nc.circuit.n_and - nc.params.and_gates)
                yield {
                    "kernel": name, "w": w, "eps": eps, "noise": "RR", "S": 1, "K": "-", "acc": nc.params.acc,
                    "kernel_and": k, "noise_and": nc.params.and_gates, "total_and": nc.circuit.n_and, "out_bits": 1,
                    "delta": f"0 (eps'={nc.guarantee.epsilon:.5g})",
                }


def show(rows, markdown: bool) -> None:
    rows = list(rows)
    cols = list(rows[0])
    if markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for r in rows:
            print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    else:
        wid = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
        print("  ".join(c.rjust(wid[c]) for c in cols))
        for r in rows:
            print("  ".join(str(r[c]).rjust(wid[c]) for c in cols))
    print()


def garble_rate(n: int) -> None:
    from pairwise.circuits.noise import decode_output
    from pairwise.mpc.garble import garble_and_evaluate

    nc = discrete_laplace_gadget(choose_discrete_laplace(1, 1))
    rx, ry = nc.random_inputs(n)
    t = time.perf_counter()
    out = decode_output(nc, garble_and_evaluate(nc.circuit, [rx, ry])[0])
    dt = time.perf_counter() - t
    print(f"garbled {n} discrete Laplace samples (S=1, eps=1, {nc.circuit.n_and} ANDs each) in {dt:.2f} s: "
          f"{n / dt:.0f} samples/s, {n * nc.circuit.n_and / dt / 1e6:.2f} M AND/s; mean {out.mean():+.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--garble", type=int, default=0, metavar="N", help="also time N garbled discrete Laplace samples")
    args = ap.parse_args()
    show(gadget_rows(), args.markdown)
    show(kernel_rows(), args.markdown)
    if args.garble:
        garble_rate(args.garble)


if __name__ == "__main__":
    main()
