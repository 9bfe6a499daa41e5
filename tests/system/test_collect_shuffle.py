"""The shuffled histogram among real processes: aggregator, shuffler, and users from ``simulate-users``.

n = 600 is the smallest valid n at epsilon = 1, delta = 0.9 (Theorem 3.2),
so 610 users, each with its own certificate and only its own row, submit
through a shuffler process.  Checks: the release's frequencies are within
the Theorem 3.1/3.2 Chernoff bound of the exact ones (the task's beta =
1e-6 is the probability that this can fail); the aggregator's state and log
hold no user name (it never receives a sender identity); the shuffler holds
no user-to-box link after the batch left; a user who joins again resends
its kept boxes and the shuffler counts them once.
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
from pairwise.protocols.collect.processes import AggregatorProcess, study_certificates
from pairwise.protocols.collect.simulate import simulate_users
from pairwise.protocols.service.processes import ServiceProcess

pytestmark = pytest.mark.slow
N = 610


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    d = tmp_path_factory.mktemp("study")
    study_certificates(str(d), 0)
    create_certificate(d, "shuffler", "server")
    vals = np.random.default_rng(5).integers(1, 6, N)  # the data
    csv = d / "data.csv"
    csv.write_text("v\n" + "".join(f"{v}\n" for v in vals))
    return d, csv, vals


def test_shuffled_histogram_among_processes(study, tmp_path):
    d, csv, vals = study
    agg = AggregatorProcess(str(tmp_path / "agg"), tls_dir=str(d), timeout=60)
    shuf = ServiceProcess(["collect", "shuffler"], ["--upstream", agg.server, "--upstream-name", "aggregator",
                                                    "--tls", str(d), "--name", "shuffler", "--poll", "0.5",
                                                    "--state", str(tmp_path / "shuf")], label="the shuffler")
    try:
        sh = f"{shuf.address[0]}:{shuf.address[1]}"
        with Collector(agg.server, tls=TLSConfig(d, "analyst"), server_name="aggregator") as c:
            task = c.create("shuffle-histogram", {"lower": 1, "upper": 5, "epsilon": 1.0, "delta": 0.9,
                                                  "min_users": 600, "deadline": 900, "timeout": 60, "beta": 1e-6,
                                                  "shuffler": sh, "shuffler_name": "shuffler"}, task_id="h1")
            assert len(bytes.fromhex(task["spec"]["seal_public_key"])) == 32
            out = simulate_users(agg.server, "h1", str(csv), ["v"], users=N, processes=2, tls=str(d),
                                 server_name="aggregator", timeout=60, wait=120)
            assert out["statuses"] == {"submitted to the shuffler": N}, out
            # user 0 joins again from the command line: its ledger is gone with the simulation, so it seals anew;
            # the shuffler refuses a second submission of that certificate
            again = subprocess.run(
                [sys.executable, "-m", "pairwise", "collect", "join", "--server", agg.server, "--server-name",
                 "aggregator", "--task", "h1", "--value", "3", "--tls", str(d), "--name", "sim000000",
                 "--state", str(tmp_path / "ledger0"), "--json"], capture_output=True, text=True, timeout=120)
            assert again.returncode == 0, again.stderr
            assert json.loads(again.stdout.strip().splitlines()[-1])["status"] == "already submitted"
            c.close_task("h1")
            r = c.result("h1", wait=120)
            assert c.result("h1") == r  # computed once, stored
    finally:
        shuf_log = shuf.logs()
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
    assert b"sim0" not in blobs and "sim0" not in agg_log
    # the shuffler knows who submitted, but no longer which boxes were whose
    sdb = sqlite3.connect(tmp_path / "shuf" / "collect-shuffler.db")
    assert sdb.execute("SELECT COUNT(*) FROM submission WHERE boxes IS NOT NULL").fetchone()[0] == 0
    assert sdb.execute("SELECT COUNT(*) FROM outbox").fetchone()[0] == 0
    assert "delivered" in shuf_log
    assert os.stat(tmp_path / "agg" / "collect-aggregator.db").st_mode & 0o077 == 0
