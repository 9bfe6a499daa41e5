"""The shuffle-histogram task's public parameters: the shuffler's address and name, the domain cap, the key."""

from __future__ import annotations

import pytest

from pairwise.protocols.collect.histogram import MAX_BINS, HistogramTask
from pairwise.protocols.collect.tasks import validate_task
from pairwise.protocols.collect.wire import CollectError

GOOD = {
    "epsilon": 1.0,
    "delta": 0.9,
    "lower": 1,
    "upper": 5,
    "min_users": 600,
    "shuffler": "127.0.0.1:9000",
    "shuffler_name": "shuffler",
}


def test_spec_names_the_shuffler_and_maps_to_the_protocol():
    spec = validate_task("shuffle-histogram", dict(GOOD))
    assert spec["shuffler"] == "127.0.0.1:9000" and spec["shuffler_name"] == "shuffler" and spec["d"] == 5
    t = HistogramTask.from_spec(spec)
    assert (t.lower, t.upper, t.min_users, t.epsilon, t.delta) == (1, 5, 600, 1.0, 0.9)
    assert "seal_public_key" not in spec  # the aggregator adds it when it creates the task (with its private key)


@pytest.mark.parametrize(
    "change,match",
    [
        ({"shuffler": None}, "needs --shuffler"),
        ({"shuffler": "no-port"}, "--shuffler"),
        ({"shuffler_name": "bad name"}, "--shuffler-name"),
        ({"upper": MAX_BINS + 1}, f"1..{MAX_BINS} values"),
        ({"min_users": 100}, "400 ln"),
    ],
)
def test_bad_parameters_are_refused(change, match):
    with pytest.raises(CollectError, match=match):
        validate_task("shuffle-histogram", {**GOOD, **change})
