"""Admission control of the aggregator (issue 21): a handshake flood, waiting users without connections, retried joins.

The smallest sizes that show each property: a gate of 6 handshakes (3 per
address), strangers flooding it from another loopback address (127.0.0.2)
with connections that never finish TLS, and 4 users of a kendall 2PC task
with P = 1 over mutual TLS.  No timing is asserted; every wait is generous.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
import time

import pytest

from pairwise.mpc.tls import TLSConfig, create_certificate, create_certificates
from pairwise.protocols.collect import Collector, join
from pairwise.protocols.collect import admission as adm
from pairwise.protocols.collect.admission import Admission, HandshakeGate
from pairwise.protocols.collect.aggregator import Aggregator
from pairwise.protocols.collect.wire import ROLE_USER, call, connect

N = 4
X = [3, 8, 1, 9]
Y = [2, 9, 2, 5]


class _Transport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


def test_the_gate_bounds_handshakes_evicts_old_ones_and_refuses_a_young_flood(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(adm.time, "monotonic", lambda: clock[0])
    g = HandshakeGate(Admission(max_handshakes=4, per_address=2, min_age=5.0))
    strangers = [_Transport() for _ in range(3)]
    s1, s2 = g.enter("10.0.0.9", strangers[0]), g.enter("10.0.0.9", strangers[1])
    assert s1 is not None and s2 is not None
    assert g.enter("10.0.0.9", strangers[2]) is None  # its address is at its cap, all young: told busy
    users = [_Transport(), _Transport()]
    u1, u2 = g.enter("10.0.0.1", users[0]), g.enter("10.0.0.1", users[1])
    assert u1 is not None and u2 is not None and len(g) == 4
    assert g.enter("10.0.0.2", _Transport()) is None  # full of young handshakes
    clock[0] += 6.0  # older than min_age: a newcomer takes the place of the most crowded address's oldest
    newcomer = g.enter("10.0.0.2", _Transport())
    assert newcomer is not None and len(g) == 4 and strangers[0].aborted and s1.evicted
    again = g.enter("10.0.0.9", strangers[2])  # full: the most crowded address (10.0.0.1) gives its oldest
    assert again is not None and users[0].aborted and not strangers[1].aborted
    clock[0] += 6.0
    third = g.enter("10.0.0.9", _Transport())  # at its own cap of 2: it replaces its own oldest
    assert third is not None and strangers[1].aborted and len(g.by_address["10.0.0.9"]) == 2 and len(g) == 4
    for s in (u1, u2, newcomer, again, s1, s2, third):
        g.leave(s)
    assert len(g) == 0 and not g.by_address and g.refused == 2 and g.evicted == 3


@pytest.mark.parametrize(
    "bad",
    [
        {"max_handshakes": 0},
        {"per_address": True},
        {"poll_rate": 0},
        {"min_poll": 5.0, "max_poll": 1.0},
        {"handshake_timeout": float("nan")},
    ],
)
def test_admission_parameters_are_validated(bad):
    with pytest.raises(ValueError):
        Admission(**bad)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    create_certificate(d, "agg", "server")
    create_certificate(d, "analyst", "collector")
    create_certificates(d, [f"user{i}" for i in range(N)], "user")
    return d


class _Flood:
    """Strangers at 127.0.0.2 opening TCP connections that start TLS and never finish it, as fast as they can."""

    def __init__(self, port: int) -> None:
        self.port, self.stop, self.opened = port, threading.Event(), 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        held: list[socket.socket] = []
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=5, source_address=("127.0.0.2", 0))
                s.sendall(b"\x16\x03\x01\x02\x00")  # the start of a ClientHello, and then nothing
                held.append(s)
                self.opened += 1
            except OSError:
                pass
            while len(held) > 200:
                held.pop(0).close()
            time.sleep(0.01)
        for s in held:
            s.close()


def test_a_handshake_flood_does_not_stop_registered_users_who_wait_without_connections(pki, tmp_path):
    admission = Admission(
        max_handshakes=6, per_address=3, min_age=1.0, handshake_timeout=10.0, min_poll=0.5, max_poll=2.0
    )
    agg = Aggregator(
        "127.0.0.1", 0, tls=TLSConfig(pki, "agg"), timeout=60.0, log=lambda m: None, admission=admission
    ).start_in_thread()
    server = f"127.0.0.1:{agg.port}"
    flood = _Flood(agg.port)
    flood.thread.start()
    outs: list = [None] * N
    try:
        with Collector(server, tls=TLSConfig(pki, "analyst"), server_name="agg", timeout=60) as c:
            c.create(
                "ustat-2pc",
                {
                    "statistic": "kendall",
                    "lower": [0, 0],
                    "upper": [15, 15],
                    "decimals": [0, 0],
                    "epsilon": 64.0,
                    "pairs_per_user": 1,
                    "min_users": 2,
                    "deadline": 3600,
                    "timeout": 60,
                    "pair_channel": "tls",
                },
                task_id="k",
            )

            def user(i: int) -> None:
                try:
                    outs[i] = join(
                        server,
                        "k",
                        X[i],
                        Y[i],
                        tls=TLSConfig(pki, f"user{i}"),
                        server_name="agg",
                        max_epsilon=100,
                        budget=500,
                        state_dir=str(tmp_path / f"u{i}"),
                        timeout=120,
                        wait=300,
                    )
                except BaseException as exc:  # noqa: BLE001 - reported below
                    outs[i] = exc

            ts = [threading.Thread(target=user, args=(i,), daemon=True) for i in range(N)]
            for t in ts:
                t.start()
            end = time.monotonic() + 120
            while c.show("k")["users_registered"] < N and time.monotonic() < end:
                time.sleep(0.2)
            assert c.show("k")["users_registered"] == N, outs

            # registered and waiting for the close: no user holds a connection (each polls, then hangs up)
            def users_connected() -> list:
                return [c for c in list(agg._conns) if c.identity is not None and c.identity.role == "user"]

            while users_connected() and time.monotonic() < end:
                time.sleep(0.05)
            assert not users_connected()
            # a retried join (a reply lost on the way) is recognised: registered once
            for _ in range(2):
                ch = connect(
                    ("127.0.0.1", agg.port),
                    ROLE_USER,
                    tls=TLSConfig(pki, "user0"),
                    server_name="agg",
                    timeout=60,
                    connect_timeout=60,
                )
                try:
                    reply = call(ch, {"op": "join", "task": "k", "poll": True})
                finally:
                    ch.close()
                assert reply["registered"] and reply["resumed"] and reply["retry_after"] >= 0
            assert c.show("k")["users_registered"] == N
            c.close_task("k")
            for t in ts:
                t.join(300)
            res = c.result("k", wait=120)
    finally:
        flood.stop.set()
        flood.thread.join(30)
        agg.stop_thread()
    assert all(not isinstance(o, BaseException) and o.status == "sessions finished" for o in outs), outs
    assert res["pairs_planned"] == res["pairs_completed"] == 2 and res["pairs_dropped"] == 0
    assert flood.opened > 0 and agg.gate.refused + agg.gate.evicted > 0  # the flood met the gate


def test_joins_at_once_are_stored_together_and_a_user_joining_twice_at_once_counts_once(tmp_path):
    agg = Aggregator(
        "127.0.0.1", 0, state_dir=str(tmp_path / "agg"), timeout=60.0, log=lambda m: None
    ).start_in_thread()
    try:
        with Collector(f"127.0.0.1:{agg.port}", timeout=60) as c:
            c.create(
                "ustat-2pc",
                {
                    "statistic": "gini",
                    "lower": 0,
                    "upper": 10,
                    "decimals": 0,
                    "epsilon": 1.0,
                    "min_users": 50,
                    "deadline": 3600,
                },
                task_id="g",
            )
            names = [f"u{i}" for i in range(12)] * 3  # every user three times, all at once
            replies: list = []

            def one(name: str) -> None:
                ch = connect(("127.0.0.1", agg.port), ROLE_USER, timeout=60, connect_timeout=60)
                try:
                    replies.append((name, call(ch, {"op": "join", "task": "g", "poll": True, "user": name})))
                except BaseException as exc:  # noqa: BLE001 - reported below
                    replies.append((name, exc))
                finally:
                    ch.close()

            ts = [threading.Thread(target=one, args=(n,), daemon=True) for n in names]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
            assert len(replies) == len(names) and all(isinstance(r, dict) and r["registered"] for _, r in replies)
            for n in set(names):  # exactly one of each user's joins registered it; the others were recognised
                assert sorted(r["resumed"] for m, r in replies if m == n) == [False, True, True]
            assert c.show("g")["users_registered"] == 12
        db = sqlite3.connect(f"file:{tmp_path}/agg/collect-aggregator.db?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT name, seq FROM users WHERE task = 'g' ORDER BY seq").fetchall()
        finally:
            db.close()
        assert sorted(n for n, _ in rows) == sorted(set(names)) and [s for _, s in rows] == list(range(1, 13))
    finally:
        agg.stop_thread()
