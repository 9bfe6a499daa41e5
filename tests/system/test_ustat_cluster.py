"""run_ustat on Dask distributed (pairwise.protocols.ustat.cluster) against the in-process simulation.

CI runs these on a LocalCluster of two worker processes (Dask distributed comes with the dev extra).
No test times anything; every wait inside the runs has a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy import stats

from pairwise.protocols.cluster import ClusterError, open_cluster, parse_cluster, run_bounded
from pairwise.protocols.datasets import load_dataset
from pairwise.protocols.ustat import UStatError, prepare_data, run_ustat
from pairwise.protocols.ustat.cluster import BATCHES_PER_TASK
from pairwise.protocols.ustat.stats import sample_pairs, sample_two_sample_pairs
from tests.support.ustat import BOUNDS, DATA, noiseless_reference


@pytest.fixture(scope="module")
def client():
    with open_cluster("local:2", timeout=120) as c:
        yield c


def test_cluster_specs():
    assert parse_cluster("local:3").workers == 3 and parse_cluster("local").workers >= 1
    assert parse_cluster("tcp://10.0.0.5:8786").address == "tcp://10.0.0.5:8786"
    assert str(parse_cluster(" local:2 ")) == "local:2"
    for bad in ("local:0", "local:-1", "local:two", "remote", "tcp://host", "http://h:1", "tcp://h:99999", ""):
        with pytest.raises(ClusterError):
            parse_cluster(bad)
    for remote in ("tcp://10.1.2.3:8786", "tcp://scheduler.example:8786", "tcp://[2001:db8::1]:8786"):
        with pytest.raises(ClusterError, match="in the clear.*tls://"):  # refused before any connection
            with open_cluster(remote, timeout=5, connect_timeout=5):
                pass
    with pytest.raises(ClusterError, match="TLS settings"):  # no certificates in Dask's config
        with open_cluster("tls://127.0.0.1:9", timeout=5):
            pass
    x = np.arange(10.0)
    with pytest.raises(UStatError, match="cluster spec"):
        run_ustat("gini", x, epsilon=1, cluster="lokal", lower=0, upper=10)
    with pytest.raises(UStatError, match="simulate"):
        run_ustat("gini", x, epsilon=1, mode="network", cluster="local:2", lower=0, upper=10)


@pytest.mark.parametrize("statistic", ["gini", "kendall", "auc"])
def test_cluster_run_equals_the_in_process_run_without_noise(client, statistic):
    """At eps = 60 per pair on a kernel range of 2 the noise is nonzero with probability < 2e-13 per pair
    (as in test_ustat), so the cluster estimate must equal the in-process estimate and the plain average
    over the same sampled pairs; the exact value is the same."""
    x, y, lab = DATA[statistic]()
    seed = 23
    kw = dict(epsilon=120.0, pairs_per_user=2, batch=16, **BOUNDS[statistic])
    done = []
    res_c = run_ustat(
        statistic,
        x,
        y,
        lab,
        rng=np.random.default_rng(seed),
        cluster=client,
        progress=lambda d, m: done.append((d, m)),
        **kw,
    )
    res_i = run_ustat(statistic, x, y, lab, rng=np.random.default_rng(seed), **kw)
    pd = prepare_data(statistic, x, y, lab, **BOUNDS[statistic])
    rng = np.random.default_rng(seed)
    pairs = (
        sample_two_sample_pairs(pd.x.size, pd.y.size, 2, rng) if statistic == "auc" else sample_pairs(pd.x.size, 2, rng)
    )
    assert res_c.pairs == res_i.pairs == pairs.shape[0]
    assert res_c.exact == res_i.exact
    assert res_c.estimate == pytest.approx(res_i.estimate, abs=1e-12)
    assert res_c.estimate == pytest.approx(noiseless_reference(statistic, pd, pairs), abs=1e-12)
    assert res_c.and_gates == res_i.and_gates and res_c.bytes > 32 * res_c.and_gates
    # progress starts at 0, then one call per finished task, ending at all pairs; equal tasks, as many
    # as a multiple of the 2 worker threads, each of at most BATCHES_PER_TASK executions of <= 16 pairs
    tasks, least = res_c.extra["cluster_tasks"], -(-res_c.pairs // 16)
    assert done[0] == (0, res_c.pairs)
    assert tasks == len(done) - 1 and tasks == 2 * -(-least // (2 * BATCHES_PER_TASK))
    assert least <= res_c.executions <= least + tasks and res_c.executions <= tasks * BATCHES_PER_TASK
    assert done[-1] == (res_c.pairs, res_c.pairs) and all(b > a for (a, _), (b, _) in zip(done, done[1:]))
    assert res_c.extra["cluster_workers"] == 2 and res_i.extra["cluster"] is None


def test_cluster_estimates_have_the_in_process_distribution(client):
    """R = 20 runs on each path, run s of both paths on the same sampled pairs (seed s).

    Given the pairs, estimate - (noiseless subsample mean) is the mean of m iid discrete Laplace
    values with the stated per-pair variance s2: sum over runs of err^2 / (s2 / m) is chi2(R)
    (normal approximation of a mean of m = 100 iid symmetric values), tested two-sided at
    alpha = 1e-3 for each path.  The empirical MSEs around the exact value are compared by a
    paired t-test at alpha = 1e-3 (the shared pairs cancel the sampling part); the exact value is the same.
    """
    x = load_dataset("diabetes")["progression"][:200]
    R, alpha = 20, 1e-3
    bounds = dict(lower=0, upper=400, decimals=0)
    pd = prepare_data("gini", x, **bounds)
    errs = {"cluster": [], "local": []}
    sq = {"cluster": [], "local": []}
    s2 = m = exact = None
    for s in range(R):
        pairs = sample_pairs(pd.x.size, 1, np.random.default_rng(s))
        ref = noiseless_reference("gini", pd, pairs)
        for path, cl in (("cluster", client), ("local", None)):
            r = run_ustat(
                "gini",
                x,
                epsilon=2.0,
                rng=np.random.default_rng(s),
                batch=64,
                cluster=cl,
                compute_theorem5=False,
                **bounds,
            )
            assert exact is None or r.exact == exact
            exact, s2, m = r.exact, r.extra["noise_variance_per_pair"], r.pairs
            errs[path].append(r.estimate - ref)
            sq[path].append((r.estimate - r.extra["exact_quantized"]) ** 2)
    lo, hi = stats.chi2.ppf(alpha / 2, R), stats.chi2.ppf(1 - alpha / 2, R)
    for path in errs:
        q = float(np.sum(np.square(errs[path])) / (s2 / m))
        assert lo < q < hi, (path, q, lo, hi)
    assert stats.ttest_rel(sq["cluster"], sq["local"]).pvalue > alpha


def test_a_worker_killed_mid_run_is_an_error_not_a_hang():
    """Kill (SIGKILL) a worker process that is running a batch, from the progress callback of the
    first finished batch: the run must raise ClusterError naming the lost batch."""
    f = load_dataset("fair")
    x, y = f["rate_marriage"][:3000], f["religious"][:3000]
    with open_cluster("local:2", timeout=120) as c:
        killed = []

        def progress(done, total):
            if killed:
                return
            for addr, keys in c.processing().items():
                if keys:
                    pid = c.run(os.getpid, workers=[addr])[addr]
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return

        with pytest.raises(ClusterError, match="died"):
            run_ustat(
                "kendall",
                x,
                y,
                epsilon=1.0,
                batch=32,
                cluster=c,
                progress=progress,
                timeout=120,
                lower=[1, 1],
                upper=[5, 4],
            )
        assert killed


def test_no_finished_task_within_the_deadline_is_an_error(client):
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match="no task finished within 1 s"):
        run_bounded(client, time.sleep, [(30,), (30,)], window=2, timeout=1, on_result=lambda i, r: None)
    assert time.monotonic() - t0 < 25  # not a hang; the sleeping tasks were cancelled, not awaited


def test_cli_cluster_json():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pairwise",
            "ustat",
            "--statistic",
            "auc",
            "--epsilon",
            "1",
            "--cluster",
            "local:2",
            "--batch",
            "128",
            "--compare",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["cluster"] == "local:2" and d["cluster_workers"] == 2 and d["n"] == 569
    assert d["cluster_tasks"] == d["executions"] >= 2
    assert d["exact"] == pytest.approx(0.9375, abs=1e-3)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pairwise",
            "ustat",
            "--statistic",
            "auc",
            "--epsilon",
            "1",
            "--cluster",
            "local:zero",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "cluster spec" in json.loads(r.stdout)["error"]


def _faults_of_a_reallocation_loop(tune: bool) -> int:
    """In a worker: minor page faults of allocating, touching and freeing a 1 MiB array 200 times."""
    import resource

    from pairwise.protocols.cluster import keep_large_allocations

    if tune:
        keep_large_allocations()
    np.ones(1 << 17)  # (first touch of the heap, not counted)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(200):
        a = np.empty(1 << 17)  # 1 MiB
        a.fill(1.0)
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tuning")
def test_workers_reuse_freed_memory_instead_of_faulting_in_fresh_pages():
    """Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536, so a worker maps and faults in every MiB-sized array
    afresh (256 faults per 1 MiB array); after keep_large_allocations() it reuses freed memory.  Counts, not
    times: 200 arrays make ~51,200 faults untuned, a handful tuned."""
    with open_cluster("local:1", timeout=120) as c:
        before = c.submit(_faults_of_a_reallocation_loop, False, pure=False).result(timeout=120)
        after = c.submit(_faults_of_a_reallocation_loop, True, pure=False).result(timeout=120)
        env = c.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert list(env.values()) == ["65536"], env  # the condition this guards against is still Dask's default
    assert before > 20_000, before
    assert after < 2_000, after
