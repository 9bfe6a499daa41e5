"""``pairwise noise``: sample the in-circuit discrete Laplace gadget and show its guarantee.

Commands
    ``pairwise noise sample --epsilon E --sensitivity S --count N [--garbled] [--progress] [--json]``
        Chooses the gadget's support and precision
        (:func:`pairwise.circuits.noise.choose_discrete_laplace`, delta target
        2^-lam / releases), draws N samples and prints their histogram and
        the stated (epsilon, delta).  With ``--garbled`` the gadget circuit is
        garbled and evaluated (half-gates, SIMD batches) on random-bit shares
        of both parties drawn from the OS CSPRNG (a progress bar on stderr
        counts the samples; ``--progress``/``--no-progress``, default: when
        stderr is a terminal); otherwise the exact numpy sampler draws from
        the same distribution.  JSON keys: ``values``,
        ``counts`` (the samples: the only random keys), ``epsilon``,
        ``delta``, ``and_gates_per_sample`` (plus ``epsilon_requested``, ``method``,
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

from .options import add_epsilon, add_json, add_progress, positive_int, progress_bar

#: JSON keys holding the random samples; every other key is a function of the public flags.
DP_KEYS = ("values", "counts")
NOT_PRIVATE_KEYS: tuple = ()

GARBLE_CHUNK = 1 << 13  # samples per garbled SIMD call: same rate as 2^15 (A/B, load 3.9), finer progress
MAX_COUNT = 10**8
HIST_ROWS = 41


def _add_common(p) -> None:
    add_epsilon(p, what="privacy budget of one release")
    p.add_argument(
        "--sensitivity",
        type=positive_int,
        default=1,
        metavar="S",
        help="integer sensitivity S of the query (output units), default 1",
    )
    p.add_argument(
        "--lam", type=positive_int, default=40, help="statistical security: delta target 2^-lam / releases (default 40)"
    )
    p.add_argument(
        "--releases",
        type=positive_int,
        default=1,
        help="number of releases sharing the 2^-lam delta budget (default 1)",
    )
    add_json(p)


def register(root, groups) -> None:
    p = root.add_parser("noise", help="in-circuit DP noise gadgets (discrete Laplace)")
    sub = p.add_subparsers(dest="noise_command", metavar="WHAT")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])

    s = sub.add_parser("sample", help="draw samples from the discrete Laplace gadget and print the histogram")
    _add_common(s)
    s.add_argument(
        "--count", type=positive_int, required=True, metavar="N", help=f"number of samples N, 1..{MAX_COUNT:.0e}"
    )
    s.add_argument(
        "--garbled",
        action="store_true",
        help="garble and evaluate the gadget circuit (SIMD) instead of the exact sampler",
    )
    add_progress(s)
    s.set_defaults(func=cmd_sample)

    q = sub.add_parser("params", help="the chosen support, precision, AND gates and (epsilon, delta)")
    _add_common(q)
    q.set_defaults(func=cmd_params)


#: The gadget's largest epsilon (circuits.noise); a larger --epsilon (the command line takes up
#: to 500) builds the gadget at this one, which is epsilon-DP all the more, and says so.
GADGET_MAX_EPSILON = 64.0


def _params(args):
    eps = min(args.epsilon, GADGET_MAX_EPSILON)
    return choose_discrete_laplace(eps, args.sensitivity, lam=args.lam, n_samples=args.releases)


def _describe(params, requested: float) -> dict:
    g = discrete_laplace_guarantee(params)
    return {
        "epsilon": g.epsilon,
        "epsilon_requested": requested,
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


def draw(params, count: int, garbled: bool, progress=None) -> np.ndarray:
    """``count`` samples of the gadget: garbled circuit (SIMD chunks) or the exact sampler.

    ``progress(done, total)``, if given, is called after each garbled chunk (samples done so far).
    """
    if not garbled:
        return sample_discrete_laplace(params, count)
    from pairwise.mpc.garble import garble_and_evaluate

    nc = discrete_laplace_gadget(params)
    parts = []
    if progress:
        progress(0, count)
    for start in range(0, count, GARBLE_CHUNK):
        b = min(GARBLE_CHUNK, count - start)
        parts.append(decode_output(nc, garble_and_evaluate(nc.circuit, [], random=("rx", "ry"), batch=b)[0]))
        if progress:
            progress(start + b, count)
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def cmd_sample(args) -> int:
    if isinstance(args.count, bool) or args.count < 1 or args.count > MAX_COUNT:
        raise NoiseParameterError(f"--count must lie in [1, {MAX_COUNT}], got {args.count}")
    params = _params(args)
    info = _describe(params, args.epsilon)
    with progress_bar(args, "garbled samples", unit="sample") as progress:
        samples = draw(params, args.count, args.garbled, progress)
    values, counts = np.unique(samples, return_counts=True)
    if args.json:
        print(json.dumps({"values": values.tolist(), "counts": counts.tolist(), **info, "garbled": bool(args.garbled)}))
        return 0
    _print_header(info, sampler="garbled circuit (half-gates, SIMD)" if args.garbled else "exact sampler (os.urandom)")
    print(f"samples   {args.count}, mean {samples.mean():+.4g}, std {samples.std():.4g}")
    _print_histogram(values, counts)
    return 0


def cmd_params(args) -> int:
    info = _describe(_params(args), args.epsilon)
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
    print(
        f"cost      {info['and_gates_per_sample']} AND gates, {info['random_bits_per_party']} random bits per party per sample"
    )
    print(
        f"epsilon   {info['epsilon']:.6g}"
        + (
            f" (requested {info['epsilon_requested']:g}; the gadget's largest "
            f"epsilon is {GADGET_MAX_EPSILON:g}, which is "
            f"{info['epsilon_requested']:g}-DP too)"
            if info["epsilon_requested"] > GADGET_MAX_EPSILON
            else ""
        )
    )
    print(
        f"delta     {info['delta']:.6g} ({info['method']}; rigorous bound {info['delta_bound']:.3g}; target {info['target_delta']:.3g})"
    )
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
