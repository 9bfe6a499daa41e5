"""Task specs: every public parameter validated when the task is created, by the validators today's commands use."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pairwise.protocols.collect.tasks import PROTOCOLS, validate_task
from pairwise.protocols.collect.wire import BadReport, CollectError

NOW = 1_700_000_000.0

GOOD = {
    "ustat-2pc": {
        "epsilon": 1,
        "statistic": "kendall",
        "lower": [1, 1],
        "upper": [5, 4],
        "decimals": [0, 0],
        "min_users": 4,
        "pairs_per_user": 2,
    },
    "ldp-ustat": {"epsilon": 2, "kernel": "gini", "lower": 0, "upper": 10},
    "ldp-auc": {"epsilon": 2, "lower": 5, "upper": 30, "bits": 3},
    "ldp-qmle": {"epsilon": 2, "lower": 0, "upper": 3000, "tau": 0.5},
    "shuffle-histogram": {"epsilon": 1, "lower": 1, "upper": 5, "min_users": 6000, "shuffler": "127.0.0.1:9000"},
}


@pytest.mark.parametrize("protocol", sorted(GOOD))
def test_a_good_spec_is_json_and_public(protocol):
    spec = validate_task(protocol, GOOD[protocol], now=NOW)
    assert json.loads(json.dumps(spec)) == spec  # JSON round trip: what users are shown is what is stored
    assert spec["protocol"] == protocol and spec["epsilon"] == float(GOOD[protocol]["epsilon"])
    assert spec["deadline_at"] == NOW and spec["timeout"] == 120.0
    assert 0 <= spec["delta"] < 1


def test_every_protocol_of_the_issue_is_registered():
    assert set(PROTOCOLS) == {"ustat-2pc", "ldp-ustat", "ldp-auc", "ldp-qmle", "shuffle-histogram"}


def _refused(protocol, **change):
    params = dict(GOOD[protocol], **change)
    params = {k: v for k, v in params.items() if v is not None}
    with pytest.raises(CollectError) as info:
        validate_task(protocol, params, now=NOW)
    return str(info.value)


def test_epsilon_is_checked_by_the_one_validator_of_every_command():
    from pairwise.dp.accounting import check_epsilon
    from pairwise.dp.errors import PrivacyParameterError

    for bad in (0, -1, 501, float("nan"), "x"):
        with pytest.raises(PrivacyParameterError) as ref:
            check_epsilon(bad)
        assert _refused("ldp-ustat", epsilon=bad) == str(ref.value)


def test_ustat_2pc_is_checked_like_pairwise_ustat():
    from pairwise.protocols.ustat.public import UStatError, check_parameters

    with pytest.raises(UStatError) as ref:
        check_parameters("gini", 1.0, 1, noise="krr")
    assert _refused("ustat-2pc", statistic="gini", lower=0, upper=10, decimals=0, noise="krr") == str(ref.value)
    with pytest.raises(UStatError) as ref:
        check_parameters("kendall", 1.0, 1, pair_delta=2.0)
    assert _refused("ustat-2pc", pair_delta=2.0) == str(ref.value)
    assert "exceeds n - 1" in _refused("ustat-2pc", pairs_per_user=4, min_users=4)
    assert "lower < upper" in _refused("ustat-2pc", lower=[5, 1], upper=[1, 4])
    assert "one value per private column" in _refused("ustat-2pc", lower=1)
    assert "too narrow" in _refused("ustat-2pc", statistic="gini", lower=0, upper=10**6, decimals=0, bits=8)
    assert "needs --lower" in _refused("ustat-2pc", lower=None)


def test_ldp_tasks_are_checked_like_pairwise_ldp():
    from pairwise.dp.errors import PrivacyParameterError
    from pairwise.protocols.ldp.auc import PrivateHierarchicalHistogram
    from pairwise.protocols.ldp.qmle import BitModel

    with pytest.raises(PrivacyParameterError) as ref:
        PrivateHierarchicalHistogram(3, 2.0, 3, "budget", "advanced", 0.0)
    assert _refused("ldp-auc", splitting="budget", composition="advanced") == str(ref.value)
    assert "must be > 1" in _refused("ldp-auc", a=0.5)
    assert "<= 24" in _refused("ldp-auc", bits=25)
    with pytest.raises(ValueError) as ref:
        BitModel(0, 3000, 2.0, 1.5, 300.0)
    assert _refused("ldp-qmle", tau=1.5) == str(ref.value)
    assert "more than 8192" in _refused(
        "ldp-ustat", kernel="kendall", lower=[0, 0], upper=[1000, 1000], decimals=[0, 0], discrete=True
    )
    assert "400 ln(4/delta)" in _refused("shuffle-histogram", min_users=100)


def test_unknown_parameters_protocols_and_deadlines_are_refused_by_name():
    assert "no parameter(s) bogus" in _refused("ldp-ustat", bogus=1)
    with pytest.raises(CollectError, match="unknown protocol"):
        validate_task("ldp-nope", {"epsilon": 1})
    assert "--deadline" in _refused("ldp-ustat", deadline=-1)
    assert "--deadline" in _refused("ldp-ustat", deadline="next tuesday")
    assert "--min-users" in _refused("ldp-ustat", min_users=1)
    spec = validate_task("ldp-ustat", dict(GOOD["ldp-ustat"], deadline=60), now=NOW)
    assert spec["deadline_at"] == NOW + 60
    spec = validate_task("ldp-ustat", dict(GOOD["ldp-ustat"], deadline="2023-11-15T00:00:00Z"), now=NOW)
    assert spec["deadline_at"] == 1700006400.0
    assert "more than a year" in _refused("ldp-ustat", deadline="2030-01-01T00:00:00Z")


def test_validation_does_not_change_the_callers_parameters():
    params = dict(GOOD["ustat-2pc"])
    validate_task("ustat-2pc", params, now=NOW)
    assert params == GOOD["ustat-2pc"]


# ------------------------------------------------------------------------------ the users' side


def test_users_clamp_into_the_public_domain_and_get_checked_shapes():
    spec = validate_task("ustat-2pc", GOOD["ustat-2pc"], now=NOW)
    p = PROTOCOLS["ustat-2pc"]
    # kendall packs (x, y) on the grid; values outside [lower, upper] are clamped by the owner
    assert p.encode(spec, 99, -5, None) == p.encode(spec, 5, 1, None)
    for args in ((1, None, None), (1, 2, 1), ("x", 2, None), (float("inf"), 2, None)):
        with pytest.raises(CollectError):
            p.check_user(spec, *args)
    auc = validate_task("ldp-auc", GOOD["ldp-auc"], now=NOW)
    with pytest.raises(CollectError, match="label"):
        PROTOCOLS["ldp-auc"].check_user(auc, 10.0, None, None)


@pytest.mark.parametrize("protocol", ["ldp-ustat", "ldp-auc", "ldp-qmle"])
def test_reports_outside_the_randomizers_range_are_refused(protocol):
    spec = validate_task(protocol, GOOD[protocol], now=NOW)
    p = PROTOCOLS[protocol]
    label = 1 if p.needs_label(spec) else None
    assignment = p.assign(spec, label, [])
    value2 = 1.0 if p.values(spec) == 2 else None
    good = p.randomize(spec, assignment, 7.0, value2, label)
    assert p.check_report(spec, assignment, label, json.loads(json.dumps(good))) == good
    bad_reports = [
        None,
        [],
        {},
        {"cell": -1},
        {"cell": 10**9},
        {"bits": [2]},
        {"bits": [0, 1, 0, 1, 0]},
        {"z": 2, "x": [1.0]},
        {"z": 1, "x": [math.inf]},
        {"z": True, "x": [1.0]},
        dict(good, extra=1),
    ]
    for bad in bad_reports:
        with pytest.raises(BadReport):
            p.check_report(spec, assignment, label, bad)


def test_auc_levels_are_dealt_evenly_and_indices_are_in_range():
    spec = validate_task("ldp-auc", dict(GOOD["ldp-auc"], bits=4), now=NOW)
    p = PROTOCOLS["ldp-auc"]
    prev: list = []
    for _ in range(4 * 25):
        a = p.assign(spec, 1, prev)
        (lv,), (j,) = a["levels"], a["indices"]
        assert 1 <= lv <= 4 and 0 <= j < 2**lv
        prev.append(a)
    counts = np.bincount([a["levels"][0] for a in prev], minlength=5)[1:]
    assert counts.tolist() == [25, 25, 25, 25]  # blocks of alpha: every level once per block


def test_pairs_respect_p_and_the_auc_classes():
    from pairwise.protocols.ustat.stats import csprng_generator

    p = PROTOCOLS["ustat-2pc"]
    spec = validate_task("ustat-2pc", dict(GOOD["ustat-2pc"], pairs_per_user=3, min_users=9), now=NOW)
    users = [(f"u{i}", None) for i in range(9)]
    pairs = p.pair(spec, users, csprng_generator())
    assert len(pairs) == 3 * (9 // 2)
    seen: dict = {}
    for g, e, rnd in pairs:
        assert g != e and 0 <= rnd < 3
        for u in (g, e):
            seen[u] = seen.get(u, 0) + 1
    assert max(seen.values()) <= 3
    auc = validate_task(
        "ustat-2pc", dict(GOOD["ustat-2pc"], statistic="auc", lower=0, upper=1, decimals=2, pairs_per_user=2), now=NOW
    )
    users = [(f"p{i}", 1) for i in range(3)] + [(f"n{i}", 0) for i in range(5)]
    pairs = p.pair(auc, users, csprng_generator())
    assert len(pairs) == 2 * 3 and all(g.startswith("p") and e.startswith("n") for g, e, _ in pairs)
    with pytest.raises(CollectError, match="smaller class"):
        p.pair(dict(auc, pairs_per_user=4), users, csprng_generator())
    with pytest.raises(CollectError, match="one negative"):
        p.pair(auc, users[:3], csprng_generator())


def test_the_aggregator_refuses_a_2pc_value_the_circuit_cannot_output():
    p = PROTOCOLS["ustat-2pc"]
    spec = validate_task("ustat-2pc", GOOD["ustat-2pc"], now=NOW)
    nc = p.circuit(spec)
    assert nc.codes is not None  # kendall: k-RR codes
    for v in range(len(nc.codes)):
        assert p.check_value(spec, v) == v
    for bad in (-1, len(nc.codes), 1.5, "0", True, None):
        with pytest.raises(BadReport):
            p.check_value(spec, bad)
