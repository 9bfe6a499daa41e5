"""The multi-server ECDF service end to end: real server processes on loopback, real TCP, real 2PC.

Servers are ``python -m pairwise ecdf serve`` processes (started by
:class:`pairwise.protocols.ecdf.client.ServerProcesses`); the clients and the querier
run in this process.  References are plain numpy counts on the same
quantized data, the Mann-Whitney AUC, and an independent Hosmer-Lemeshow
computation.  Noisy releases are checked against a tail bound of the exact
noise law (sum of L + 1 discrete Laplace variables) at alpha = 1e-6 (union
bound over the thresholds).  Every wait is bounded by the servers' and the
querier's timeouts.  No test measures time: the bound on a streaming
upload's memory is shown by counting the clients whose keys were made
against those every server has been sent.
"""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

import pairwise.protocols.ecdf.uploader as uploader
from pairwise.protocols.ecdf.client import (
    ClientBlock,
    ECDFQuerier,
    ServerProcesses,
    make_keys,
    make_series,
    send_keys,
    upload,
    upload_pointwise,
    upload_source,
)
from pairwise.protocols.ecdf.wire import (
    BudgetExceeded,
    DatasetError,
    DatasetExists,
    QueryRefused,
    ServerUnavailable,
)

NB = 6  # domain bits: 64 bins, L = 6
N = 1 << NB
HUGE = 1e4  # per-value epsilon capped at 32: P[any noise != 0] ~ 1e-12 per release
ALPHA = 1e-6


@pytest.fixture(scope="module")
def two():
    with ServerProcesses(
        2,
        budget="1000000",
        dataset_budgets={"tight": "1", "tight-roc": "1"},
        timeout=30,
        extra_args=("--accept-unverified",),  # the pointwise baseline
    ) as sp:
        yield sp


@pytest.fixture(scope="module")
def three():
    with ServerProcesses(3, budget="1000000", timeout=30, extra_args=("--accept-unverified",)) as sp:
        yield sp


def querier(sp) -> ECDFQuerier:
    return ECDFQuerier(sp.addresses, timeout=60, connect_timeout=5)


def values(seed: int, n: int = 200) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, N, n)


def exact_counts(x) -> np.ndarray:
    return np.array([(np.asarray(x) <= t).sum() for t in range(N)], dtype=float)


def tail_bound(epsilon: float, L: int, N_thr: int, alpha: float = ALPHA) -> float:
    """b with P(|sum of L+1 iid DL(exp(-eps/(L+1)))| > b) <= alpha / N_thr (exact pmf convolution)."""
    a = np.exp(-epsilon / (L + 1))
    z = np.arange(-3000, 3001)
    p = (1 - a) / (1 + a) * a ** np.abs(z)
    s = p.copy()
    for _ in range(L):
        s = np.convolve(s, p)
    vals = np.arange(-(L + 1) * 3000, (L + 1) * 3000 + 1)
    order = np.argsort(np.abs(vals))
    tail = 1.0 - np.cumsum(s[order])
    ok = np.flatnonzero(tail <= alpha / N_thr)
    return float(np.abs(vals[order][ok[0]]))


def first_reaching(f, q):
    return int(np.flatnonzero(f >= q - 1e-12)[0])


# --------------------------------------------------------------------------- releases
def test_two_servers_release_equals_exact_at_huge_epsilon(two):
    x = values(1)
    rep = upload(two.addresses, "exact2", x, domain_bits=NB)
    assert rep.accepted == [200, 200] and rep.rejected_count == [0, 0]
    q = querier(two)
    ex = exact_counts(x)
    rel = q.ecdf("exact2", HUGE)
    assert rel.noise == "gc" and rel.servers == 2 and rel.n == 200
    assert np.array_equal(rel.cumulative, ex)
    assert np.allclose(rel.smoothed, ex / 200, atol=1e-12)  # smoothing leaves a monotone ECDF unchanged
    assert rel.delta < 1e-9 and rel.bytes["servers"] > 0
    hier = q.ecdf("exact2", HUGE, mechanism="hierarchical")
    assert np.allclose(hier.cumulative, ex, atol=1e-6)
    sub = q.ecdf("exact2", HUGE, thresholds=[40, 0, 5])
    assert sub.thresholds.tolist() == [0, 5, 40] and np.array_equal(sub.cumulative, ex[[0, 5, 40]])
    # Algorithm 1 on the released ECDF: the first threshold whose ECDF reaches q
    qs = [0.1, 0.25, 0.5, 0.9]
    assert rel.quantiles(qs).tolist() == [first_reaching(ex / 200, v) for v in qs]


@pytest.mark.parametrize("servers", ["two", "three"])
def test_noisy_release_is_within_noise_bounds(servers, request):
    sp = request.getfixturevalue(servers)
    x = values(2)
    ds = f"noisy-{servers}"
    upload(sp.addresses, ds, x, domain_bits=NB)
    rel = querier(sp).ecdf(ds, 1.0)
    err = rel.cumulative - exact_counts(x)
    b = tail_bound(1.0, NB, N)
    assert np.abs(err).max() <= b, (np.abs(err).max(), b)
    assert (err != 0).sum() >= N // 2  # the release is noisy (P[err = 0] is about 0.02 per threshold)
    assert np.all(np.diff(rel.smoothed) >= 0) and rel.smoothed.min() >= 0 and rel.smoothed.max() <= 1
    assert rel.epsilon == 1.0 and rel.delta < 2.0**-40
    assert rel.noise == ("gc" if servers == "two" else "polya")
    # Theorem 3.1's per-threshold variance: (L + 1) Var(node noise), node scale (L + 1)/eps
    a = np.exp(-1 / (NB + 1))
    assert rel.mse_per_threshold == pytest.approx((NB + 1) * 2 * a / (1 - a) ** 2, rel=1e-9)


def test_three_servers_release_equals_exact_at_huge_epsilon(three):
    x = values(3, 150)
    rep = upload(three.addresses, "exact3", x, domain_bits=NB)
    assert rep.scheme == "mshare" and rep.accepted == [150, 150, 150]
    q = querier(three)
    ex = exact_counts(x)
    rel = q.ecdf("exact3", HUGE)
    assert np.array_equal(rel.cumulative, ex) and rel.noise == "polya"
    hier = q.ecdf("exact3", HUGE, mechanism="hierarchical")
    assert np.allclose(hier.cumulative, ex, atol=1e-6)
    tol = q.ecdf("exact3", HUGE, tolerate=1)  # noise shares NB(1/2): eps-DP against the querier + 1 server
    assert np.array_equal(tol.cumulative, ex)
    with pytest.raises(QueryRefused, match="tolerate"):
        q.ecdf("exact3", 1.0, tolerate=3)


def test_roc_auc_and_derived_ecdf(two):
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 240)
    x = np.clip(rng.normal(28 + 10 * y, 9), 0, N - 1).astype(int)
    upload(two.addresses, "roc", x, labels=y, domain_bits=NB)
    q = querier(two)
    roc = q.roc("roc", HUGE)
    xp, xn = x[y == 1], x[y == 0]
    mw = (xp[:, None] > xn[None, :]).mean() + 0.5 * (xp[:, None] == xn[None, :]).mean()
    assert roc.auc == pytest.approx(mw, abs=1e-12)
    assert roc.epsilon == HUGE
    assert roc.fpr[0] == 0 and roc.tpr[0] == 0 and roc.fpr[-1] == 1 and roc.tpr[-1] == 1
    # "all" = pos + neg shares, without an extra key
    assert np.array_equal(q.ecdf("roc", HUGE).cumulative, exact_counts(x))


@pytest.mark.parametrize("servers", ["two", "three"])
def test_hosmer_lemeshow_over_servers(servers, request):
    sp = request.getfixturevalue(servers)
    rng = np.random.default_rng(5)
    n, Q = 300, 5
    p = rng.beta(2, 3, n)
    yl = (rng.uniform(size=n) < p).astype(int)
    bins = np.minimum(np.floor(p * N), N - 1).astype(int)  # the probability grid of Algorithm 2, L = 6
    ds = f"hl-{servers}"
    upload(sp.addresses, ds, bins, labels=yl, probabilities=p, domain_bits=NB)
    hl = querier(sp).hosmer_lemeshow(ds, HUGE, Q=Q)
    # independent reference: exact ECDF cuts, groups (b_{q-1}, b_q], E on the 2^-8 weight grid
    f = exact_counts(bins) / n
    cuts = [first_reaching(f, k / Q) for k in range(1, Q)]
    assert hl.cuts.tolist() == cuts
    group = np.searchsorted(np.array(cuts), bins, side="left")
    w = np.rint(p * 256) / 256
    o1 = np.bincount(group, weights=yl, minlength=Q)
    o0 = np.bincount(group, weights=1 - yl, minlength=Q)
    e1 = np.bincount(group, weights=w, minlength=Q)
    e0 = np.bincount(group, weights=1 - w, minlength=Q)
    assert np.array_equal(hl.o1, o1) and np.array_equal(hl.o0, o0)
    # E has sensitivity 256 grid units, so even the capped per-value epsilon 32 leaves DL noise of
    # scale 8 grid units (a = e^-1/8): |noise| <= 135 units = 0.53 with probability 1 - 1e-7 per value
    assert np.abs(hl.e1 - e1).max() < 0.53 and np.abs(hl.e0 - e0).max() < 0.53
    got = np.sum((hl.o1 - hl.e1) ** 2 / np.maximum(hl.e1, 0.5) + (hl.o0 - hl.e0) ** 2 / np.maximum(hl.e0, 0.5))
    assert hl.statistic == pytest.approx(got, rel=1e-12)  # Eq. (5) on the released statistics
    # Theorem 5.1: (L + 1) eps' + 8 eps' = eps
    assert hl.epsilon == pytest.approx(HUGE, rel=1e-12) and hl.epsilon_prime == pytest.approx(HUGE / (NB + 9))


# --------------------------------------------------------------------------- budget and failures
def test_budget_is_tracked_and_enforced(two):
    upload(two.addresses, "tight", values(6), domain_bits=NB)
    q = querier(two)
    q.ecdf("tight", 0.6)
    refused = r"budget of dataset 'tight' exhausted on server 0.*spent 0\.6.*needs 0\.6"
    with pytest.raises(BudgetExceeded, match=refused):
        q.ecdf("tight", 0.6)
    q.ecdf("tight", 0.4)  # exact decimal arithmetic: 0.6 + 0.4 == 1
    assert all(s["info"]["spent"] == "1" and s["info"]["reserved"] == "0" for s in q.status("tight"))
    with pytest.raises(BudgetExceeded):
        q.ecdf("tight", 0.01)
    with pytest.raises(DatasetError, match="no dataset 'missing'"):
        q.ecdf("missing", 1.0)


def test_roc_releases_both_classes_or_neither(two):
    # 2000 clients per class: each class total's noise (eps 0.4 over the tree) has a standard deviation
    # of about 65 counts (7 nodes at scale 17.5), so a non-positive noisy total is a 30-sigma event
    y = np.arange(4000) % 2
    upload(two.addresses, "tight-roc", values(12, 4000), labels=y, domain_bits=NB)
    q = querier(two)
    assert q.roc("tight-roc", 0.8).epsilon == 0.8  # pos and neg with 0.4 each, one request
    with pytest.raises(BudgetExceeded, match="needs 0.4"):
        q.roc("tight-roc", 0.4)
    assert all(s["info"]["spent"] == "4/5" for s in q.status("tight-roc"))  # nothing charged for the refusal


def test_malformed_key_rejects_that_client_and_keeps_the_others(two):
    x = values(7, 120)
    series = make_series()
    keys = make_keys(x, series, scheme="vdpf", m=2, domain_bits=NB)
    keys[0]["all"][5] = keys[0]["all"][5][:-3]  # client 5's key for server 0 is truncated
    rep = send_keys(
        two.addresses,
        "malformed",
        scheme="vdpf",
        domain_bits=NB,
        output_bits=32,
        series_meta={"all": 1},
        ids=np.arange(120, dtype=np.uint64),
        keys=keys,
    )
    # server 0 rejects client 5; the upload commits the other 119 clients on both servers
    assert rep.accepted == [119, 119] and rep.rejected_count == [1, 1]
    assert rep.rejected[0][0]["client"] == 5 and "truncated" in rep.rejected[0][0]["reason"]
    # server 1 learns it from the servers' check of the chunk
    assert rep.rejected[1][0]["client"] == 5 and "did not parse at the other server" in rep.rejected[1][0]["reason"]
    assert [s["info"]["clients"] for s in querier(two).status("malformed")] == [119, 119]
    rel = querier(two).ecdf("malformed", HUGE)
    assert rel.n == 119
    assert np.array_equal(rel.cumulative, exact_counts(np.delete(x, 5)))


def test_duplicate_client_ids_are_rejected(two):
    x = np.array([1, 2, 3, 4, 60])
    rep = upload(two.addresses, "dups", x, client_ids=[10, 11, 12, 12, 13], domain_bits=NB)
    assert rep.accepted == [4, 4] and rep.rejected_count == [1, 1]
    assert rep.rejected[0] == [{"client": 12, "reason": "duplicate client id 12", "position": 3}]  # its row
    with pytest.raises(DatasetExists, match="already exists.*ecdf query"):  # datasets are sealed
        upload(two.addresses, "dups", np.array([9, 50]), client_ids=[11, 14], domain_bits=NB)
    rep = upload(two.addresses, "dups", np.array([9, 50]), client_ids=[11, 14], domain_bits=NB, append=True)
    assert rep.accepted == [1, 1] and rep.rejected[1][0]["client"] == 11
    rel = querier(two).ecdf("dups", HUGE)
    assert rel.n == 5 and np.array_equal(rel.cumulative, exact_counts([1, 2, 3, 60, 50]))


def test_an_append_must_declare_the_datasets_public_domain(two):
    """Clients appended on another public domain would sit on another grid than the stored ones: the servers
    refuse the append before taking any key (same metadata, or none at all from the Python API)."""
    meta = {"column": "v", "range": [20.0, 30.0]}
    upload(two.addresses, "grid", np.array([1, 2, 3]), client_ids=[1, 2, 3], domain_bits=NB, meta=meta)
    with pytest.raises(DatasetError, match=r"same.*public domain.*got \{'column': 'v', 'range': \[0.0, 250.0\]\}"):
        upload(
            two.addresses,
            "grid",
            np.array([4]),
            client_ids=[4],
            domain_bits=NB,
            append=True,
            meta={"column": "v", "range": [0.0, 250.0]},
        )
    assert [s["info"]["clients"] for s in querier(two).status("grid")] == [3, 3]  # nothing was taken
    rep = upload(two.addresses, "grid", np.array([4]), client_ids=[4], domain_bits=NB, append=True, meta=meta)
    assert rep.accepted == [1, 1]
    assert [s["info"]["meta"] for s in querier(two).status("grid")] == [meta, meta]


def test_server_that_is_down_is_named(two):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed again: nothing listens there
    q = ECDFQuerier([two.addresses[0], ("127.0.0.1", dead)], timeout=30, connect_timeout=1)
    with pytest.raises(ServerUnavailable, match=rf"server 1 \(127\.0\.0\.1:{dead}\).*unavailable"):
        q.ecdf("exact2", 1.0)
    with pytest.raises(ServerUnavailable, match=rf"server 1 \(127\.0\.0\.1:{dead}\)"):
        upload([two.addresses[0], ("127.0.0.1", dead)], "nowhere", values(8), domain_bits=NB, connect_timeout=1)


def test_killed_server_makes_the_release_fail_naming_it():
    with ServerProcesses(2, budget="100", timeout=20) as sp:
        upload(sp.addresses, "d", values(9, 50), domain_bits=NB)
        sp.kill(1)
        q = ECDFQuerier(sp.addresses, timeout=20, connect_timeout=1)
        with pytest.raises(ServerUnavailable, match=r"server 1 \(127\.0\.0\.1:\d+\)"):
            q.ecdf("d", 1.0)


def test_misordered_servers_and_mismatched_uploads_are_refused(two):
    rev = [two.addresses[1], two.addresses[0]]
    # both servers refuse at once; the uploader reports the refusal that reached it first
    with pytest.raises(QueryRefused, match="keys are for server (0, but this is server 1|1, but this is server 0)"):
        upload(rev, "order", values(10, 20), domain_bits=NB)
    upload(two.addresses, "shape", values(10, 20), domain_bits=NB)
    with pytest.raises(DatasetError, match="does not match"):
        upload(two.addresses, "shape", values(10, 20), domain_bits=NB + 1)


# --------------------------------------------------------------------------- the pointwise baseline
def test_pointwise_baseline_gives_the_same_counts_as_fss(two):
    x = values(11, 180)
    ex = exact_counts(x)
    q = querier(two)
    fss = upload(two.addresses, "cmp-fss", x, domain_bits=NB)
    pw = upload_pointwise(two.addresses, "cmp-pw", x, grid_bits=NB, domain_bits=NB)
    r_fss, r_pw = q.ecdf("cmp-fss", HUGE), q.ecdf("cmp-pw", HUGE)
    assert np.array_equal(r_fss.cumulative, ex) and np.array_equal(r_pw.cumulative, ex)
    # pointwise: every client sends |B| shares of 4 bytes to each of the 2 servers
    assert pw.bytes >= 180 * 2 * N * 4 > fss.bytes
    # a query round for a few thresholds, and a threshold outside the round is refused
    upload_pointwise(two.addresses, "cmp-pw", x, grid_bits=NB, domain_bits=NB, thresholds=[3, 17, 40])
    assert np.array_equal(q.ecdf("cmp-pw", HUGE, thresholds=[3, 40]).cumulative, ex[[3, 40]])
    with pytest.raises(QueryRefused, match="does not cover"):
        q.ecdf("cmp-pw", HUGE, thresholds=[4])


# --------------------------------------------------------------------------- streaming uploads (issue 22, item 6)
class CountingSource:
    """Clients 0..K-1 of ``x``, recording how far ahead of the servers each block is made."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self.count = int(x.size)
        self.series = {"all": 1}
        self.made = 0
        self.sent = 0  # clients every server has been sent (the upload's progress callback)
        self.ahead: list[int] = []

    def progress(self, done: int, total: int) -> None:
        self.sent = done

    def blocks(self, size: int):
        for c0 in range(0, self.count, size):
            k = min(size, self.count - c0)
            self.made += k
            self.ahead.append(self.made - self.sent)
            yield ClientBlock(self.x[c0 : c0 + k], {"all": None}, np.arange(c0, c0 + k, dtype=np.uint64))


def test_keys_are_made_chunk_by_chunk_a_few_chunks_ahead_of_the_servers(two):
    """3,000 clients in chunks of 100: no block is made more than 4 chunks (2 queued per server, 1 being sent,
    1 being made) ahead of what every server has received, and the release equals the exact counts."""
    x = np.random.default_rng(3).integers(0, 1 << NB, 3000)
    src = CountingSource(x)
    rep = upload_source(two.addresses, "stream-bounded", src, domain_bits=NB, chunk=100, progress=src.progress)
    assert rep.accepted == [3000, 3000] and src.made == 3000
    assert len(src.ahead) == 30 and max(src.ahead) <= 4 * 100, src.ahead
    rel = ECDFQuerier(two.addresses, timeout=60).ecdf("stream-bounded", HUGE)
    np.testing.assert_array_equal(rel.cumulative, [(x <= t).sum() for t in range(1 << NB)])


def test_no_key_is_made_before_every_server_is_reached_and_accepts_the_upload(two, monkeypatch):
    """Issue 22: ``ecdf upload`` of 10^7 rows built every key (10.8 GB, 76 s) before it connected, then failed
    with ServerUnavailable.  Now a server that is down, or a dataset id that exists, fails the upload before a
    single key is made."""
    made = []
    real = uploader.make_keys

    def counting(values, *a, **kw):
        made.append(int(np.asarray(values).size))
        return real(values, *a, **kw)

    monkeypatch.setattr(uploader, "make_keys", counting)
    x = np.random.default_rng(4).integers(0, 1 << NB, 500)
    down = [two.addresses[0], ("127.0.0.1", 9)]  # discard port: nothing listens
    with pytest.raises(ServerUnavailable):
        upload(down, "stream-down", x, domain_bits=NB, connect_timeout=2)
    assert made == []
    upload(two.addresses, "stream-exists", x, domain_bits=NB)
    made.clear()
    with pytest.raises(DatasetExists):
        upload(two.addresses, "stream-exists", x, domain_bits=NB)
    assert made == []


def test_pointwise_rounds_stream_too(two):
    x = np.random.default_rng(5).integers(0, 1 << NB, 700)
    src = CountingSource(x)
    rep = upload_pointwise(
        two.addresses,
        "stream-pointwise",
        None,
        grid_bits=4,
        domain_bits=NB,
        chunk=100,
        source=src,
        progress=src.progress,
    )
    assert rep.accepted == [700, 700] and max(src.ahead) <= 4 * 100, src.ahead
    rel = ECDFQuerier(two.addresses, timeout=60).ecdf("stream-pointwise", HUGE, grid_bits=4)
    np.testing.assert_array_equal(rel.cumulative, [(x <= (t + 1) * 4 - 1).sum() for t in range(16)])


def test_a_source_that_gives_fewer_clients_than_announced_fails_the_upload_and_commits_nothing(two):
    """A CSV that changes between the check and the upload: the keys' maker fails, every server's upload
    stops, and nothing is committed anywhere (the dataset id stays free)."""
    from pairwise.protocols.ecdf.shares import ShareParameterError

    x = np.random.default_rng(6).integers(0, 1 << NB, 500)
    src = CountingSource(x)
    src.count = 800  # announced (the header); its blocks give the 500 of another source
    src.blocks = CountingSource(x).blocks
    with pytest.raises(ShareParameterError, match="gave 500 clients, announced 800"):
        upload_source(two.addresses, "stream-short", src, domain_bits=NB, chunk=100)
    # each server frees the id once it has seen the upload's connection end, a moment after the uploader
    # raised: until then it says "being created by another upload right now" (seen on a loaded machine)
    end = time.monotonic() + 60
    while True:
        try:
            rep = upload(two.addresses, "stream-short", x, domain_bits=NB)
            break
        except DatasetError as exc:
            if "being created by another upload right now" not in str(exc) or time.monotonic() > end:
                raise
            time.sleep(0.2)
    assert rep.accepted == [500, 500]
