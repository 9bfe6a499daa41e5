"""The transport options of every networked process: ``--tls DIR --name NAME [--insecure]``.

The ``pairwise`` commands (:mod:`pairwise.commands`) and the worker processes
the library starts itself (:mod:`pairwise.protocols.ustat.worker`) read them
the same way, and :func:`transport_argv` passes them on to a child, so they
live here, below both.

``--tls DIR --name NAME`` runs the command's connections in mutual TLS 1.3
with the credentials ``DIR/ca.pem``, ``DIR/NAME.pem``, ``DIR/NAME.key`` (made by
``pairwise certs create``, :mod:`pairwise.commands.certs`); the
peer's certificate must chain to the same CA.  Without ``--tls`` the command
runs in plaintext, which :mod:`pairwise.mpc.channel` allows on loopback
addresses only; ``--insecure`` allows it elsewhere (a network you trust).

:class:`Transport` carries the same settings, plus the timeouts, through the
library as one validated value instead of five loose arguments.

Security model: see :mod:`pairwise.mpc.tls`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Transport", "add_transport_args", "tls_from_args", "transport_argv"]


@dataclass(frozen=True)
class Transport:
    """How a protocol's processes reach each other: TLS, plaintext permission and timeouts.

    ``tls``: mutual TLS 1.3 on every connection (default); ``tls_dir``: the
    directory of ``pairwise certs create`` credentials (None: a throwaway CA
    made for the run, where the caller supports one); ``insecure``: allow
    plaintext on a non-loopback address (only without TLS); ``timeout``:
    seconds any wait on a peer may take; ``connect_timeout``: seconds to keep
    trying to reach a peer (None: ``timeout``).  Validated on construction.
    """

    tls: bool = True
    tls_dir: str | None = None
    insecure: bool = False
    timeout: float = 120.0
    connect_timeout: float | None = None

    def __post_init__(self) -> None:
        for name in ("timeout", "connect_timeout"):
            v = getattr(self, name)
            if v is None and name == "connect_timeout":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
        if not isinstance(self.tls, bool) or not isinstance(self.insecure, bool):
            raise ValueError("tls and insecure are booleans")
        if self.tls_dir is not None and not self.tls:
            raise ValueError("tls_dir names TLS credentials: it needs tls=True")
        if self.insecure and self.tls:
            raise ValueError("insecure only allows plaintext: it excludes tls=True")

    @property
    def connect_deadline(self) -> float:
        """Seconds to keep trying to reach a peer: ``connect_timeout``, else ``timeout``."""
        return self.timeout if self.connect_timeout is None else self.connect_timeout


def add_transport_args(p) -> None:
    """Add ``--tls``, ``--name`` and ``--insecure`` to parser ``p``."""
    g = p.add_argument_group("transport security")
    g.add_argument(
        "--tls",
        metavar="DIR",
        help="mutual TLS 1.3 with DIR/ca.pem and DIR/NAME.pem, DIR/NAME.key (pairwise certs create)",
    )
    g.add_argument("--name", metavar="NAME", help="this party's certificate name in the --tls directory")
    g.add_argument(
        "--insecure",
        action="store_true",
        help="allow plaintext on a non-loopback address (only on a network you trust)",
    )


def tls_from_args(args):
    """The :class:`pairwise.mpc.tls.TLSConfig` of ``--tls DIR --name NAME``, or None for plaintext."""
    tls_dir, name = getattr(args, "tls", None), getattr(args, "name", None)
    if tls_dir is None:
        if name is not None:
            raise ValueError("--name NAME needs --tls DIR (the directory holding NAME.pem and NAME.key)")
        return None
    if not name:
        raise ValueError("--tls DIR needs --name NAME (this party's certificate in DIR)")
    if getattr(args, "insecure", False):
        raise ValueError("--insecure and --tls exclude each other (--insecure only allows plaintext)")
    from pairwise.mpc.tls import TLSConfig

    return TLSConfig(tls_dir, name)


def transport_argv(tls_dir: str | None, name: str | None, insecure: bool = False) -> list[str]:
    """The command-line arguments that reproduce these options in a child process."""
    if tls_dir is not None:
        return ["--tls", str(tls_dir), "--name", str(name)]
    return ["--insecure"] if insecure else []
