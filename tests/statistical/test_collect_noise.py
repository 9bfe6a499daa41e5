"""The noise of the 2PC U-statistic among real users has the simulation's distribution (issue 21, "Tests").

``pairwise ustat`` (one process) and ``pairwise collect`` (users paired
through an aggregator) build the same noisy kernel circuit from the same
public parameters; what can differ is how the deployment wires it: whose
noise bits enter, what the evaluator reports, how the aggregator decodes and
averages.  Here 12 users with equal ratings (every pair's Kendall kernel is
0, so each pair's report is pure noise) join a ``ustat-2pc`` task with P = 3
through an aggregator over real loopback TCP (in this process, users in
threads: the property is the noise, not the processes).  Checks, each at
alpha = 1e-3 (so a correct deployment fails one run in a thousand):

* the 18 values the aggregator stored follow the circuit's exact k-RR pmf
  (:meth:`NoisyCircuit.noise_pmf`, the pmf the simulation draws from):
  chi-square goodness of fit;
* the released estimate is within 3.29 standard deviations of the kernel's
  mean 0, with the per-pair estimate variance of the exact mechanism
  (:meth:`NoisyCircuit.estimate_variance`): the error the simulation
  predicts for the same pairs.

A deployment that dropped one party's noise bits, reported the kernel before
noise or decoded the codes wrongly fails the first check with certainty.
"""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest
from scipy import stats

from pairwise.protocols.collect.tasks import protocol_of, validate_task
from tests.protocols.collect.conftest import Study

ALPHA = 1e-3
N, P = 12, 3


@pytest.fixture
def study(tmp_path):
    s = Study(tmp_path)
    yield s
    s.stop()


def test_the_reports_follow_the_exact_krr_pmf_and_the_estimate_its_variance(study):
    params = {
        "statistic": "kendall",
        "lower": [0, 0],
        "upper": [10, 10],
        "decimals": [0, 0],
        "epsilon": 1.0,
        "pairs_per_user": P,
        "min_users": N,
    }
    study.create("ustat-2pc", "k", **params)
    out = study.join_all("k", [(f"u{i:02d}", 5, 5, None) for i in range(N)])
    assert all(o.status == "sessions finished" for o in out.values()), out
    res = study.result("k")
    m = N * P // 2
    assert res["pairs_completed"] == m and res["pairs_dropped"] == 0
    db = sqlite3.connect(f"file:{study.state}/collect-aggregator.db?mode=ro", uri=True)
    values = [v for (v,) in db.execute("SELECT value FROM pairs WHERE task = 'k'")]
    db.close()
    assert len(values) == m
    nc = protocol_of("ustat-2pc")._build(validate_task("ustat-2pc", params))
    assert nc.mechanism == "krr" and nc.codes[0] == 0  # code 0 reports kernel value 0: the reports are the shifts
    pmf = nc.noise_pmf()
    observed = np.bincount(values, minlength=len(nc.codes))
    expected = np.array([float(pmf[d]) * m for d in range(len(nc.codes))])
    assert expected.min() >= 5  # the chi-square approximation holds
    assert stats.chisquare(observed, expected).pvalue > ALPHA, (observed, expected)
    sd = math.sqrt(float(nc.estimate_variance(0)) / m) * float(nc.unit)
    assert abs(res["estimate"]) <= stats.norm.isf(ALPHA / 2) * sd, (res["estimate"], sd)
