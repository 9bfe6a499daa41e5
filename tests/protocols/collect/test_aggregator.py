"""The aggregator in this process, users in threads over loopback TCP: tasks end to end, bad input, restarts."""

from __future__ import annotations

import io
import json
import sqlite3
from contextlib import redirect_stdout

import numpy as np
import pytest

from pairwise.protocols.collect.wire import (
    ROLE_USER,
    AlreadyJoined,
    BadReport,
    CapExceeded,
    RegistrationClosed,
    UnknownTask,
    call,
    connect,
)
from pairwise.protocols.service.frames import recv_json

from .conftest import Study


def raw_user(study: Study, name: str):
    """A hand-driven user connection (plaintext loopback: the user names itself in each request)."""
    ch = connect(("127.0.0.1", study.port), ROLE_USER, timeout=30)
    return ch, (lambda **msg: call(ch, {**msg, "user": name}))


def rng_rows(n: int, seed: int = 7, two: bool = False, labels: bool = False) -> list:
    g = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        x = float(g.integers(0, 11))
        y = float(g.integers(0, 11)) if two else None
        lab = int(i % 2) if labels else None
        rows.append((f"u{i}", x, y, lab))
    return rows


def cli_json(argv: list[str]) -> dict:
    from pairwise.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(argv) == 0
    return json.loads(buf.getvalue())


# ------------------------------------------------------------------------------ local model


def test_ldp_ustat_at_a_noiseless_epsilon_equals_todays_exact_value(study, tmp_path):
    rows = rng_rows(12)
    study.create("ldp-ustat", "t", epsilon=500, kernel="gini", lower=0, upper=10, decimals=0, min_users=12)
    out = study.join_all("t", rows)
    assert all(o.status == "reported" for o in out.values()), out
    res = study.result("t")
    csv = tmp_path / "data.csv"
    csv.write_text("x\n" + "\n".join(str(v) for _, v, _, _ in rows) + "\n")
    today = cli_json(
        [
            "ldp",
            "ustat",
            "--kernel",
            "gini",
            "--data",
            str(csv),
            "--columns",
            "x",
            "--lower",
            "0",
            "--upper",
            "10",
            "--epsilon",
            "500",
            "--compare",
            "--json",
        ]
    )
    # k-RR at epsilon 500 keeps every cell (beta = K / (K + e^500 - 1) = 0): the estimate is the exact value
    assert res["estimate"] == pytest.approx(today["exact_quantized"], abs=1e-9)
    assert res["n"] == 12 and res["reports"] == 12 and res["users_registered"] == 12
    expected = set(today) | {"users_registered", "pairs_planned", "pairs_completed", "pairs_dropped"}
    assert expected <= set(res), expected - set(res)
    assert res["exact"] is None and res["pairs_planned"] is None  # the aggregator never sees a value
    assert study.result("t") == res  # computed once, stored: the same release every time


@pytest.mark.parametrize(
    "protocol,params,two,labels",
    [
        ("ldp-auc", {"lower": 0, "upper": 10, "bits": 3}, False, True),
        ("ldp-qmle", {"lower": 0, "upper": 10}, True, False),
        ("ldp-ustat", {"kernel": "kendall", "lower": [0, 0], "upper": [10, 10], "decimals": [0, 0]}, True, False),
        ("ldp-ustat", {"kernel": "auc", "lower": 0, "upper": 10}, False, True),
    ],
)
def test_every_local_task_runs_and_keeps_todays_json_keys(study, tmp_path, protocol, params, two, labels):
    rows = rng_rows(12, two=two, labels=labels)
    study.create(protocol, "t", epsilon=2, min_users=12, **params)
    out = study.join_all("t", rows)
    assert all(getattr(o, "status", None) == "reported" for o in out.values()), out
    res = study.result("t")
    assert res["n"] == 12 and res["epsilon"] == 2.0
    csv = tmp_path / "data.csv"
    csv.write_text("x,y,lab\n" + "\n".join(f"{v},{w or 0},{lab or 0}" for _, v, w, lab in rows) + "\n")
    argv = {
        "ldp-auc": ["ldp", "auc", "--columns", "x", "--label", "lab", "--bits", "3"],
        "ldp-qmle": ["ldp", "qmle", "--response", "x", "--covariates", "y"],
        "ldp-ustat": ["ldp", "ustat", "--kernel", params.get("kernel", "gini"), "--columns", "x,y" if two else "x"]
        + (["--label", "lab"] if labels else []),
    }[protocol]
    lo = ",".join(str(x) for x in np.atleast_1d(params["lower"]))
    hi = ",".join(str(x) for x in np.atleast_1d(params["upper"]))
    today = cli_json(argv + ["--data", str(csv), "--lower", lo, "--upper", hi, "--epsilon", "2", "--json"])
    expected = set(today) | {"users_registered", "pairs_planned", "pairs_completed", "pairs_dropped"}
    assert expected <= set(res), expected - set(res)


def test_a_bad_report_or_frame_is_refused_for_that_user_alone(study):
    study.create("ldp-ustat", "t", epsilon=1, kernel="gini", lower=0, upper=10, min_users=3, deadline=3600)
    ch, req = raw_user(study, "mallory")
    req(op="join", task="t")
    for bad in ({"cell": 99}, {"cell": -1}, {"cell": "1"}, "x", {"cell": 1, "more": 2}):
        with pytest.raises(BadReport):
            req(op="report", task="t", report=bad)
    assert req(op="report", task="t", report={"cell": 3}) == {"ok": True, "counted": True, "duplicate": False}
    assert req(op="report", task="t", report={"cell": 3})["duplicate"] is True  # a replay is not counted again
    with pytest.raises(AlreadyJoined):
        req(op="report", task="t", report={"cell": 4})  # one report per user, whatever it sends later
    ch.send(b"\xff not json")  # a malformed frame ends this connection only
    with pytest.raises(Exception):  # noqa: B017 - the connection ends: closed, reset or timed out
        recv_json(ch, timeout=10)
        recv_json(ch, timeout=10)
    ch.close()
    out = study.join_all("t", [(f"u{i}", 5.0, None, None) for i in range(2)], max_epsilon=1)
    assert all(o.status == "reported" for o in out.values())
    assert study.show("t")["reports"] == 3


def test_unknown_task_double_join_and_join_after_close(study):
    with pytest.raises(UnknownTask):
        study.join("u0", "nope", 1.0)
    study.create("ldp-ustat", "t", epsilon=1, kernel="gini", lower=0, upper=10, min_users=2, deadline=3600)
    first = study.join("u0", "t", 4.0, max_epsilon=1)
    again = study.join("u0", "t", 4.0, max_epsilon=1)  # the same user joins twice: its kept report, not a new one
    assert first.status == "reported" and again.status == "already reported" and again.report == first.report
    study.join("u1", "t", 6.0, max_epsilon=1)
    with study.collector() as c:
        c.close_task("t")
    with pytest.raises(RegistrationClosed):
        study.join("u2", "t", 5.0, max_epsilon=1)
    assert study.result("t")["n"] == 2


def test_a_user_refuses_a_task_above_its_cap_and_sends_nothing(study):
    study.create("ldp-ustat", "t", epsilon=2, kernel="gini", lower=0, upper=10, min_users=2, deadline=3600)
    with pytest.raises(CapExceeded, match="cap"):
        study.join("u0", "t", 4.0, max_epsilon=1)
    study.create("ldp-ustat", "t2", epsilon=1, kernel="gini", lower=0, upper=10, min_users=2, deadline=3600)
    study.join("u1", "t2", 4.0, max_epsilon=1, budget=1.5)
    study.create("ldp-ustat", "t3", epsilon=1, kernel="gini", lower=0, upper=10, min_users=2, deadline=3600)
    with pytest.raises(CapExceeded, match="ledger has left"):
        study.join("u1", "t3", 4.0, max_epsilon=1, budget=1.5)
    for t in ("t", "t3"):
        assert study.show(t)["users_registered"] == 0 and study.show(t)["reports"] == 0


def test_a_restarted_aggregator_resumes_without_counting_a_report_twice(tmp_path):
    s = Study(tmp_path)
    try:
        s.create("ldp-ustat", "t", epsilon=1, kernel="gini", lower=0, upper=10, min_users=8, deadline=3600)
        before = s.join_all("t", [(f"u{i}", float(i), None, None) for i in range(5)], max_epsilon=1)
        s.stop()
        s.start()  # same port, same state
        again = s.join_all("t", [(f"u{i}", float(i), None, None) for i in range(8)], max_epsilon=1)
        for i in range(5):
            assert again[f"u{i}"].status == "already reported" and again[f"u{i}"].report == before[f"u{i}"].report
        with s.collector() as c:
            c.close_task("t")
        res = s.result("t")
        assert res["n"] == 8 and res["reports"] == 8
        s.stop()
        s.start()
        assert s.result("t") == res
    finally:
        s.stop()


# ------------------------------------------------------------------------------ 2PC


def _pairs(study: Study, task: str) -> list[tuple[str, str, str, int | None]]:
    db = sqlite3.connect(f"file:{study.state}/collect-aggregator.db?mode=ro", uri=True)
    try:
        return db.execute(
            "SELECT garbler, evaluator, state, value FROM pairs WHERE task = ? ORDER BY session", (task,)
        ).fetchall()
    finally:
        db.close()


def test_kendall_2pc_at_a_noiseless_epsilon_is_the_average_kernel_of_the_pairs(study):
    rows = rng_rows(8, two=True)
    vals = {n: (x, y) for n, x, y, _ in rows}
    study.create(
        "ustat-2pc",
        "k",
        epsilon=500,
        statistic="kendall",
        lower=[0, 0],
        upper=[10, 10],
        decimals=[0, 0],
        pairs_per_user=2,
        min_users=8,
    )
    out = study.join_all("k", rows)
    assert all(o.status == "sessions finished" for o in out.values()), out
    res = study.result("k")
    pairs = _pairs(study, "k")
    assert len(pairs) == res["pairs_planned"] == res["pairs_completed"] == 8 and res["pairs_dropped"] == 0
    kern = [np.sign(vals[g][0] - vals[e][0]) * np.sign(vals[g][1] - vals[e][1]) for g, e, _, _ in pairs]
    # eps / P = 250 per pair is capped at 64: k-RR keeps the value with probability 1 - 2 e^-64
    assert res["estimate"] == pytest.approx(float(np.mean(kern)), abs=1e-9)
    from pairwise.protocols.ustat.result import _ORDER  # the keys of today's pairwise ustat --json

    assert set(_ORDER) - {"cluster_workers", "cluster_tasks", "cluster_task_seconds"} <= set(res)
    lo, hi = res["interval"]
    assert lo < res["estimate"] < hi and res["alpha"] == 0.05 and res["interval_width"] == pytest.approx(hi - lo)
    per_user: dict = {}
    for g, e, _, _ in pairs:
        per_user[g] = per_user.get(g, 0) + 1
        per_user[e] = per_user.get(e, 0) + 1
    assert max(per_user.values()) <= 2


def test_a_user_who_leaves_after_pairing_loses_its_pairs_and_the_others_go_on(study):
    import threading

    study.create(
        "ustat-2pc",
        "k",
        epsilon=1,
        statistic="gini",
        lower=0,
        upper=10,
        decimals=0,
        pairs_per_user=2,
        min_users=7,
        timeout=20,
    )
    ch, req = raw_user(study, "leaver")
    assert req(op="join", task="k")["registered"] is True
    left = threading.Event()

    def leave_after_pairing() -> None:  # read the control connection until the sessions come, then vanish
        while True:
            ev = recv_json(ch, timeout=60)
            if ev.get("event") == "sessions":
                ch.close()
                left.set()
                return

    t = threading.Thread(target=leave_after_pairing, daemon=True)
    t.start()
    out = study.join_all("k", [(f"u{i}", float(i), None, None) for i in range(6)])
    t.join(60)
    assert left.is_set()
    res = study.result("k")
    pairs = _pairs(study, "k")
    assert res["pairs_planned"] == len(pairs) == 6
    for g, e, state, _ in pairs:
        assert state == ("dropped" if "leaver" in (g, e) else "completed"), pairs
    assert res["pairs_dropped"] == sum("leaver" in (g, e) for g, e, _, _ in pairs) > 0
    assert res["pairs_completed"] + res["pairs_dropped"] == res["pairs_planned"]
    assert all(o.status == "sessions finished" for o in out.values())
