"""The ``pairwise`` command line.

Each area of the framework owns one module in :mod:`pairwise.commands` that
exposes ``register(root, groups)``: ``root`` is the top-level subparser
collection and ``groups`` maps the shared command groups (``bench``, ``demo``)
to their subparser collections, so ``pairwise bench garble`` and
``pairwise bench fss`` live in different modules.  A command sets
``func(args) -> int`` on its parser.  The command line is the one layer above
the library: :mod:`pairwise.protocols` and the layers below never import it
(the old paths ``pairwise.protocols.cli`` and ``pairwise.protocols.commands``
are deprecated aliases, for one release).

The shared option vocabulary (``--data``, ``--columns``, ``--builtin``,
``--epsilon``, ``--json``, ``--timeout``, ``--connect-timeout``,
``--progress``) and its deprecated aliases live in
:mod:`pairwise.commands.options`.

Errors that a user can act on (``ValueError`` from parameter validation and
its project subclasses such as ``CircuitError`` and ``DataError``, ``OSError``
from sockets and files, including every ``ChannelError``)
are printed as one line on stderr with exit status 2; with ``--json`` they are
also printed as ``{"error": ..., "type": ...}`` on stdout.  Bad command-line
values (an epsilon out of range, ``--batch 0``) are refused by argparse
before the command starts, with the same exit status and, under ``--json``,
``{"error": ..., "type": "UsageError"}`` on stdout.

``pairwise --version`` prints the installed package version (package metadata).

Signals: SIGINT and SIGTERM unwind the command (exit status 130 and 143),
so every command stops the processes it started
(:mod:`pairwise.protocols.processes`); a command started by another
``pairwise`` process also exits when that parent dies.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys

#: Command modules, in the order their commands appear in ``--help``.
COMMAND_MODULES = (
    "pairwise.commands.ustat",
    "pairwise.commands.circuit",
    "pairwise.commands.garble",
    "pairwise.commands.twopc",
    "pairwise.commands.noise",
    "pairwise.commands.ecdf",
    "pairwise.commands.collect",
    "pairwise.commands.fss",
    "pairwise.commands.ldp",
    "pairwise.commands.certs",
)


def package_version() -> str:
    """The installed distribution's version (``pairwise-mpc``), from its metadata (:data:`pairwise.__version__`)."""
    from pairwise import __version__

    return __version__


class _Parser(argparse.ArgumentParser):
    """argparse with one change: under ``--json`` a usage error is also a JSON object on stdout."""

    json_errors = False

    def error(self, message: str):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        if _Parser.json_errors:
            print(json.dumps({"error": message, "type": "UsageError"}))
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pairwise",
        description="Secure two-party and multi-server computation of private statistics.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"pairwise {package_version()}",
        help="print the installed version and exit",
    )
    root = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction] = {}
    for name, help_text in (
        ("bench", "throughput benchmarks (garbling, FSS)"),
        ("demo", "self-contained demos on loopback"),
    ):
        p = root.add_parser(name, help=help_text)
        groups[name] = p.add_subparsers(dest=f"{name}_command", metavar="WHAT")
        p.set_defaults(func=lambda args, _p=p: (_p.print_help(), 2)[1])
    for modname in COMMAND_MODULES:
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name == modname:
                continue  # area not built yet
            raise
        mod.register(root, groups)
    return parser


#: Flags whose value may be a negative number or a comma-separated list of them (``--lower -1,-2``).
NUMERIC_FLAGS = ("--lower", "--upper", "--range", "--input", "--garbler-input", "--evaluator-input")
_NEGATIVE = re.compile(r"^-(?:\d|\.\d)[\w.+\-,]*$")


def _join_negative_values(argv: list[str]) -> list[str]:
    """``--lower -1,-2`` -> ``--lower=-1,-2``: argparse takes a token such as ``-1,-2`` or ``-1e3`` for an
    option name (only plain ``-1`` or ``-1.5`` pass), so the documented spelling of negative bounds failed
    with "expected one argument"."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in NUMERIC_FLAGS and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    from pairwise.protocols.processes import Terminated, bind_to_parent, exit_on_sigterm

    bind_to_parent()  # a child of `demo 2pc` & co. dies with its parent
    exit_on_sigterm()  # SIGTERM unwinds like Ctrl-C: children are stopped in `finally`
    parser = build_parser()
    argv = _join_negative_values(list(sys.argv[1:] if argv is None else argv))
    _Parser.json_errors = "--json" in argv
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2): a status, as for any other error
        return exc.code if isinstance(exc.code, int) else 2
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt as exc:
        term = isinstance(exc, Terminated)
        print(f"pairwise: {'terminated' if term else 'interrupted'}", file=sys.stderr)
        return 143 if term else 130
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0
    except (ValueError, OSError, LookupError, RuntimeError) as exc:
        name = type(exc).__name__
        print(f"pairwise: error: {name}: {exc}", file=sys.stderr)
        if getattr(args, "json", False):
            print(json.dumps({"error": str(exc), "type": name}))
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
