"""``pairwise collect simulate-users`` against a real aggregator process: a kendall 2PC task over the tls pair channel.

20 users on 2 worker processes, each with its own certificate (made by the
generator from the CA key) and only its own CSV row.  Checks the outcomes,
that every pair completed, and that the users' per-session costs were
measured and add up (both roles, positive CPU in every phase, the relayed
bytes seen equally by both sides).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pairwise.mpc.tls import TLSConfig
from pairwise.protocols.collect import Collector
from pairwise.protocols.collect.processes import AggregatorProcess, study_certificates

N = 20


def test_simulate_users_plays_a_2pc_task(tmp_path):
    study_certificates(str(tmp_path), 0)
    rng = np.random.default_rng(2)  # the data
    csv = tmp_path / "data.csv"
    csv.write_text("x,y\n" + "".join(f"{rng.integers(0, 16)},{rng.integers(0, 16)}\n" for _ in range(N)))
    agg = AggregatorProcess(None, tls_dir=str(tmp_path), timeout=60)
    try:
        with Collector(agg.server, tls=TLSConfig(tmp_path, "analyst"), server_name="aggregator") as c:
            c.create(
                "ustat-2pc",
                {
                    "statistic": "kendall",
                    "lower": [0, 0],
                    "upper": [15, 15],
                    "decimals": [0, 0],
                    "epsilon": 1.0,
                    "pairs_per_user": 1,
                    "min_users": N,
                    "timeout": 60,
                    "pair_channel": "tls",
                },
                task_id="k1",
            )
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pairwise",
                    "collect",
                    "simulate-users",
                    "--server",
                    agg.server,
                    "--server-name",
                    "aggregator",
                    "--task",
                    "k1",
                    "--data",
                    str(csv),
                    "--columns",
                    "x,y",
                    "--users",
                    str(N),
                    "--processes",
                    "2",
                    "--tls",
                    str(tmp_path),
                    "--json",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert run.returncode == 0, run.stderr
            out = json.loads(run.stdout.strip().splitlines()[-1])
            r = c.result("k1", wait=60)
    finally:
        agg.close()
    assert out["users"] == out["finished"] == N and out["statuses"] == {"sessions finished": N}, out
    assert out["workers"] == 2 and out["errors"] == []
    assert r["pairs_planned"] == r["pairs_completed"] == N // 2 and r["pairs_dropped"] == 0
    g, e = out["per_session"]["garbler"], out["per_session"]["evaluator"]
    for c in (g, e):
        assert c["tls_cpu"] > 0 and c["setup_cpu"] > 0 and c["run_cpu"] > 0 and c["wait"] >= 0
    assert g["wire_sent"] == pytest.approx(e["wire_received"]) and e["wire_sent"] == pytest.approx(g["wire_received"])
    assert (tmp_path / "sim000019.pem").exists() and not (tmp_path / "sim000020.pem").exists()
