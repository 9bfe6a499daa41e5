"""The shuffled histogram among real processes: aggregator, shuffler, and users from ``simulate-users``.

Theorem 3.2 needs n >= 400 ln(4/delta)/eps^2 users (n = 600 at eps = 1,
delta = 0.9, the smallest valid n).  Only ``N_REAL`` of them are processes
here (one ``simulate-users`` worker, each user with its own certificate and
only its own row, over TLS to the aggregator and the shuffler); the other
users' submissions are sealed by the test with the task's public key and
written into the shuffler's state before the shuffler starts, through its
own store (the shuffler then treats them like any submission).  Checks: the
release's frequencies are within the Theorem 3.1/3.2 Chernoff bound of the
exact ones (the task's beta = 1e-6 is the probability that this can fail);
the aggregator's state and log hold no user name (it never receives a sender
identity); the shuffler holds no user-to-box link after the batch left; a
user who joins again is refused a second submission.  That the shuffler's
output order is independent of the arrival order is tested at alpha 1e-3 in
tests/protocols/collect/test_shuffler_store.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from pairwise.mpc.tls import TLSConfig, create_certificate
from pairwise.protocols.collect import Collector
from pairwise.protocols.collect import histogram as H
from pairwise.protocols.collect.processes import AggregatorProcess, study_certificates
from pairwise.protocols.collect.shuffler import TaskInfo, open_store
from pairwise.protocols.collect.simulate import simulate_users
from pairwise.protocols.service.processes import ServiceProcess

pytestmark = pytest.mark.slow
N = 606  # users in the batch (n = 600)
N_REAL = 24  # of which processes of their own


def test_shuffled_histogram_among_processes(tmp_path):
    d = tmp_path / "study"
    study_certificates(str(d), 0)
    create_certificate(d, "shuffler", "server")
    vals = np.random.default_rng(5).integers(1, 6, N)  # the data: users 0..N_REAL-1 are processes
    csv = tmp_path / "data.csv"
    csv.write_text("v\n" + "".join(f"{v}\n" for v in vals[:N_REAL]))
    agg = AggregatorProcess(str(tmp_path / "agg"), tls_dir=str(d), timeout=60)
    shuf = None
    try:
        with Collector(agg.server, tls=TLSConfig(d, "analyst"), server_name="aggregator") as c:
            shuf_port = _free_port()
            task = c.create(
                "shuffle-histogram",
                {
                    "lower": 1,
                    "upper": 5,
                    "epsilon": 1.0,
                    "delta": 0.9,
                    "min_users": 600,
                    "deadline": 900,
                    "timeout": 60,
                    "beta": 1e-6,
                    "shuffler": f"127.0.0.1:{shuf_port}",
                    "shuffler_name": "shuffler",
                },
                task_id="h1",
            )
            pk = bytes.fromhex(task["spec"]["seal_public_key"])
            assert len(pk) == 32
            # the other users' submissions, sealed to the task's key, in the shuffler's state before it starts
            info = TaskInfo.from_info("h1", {"protocol": task["protocol"], "spec": task["spec"]})
            ht = H.HistogramTask.from_spec(task["spec"])
            store = open_store(str(tmp_path / "shuf"))
            store.remember_task(info)
            for u in range(N_REAL, N):
                store.submit(info, f"bg{u:04d}", b"".join(H.user_messages(float(vals[u]), ht, pk, "h1")[0]))
            store.close()
            shuf = ServiceProcess(
                ["collect", "shuffler"],
                [
                    "--upstream",
                    agg.server,
                    "--upstream-name",
                    "aggregator",
                    "--tls",
                    str(d),
                    "--name",
                    "shuffler",
                    "--poll",
                    "0.5",
                    "--state",
                    str(tmp_path / "shuf"),
                ],
                port=shuf_port,
                label="the shuffler",
            )
            out = simulate_users(
                agg.server,
                "h1",
                str(csv),
                ["v"],
                users=N_REAL,
                processes=1,
                tls=str(d),
                server_name="aggregator",
                timeout=60,
                wait=120,
            )
            assert out["statuses"] == {"submitted to the shuffler": N_REAL}, out
            # user 0 joins again from the command line: its ledger is gone with the simulation, so it seals anew;
            # the shuffler refuses a second submission of that certificate
            again = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pairwise",
                    "collect",
                    "join",
                    "--server",
                    agg.server,
                    "--server-name",
                    "aggregator",
                    "--task",
                    "h1",
                    "--value",
                    "3",
                    "--tls",
                    str(d),
                    "--name",
                    "sim000000",
                    "--state",
                    str(tmp_path / "ledger0"),
                    "--json",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert again.returncode == 0, again.stderr
            assert json.loads(again.stdout.strip().splitlines()[-1])["status"] == "already submitted"
            c.close_task("h1")
            r = c.result("h1", wait=120)
            assert c.result("h1") == r  # computed once, stored
    finally:
        shuf_log = shuf.logs() if shuf is not None else ""
        if shuf is not None:
            shuf.close()
        agg_log = agg.logs()
        agg.close()
    exact = np.bincount(vals - 1, minlength=5) / N
    assert r["n"] == N and r["users_registered"] == N and r["batches"] == 1 and r["messages_rejected"] == 0
    assert r["users_dropped_by_shuffler"] == 0
    assert np.max(np.abs(np.array(r["estimate"]) - exact)) <= r["error_bound"]
    assert np.max(np.abs(np.array(r["estimate_thresholded"]) - exact)) <= r["error_bound"]
    # the aggregator never received a sender identity: no registration, no name in a batch or in its log
    db = sqlite3.connect(tmp_path / "agg" / "collect-aggregator.db")
    assert db.execute("SELECT COUNT(*) FROM users WHERE task = 'h1'").fetchone()[0] == 0
    blobs = b"".join(row[0] for row in db.execute("SELECT boxes FROM shuffle_batches WHERE task = 'h1'"))
    assert len(blobs) == r["messages"] * 54
    for name in ("sim0", "bg0"):
        assert name.encode() not in blobs and name not in agg_log
    # the shuffler knows who submitted, but no longer which boxes were whose
    sdb = sqlite3.connect(tmp_path / "shuf" / "collect-shuffler.db")
    assert sdb.execute("SELECT COUNT(*) FROM submission WHERE boxes IS NOT NULL").fetchone()[0] == 0
    assert sdb.execute("SELECT COUNT(*) FROM outbox").fetchone()[0] == 0
    assert "delivered" in shuf_log
    assert os.stat(tmp_path / "agg" / "collect-aggregator.db").st_mode & 0o077 == 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
