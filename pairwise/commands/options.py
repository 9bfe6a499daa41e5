"""Shared option definitions of the ``pairwise`` command line: one vocabulary for every command.

What it does
    Every command module builds its options with these helpers, so the same
    thing is spelled, validated and documented the same way everywhere:

    ``--data FILE.csv``, ``--columns A[,B]``, ``--label COLUMN``, ``--builtin
    NAME``, ``--dataset ID``, ``--epsilon E`` (one validator,
    :func:`pairwise.dp.accounting.check_epsilon`: limits [2^-32, 500];
    required, except in demos), ``--json``, ``--timeout S``,
    ``--connect-timeout S``, ``--progress``/``--no-progress`` and ``--cluster
    SPEC`` (:mod:`pairwise.protocols.cluster`); their meanings are the table
    of ``docs/cli.md``.

    Old spellings (``--csv``, ``--score``, ``--column``, ``--columns A B``,
    ``ldp --dataset``, ``2pc evaluator --connect-deadline``) still work for
    one release: :func:`add_alias` registers them hidden from ``--help``, and
    using one prints ``pairwise: warning: ... is deprecated`` on stderr.

    Argument types (:func:`epsilon`, :func:`positive_int`, :func:`seconds`)
    refuse bad values while the command line is parsed, before any file is
    read or any process, socket or budget is touched.

Progress
    :func:`progress_bar` wraps ``tqdm`` and yields the ``progress(done,
    total)`` callback the library APIs take (counts of finished work units,
    from ``(0, total)`` to ``(total, total)``, never decreasing); bars go to
    stderr only, so stdout stays clean.  Which commands have ``--progress``,
    why the others have none, and how a command module uses these helpers:
    ``docs/cli.md``, "Shared options and progress bars".

Security model
    None of its own: parsing and display only.  Progress shows counts of
    public work units (pairs, batches, samples), never data.
"""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import contextmanager

__all__ = [
    "warn",
    "deprecated",
    "epsilon",
    "positive_int",
    "seconds",
    "split_columns",
    "add_alias",
    "add_epsilon",
    "add_json",
    "add_data",
    "add_columns",
    "add_builtin",
    "add_timeouts",
    "add_progress",
    "add_cluster_argument",
    "progress_bar",
]


def warn(message: str) -> None:
    """One warning line on stderr (never stdout: ``--json`` output stays parseable)."""
    print(f"pairwise: warning: {message}", file=sys.stderr, flush=True)


def deprecated(old: str, new: str) -> None:
    """The one deprecation warning: ``old`` still works for one release; use ``new``."""
    warn(f"{old} is deprecated and will be removed in the next release; use {new}")


# --------------------------------------------------------------------------- argument types


def epsilon(text: str) -> float:
    """argparse type: a privacy budget within the project's limits (one validator for all commands)."""
    from pairwise.dp.accounting import check_epsilon
    from pairwise.dp.errors import PrivacyParameterError

    try:
        return check_epsilon(text)
    except PrivacyParameterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        v = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1 or more), got {text}")
    return v


def seconds(text: str) -> float:
    """argparse type: a finite positive number of seconds."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite number of seconds, got {text}")
    return v


def split_columns(values) -> list[str]:
    """``["A,B"]`` or ``["A", "B"]`` (or a plain string) -> ``["A", "B"]``."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


# --------------------------------------------------------------------------- deprecated aliases


class _Deprecated(argparse.Action):
    """A hidden old spelling: warns on stderr, then stores into the new option's ``dest``."""

    def __init__(self, option_strings, dest, new: str, how: str = "store", **kw):
        self.new = new
        self.how = how  # "store", or "columns": a single old column name becomes the new list
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        deprecated(option_string, self.new)
        if self.how == "columns":
            values = split_columns(values)
        setattr(namespace, self.dest, values)


def add_alias(p, old: str, new: str, dest: str, how: str = "store", **kw) -> None:
    """Register ``old`` as a deprecated, hidden spelling of ``new`` (same ``dest``)."""
    p.add_argument(
        old, dest=dest, action=_Deprecated, new=new, how=how, help=argparse.SUPPRESS, default=argparse.SUPPRESS, **kw
    )


class _Columns(argparse.Action):
    """``--columns A,B``; the old space-separated ``--columns A B`` still works, with a warning."""

    def __call__(self, parser, namespace, values, option_string=None):
        if isinstance(values, str):
            values = [values]
        if len(values) > 1:
            warn(f"{option_string} {' '.join(values)} is deprecated; write {option_string} {','.join(values)}")
        setattr(namespace, self.dest, split_columns(values))


# --------------------------------------------------------------------------- option groups


def add_epsilon(p, *, default: float | None = None, what: str = "privacy budget of the release") -> None:
    """``--epsilon E``: required unless ``default`` is given (demos); limits [2^-32, 500]."""
    tail = f"default {default:g}" if default is not None else "required"
    p.add_argument(
        "--epsilon",
        type=epsilon,
        default=default,
        required=default is None,
        metavar="E",
        help=f"{what}, in [2^-32, 500] ({tail})",
    )


def add_json(p, what: str = "print one JSON object on stdout instead of text") -> None:
    p.add_argument("--json", action="store_true", help=what)


def add_compare(p, *, what: str = "the exact value", release: str = "one DP release") -> None:
    """``--compare``: the not-private evaluation aids (``what``), printed only when asked for (issue 25 item 3)."""
    p.add_argument(
        "--compare",
        action="store_true",
        help=f"also print evaluation aids computed from the raw data ({what}; not private). "
        f"Without it the output is {release} and public parameters: it can be published",
    )


def add_data(p, *, required: bool = False, what: str = "CSV file with a header row", old: tuple[str, ...] = ()) -> None:
    """``--data FILE.csv`` (and hidden deprecated ``old`` spellings, e.g. ``--csv``)."""
    p.add_argument("--data", metavar="FILE.csv", required=required, help=what)
    for o in old:
        add_alias(p, o, "--data", "data", metavar="FILE.csv")


def add_columns(
    p, *, what: str, default=None, old: tuple[str, ...] = (), spaces: bool = False, flag: str = "--columns"
) -> None:
    """``--columns A[,B]`` (list of names in ``args.columns``); ``old`` single-column spellings.

    ``spaces``: also accept the old space-separated ``--columns A B`` (with a warning).
    ``flag``: another name for a list of columns with a role (``ldp qmle --covariates A,B``).
    """
    dest = flag.lstrip("-").replace("-", "_")
    p.add_argument(flag, nargs="+" if spaces else None, action=_Columns, default=default, metavar="A[,B]", help=what)
    for o in old:
        add_alias(p, o, flag, dest, how="columns", metavar="COLUMN")


def add_builtin(p, *, default: str | None, what: str | None = None, old: tuple[str, ...] = ()) -> None:
    """``--builtin NAME``: a dataset shipped with pairwise (``ldp --dataset`` is its old spelling)."""
    from pairwise.protocols.datasets import list_datasets

    names = ", ".join(list_datasets())
    text = what or f"shipped dataset ({names})" + (f"; default {default}" if default else "")
    p.add_argument("--builtin", metavar="NAME", default=default, help=text)
    for o in old:
        add_alias(p, o, "--builtin", "builtin", metavar="NAME")


def add_timeouts(
    p, *, timeout: float, connect_timeout: float | None, timeout_what: str = "a peer", old_connect: tuple[str, ...] = ()
) -> None:
    """``--timeout S`` and (when there is something to connect to) ``--connect-timeout S``."""
    p.add_argument(
        "--timeout",
        type=seconds,
        default=timeout,
        metavar="S",
        help=f"seconds any wait for {timeout_what} may take (default {timeout:g})",
    )
    if connect_timeout is not None:
        p.add_argument(
            "--connect-timeout",
            type=seconds,
            default=connect_timeout,
            metavar="S",
            help=f"seconds to keep trying to connect (default {connect_timeout:g})",
        )
        for o in old_connect:
            add_alias(p, o, "--connect-timeout", "connect_timeout", type=seconds, metavar="S")


def add_progress(p) -> None:
    """``--progress`` / ``--no-progress``: a bar on stderr (default: when stderr is a terminal)."""
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: only when stderr is a terminal)",
    )


def add_cluster_argument(parser, what: str) -> None:
    """The ``--cluster`` flag shared by the commands that can run on Dask."""
    from pairwise.protocols.cluster import INSTALL_HINT

    parser.add_argument(
        "--cluster",
        metavar="SPEC",
        help=f"run {what} on Dask distributed: 'local' (one worker process per core), "
        "'local:N', or a scheduler address tls://HOST:PORT with Dask's TLS settings "
        f"(tcp://HOST:PORT on loopback only); needs {INSTALL_HINT}",
    )


#: On a terminal, the bar is redrawn this often (seconds) between reports, so its elapsed time keeps moving
#: through a long step (an ECDF release waits for the servers' noise with no report in between).
REFRESH_SECONDS = 1.0


@contextmanager
def progress_bar(args, desc: str, unit: str = "it"):
    """Yield a ``progress(done, total)`` callback drawing a tqdm bar on stderr, or ``None`` when off.

    On unless ``--no-progress``; without either flag, on only when stderr is a terminal.
    On a terminal a background thread redraws the bar every :data:`REFRESH_SECONDS`
    (elapsed time) until the block ends; in a log (``--progress`` with stderr
    redirected) the bar is drawn at reports only.
    """
    on = getattr(args, "progress", None)
    if on is None:
        on = sys.stderr.isatty()
    if not on:
        yield None
        return
    import threading

    from tqdm import tqdm

    bars = []  # created on the first report, when the total is known
    stop = threading.Event()

    def redraw() -> None:
        while not stop.wait(REFRESH_SECONDS):
            for bar in list(bars):
                bar.refresh()

    ticker = threading.Thread(target=redraw, name="progress-redraw", daemon=True) if sys.stderr.isatty() else None
    if ticker is not None:
        ticker.start()

    def update(done: int, total: int) -> None:
        if not bars:
            bars.append(
                tqdm(
                    total=total,
                    desc=desc,
                    unit=unit,
                    file=sys.stderr,
                    dynamic_ncols=True,
                    leave=not sys.stderr.isatty(),
                )
            )  # a terminal keeps its screen; a log its last line
        bar = bars[0]
        if bar.total != total:
            bar.total = total
            bar.refresh()
        if done > bar.n:
            bar.update(done - bar.n)

    try:
        yield update
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        for bar in bars:
            bar.close()
