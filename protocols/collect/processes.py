"""A real collect aggregator process on loopback, and throwaway certificates for a study, for tests and demos.

What it does
    :class:`AggregatorProcess` runs ``python -m pairwise collect serve``
    through :class:`pairwise.protocols.service.processes.ServiceProcess`
    (a free port, the ``listening`` line, logs, SIGTERM or SIGKILL, a restart
    on the same port and ``--state``).  :func:`study_certificates` makes a CA
    with an aggregator (role ``server``), a collector and N users (role
    ``user``), each with its own key.

Security model
    Loopback only; the CA key lies in the given directory, which the caller
    removes.
"""

from __future__ import annotations

from ..service.processes import ServiceProcess
from .wire import AggregatorUnavailable

__all__ = ["AGGREGATOR", "COLLECTOR", "AggregatorProcess", "study_certificates", "user_name"]

AGGREGATOR = "aggregator"
COLLECTOR = "analyst"


def user_name(i: int) -> str:
    return f"user-{i}"


def study_certificates(directory: str, users: int, *, days: int = 2) -> None:
    """A CA in ``directory`` with ``aggregator`` (server), ``analyst`` (collector) and ``user-0`` .. (user)."""
    from pairwise.mpc.tls import create_certificate

    create_certificate(directory, AGGREGATOR, "server", days=days)
    create_certificate(directory, COLLECTOR, "collector", days=days)
    for i in range(users):
        create_certificate(directory, user_name(i), "user", days=days)


class AggregatorProcess(ServiceProcess):
    """``pairwise collect serve`` on a free loopback port (``tls_dir``: with the ``aggregator`` certificate)."""

    def __init__(
        self,
        state_dir: str | None,
        *,
        tls_dir: str | None = None,
        name: str = AGGREGATOR,
        timeout: float = 120.0,
        extra_args: tuple = (),
        startup_timeout: float = 60.0,
    ) -> None:
        args = ["--timeout", str(timeout), *extra_args]
        if state_dir is not None:
            args += ["--state", str(state_dir)]
        if tls_dir is not None:
            args += ["--tls", str(tls_dir), "--name", name]
        super().__init__(
            ["collect", "serve"],
            args,
            label="the aggregator",
            startup_timeout=startup_timeout,
            error=AggregatorUnavailable,
        )

    @property
    def server(self) -> str:
        host, port = self.address
        return f"{host}:{port}"
