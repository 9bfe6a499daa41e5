"""Fixtures of the collect tests: an aggregator in this process (its own event-loop thread) and users in threads.

The aggregator listens on loopback; users and collectors talk to it over
real TCP (plaintext on loopback, users naming themselves, or mutual TLS
with throwaway certificates).  Real-process tests are in
``tests/system/test_collect_*.py``.
"""

from __future__ import annotations

import threading

import pytest

from pairwise.protocols.collect import Collector, join
from pairwise.protocols.collect.aggregator import Aggregator


class Study:
    """An in-process aggregator with its state in ``tmp_path``, and helpers to create tasks and run users."""

    def __init__(self, tmp_path, *, tls_dir=None, timeout: float = 30.0, relay_tap=None) -> None:
        self.tmp = tmp_path
        self.state = str(tmp_path / "aggregator")
        self.tls_dir = tls_dir
        self.timeout = timeout
        self.relay_tap = relay_tap
        self.logs: list[str] = []
        self.start()

    def start(self) -> None:
        tls = None
        if self.tls_dir is not None:
            from pairwise.mpc.tls import TLSConfig

            tls = TLSConfig(self.tls_dir, "aggregator")
        port = getattr(self, "port", 0)
        self.agg = Aggregator(
            "127.0.0.1",
            port,
            state_dir=self.state,
            tls=tls,
            timeout=self.timeout,
            log=self.logs.append,
            relay_tap=self.relay_tap,
        ).start_in_thread()
        self.port = self.agg.port
        self.server = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.agg.stop_thread()

    def collector(self) -> Collector:
        tls = None
        if self.tls_dir is not None:
            from pairwise.mpc.tls import TLSConfig

            tls = TLSConfig(self.tls_dir, "analyst")
        return Collector(self.server, tls=tls)

    def create(self, protocol: str, task_id: str, **params) -> dict:
        with self.collector() as c:
            return c.create(protocol, params, task_id)

    def result(self, task: str, wait: float = 60.0) -> dict:
        with self.collector() as c:
            return c.result(task, wait=wait)

    def show(self, task: str) -> dict:
        with self.collector() as c:
            return c.show(task)

    def join(self, name: str, task: str, value, value2=None, label=None, **kw):
        kw.setdefault("max_epsilon", 500)
        kw.setdefault("budget", 500)
        kw.setdefault("state_dir", str(self.tmp / "users" / name))
        if self.tls_dir is not None:
            from pairwise.mpc.tls import TLSConfig

            kw.setdefault("tls", TLSConfig(self.tls_dir, name))
        else:
            kw.setdefault("user", name)
        return join(self.server, task, value, value2, label, **kw)

    def join_all(self, task: str, rows: list, **kw) -> dict:
        """Every row (name, value, value2, label) joins in its own thread; {name: outcome or exception}."""
        out: dict = {}

        def one(row) -> None:
            name, v, v2, lab = row
            try:
                out[name] = self.join(name, task, v, v2, lab, **kw)
            except BaseException as exc:  # noqa: BLE001 - reported per user
                out[name] = exc

        threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in rows]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        return out


@pytest.fixture
def study(tmp_path):
    s = Study(tmp_path)
    yield s
    s.stop()
