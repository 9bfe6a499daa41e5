"""The analyst's client: create, list, show and close collect tasks, and read their results.

What it does
    :class:`Collector` (``pairwise collect task create|list|show|close`` and
    ``pairwise collect result``) holds one connection to the aggregator,
    made with a ``collector`` certificate.  :meth:`Collector.create` validates
    the task's parameters locally first (:func:`pairwise.protocols.collect.tasks.validate_task`,
    the same checks the aggregator runs), so a typo is refused before
    anything is sent.  :meth:`Collector.result` returns the stored release of
    a finished task (the same one on every call) and can wait for it.

Security model
    The collector chooses the public parameters and reads the result: the
    DP guarantee of each protocol is against it (and the aggregator).  Users
    see every parameter before they join and refuse tasks above their caps.
"""

from __future__ import annotations

import time

from ..service.frames import parse_address
from .tasks import validate_task
from .wire import ROLE_COLLECTOR, AggregatorUnavailable, NotFinished, call, check_task_id, connect

__all__ = ["Collector"]


class Collector:
    """A connection to the aggregator at ``server`` (``HOST:PORT``) as a collector (see the module docstring)."""

    def __init__(
        self,
        server,
        *,
        tls=None,
        insecure: bool = False,
        server_name: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 30.0,
    ) -> None:
        self.addr = parse_address(server) if isinstance(server, str) else (str(server[0]), int(server[1]))
        self.timeout = float(timeout)
        self._connect = lambda: connect(
            self.addr,
            ROLE_COLLECTOR,
            tls=tls,
            insecure=insecure,
            server_name=server_name,
            connect_timeout=connect_timeout,
            timeout=timeout,
        )
        self.ch = self._connect()

    def _call(self, *, again: bool = False, **msg) -> dict:
        """One request; ``again``: a read-only one, sent once more on a new connection if the old one was
        lost (the aggregator closes connections that stay idle past its timeout)."""
        try:
            return call(self.ch, msg, timeout=self.timeout)
        except AggregatorUnavailable:
            if not again:
                raise
            self.ch.close()
            self.ch = self._connect()
            return call(self.ch, msg, timeout=self.timeout)

    def create(self, protocol: str, params: dict, task_id: str | None = None) -> dict:
        """A new task (its public view: id, state, counts, spec); parameters are checked here first."""
        validate_task(protocol, params)
        if task_id is not None:
            check_task_id(task_id)
        return self._call(op="task_create", protocol=protocol, params=params, id=task_id)["task"]

    def list(self) -> list[dict]:
        return self._call(op="task_list", again=True)["tasks"]

    def show(self, task: str) -> dict:
        return self._call(op="task_show", task=check_task_id(task), again=True)["task"]

    def close_task(self, task: str) -> dict:
        """Close registration now (2PC: pair the connected users; local: compute the result)."""
        return self._call(op="task_close", task=check_task_id(task))["task"]

    def result(self, task: str, *, wait: float = 0.0) -> dict:
        """The stored release of ``task``; with ``wait`` > 0, poll until it exists (or raise NotFinished)."""
        end = time.monotonic() + max(0.0, float(wait))
        while True:
            try:
                return self._call(op="result", task=check_task_id(task), again=True)["result"]
            except NotFinished:
                if time.monotonic() >= end:
                    raise
                time.sleep(min(0.5, max(0.0, end - time.monotonic())))

    def close(self) -> None:
        self.ch.close()

    def __enter__(self) -> Collector:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
