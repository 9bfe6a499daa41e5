"""An ECDF server's key evaluation on its own Dask cluster (pairwise.protocols.ecdf.cluster).

The sharded evaluation must equal the server's own evaluation bit for bit (additive shares mod 2^l),
and the two servers' shares must still reconstruct the exact counts (Python ints as the reference).
A worker killed while it evaluates a shard fails the evaluation with ClusterError, and the retry
scatters the shards again and succeeds.  CI runs these on a LocalCluster of two worker processes.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from pairwise.protocols.cluster import ClusterError, open_cluster
from pairwise.protocols.ecdf.client import make_keys, make_series
from pairwise.protocols.ecdf.cluster import ClusterKeys
from pairwise.protocols.ecdf.shares import parse_keys

DOMAIN, L = 10, 32


@pytest.fixture(scope="module")
def client():
    with open_cluster("local:2", timeout=120) as c:
        yield c


def _server_shares(x, scheme, m, labels=None):
    keys = make_keys(x, make_series(labels), scheme=scheme, m=m, domain_bits=DOMAIN, output_bits=L)
    out = []
    for j in range(m):
        per = {}
        for s, blobs in keys[j].items():
            sh, kept, bad = parse_keys(scheme, blobs, party=j, m=m, n=DOMAIN, l=L)
            assert not bad and len(kept) == len(x)
            per[s] = sh
        out.append(per)
    return out


@pytest.mark.parametrize("scheme,m", [("dcf", 2), ("mshare", 3)])
def test_sharded_evaluation_equals_the_servers_own(client, scheme, m):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 1 << DOMAIN, 1500)
    y = rng.integers(0, 2, x.size)
    shares = _server_shares(x, scheme, m, labels=y)
    pts = np.array([0, 7, 300, 511, 512, 1000, 1023], dtype=np.uint64)
    total = {s: [0] * pts.size for s in shares[0]}
    for j in range(m):
        keys = ClusterKeys(client, timeout=120)  # one per server: each server has its own cluster
        ev = keys.evaluate(f"ds-{scheme}", "digest-1", shares[j], pts)
        for s, sh in shares[j].items():
            direct = sh.cumulative_shares(pts)
            assert np.array_equal(ev[s].cumulative_shares(pts), direct)
            assert np.array_equal(ev[s].cumulative_shares(pts[[4, 1]]), direct[[4, 1]])
            assert len(ev[s]) == x.size
            total[s] = [a + int(v) for a, v in zip(total[s], direct)]
        with pytest.raises(ValueError, match="outside the points"):
            ev["pos"].cumulative_shares(np.array([8], dtype=np.uint64))
        keys.forget(f"ds-{scheme}")
    weights = {"pos": y, "neg": 1 - y}
    for s, w in weights.items():
        want = [int(((x <= int(t)) * w).sum()) for t in pts]
        assert [v % (1 << L) for v in total[s]] == want


def test_shards_are_reused_and_rescattered_when_the_dataset_changes(client):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 1 << DOMAIN, 400)
    sh = _server_shares(x, "dcf", 2)[0]
    keys = ClusterKeys(client, timeout=120)
    pts = np.arange(0, 1 << DOMAIN, 64, dtype=np.uint64)
    keys.evaluate("d", "v1", sh, pts)
    first = list(keys._cache[("d", "all")][2])
    keys.evaluate("d", "v1", sh, pts[:3])
    assert keys._cache[("d", "all")][2] == first  # same digest: no new scatter
    x2 = np.concatenate([x, rng.integers(0, 1 << DOMAIN, 50)])
    sh2 = _server_shares(x2, "dcf", 2)[0]
    ev = keys.evaluate("d", "v2", sh2, pts)
    assert keys._cache[("d", "all")][2] != first
    assert np.array_equal(ev["all"].cumulative_shares(pts), sh2["all"].cumulative_shares(pts))
    keys.forget("d")
    assert not keys._cache


def test_a_worker_killed_during_the_evaluation_fails_it_and_the_retry_works():
    """Stop (SIGSTOP) one worker after the shards are scattered, start an evaluation, and once that
    worker has a task of it, kill it (SIGKILL): the evaluation raises ClusterError instead of waiting
    for the deadline, and the next evaluation re-scatters the lost shards and equals the direct one."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 1 << DOMAIN, 3000)
    sh = _server_shares(x, "dcf", 2)[0]
    pts = np.arange(0, 1 << DOMAIN, 4, dtype=np.uint64)
    want = sh["all"].cumulative_shares(pts)
    with open_cluster("local:2", timeout=120) as c:
        keys = ClusterKeys(c, timeout=120)
        keys.evaluate("d", "v1", sh, pts[:2])  # scatter
        pids = c.run(os.getpid)
        victim = sorted(pids)[0]
        os.kill(pids[victim], signal.SIGSTOP)
        err: list[BaseException] = []
        t = threading.Thread(target=lambda: _capture(err, keys.evaluate, "d", "v1", sh, pts), daemon=True)
        t.start()
        try:
            deadline = time.monotonic() + 60
            while not c.processing(workers=[victim]).get(victim) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert c.processing(workers=[victim]).get(victim), "the stopped worker never got a task"
        finally:
            os.kill(pids[victim], signal.SIGKILL)
        t.join(150)
        assert not t.is_alive() and err and isinstance(err[0], ClusterError), err
        assert "died" in str(err[0]) or "lost" in str(err[0]), err
        ev = keys.evaluate("d", "v1", sh, pts)  # the retry: lost shards scattered again
        assert np.array_equal(ev["all"].cumulative_shares(pts), want)


def _capture(err: list, fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        err.append(exc)
