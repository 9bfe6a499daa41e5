"""The bound flags shared by ``ustat``, ``ecdf run`` and every ``ldp`` command.

One way to state the public domain of the private columns:

``--lower L[,L2,...] --upper U[,U2,...]``
    One value per private column, in the order the command lists its
    columns (``ustat --statistic kendall --columns A,B --lower 1,1 --upper 5,4``).
``--decimals D[,D2,...]`` (where the command uses a fixed-point or discrete grid)
    The grid lower + k 10^-D. Default: the shipped dataset's declared
    decimals, else the fewest decimals giving at least 10^4 steps across
    [L, U] (:func:`pairwise.dp.bounds.default_decimals`), a function of the
    public bounds only.

Without the flags, shipped data use the domain declared in
``protocols/data/domains.json`` (see SOURCES.md); a user CSV without bounds
is an error that names the flags. Owners clamp their values into the
public domain (and round them to the grid) before anything enters a
mechanism. How many values were clamped depends on the data: it is
printed and put in the JSON as ``clamped``, labelled not private, and it
is never part of a private output.

Security model: parses public parameters only; nothing here reads the data.
"""

from __future__ import annotations

from pairwise.dp.bounds import PublicDomain, validate_decimals

from .options import deprecated  # noqa: F401 - the one deprecation warning, re-exported for the commands

#: Text-output label of every value computed without noise.
NOT_PRIVATE = "(not private)"


def add_bound_args(
    p, columns: str, *, decimals: bool = False, integer: bool = False, shipped_default: bool = True
) -> None:
    """Add ``--lower``/``--upper`` (and ``--decimals``) to parser ``p``; ``columns`` names them in the help.

    ``shipped_default``: the command can read a shipped dataset, whose declared domain is then the default.
    """
    kind = "integer" if integer else "value"
    default = (
        "Default: the shipped dataset's declared domain; required with a CSV file" if shipped_default else "Required"
    )
    p.add_argument(
        "--lower",
        metavar="L[,L2]",
        help=f"public lower bound, one {kind} per private column ({columns}); values below are "
        f"clamped by their owner (negative values: --lower -1,-2 or --lower=-1,-2). {default}",
    )
    p.add_argument(
        "--upper",
        metavar="U[,U2]",
        help=f"public upper bound, one {kind} per private column ({columns}); values above are clamped by their owner",
    )
    if decimals:
        p.add_argument(
            "--decimals",
            metavar="D[,D2]",
            help="fixed-point scale: values are rounded to lower + k 10^-D (default: the shipped "
            "domain's decimals, else the fewest giving at least 10^4 steps across [L, U])",
        )


def parse_list(text: str | None, count: int, flag: str, *, integer: bool = False) -> list | None:
    """``"a,b"`` -> ``[a, b]`` with exactly ``count`` numbers, or None when the flag was not given."""
    if text is None:
        return None
    parts = [t.strip() for t in str(text).split(",")]
    try:
        vals = [int(t) if integer else float(t) for t in parts]
    except ValueError:
        raise ValueError(
            f"{flag} must be {count} comma-separated {'integers' if integer else 'numbers'}, got {text!r}"
        ) from None
    if len(vals) != count:
        raise ValueError(f"{flag} needs one value per private column ({count}), got {len(vals)} in {text!r}")
    return vals


def resolve_domains(
    args, columns: list[str], dataset: str | None, *, integer: bool = False, data_flag: str = "--data"
) -> list[PublicDomain]:
    """The public domain of each of ``columns``, from the flags or the shipped dataset's declaration.

    ``dataset`` is the shipped dataset's name, or None for a user CSV (then
    the flags are required).
    """
    k = len(columns)
    lower = parse_list(getattr(args, "lower", None), k, "--lower", integer=integer)
    upper = parse_list(getattr(args, "upper", None), k, "--upper", integer=integer)
    decs = parse_list(getattr(args, "decimals", None), k, "--decimals", integer=True)
    if decs is not None:
        decs = [validate_decimals(d, f"column {c!r}") for d, c in zip(decs, columns)]
    if (lower is None) != (upper is None):
        raise ValueError("give both --lower and --upper (the public domain), not only one")
    if lower is None:
        if dataset is None:
            raise ValueError(
                f"{data_flag} needs the public domain of its private column(s) {', '.join(columns)}: give "
                f"--lower L --upper U (one value per column, comma-separated), fixed in advance, not the "
                f"data's min/max"
            )
        from pairwise.protocols.datasets import column_domain

        doms = [column_domain(dataset, c) for c in columns]
        if decs is not None:
            doms = [PublicDomain(d.lower, d.upper, dd, d.source) for d, dd in zip(doms, decs)]
        return doms
    return [
        PublicDomain(lo, hi, None if decs is None else decs[j], f"column {c!r} (--lower/--upper)")
        for j, (c, lo, hi) in enumerate(zip(columns, lower, upper))
    ]


def clamped_note(count: int, domains: list[PublicDomain]) -> str:
    """The text-output note about clamped values (a non-private diagnostic)."""
    rng = "; ".join(f"[{d.lower:g}, {d.upper:g}]" for d in domains)
    return f"{count} value(s) clamped into the public domain {rng} by their owners {NOT_PRIVATE}"
