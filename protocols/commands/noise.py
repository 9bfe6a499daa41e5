"""``pairwise noise``: sample the in-circuit discrete Laplace gadget and show its guarantee.

Commands
    ``pairwise noise sample --epsilon E --sensitivity S --count N [--garbled] [--json]``
        Chooses the gadget's support and precision
        (:func:`pairwise.circuits.noise.choose_discrete_laplace`, delta target
        2^-lam / releases), draws N samples and prints their histogram and
        the stated (epsilon, delta).  With ``--garbled`` the gadget circuit is
        garbled and evaluated (half-gates, SIMD batches) on random-bit shares
        of both parties drawn from the OS CSPRNG; otherwise the exact numpy
        sampler draws from the same distribution.  JSON keys: ``values``,
        ``counts`` (the samples: the only random keys), ``epsilon``,
        ``delta``, ``and_gates_per_sample`` (plus ``method``,
        ``delta_bound``, ``tv_to_ideal``, ``bits``, ``acc``,
        ``random_bits_per_party``, ``garbled``), all functions of the public
        flags.  Every flag is checked before any sample is drawn.
    ``pairwise noise params --epsilon E --sensitivity S [--json]``
        The chosen parameters, AND gates and guarantee, without sampling.

Security model: ``--garbled`` runs both roles in one process (a demonstration
of the circuit, not a two-party protocol); the noise is drawn from the OS
CSPRNG in both modes.
"""

from __future__ import annotations

import json

import numpy as np

from pairwise.circuits.noise import (
    NoiseParameterError,
    choose_discrete_laplace,
    decode_output,
    discrete_laplace_gadget,
    discrete_laplace_guarantee,
    sample_discrete_laplace,
)

#: JSON keys holding the random samples; every other key is a function of the public flags.
DP_KEYS = ("values", "counts")
NOT_PRIVATE_KEYS: tuple = ()

GARBLE_CHUNK = 1 << 15
MAX_COUNT = 10**8
HIST_ROWS = 41


def _add_common(p) -> None:
    p.add_argument("--epsilon", type=float, required=True, help="privacy budget of one release (> 0)")
    p.add_argument("--sensitivity", type=int, default=1, help="integer sensitivity S of the query (output units), default 1")
    p.add_argument("--lam", type=int, default=40, help="statistical security: delta target 2^-lam / releases (default 40)")
    p.add_argument("--releases", type=int, default=1, help="number of releases sharing the 2^-lam delta budget (default 1)")
    p.add_argument("--json", action="store_true")


def register(root, groups) -> None:
    p = root.add_parser("noise", help="in-circuit DP noise gadgets (discrete Laplace)")
    sub = p.add_subparsers(dest="noise_command", metavar="WHAT")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])

    s = sub.add_parser("sample", help="draw samples from the discrete Laplace gadget and print the histogram")
    _add_common(s)
    s.add_argument("--count", type=int, required=True, help="number of samples N")
    s.add_argument("--garbled", action="store_true", help="garble and evaluate the gadget circuit (SIMD) instead of the exact sampler")
    s.set_defaults(func=cmd_sample)

    q = sub.add_parser("params", help="the chosen support, precision, AND gates and (epsilon, delta)")
    _add_common(q)
    q.set_defaults(func=cmd_params)


def _params(args):
    return choose_discrete_laplace(args.epsilon, args.sensitivity, lam=args.lam, n_samples=args.releases)


def _describe(params) -> dict:
    g = discrete_laplace_guarantee(params)
    return {
        "epsilon": g.epsilon,
        "delta": g.delta,
        "method": g.method,
        "delta_bound": g.delta_bound,
        "tv_to_ideal": g.tv_to_ideal,
        "target_delta": g.target_delta,
        "sensitivity": params.sensitivity,
        "bits": params.bits,
        "acc": params.acc,
        "and_gates_per_sample": params.and_gates,
        "random_bits_per_party": params.random_bits,
    }


def draw(params, count: int, garbled: bool) -> np.ndarray:
    """``count`` samples of the gadget: garbled circuit (SIMD chunks) or the exact sampler."""
    if not garbled:
        return sample_discrete_laplace(params, count)
    from pairwise.mpc.garble import garble_and_evaluate

    nc = discrete_laplace_gadget(params)
    parts = []
    for start in range(0, count, GARBLE_CHUNK):
        b = min(GARBLE_CHUNK, count - start)
        rx, ry = nc.random_inputs(b)
        parts.append(decode_output(nc, garble_and_evaluate(nc.circuit, [rx, ry])[0]))
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def cmd_sample(args) -> int:
    if isinstance(args.count, bool) or args.count < 1 or args.count > MAX_COUNT:
        raise NoiseParameterError(f"--count must lie in [1, {MAX_COUNT}], got {args.count}")
    params = _params(args)
    info = _describe(params)
    samples = draw(params, args.count, args.garbled)
    values, counts = np.unique(samples, return_counts=True)
    if args.json:
        print(json.dumps({"values": values.tolist(), "counts": counts.tolist(), **info, "garbled": bool(args.garbled)}))
        return 0
    _print_header(info, sampler="garbled circuit (half-gates, SIMD)" if args.garbled else "exact sampler (os.urandom)")
    print(f"samples   {args.count}, mean {samples.mean():+.4g}, std {samples.std():.4g}")
    _print_histogram(values, counts)
    return 0


def cmd_params(args) -> int:
    info = _describe(_params(args))
    if args.json:
        print(json.dumps(info))
    else:
        _print_header(info, sampler=None)
    return 0


def _print_header(info: dict, sampler: str | None) -> None:
    print(
        f"gadget    discrete Laplace, alpha = exp(-epsilon/S), S = {info['sensitivity']}: "
        f"K = {info['bits']} digits, acc = {info['acc']} bits"
    )
    print(f"cost      {info['and_gates_per_sample']} AND gates, {info['random_bits_per_party']} random bits per party per sample")
    print(f"epsilon   {info['epsilon']:.6g}")
    print(f"delta     {info['delta']:.6g} ({info['method']}; rigorous bound {info['delta_bound']:.3g}; target {info['target_delta']:.3g})")
    print(f"TV        <= {info['tv_to_ideal']:.3g} from the ideal discrete Laplace")
    if sampler:
        print(f"sampler   {sampler}")


def _print_histogram(values: np.ndarray, counts: np.ndarray) -> None:
    if values.size > HIST_ROWS:
        edges = np.linspace(values.min(), values.max() + 1, HIST_ROWS + 1)
        idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, HIST_ROWS - 1)
        binned = np.bincount(idx, weights=counts, minlength=HIST_ROWS).astype(np.int64)
        labels = [f"[{int(np.ceil(edges[i]))}, {int(np.ceil(edges[i + 1])) - 1}]" for i in range(HIST_ROWS)]
        rows = list(zip(labels, binned.tolist()))
    else:
        rows = [(str(v), c) for v, c in zip(values.tolist(), counts.tolist())]
    top = max(c for _, c in rows) or 1
    wl = max(len(lbl) for lbl, _ in rows)
    wc = max(len(str(c)) for _, c in rows)
    for lbl, c in rows:
        print(f"{lbl:>{wl}}  {c:>{wc}}  {'#' * round(50 * c / top)}")
