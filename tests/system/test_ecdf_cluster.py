"""An ECDF server's key evaluation on its own Dask cluster (pairwise.protocols.ecdf.cluster, ecdf serve --cluster).

The sharded evaluation must equal the server's own evaluation bit for bit (additive shares mod 2^l),
and the two servers' shares must still reconstruct the exact counts (Python ints as the reference).
A worker killed while it evaluates a shard fails the evaluation with ClusterError, and the retry
scatters the shards again and succeeds.  CI runs these on a LocalCluster of two worker processes.

End to end, with real ``ecdf serve --cluster local:2`` processes (each server its own LocalCluster):
releases equal the releases of servers without a cluster and the exact counts (numpy) at epsilon 500,
where the noise is 0 except with probability ~1e-13 per value; a worker of server 0 killed while a
release is prepared refuses the release (ServerUnavailable naming the cluster), charges nothing on
either server, and the retry succeeds; and ``ecdf serve --cluster`` on the command line.  Every wait
is bounded; nothing is timed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from fractions import Fraction

import numpy as np
import pytest

from pairwise.cli import main
from pairwise.protocols.cluster import ClusterError, open_cluster
from pairwise.protocols.ecdf.client import ECDFQuerier, ServerProcesses, make_keys, make_series, upload
from pairwise.protocols.ecdf.cluster import ClusterKeys
from pairwise.protocols.ecdf.shares import dcf_client_keys, parse_keys, quantize
from pairwise.protocols.ecdf.wire import ServerUnavailable

DOMAIN, L = 10, 32


@pytest.fixture(scope="module")
def client():
    with open_cluster("local:2", timeout=120) as c:
        yield c


def _server_shares(x, scheme, m, labels=None):
    """Parsed shares of each server; ``dcf``: the keys of a dataset stored before version 2 keys (still released)."""
    if scheme == "dcf":
        series = make_series(labels)
        keys = [{}, {}]
        for s, (w, _) in series.items():
            k = dcf_client_keys(x, w, domain_bits=DOMAIN, output_bits=L)
            keys[0][s], keys[1][s] = k
    else:
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


def test_workers_keep_the_shards_of_at_most_max_datasets(client):
    """Memory on the workers is bounded by max_datasets datasets' keys: the least recently released goes first."""
    rng = np.random.default_rng(5)
    sh = _server_shares(rng.integers(0, 1 << DOMAIN, 200), "dcf", 2)[0]
    pts = np.array([0, 100, 1023], dtype=np.uint64)
    keys = ClusterKeys(client, timeout=120, max_datasets=2)
    for name in ("a", "b"):
        keys.evaluate(name, "v1", sh, pts)
    assert keys.shards("a") > 0 and keys.shards("b") > 0
    keys.evaluate("a", "v1", sh, pts)  # a is now the most recent
    ev = keys.evaluate("c", "v1", sh, pts)  # evicts b, not a
    assert keys.shards("b") == 0 and keys.shards("a") > 0 and keys.shards("c") > 0
    assert {k[0] for k in keys._cache} == {"a", "c"}
    assert np.array_equal(ev["all"].cumulative_shares(pts), sh["all"].cumulative_shares(pts))
    ev = keys.evaluate("b", "v1", sh, pts)  # scattered again from the server's store: still exact
    assert np.array_equal(ev["all"].cumulative_shares(pts), sh["all"].cumulative_shares(pts))
    assert {k[0] for k in keys._cache} == {"c", "b"}
    with pytest.raises(ValueError, match="max_datasets"):
        ClusterKeys(client, timeout=120, max_datasets=0)


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


# --------------------------------------------------------------------------- ecdf serve --cluster
NB = 6  # service tests: 2^6 bins, L = 6
EPS = 500  # the CLI's cap; every per-value epsilon is capped at 32: P[noise != 0] ~ 1e-13 per value
CLI = [sys.executable, "-m", "pairwise"]


@pytest.fixture(scope="module")
def clustered():
    # server 0: a LocalCluster of two worker processes (the one whose worker is killed); server 1: one
    with ServerProcesses(2, budget="1000000", timeout=60, cluster=["local:2", "local:1"], startup_timeout=240) as sp:
        yield sp


@pytest.fixture(scope="module")
def clustered3():
    # m = 3 (mshare keys, evaluated at release time): server 0 on a LocalCluster of two worker processes
    with ServerProcesses(
        3,
        budget="1000000",
        timeout=60,
        cluster=["local:2", None, None],
        startup_timeout=240,
        extra_args=("--accept-unverified",),
    ) as sp:
        yield sp


@pytest.fixture(scope="module")
def plain():
    with ServerProcesses(2, budget="1000000", timeout=60) as sp:
        yield sp


def _q(sp) -> ECDFQuerier:
    return ECDFQuerier(sp.addresses, timeout=180, connect_timeout=10)


def _exact(x, w=None) -> np.ndarray:
    w = np.ones(len(x), dtype=np.int64) if w is None else np.asarray(w)
    return np.array([int(((np.asarray(x) <= t) * w).sum()) for t in range(1 << NB)], dtype=float)


def _spent(q: ECDFQuerier, dataset: str) -> list[tuple[str, str]]:
    return [(r["info"]["spent"], r["info"]["reserved"]) for r in q.status(dataset)]


def test_releases_with_a_cluster_equal_releases_without_one(clustered, plain):
    rng = np.random.default_rng(11)
    x = rng.integers(0, 1 << NB, 300)
    y = (rng.uniform(size=x.size) < 0.4).astype(int)
    for sp in (clustered, plain):
        rep = upload(sp.addresses, "same", x, labels=y, domain_bits=NB)
        assert rep.accepted == [300, 300]
    qc, qp = _q(clustered), _q(plain)
    for r, k in zip(qc.status(), (2, 1)):
        c = r["cluster"]
        assert c["spec"] == f"local:{k}" and c["workers"] == k and c["threads"] == k, c
    assert all(r["cluster"] is None for r in qp.status())
    ids = {r["cluster"]["scheduler_id"] for r in qc.status()}
    assert len(ids) == 2  # each server its own cluster
    ex = _exact(x)
    sub = [50, 0, 7, 63]
    # "all" is pos + neg (two stored series evaluated on the cluster); a threshold subset; every grid point
    for kw in ({}, {"thresholds": sub, "grid_bits": NB}, {"mechanism": "hierarchical"}):
        rc, rp = qc.ecdf("same", EPS, **kw), qp.ecdf("same", EPS, **kw)
        want = ex[sorted(sub)] if "thresholds" in kw else ex
        assert np.array_equal(rc.thresholds, rp.thresholds), kw
        assert np.allclose(rc.cumulative, rp.cumulative, atol=1e-6) and np.allclose(rc.cumulative, want, atol=1e-6), kw
        # two servers keep verified (vdpf) keys: their histogram shares come from the upload's check, so a
        # release evaluates no key, on a cluster or not (m > 2 evaluates on it: the worker test below)
        assert not any("cluster" in t for t in rc.server_timings + rp.server_timings)
    cc = qc.counts("same", [10, 30], EPS, ["pos", "neg"])
    cp = qp.counts("same", [10, 30], EPS, ["pos", "neg"])
    for s, w in (("pos", y), ("neg", 1 - y)):
        cum = _exact(x, w)
        want = np.diff(np.concatenate([[0], cum[[10, 30, 63]]]))
        assert np.array_equal(cc.values[s], want) and np.array_equal(cp.values[s], want), s


def _workers_of(pid: int) -> list[int]:
    """The Dask worker processes a server started (children running multiprocessing's spawn_main)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmd:
            out.append(int(d))
    return sorted(out)


def _wait_for(pred, what: str, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not pred():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_worker_killed_during_a_release_refuses_it_charges_nothing_and_the_retry_works(clustered3):
    """Warm the shards with one release, stop (SIGSTOP) one of server 0's workers, ask for another
    release, and once server 0 logs that it evaluates on the cluster, kill (SIGKILL) that worker: the
    release fails with ServerUnavailable (not a hang), neither server charged anything, and the next
    release (shards scattered again) equals the exact counts.  Three servers: their mshare keys are evaluated
    at release time (two servers' verified keys are not, see above)."""
    rng = np.random.default_rng(12)
    x = rng.integers(0, 1 << NB, 400)
    upload(clustered3.addresses, "lost", x, domain_bits=NB)
    q = _q(clustered3)
    assert np.allclose(q.ecdf("lost", EPS).cumulative, _exact(x))
    before = _spent(q, "lost")
    _wait_for(lambda: len(_workers_of(clustered3.pids[0])) == 2, "server 0's two workers")
    victim = _workers_of(clustered3.pids[0])[0]
    marks = clustered3.logs(0).count("evaluating")
    os.kill(victim, signal.SIGSTOP)
    err: list[BaseException] = []
    t = threading.Thread(target=lambda: _capture(err, q.ecdf, "lost", EPS), daemon=True)
    t.start()
    try:
        _wait_for(lambda: clustered3.logs(0).count("evaluating") > marks, "server 0 to evaluate on its cluster")
        time.sleep(1.0)  # let the scheduler hand the stopped worker its shards' tasks (either way it fails)
    finally:
        os.kill(victim, signal.SIGKILL)
    t.join(200)
    assert not t.is_alive(), "the release hung after a worker died"
    assert err and isinstance(err[0], ServerUnavailable), err
    assert "Dask cluster failed" in str(err[0]) and "Nothing was reserved or charged" in str(err[0]), err[0]
    assert _spent(q, "lost") == before  # spent and reserved unchanged on both servers
    assert "the cluster failed; refused, nothing reserved" in clustered3.logs(0)
    rel = q.ecdf("lost", EPS)  # the retry: shards scattered again from the server's keys
    assert np.allclose(rel.cumulative, _exact(x))
    spent = [Fraction(s) for s, _ in _spent(q, "lost")]
    assert spent == [Fraction(before[0][0]) + EPS] * 3


def test_one_scheduler_for_two_servers_is_refused():
    with pytest.raises(ValueError, match="cluster of its own"):
        ServerProcesses(2, cluster="tcp://127.0.0.1:8786")
    with pytest.raises(ValueError, match="cluster of its own"):
        ServerProcesses(2, cluster=["tcp://127.0.0.1:8786", "tcp://127.0.0.1:8786"])
    q = ECDFQuerier([("127.0.0.1", 1), ("127.0.0.1", 2)])
    why = q._shared_cluster([{"ok": True, "cluster_id": "Scheduler-a"}, {"ok": True, "cluster_id": "Scheduler-a"}])
    assert "one Dask cluster" in why
    assert not q._shared_cluster([{"ok": True, "cluster_id": "Scheduler-a"}, {"ok": True, "cluster_id": None}])


def test_ecdf_serve_cluster_on_the_command_line(tmp_path, capsys):
    """Server 0 with --cluster local:1, server 1 without, as real processes (the querier side runs
    in-process through the same CLI entry point); ecdf run at epsilon 500 equals the exact ECDF; ecdf
    status names server 0's cluster; SIGTERM stops server 0 and its worker; a bad spec and a demo with
    one scheduler for both servers are refused before anything starts."""
    rng = np.random.default_rng(13)
    v = np.round(rng.uniform(0, 30, 120), 3)
    path = tmp_path / "v.csv"
    path.write_text("v\n" + "".join(f"{a}\n" for a in v))
    procs = []
    try:
        for j, extra in ((0, ["--cluster", "local:1"]), (1, [])):
            procs.append(
                subprocess.Popen(
                    CLI
                    + [
                        "ecdf",
                        "serve",
                        "--server-id",
                        str(j),
                        "--listen",
                        "127.0.0.1:0",
                        "--budget",
                        "100000",
                        "--timeout",
                        "60",
                        *extra,
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        hello = [json.loads(p.stdout.readline()) for p in procs]
        assert hello[0]["event"] == "listening" and hello[0]["cluster"] == "local:1" and hello[1]["cluster"] is None
        servers = ",".join(f"127.0.0.1:{h['port']}" for h in hello)
        capsys.readouterr()
        assert (
            main(
                [
                    "ecdf",
                    "run",
                    "--servers",
                    servers,
                    "--data",
                    str(path),
                    "--columns",
                    "v",
                    "--lower",
                    "0",
                    "--upper",
                    "30",
                    "--domain-bits",
                    str(NB),
                    "--epsilon",
                    str(EPS),
                    "--timeout",
                    "180",
                    "--compare",
                    "--json",
                ]
            )
            == 0
        )
        d = json.loads(capsys.readouterr().out)
        xq = quantize(v, 0.0, 30.0, NB)
        assert np.allclose(d["dp"], _exact(xq) / v.size) and np.allclose(d["exact"], d["dp"])
        assert main(["ecdf", "status", "--servers", servers, "--json"]) == 0
        st = json.loads(capsys.readouterr().out)
        assert st[0]["cluster"]["spec"] == "local:1" and st[0]["cluster"]["workers"] == 1 and st[1]["cluster"] is None
        assert main(["ecdf", "status", "--servers", servers]) == 0
        out = capsys.readouterr().out
        assert "Dask cluster local:1" in out and "1 worker(s), 1 thread(s)" in out, out
        workers = _workers_of(procs[0].pid)
        assert len(workers) == 1
        procs[0].send_signal(signal.SIGTERM)
        assert procs[0].wait(timeout=60) == 0
        log = procs[0].stderr.read()
        assert "Dask cluster local:1: 1 worker(s)" in log and "stopped (SIGTERM)" in log and "Traceback" not in log
        _wait_for(lambda: all(_state(w) == "Z" for w in workers), "server 0's worker to exit", limit=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    capsys.readouterr()
    assert main(["ecdf", "serve", "--server-id", "0", "--listen", "127.0.0.1:0", "--cluster", "locl:2"]) == 2
    err = capsys.readouterr()
    assert "cluster spec must be" in err.err and "listening" not in err.out
    assert main(["ecdf", "demo", "--cluster", "tcp://127.0.0.1:8786"]) == 2
    assert "a cluster per server" in capsys.readouterr().err


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_ctrl_c_stops_a_clustered_server_and_its_workers_without_a_traceback():
    """Ctrl-C in a terminal signals the whole foreground process group: ``ecdf serve --cluster local:1`` and
    its worker.  On main each worker's asyncio runner ended in a KeyboardInterrupt traceback on the server's
    stderr; now the workers ignore SIGINT (a Dask preload) and the server stops them itself: exit 0, no
    traceback, no process of the group left."""
    p = subprocess.Popen(
        CLI
        + ["ecdf", "serve", "--server-id", "0", "--listen", "127.0.0.1:0", "--timeout", "60"]
        + ["--cluster", "local:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        assert json.loads(p.stdout.readline())["cluster"] == "local:1"
        workers = _workers_of(p.pid)
        assert len(workers) == 1
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=120) == 0
        log = p.stderr.read()
        assert "stopped (SIGINT)" in log and "Traceback" not in log and "KeyboardInterrupt" not in log, log
        _wait_for(lambda: all(_state(w) == "Z" for w in workers), "the worker to exit", limit=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
