"""The ``pairwise`` command line.

Each area of the framework owns one module in :mod:`pairwise.protocols.commands` that
exposes ``register(root, groups)``: ``root`` is the top-level subparser
collection and ``groups`` maps the shared command groups (``bench``, ``demo``)
to their subparser collections, so ``pairwise bench garble`` and
``pairwise bench fss`` live in different modules.  A command sets
``func(args) -> int`` on its parser.

Errors that a user can act on (``ValueError`` from parameter validation and
its project subclasses such as ``CircuitError`` and ``DataError``, ``OSError``
from sockets and files, including every ``ChannelError``)
are printed as one line on stderr with exit status 2; with ``--json`` they are
also printed as ``{"error": ...}`` on stdout.

Signals: SIGINT and SIGTERM unwind the command (exit status 130 and 143),
so every command stops the processes it started
(:mod:`pairwise.protocols.processes`); a command started by another
``pairwise`` process also exits when that parent dies.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

#: Command modules, in the order their commands appear in ``--help``.
COMMAND_MODULES = (
    "pairwise.protocols.commands.ustat",
    "pairwise.protocols.commands.circuit",
    "pairwise.protocols.commands.garble",
    "pairwise.protocols.commands.twopc",
    "pairwise.protocols.commands.noise",
    "pairwise.protocols.commands.ecdf",
    "pairwise.protocols.commands.fss",
    "pairwise.protocols.commands.ldp",
    "pairwise.protocols.commands.certs",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pairwise",
        description="Secure two-party and multi-server computation of private statistics.",
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


def main(argv: list[str] | None = None) -> int:
    from .processes import Terminated, bind_to_parent, exit_on_sigterm

    bind_to_parent()  # a child of `demo 2pc` & co. dies with its parent
    exit_on_sigterm()  # SIGTERM unwinds like Ctrl-C: children are stopped in `finally`
    parser = build_parser()
    args = parser.parse_args(argv)
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
