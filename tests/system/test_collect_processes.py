"""The collect service among real processes on loopback: one aggregator, users that are processes of their own.

Every user process holds its own certificate (role ``user``) and only its
own value(s); the aggregator is ``pairwise collect serve`` with its state in
SQLite; the analyst is ``pairwise collect task ...`` / the Python
``Collector``.  The tests read the aggregator's SQLite file (read-only) to
see what it stored: the pairs it sampled and their states.

* fifty user processes run ustat-2pc (kendall, gini, auc) and the local-model
  tasks at once; at a noiseless epsilon every 2PC estimate is exactly the
  mean kernel over the pairs the aggregator sampled, and ldp-ustat's equals
  ``pairwise ldp ustat``'s exact value on the same data;
* users killed with SIGKILL during their sessions, and one stalled (SIGSTOP)
  past the task's timeout, lose their pairs; every other pair completes and
  nobody is in more than P pairs;
* the aggregator killed with SIGKILL mid-task and restarted on its state
  counts no report twice, and a 2PC task it was running still ends cleanly;
* a user whose cap is below the task's epsilon refuses it: exit status 3,
  nothing registered, nothing charged.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pairwise.protocols.collect import Collector
from pairwise.protocols.collect.processes import AggregatorProcess, study_certificates, user_name

USER_SCRIPT = Path(__file__).with_name("collect_user.py")
N = 50
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("collect-certs")
    study_certificates(str(d), N)
    return d


def analyst(agg: AggregatorProcess, certs: Path) -> Collector:
    from pairwise.mpc.tls import TLSConfig

    return Collector(agg.server, tls=TLSConfig(str(certs), "analyst"), server_name="aggregator")


def stored(state: Path, sql: str, args: tuple = ()) -> list:
    db = sqlite3.connect(f"file:{state}/collect-aggregator.db?mode=ro", uri=True, timeout=30)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def pairs_of(state: Path, task: str) -> list[tuple]:
    return stored(state, "SELECT garbler, evaluator, state, value FROM pairs WHERE task = ? ORDER BY session", (task,))


def cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pairwise", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def join_cli(agg, certs: Path, tmp: Path, i: int, task: str, *values: str, extra=()) -> subprocess.Popen:
    return cli(
        "collect",
        "join",
        "--server",
        agg.server,
        "--task",
        task,
        "--tls",
        str(certs),
        "--name",
        user_name(i),
        "--server-name",
        "aggregator",
        "--state",
        str(tmp / user_name(i)),
        *values,
        *extra,
    )


def finish(procs, timeout: float = 900.0) -> list[tuple[int, str, str]]:
    out = []
    end = time.monotonic() + timeout
    for p in procs:
        try:
            so, se = p.communicate(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            so, se = p.communicate()
        out.append((p.returncode, so, se))
    return out


def per_user(pairs) -> dict:
    seen: dict = {}
    for g, e, *_ in pairs:
        seen[g] = seen.get(g, 0) + 1
        seen[e] = seen.get(e, 0) + 1
    return seen


# ------------------------------------------------------------------------------ fifty users, every task


def test_fifty_user_processes_run_every_task(tmp_path, certs):
    g = np.random.default_rng(21)
    x = g.integers(0, 11, N).astype(float)
    y = np.clip(x + g.integers(-3, 4, N), 0, 10).astype(float)
    b = g.integers(0, 2, N).astype(float)  # gini on a binary column: exact at any epsilon with this noise
    lab = np.array([i % 2 for i in range(N)])
    state = tmp_path / "agg"
    with AggregatorProcess(str(state), tls_dir=str(certs)) as agg, analyst(agg, certs) as c:
        common = {"epsilon": 40, "min_users": N, "deadline": 0}
        c.create(
            "ustat-2pc",
            {**common, "statistic": "kendall", "lower": [0, 0], "upper": [10, 10], "decimals": [0, 0]},
            "kendall",
        )
        c.create(
            "ustat-2pc",
            {**common, "statistic": "gini", "lower": 0, "upper": 1, "decimals": 0, "noise": "discrete_laplace"},
            "gini",
        )
        c.create("ustat-2pc", {**common, "statistic": "auc", "lower": 0, "upper": 10, "decimals": 0}, "auc")
        c.create(
            "ldp-ustat",
            {**common, "kernel": "kendall", "lower": [0, 0], "upper": [10, 10], "decimals": [0, 0]},
            "ldp-kendall",
        )
        c.create("ldp-auc", {"epsilon": 2, "min_users": N, "lower": 0, "upper": 10, "bits": 3}, "ldp-auc")
        c.create("ldp-qmle", {"epsilon": 2, "min_users": N, "lower": 0, "upper": 10}, "qmle")
        procs = []
        for i in range(N):
            joins = [
                {"task": "kendall", "value": x[i], "value2": y[i]},
                {"task": "gini", "value": b[i]},
                {"task": "auc", "value": x[i], "label": int(lab[i])},
                {"task": "ldp-kendall", "value": x[i], "value2": y[i]},
                {"task": "ldp-auc", "value": x[i], "label": int(lab[i]), "max_epsilon": 2},
                {"task": "qmle", "value": y[i], "value2": x[i], "max_epsilon": 2},
            ]
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(USER_SCRIPT),
                        agg.server,
                        str(certs),
                        user_name(i),
                        str(tmp_path / f"u{i}"),
                        json.dumps(
                            [{k: (float(v) if isinstance(v, np.floating) else v) for k, v in j.items()} for j in joins]
                        ),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outs = finish(procs)
        for rc, so, se in outs:
            assert rc == 0, se
            for line in so.splitlines():
                assert "error" not in json.loads(line), line
        res = {t: c.result(t, wait=120) for t in ("kendall", "gini", "auc", "ldp-kendall", "ldp-auc", "qmle")}
        assert c.result("kendall") == res["kendall"]  # stored once
    name = {user_name(i): i for i in range(N)}
    kernels = {
        "kendall": lambda i, j: np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]),
        "gini": lambda i, j: abs(b[i] - b[j]),
        "auc": lambda i, j: float(x[i] > x[j]) + 0.5 * float(x[i] == x[j]),
    }
    for task, f in kernels.items():
        pairs = pairs_of(state, task)
        r = res[task]
        assert r["pairs_planned"] == r["pairs_completed"] == len(pairs) and r["pairs_dropped"] == 0
        assert r["users_registered"] == N and max(per_user(pairs).values()) == 1
        if task == "auc":
            assert all(lab[name[g_]] == 1 and lab[name[e_]] == 0 for g_, e_, *_ in pairs)
        exact = float(np.mean([f(name[g_], name[e_]) for g_, e_, *_ in pairs]))
        assert r["estimate"] == pytest.approx(exact, abs=1e-9), task  # eps 40 per pair: no noise in 10^16
    csv = tmp_path / "data.csv"
    csv.write_text("x,y\n" + "\n".join(f"{a:g},{c:g}" for a, c in zip(x, y)) + "\n")
    today = subprocess.run(
        [
            sys.executable,
            "-m",
            "pairwise",
            "ldp",
            "ustat",
            "--kernel",
            "kendall",
            "--data",
            str(csv),
            "--columns",
            "x,y",
            "--lower",
            "0,0",
            "--upper",
            "10,10",
            "--decimals",
            "0,0",
            "--epsilon",
            "40",
            "--compare",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert res["ldp-kendall"]["estimate"] == pytest.approx(json.loads(today.stdout)["exact_quantized"], abs=1e-9)
    assert res["ldp-auc"]["n"] == res["qmle"]["n"] == N and res["ldp-auc"]["n_pos"] == N // 2


# ------------------------------------------------------------------------------ users killed or stalled


def test_users_killed_or_stalled_during_sessions_lose_their_pairs_only(tmp_path, certs):
    n, P = 8, 2  # the smallest study where the victims' partners keep a pair of their own
    state = tmp_path / "agg"
    with AggregatorProcess(str(state), tls_dir=str(certs)) as agg, analyst(agg, certs) as c:
        c.create(
            "ustat-2pc",
            {
                "epsilon": 1,
                "statistic": "gini",
                "lower": 0,
                "upper": 10,
                "decimals": 0,
                "pairs_per_user": P,
                "min_users": n,
                "timeout": 8,
            },
            "g",
        )
        procs = {user_name(i): join_cli(agg, certs, tmp_path, i, "g", "--value", str(i % 11)) for i in range(n)}
        killed, stalled = [user_name(0)], user_name(1)
        end = time.monotonic() + 120
        while not pairs_of(state, "g"):  # stop the victims as soon as the pairs are stored
            assert time.monotonic() < end, "the task was never paired"
            time.sleep(0.02)
        for v in (*killed, stalled):
            os.kill(procs[v].pid, signal.SIGSTOP)
        for v in killed:
            os.kill(procs[v].pid, signal.SIGKILL)  # kill -9 while their sessions wait or run
        try:
            res = c.result("g", wait=240)
        finally:
            os.kill(procs[stalled].pid, signal.SIGKILL)
        outs = dict(zip(procs, finish(procs.values())))
    pairs = pairs_of(state, "g")
    victims = {*killed, stalled}
    assert res["pairs_planned"] == len(pairs) == P * (n // 2)
    assert res["pairs_completed"] + res["pairs_dropped"] == res["pairs_planned"]
    assert max(per_user(pairs).values()) <= P
    assert any(not victims & {g_, e_} for g_, e_, *_ in pairs)  # some partners keep a pair of their own
    for g_, e_, st, _ in pairs:
        if victims & {g_, e_}:
            assert st in ("dropped", "completed")
        else:
            assert st == "completed", (g_, e_, st)  # partners' other pairs go on
    assert res["pairs_dropped"] == sum(st == "dropped" for *_, st, _ in pairs) >= 1
    for u, (rc, _so, se) in outs.items():
        if u not in victims:
            assert rc == 0, se


# ------------------------------------------------------------------------------ the aggregator killed


def test_a_killed_aggregator_restarts_without_counting_a_report_twice(tmp_path, certs):
    n = 9
    state = tmp_path / "agg"
    agg = AggregatorProcess(str(state), tls_dir=str(certs))
    try:
        with analyst(agg, certs) as c:
            c.create("ldp-ustat", {"epsilon": 1, "kernel": "gini", "lower": 0, "upper": 10, "min_users": n}, "t")
        procs = [
            join_cli(agg, certs, tmp_path, i, "t", "--value", str(i % 11), extra=("--timeout", "90")) for i in range(n)
        ]
        end = time.monotonic() + 120
        while stored(state, "SELECT COUNT(*) FROM reports")[0][0] < n // 3:
            assert time.monotonic() < end
            time.sleep(0.05)
        agg.kill(hard=True)  # kill -9 mid-task
        agg.restart()
        outs = finish(procs)
        assert all(rc == 0 for rc, _, _ in outs), [se for rc, _, se in outs if rc]
        with analyst(agg, certs) as c:
            res = c.result("t", wait=60)
    finally:
        agg.close()
    assert res["n"] == res["reports"] == n
    reports = dict(stored(state, "SELECT name, report FROM reports WHERE task = 't'"))
    assert len(reports) == n
    for i in range(n):  # the report each user kept in its own ledger is the one counted, once
        db = sqlite3.connect(f"file:{tmp_path / user_name(i)}/collect-ledger.db?mode=ro", uri=True)
        (kept,) = db.execute("SELECT report FROM charges WHERE task = 't'").fetchone()
        db.close()
        assert json.loads(kept) == json.loads(reports[user_name(i)])


def test_a_2pc_task_ends_cleanly_after_its_aggregator_is_killed(tmp_path, certs):
    n, P = 6, 2
    state = tmp_path / "agg"
    agg = AggregatorProcess(str(state), tls_dir=str(certs))
    try:
        with analyst(agg, certs) as c:
            c.create(
                "ustat-2pc",
                {
                    "epsilon": 1,
                    "statistic": "kendall",
                    "lower": [0, 0],
                    "upper": [10, 10],
                    "decimals": [0, 0],
                    "pairs_per_user": P,
                    "min_users": n,
                    "timeout": 20,
                },
                "k",
            )
        procs = [
            join_cli(
                agg, certs, tmp_path, i, "k", "--value", str(i), "--value2", str(10 - i), extra=("--timeout", "60")
            )
            for i in range(n)
        ]
        end = time.monotonic() + 120
        while not pairs_of(state, "k"):
            assert time.monotonic() < end
            time.sleep(0.02)
        agg.kill(hard=True)
        agg.restart()
        with analyst(agg, certs) as c:
            try:
                res = c.result("k", wait=180)
            except Exception as exc:  # noqa: BLE001 - a clean failure is allowed, with its reason
                res = {"failed": str(exc)}
        finish(procs)
    finally:
        agg.close()
    pairs = pairs_of(state, "k")
    assert len(pairs) == P * n // 2 and max(per_user(pairs).values()) <= P  # never re-paired
    assert all(st in ("completed", "dropped") for *_, st, _ in pairs)
    if "failed" not in res:
        assert res["pairs_completed"] == sum(st == "completed" for *_, st, _ in pairs)
        assert res["pairs_completed"] + res["pairs_dropped"] == res["pairs_planned"] == len(pairs)


# ------------------------------------------------------------------------------ a user's cap


def test_a_user_whose_cap_is_below_the_tasks_epsilon_refuses_and_sends_nothing(tmp_path, certs):
    state = tmp_path / "agg"
    with AggregatorProcess(str(state), tls_dir=str(certs)) as agg, analyst(agg, certs) as c:
        c.create(
            "ldp-ustat",
            {"epsilon": 1, "kernel": "gini", "lower": 0, "upper": 10, "min_users": 2, "deadline": 3600},
            "t",
        )
        ((rc, so, se),) = finish(
            [join_cli(agg, certs, tmp_path, 0, "t", "--value", "3", extra=("--max-epsilon", "0.5", "--json"))]
        )
        assert rc == 3, se
        assert json.loads(so)["refused"] is True and "cap" in se
        assert c.show("t")["users_registered"] == 0
    assert stored(state, "SELECT COUNT(*) FROM users")[0][0] == 0
    ledger = tmp_path / user_name(0) / "collect-ledger.db"
    if ledger.exists():
        db = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
        assert db.execute("SELECT COUNT(*) FROM charges").fetchone()[0] == 0
        db.close()
