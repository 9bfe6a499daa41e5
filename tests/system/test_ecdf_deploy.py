"""Deploying the ECDF service: durable state, crashes, stale data, hostile peers, concurrency, shutdown.

Everything runs as real server processes on loopback
(:class:`pairwise.protocols.ecdf.client.ServerProcesses`, ``python -m pairwise
ecdf serve``), crashed with SIGKILL and restarted on the same ``--state``.
References are numpy counts of the same values at an epsilon so large that
the noise is zero except with probability ~1e-12 per release (per-value
epsilon capped at 32).  Every wait is bounded; no test measures time
(memory is read from /proc, with a bound far above what the server needs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from pairwise.mpc.errors import ChannelError
from pairwise.protocols.ecdf.auth import Peer, Policy
from pairwise.protocols.ecdf.client import (
    ECDFQuerier,
    ServerProcesses,
    make_keys,
    make_series,
    upload,
    upload_pointwise,
)
from pairwise.protocols.ecdf.storage import open_storage
from pairwise.protocols.ecdf.wire import (
    ROLE_CLIENT,
    ROLE_QUERIER,
    UPLOAD_FRAME_MAX,
    BudgetExceeded,
    DatasetExists,
    DatasetMismatch,
    ECDFError,
    ServerUnavailable,
    Unauthorized,
    UnknownDataset,
    connect,
    recv_json,
    send_json,
)

NB = 6
N = 1 << NB
HUGE = 1e4
CLI = [sys.executable, "-m", "pairwise"]


def values(seed: int, n: int, bits: int = NB) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << bits, n)


def exact_counts(x, bits: int = NB) -> np.ndarray:
    return np.array([(np.asarray(x) <= t).sum() for t in range(1 << bits)], dtype=float)


def querier(sp) -> ECDFQuerier:
    return ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10)


def wait_for(pred, what: str, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def spent(q: ECDFQuerier, dataset: str) -> list[str]:
    return [s["info"]["spent"] for s in q.status(dataset)]


def client(addr):
    return connect(addr, ROLE_CLIENT, label="server", connect_timeout=10, timeout=60)


def upload_header(j: int, dataset: str, chunks: list[int], servers, **extra) -> dict:
    """A vdpf upload header for server j (``servers``: where server 0 finds server 1 for the keys' check)."""
    return dict(
        {
            "op": "upload",
            "dataset": dataset,
            "scheme": "vdpf",
            "m": 2,
            "server_id": j,
            "domain_bits": NB,
            "output_bits": 32,
            "series": [{"name": "all", "max_weight": 1}],
            "chunks": chunks,
            "upload_id": os.urandom(16).hex(),
            "servers": [list(a) for a in servers],
        },
        **extra,
    )


# --------------------------------------------------------------------------- crashes and restarts
def test_kill_9_during_upload_and_release_loses_no_client_and_no_epsilon(tmp_path):
    state = tmp_path / "state"
    x_base, x_exact = values(1, 300, 10), values(2, 200)
    with ServerProcesses(2, budget="1000000", dataset_budgets={"base": "3"}, timeout=30, state_dir=state) as sp:
        upload(sp.addresses, "base", x_base, domain_bits=10)
        upload(sp.addresses, "exact", x_exact, domain_bits=NB)
        q = querier(sp)
        q.ecdf("base", 1.0)
        # kill -9 server 1 in the middle of an upload: staged (and checked) on both servers, never committed
        x_late = values(3, 50)
        keys = make_keys(x_late, make_series(), scheme="vdpf", m=2, domain_bits=NB)
        ids = np.arange(1000, 1050, dtype=np.uint64)
        chans = [client(a) for a in sp.addresses]
        upload_id = os.urandom(16).hex()
        for j, ch in enumerate(chans):
            send_json(ch, upload_header(j, "late", [50], sp.addresses, upload_id=upload_id))
            assert recv_json(ch)["ok"]
        for j, ch in enumerate(chans):
            ch.send_array(ids)
            ch.send_array(np.full((50, 1), len(keys[j]["all"][0]), dtype=np.uint32))
            ch.send(b"".join(keys[j]["all"]))
        assert recv_json(chans[0])["staged"]  # server 0 staged it, never committed
        sp.kill(1, hard=True)
        for ch in chans:
            ch.close()
        sp.restart(1)
        assert [s["info"]["clients"] for s in q.status("base")] == [300, 300]
        assert spent(q, "base") == ["1", "1"]
        assert q.holders("late") == [False, False]  # nothing of the interrupted upload was stored

        # kill -9 server 1 in the middle of a release, once it has charged the release
        outcome: list = []

        def release():
            try:
                outcome.append(q.ecdf("base", 1.0))
            except (ServerUnavailable, ChannelError) as exc:
                outcome.append(exc)

        t = threading.Thread(target=release)
        t.start()
        wait_for(lambda: "charged 1, spent 2 of 3" in sp.logs(1), "server 1 to charge the release")
        sp.kill(1, hard=True)
        t.join(timeout=300)
        assert not t.is_alive() and len(outcome) == 1
        sp.restart(1)
        # both ledgers show the charge (server 1 wrote it before drawing noise; the status reconciles)
        assert spent(q, "base") == ["2", "2"]
        assert [s["info"]["clients"] for s in q.status("base")] == [300, 300]

        # ecdf query over the old dataset works after the restart, and spends the last epsilon
        code = subprocess.run(
            CLI + ["ecdf", "query", "--servers", sp.servers, "--dataset", "base", "--epsilon", "1", "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert code.returncode == 0, code.stderr
        out = json.loads(code.stdout)
        assert out["n"] == 300 and len(out["dp"]) == 1024 and 0 <= min(out["smoothed"]) <= max(out["smoothed"]) <= 1
        with pytest.raises(BudgetExceeded, match="exhausted on server 0"):
            q.ecdf("base", 0.5)

        # a crash of server 0 does not reset the exhausted budget
        sp.kill(0, hard=True)
        sp.restart(0)
        with pytest.raises(BudgetExceeded, match="exhausted on server 0.*spent 3"):
            q.ecdf("base", 0.5)
        assert spent(q, "base") == ["3", "3"]
        # every accepted client's keys survived both crashes
        assert np.array_equal(q.ecdf("exact", HUGE).cumulative, exact_counts(x_exact))

        # SIGTERM: a clean shutdown, and the state opens again
        assert sp.kill(0) == 0 and "stopped (SIGTERM)" in sp.logs(0)
        sp.restart(0)
        assert spent(q, "base") == ["3", "3"] and spent(q, "exact") == ["10000", "10000"]


def test_restart_reloads_mshare_keys_and_pointwise_rounds_from_disk(tmp_path):
    x, y = values(8, 90), values(9, 70)
    with ServerProcesses(
        3, budget="1000000", timeout=30, state_dir=tmp_path, extra_args=("--accept-unverified",)
    ) as sp:
        upload(sp.addresses, "ms", x, labels=np.arange(90) % 2, domain_bits=NB)  # mshare: seed and vector keys
        upload_pointwise(sp.addresses, "pw", y, grid_bits=4, domain_bits=NB, thresholds=[1, 7, 15])
        for j in range(3):
            assert sp.kill(j) == 0  # SIGTERM: a clean shutdown
        for j in range(3):
            sp.restart(j)
        q = querier(sp)
        assert np.array_equal(q.ecdf("ms", HUGE).cumulative, exact_counts(x))
        assert np.array_equal(q.ecdf("ms", HUGE, series="pos").cumulative, exact_counts(x[1::2]))  # label 1: odd rows
        pw = q.ecdf("pw", HUGE, grid_bits=4, thresholds=[1, 15])
        assert np.array_equal(pw.cumulative, exact_counts(y)[[7, 63]])  # grid points (i + 1) 4 - 1


def test_a_second_server_on_the_same_state_is_refused(tmp_path):
    with ServerProcesses(2, timeout=30, state_dir=tmp_path) as sp:
        p = subprocess.run(
            CLI + ["ecdf", "serve", "--server-id", "0", "--listen", "127.0.0.1:0", "--state", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 2 and "in use by another running server" in p.stderr
        sp.kill(1)
    open_storage(str(tmp_path / "x"), 0).close()
    os.rename(tmp_path / "x" / "ecdf-server-0.db", tmp_path / "x" / "ecdf-server-1.db")
    p = subprocess.run(
        CLI + ["ecdf", "serve", "--server-id", "1", "--listen", "127.0.0.1:0", "--state", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "belongs to server 0" in p.stderr


def test_a_state_that_is_empty_open_to_others_or_unwritable_is_refused_with_a_storage_error(tmp_path):
    """Issue 22: a zero-length state database started an empty server (no datasets, an unspent budget) without
    a warning; an existing 0755 state directory was accepted (the README promises 0700); an OSError of the
    state directory escaped as itself, not as StorageError.  Each is now refused, naming what to do."""
    from pairwise.protocols.ecdf.storage import StorageError

    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    (empty / "ecdf-server-0.db").write_bytes(b"")
    p = subprocess.run(
        CLI + ["ecdf", "serve", "--server-id", "0", "--listen", "127.0.0.1:0", "--state", str(empty)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "is empty (0 bytes)" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == "" and (empty / "ecdf-server-0.db").stat().st_size == 0  # never listened, kept the file
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    os.chmod(shared, 0o755)
    with pytest.raises(StorageError, match=r"has mode 0755.*chmod 700"):
        open_storage(str(shared), 0)
    assert not (shared / "ecdf-server-0.db").exists()
    odd = tmp_path / "odd"
    odd.mkdir(mode=0o700)
    (odd / "ecdf-server-0.lock").mkdir()  # the OSError of an unwritable state, whoever runs the test (root too)
    with pytest.raises(StorageError, match="must be writable"):
        open_storage(str(odd), 0)


# --------------------------------------------------------------------------- datasets cannot go stale
def test_servers_holding_different_data_under_one_id_refuse_and_charge_nothing():
    a, b = values(4, 100), values(5, 100)
    with ServerProcesses(2, budget="100000", timeout=30) as p, ServerProcesses(2, budget="100000", timeout=30) as r:
        upload(p.addresses, "d", a, domain_bits=NB)
        upload(r.addresses, "d", b, domain_bits=NB)  # same id, same client ids, other values and keys
        mixed = ECDFQuerier([p.addresses[0], r.addresses[1]], timeout=60, connect_timeout=10)
        with pytest.raises(
            DatasetMismatch,
            match=r"dataset 'd' differs between the servers: server 0 \(127\.0\.0\.1:"
            r"\d+\) holds 100 clients.*server 1 \(127\.0\.0\.1:\d+\) holds 100",
        ):
            mixed.ecdf("d", 1.0)
        # only server 0 of the first pair holds "e": a mismatch too, not a silent half release
        upload(p.addresses, "e", a, domain_bits=NB)
        with pytest.raises(DatasetMismatch, match="server 1 .*no dataset 'e'"):
            mixed.ecdf("e", 1.0)
        assert spent(querier(p), "d") == ["0", "0"] and spent(querier(r), "d") == ["0", "0"]
        # the re-upload of the same id is refused; an explicit append of new clients is not
        with pytest.raises(DatasetExists, match="ecdf query"):
            upload(p.addresses, "d", b, domain_bits=NB)
        upload(p.addresses, "d", b, client_ids=np.arange(100, 200), domain_bits=NB, append=True)
        assert np.array_equal(querier(p).ecdf("d", HUGE).cumulative, exact_counts(np.concatenate([a, b])))


# --------------------------------------------------------------------------- bounded resources
def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_huge_announced_frames_do_not_grow_the_server(tmp_path):
    with ServerProcesses(2, timeout=60) as sp:
        pid = sp.pids[0]
        q = querier(sp)
        upload(sp.addresses, "small", values(6, 50), domain_bits=NB)
        before = _rss_kib(pid)
        stalled = []
        key_len = len(make_keys(np.array([1]), make_series(), scheme="vdpf", m=2, domain_bits=NB)[0]["all"][0])
        cap = UPLOAD_FRAME_MAX // key_len
        for k in range(3):
            # a valid header whose chunk has the most clients allowed, then the biggest key frame it may
            # announce: 4 bytes of length prefix, a few bytes of payload, and silence
            ch = client(sp.addresses[0])
            send_json(ch, upload_header(0, f"huge-{k}", [cap], sp.addresses))
            assert recv_json(ch)["ok"]
            ch.send_array(np.arange(cap, dtype=np.uint64) + k * cap)
            ch.send_array(np.full((cap, 1), key_len, dtype=np.uint32))
            ch._sock.sendall((cap * key_len).to_bytes(4, "big") + b"\x01" * 16)
            stalled.append(ch)
        for announce in ((1 << 32) - 1, 1 << 30):
            ch = client(sp.addresses[0])  # a control frame of gigabytes: refused before anything is read
            ch._sock.sendall(announce.to_bytes(4, "big"))
            with pytest.raises(ChannelError):
                ch.recv(timeout=30)
            ch.close()
        ch = client(sp.addresses[0])  # a chunk larger than the frame limit allows: refused in the header
        send_json(ch, upload_header(0, "huge-x", [10 * cap], sp.addresses))
        reply = recv_json(ch)
        assert not reply["ok"] and "exceeds the limit" in reply["error"]
        ch.close()
        # the server keeps serving while the three uploads stall
        assert q.status("small")[0]["info"]["clients"] == 50
        peak = before
        for _ in range(30):  # sample for 3 s: the stalled threads have read their frame headers by then
            peak = max(peak, _rss_kib(pid))
            time.sleep(0.1)
        grew = (peak - before) / 1024
        assert grew < 50, f"RSS grew by {grew:.1f} MiB"
        for ch in stalled:
            ch.close()
        assert q.ecdf("small", 1.0).n == 50


def test_connections_beyond_the_cap_are_told_busy_and_the_server_recovers():
    """Two idle clients take both serving slots: a third client is told busy, while queriers are served from
    their own reserve (max(2, N / 8) slots) until it is full too; closing the idle ones frees the server."""
    from pairwise.protocols.ecdf.wire import ServerBusy

    with ServerProcesses(2, timeout=60, extra_args=("--max-connections", "2")) as sp:

        def settled(ch):
            # the handshake returns before the server's thread takes its slot; a served request proves it did
            send_json(ch, {"op": "status", "dataset": None})
            assert recv_json(ch)["ok"]
            return ch

        idle = [settled(client(sp.addresses[0])) for _ in range(2)]  # both slots are taken
        third = client(sp.addresses[0])
        send_json(third, {"op": "status", "dataset": None})
        reply = recv_json(third)
        third.close()
        assert reply["code"] == "busy" and "serves its maximum of 2 connections" in reply["error"]
        assert [r["server_id"] for r in querier(sp).status()] == [0, 1]  # the querier's reserve
        idle += [
            settled(connect(sp.addresses[0], ROLE_QUERIER, label="server", connect_timeout=10, timeout=60))
            for _ in range(2)
        ]  # and now the reserve is taken too
        with pytest.raises(ServerBusy, match="serves its maximum of 2 connections"):
            querier(sp).status()
        for ch in idle:
            ch.close()
        wait_for(lambda: _status_ok(sp), "the server to accept again")


def test_peers_that_never_authenticate_cannot_hold_the_serving_slots():
    """80 raw TCP connections that never start TLS (a stranger with no certificate, from 127.0.0.2) against a
    TLS server with 8 serving slots: at most 8 per address wait in the authentication stage (cut after 10 s),
    the rest are closed at once, and a querier with a certificate (from 127.0.0.1) is served meanwhile, not
    told busy."""
    import socket as _socket

    with ServerProcesses(2, timeout=60, tls=True, extra_args=("--max-connections", "8")) as sp:
        host, port = sp.addresses[0]
        idle = []
        try:
            for _ in range(80):
                s = _socket.create_connection((host, port), timeout=10, source_address=("127.0.0.2", 0))
                idle.append(s)
            q = ECDFQuerier(sp.addresses, timeout=60, connect_timeout=10, tls=sp.querier_tls)
            assert [r["server_id"] for r in q.status()] == [0, 1]
        finally:
            for s in idle:
                s.close()


def _status_ok(sp) -> bool:
    try:
        querier(sp).status()
        return True
    except ServerUnavailable:
        return False


def test_a_stalled_request_is_cut_at_its_deadline():
    with ServerProcesses(2, timeout=30, extra_args=("--request-timeout", "2")) as sp:
        ch = client(sp.addresses[0])
        send_json(ch, upload_header(0, "slow", [10], sp.addresses))
        assert recv_json(ch)["ok"]
        ch.send_array(np.arange(10, dtype=np.uint64))  # ... and nothing more, slowly
        wait_for(lambda: "passed its deadline" in sp.logs(0), "the request deadline")
        with pytest.raises(ChannelError):
            ch.recv(timeout=30)
        ch.close()
        assert querier(sp).holders("slow") == [False, False]


# --------------------------------------------------------------------------- concurrency
def test_concurrent_uploads_and_releases_lose_no_rows():
    with ServerProcesses(2, budget="1000000", timeout=60) as sp:
        q = querier(sp)
        base = values(7, 100)
        upload(sp.addresses, "c", base, domain_bits=NB)
        batches = {k: (values(10 + k, 60), np.arange(1000 * (k + 1), 1000 * (k + 1) + 60)) for k in range(3)}
        # two more batches share 30 client ids: every shared id ends up in at most one of them
        batches[3] = (values(20, 60), np.arange(5000, 5060))
        batches[4] = (values(21, 60), np.arange(5030, 5090))
        reports, releases, errors = {}, [], []

        def add(k):
            x, ids = batches[k]
            try:
                reports[k] = upload(sp.addresses, "c", x, client_ids=ids, domain_bits=NB, append=True)
            except Exception as exc:  # noqa: BLE001 - collected and checked below
                errors.append(exc)

        def release():
            for _ in range(3):
                try:
                    releases.append(q.ecdf("c", HUGE))
                except DatasetMismatch:
                    releases.append(None)  # an append was committed on one server only at that instant
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)

        threads = [threading.Thread(target=add, args=(k,)) for k in batches]
        threads += [threading.Thread(target=release) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        assert not errors and not any(t.is_alive() for t in threads)
        committed, kept_ids = {}, {}
        for k, rep in reports.items():
            x, ids = batches[k]
            assert rep.accepted[0] == rep.accepted[1]
            gone = {r["client"] for r in rep.rejected[0]}
            assert rep.rejected_count[0] == len(gone) <= 30 and rep.accepted[0] == 60 - len(gone)
            committed[k] = np.array([v for v, i in zip(x, ids) if int(i) not in gone])
            kept_ids[k] = {int(i) for i in ids} - gone
        assert not kept_ids[3] & kept_ids[4]  # a shared id is in one batch at most
        assert 240 <= sum(len(v) for v in committed.values()) <= 270
        everything = np.concatenate([base] + list(committed.values()))
        st = q.status("c")
        assert [s["info"]["clients"] for s in st] == [everything.size] * 2
        assert st[0]["info"]["digest"] == st[1]["info"]["digest"]
        assert np.array_equal(q.ecdf("c", HUGE).cumulative, exact_counts(everything))
        # each concurrent release saw a whole set of committed uploads, and only charged when it ran
        ok = [r for r in releases if r is not None]
        for r in ok:
            assert any(
                np.array_equal(r.cumulative, exact_counts(np.concatenate([base] + [committed[k] for k in ks])))
                for ks in _subsets(list(committed))
            )
        assert spent(q, "c") == [str(int(HUGE) * (len(ok) + 1))] * 2


def _subsets(keys):
    out = [[]]
    for k in keys:
        out += [s + [k] for s in out]
    return out


# --------------------------------------------------------------------------- shutdown
def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(d))
            except OSError:
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_demo_leaves_no_server_behind(sig):
    demo = subprocess.Popen(
        CLI + ["ecdf", "demo", "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: len(_children(demo.pid)) == 2, "the demo's two servers", limit=120)
        servers = _children(demo.pid)
        demo.send_signal(sig)
        demo.wait(timeout=60)
        wait_for(lambda: not any(_alive(p) for p in servers), "the servers to exit", limit=30)
        if sig == signal.SIGTERM:
            assert demo.returncode == 130 and "interrupted" in demo.stderr.read()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(timeout=30)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_server_stops_cleanly_on_signals(tmp_path, sig):
    p = subprocess.Popen(
        CLI + ["ecdf", "serve", "--server-id", "0", "--listen", "127.0.0.1:0", "--state", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert json.loads(p.stdout.readline())["event"] == "listening"
        p.send_signal(sig)
        assert p.wait(timeout=30) == 0
        assert f"stopped ({signal.Signals(sig).name})" in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)


# --------------------------------------------------------------------------- authorization
def test_roles_decide_what_a_peer_may_do():
    pol = Policy(server_names={0: "ecdf-0", 1: "ecdf-1"})
    pol.authorize("release", None)  # plaintext loopback: no identity to check
    pol.authorize("upload", Peer("alice", "client"))
    pol.authorize("upload", Peer("q", "querier"))
    pol.authorize("release", Peer("q", "querier"))
    pol.authorize("noise", Peer("ecdf-1", "server"), server_id=1)
    for op, peer, sid, why in (
        ("release", Peer("alice", "client"), None, "needs the role querier"),
        ("status", Peer("alice", "client"), None, "needs the role querier"),
        ("upload", Peer("ecdf-1", "server"), None, "client or querier"),
        ("noise", Peer("q", "querier"), 1, "needs the role server"),
        ("noise", Peer("ecdf-2", "server"), 1, "expects 'ecdf-1' as server 1"),
    ):
        with pytest.raises(Unauthorized, match=why):
            pol.authorize(op, peer, server_id=sid)


# --------------------------------------------------------------------------- storage
def test_storage_commits_an_upload_whole_or_not_at_all(tmp_path):
    from fractions import Fraction

    from pairwise.protocols.ecdf.storage import ChunkRecord, DatasetRecord, LedgerEntry, StorageError

    rec = DatasetRecord("d", "dcf", 2, NB, 32, {"all": 1}, Fraction(3))
    chunk = ChunkRecord("u1", 0, np.arange(4, dtype=np.uint64), {"all": (np.full(4, 3), b"abcdefghijkl")})
    st = open_storage(str(tmp_path), 0)
    st.commit_upload(rec, "u1", [chunk], create=True, replace=False)
    st.record_charges("d", [LedgerEntry("aa" * 8, Fraction(1, 10))])
    # a second upload whose second chunk violates a constraint (the same chunk number twice): nothing of it stays
    bad = ChunkRecord("u2", 0, np.arange(10, 12, dtype=np.uint64), {"all": (np.full(2, 3), b"xyzxyz")})
    with pytest.raises(StorageError, match="nothing of this request was stored"):
        st.commit_upload(rec, "u2", [bad, bad], create=False, replace=False)
    st.close()
    st = open_storage(str(tmp_path), 0)  # reopened from disk
    try:
        got = list(st.chunks("d"))
        assert [c.upload_id for c in got] == ["u1"] and got[0].ids.tolist() == [0, 1, 2, 3]
        assert got[0].keys["all"][1] == b"abcdefghijkl" and got[0].keys["all"][0].tolist() == [3, 3, 3, 3]
        assert st.ledger("d") == [LedgerEntry("aa" * 8, Fraction(1, 10), "released", st.ledger("d")[0].at)]
        assert [d.budget for d in st.datasets()] == [Fraction(3)]
    finally:
        st.close()


# --------------------------------------------------------------------------- mutual TLS and roles
def _impostor(tls_dir: str, name: str) -> tuple[subprocess.Popen, tuple[str, int]]:
    """A real server process with a valid server certificate of the same CA, but another name."""
    p = subprocess.Popen(
        CLI
        + [
            "ecdf",
            "serve",
            "--server-id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--budget",
            "100",
            "--tls",
            tls_dir,
            "--name",
            name,
            "--exit-with-parent",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    msg = json.loads(p.stdout.readline())
    return p, (msg["host"], msg["port"])


def test_tls_roles_refuse_strangers_clients_and_impostors_while_serving(tmp_path):
    from pairwise.mpc.errors import AuthenticationError
    from pairwise.mpc.tls import TLSConfig, create_certificate

    x = values(30, 80)
    with ServerProcesses(2, budget="1000000", timeout=30, tls=True) as sp:
        up = upload(sp.addresses, "t", x, domain_bits=NB, tls=sp.client_tls)  # a client certificate may upload
        assert up.accepted == [80, 80]
        q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10, tls=sp.querier_tls)
        assert np.array_equal(q.ecdf("t", HUGE).cumulative, exact_counts(x))  # TLS everywhere, incl. the 2PC
        # a client certificate may not release (nor read the status): refused by role, nothing charged
        as_client = ECDFQuerier(sp.addresses, timeout=60, connect_timeout=10, tls=sp.client_tls)
        with pytest.raises(Unauthorized, match="may not release: that needs the role querier"):
            as_client.ecdf("t", 1.0)
        with pytest.raises(Unauthorized, match="may not status"):
            as_client.status("t")
        # no certificate at all
        with pytest.raises(ChannelError, match="TLS"):
            ECDFQuerier(sp.addresses, timeout=30, connect_timeout=10).status("t")
        # a certificate of another CA
        create_certificate(tmp_path / "other-ca", "mallory", "querier")
        with pytest.raises(AuthenticationError):
            ECDFQuerier(
                sp.addresses, timeout=30, connect_timeout=10, tls=TLSConfig(tmp_path / "other-ca", "mallory")
            ).status("t")
        # an uploader or a querier that points server 0 at an impostor: a real server process with a server
        # certificate of the same CA, but not the server 1 that server 0 is configured with.  The upload's key
        # check is pinned to the configured name like the release's noise: refused before anything is stored
        create_certificate(sp.tls_dir, "impostor", "server", days=1)
        imp, imp_addr = _impostor(sp.tls_dir, "impostor")
        try:
            with pytest.raises(Unauthorized, match="refusing the upload.*impostor.*not the expected peer"):
                upload([sp.addresses[0], imp_addr], "imp", x, domain_bits=NB, tls=sp.client_tls)
            assert q.holders("imp") == [False, False]
            fooled = ECDFQuerier([sp.addresses[0], imp_addr], timeout=60, connect_timeout=10, tls=sp.querier_tls)
            with pytest.raises(ECDFError):  # the impostor holds no dataset "t": refused while preparing
                fooled.ecdf("t", 1.0)
            assert q.status("t")[0]["info"]["spent"] == str(int(HUGE))  # refused before any charge
        finally:
            imp.kill()
            imp.wait(timeout=30)
        # the servers kept serving through all of it, and charged only the one release
        assert spent(q, "t") == [str(int(HUGE))] * 2
        assert q.ecdf("t", HUGE).n == 80


def test_a_client_certificate_uploads_with_ecdf_upload_and_the_querier_releases(tmp_path):
    """Data owners hold client certificates: `ecdf upload` is their command (no status probe, no release);
    `ecdf run` needs the querier role, and says so; the querier then releases with `ecdf query`."""
    x = np.array([5.5, 7.0, 9.25, 30.0, 12.0, 41.0])  # 41 is clamped to the public upper bound 30 by its owner
    csv = tmp_path / "v.csv"
    csv.write_text("v\n" + "\n".join(str(v) for v in x) + "\n")
    with ServerProcesses(2, budget="1000000", timeout=30, tls=True) as sp:
        as_client = ["--servers", sp.servers, "--tls", sp.tls_dir, "--name", "ecdf-client"]
        data = ["--data", str(csv), "--columns", "v", "--lower", "0", "--upper", "30", "--dataset", "owned"]
        r = subprocess.run(CLI + ["ecdf", "upload", *as_client, *data], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "6 clients, accepted per server [6, 6], public domain [0, 30]" in r.stdout
        assert "1 value(s) clamped" in r.stdout
        # issue 22: the "release it" hint left out the TLS flags, so it failed as printed
        assert (
            f"release it: pairwise ecdf query --servers {sp.servers} --dataset owned --epsilon E --tls "
            f"{sp.tls_dir} --name QUERIER" in r.stdout
        ), r.stdout
        again = subprocess.run(
            CLI + ["ecdf", "upload", *as_client, *data], capture_output=True, text=True, timeout=300
        )  # sealed: the same id again is refused by the servers
        assert again.returncode != 0 and "already exists" in again.stderr and "Traceback" not in again.stderr
        run = subprocess.run(
            CLI + ["ecdf", "run", *as_client, *data[:-2], "--dataset", "other", "--epsilon", "1"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode != 0 and "querier" in run.stderr and "Traceback" not in run.stderr
        q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10, tls=sp.querier_tls)
        info = q.status("owned")[0]["info"]
        assert info["clients"] == 6 and info["meta"] == {"column": "v", "range": [0.0, 30.0]}
        rel = q.ecdf("owned", HUGE)  # exact at this epsilon: the clamped value counts at the top of the grid
        assert rel.n == 6 and rel.cumulative[-1] == 6


def test_an_append_interrupted_between_the_servers_commits_is_repaired(tmp_path, monkeypatch):
    """The uploader dies after server 0 committed an append and before server 1 did (its commit never sent):
    releases are refused (DatasetMismatch, nothing charged) until `ecdf repair` drops the upload that only
    server 0 holds; then the 40 clients of the first upload release again, exactly, and survive a restart."""
    import pairwise.protocols.ecdf.uploader as uploader
    from pairwise.protocols.ecdf.wire import DatasetMismatch

    x = values(41, 40)
    with ServerProcesses(2, budget="1000000", timeout=30, state_dir=str(tmp_path)) as sp:
        upload(sp.addresses, "d", x, client_ids=np.arange(40), domain_bits=NB)
        port1 = str(sp.addresses[1][1])
        real = uploader.send_json

        def crash_before_server_1_commits(ch, msg, *a, **kw):
            if msg.get("op") == "commit" and str(getattr(ch, "peer", "")).endswith(":" + port1):
                raise ConnectionError("uploader died before committing on server 1")
            return real(ch, msg, *a, **kw)

        monkeypatch.setattr(uploader, "send_json", crash_before_server_1_commits)
        with pytest.raises(Exception, match="died before committing"):
            upload(sp.addresses, "d", values(42, 10), client_ids=np.arange(100, 110), domain_bits=NB, append=True)
        with pytest.raises(Exception, match="died before committing"):  # a new dataset that only server 0 has
            upload(sp.addresses, "e", values(43, 5), domain_bits=NB)
        monkeypatch.setattr(uploader, "send_json", real)
        q = querier(sp)
        with pytest.raises(UnknownDataset, match="server 1 has no dataset 'e'"):  # not repaired: nothing dropped
            q.repair("e")
        assert q.holders("e") == [True, False]
        assert [s["info"]["clients"] for s in q.status("d")] == [50, 40]
        with pytest.raises(DatasetMismatch, match="ecdf repair"):
            q.ecdf("d", HUGE)
        assert spent(q, "d") == ["0", "0"]
        plan = q.repair("d", dry_run=True)
        assert [len(p["dropped"]) for p in plan] == [1, 0] and [p["clients"] for p in plan] == [50, 40]
        r = subprocess.run(
            CLI + ["ecdf", "repair", "--servers", sp.servers, "--dataset", "d", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert [(len(p["dropped"]), p["clients"]) for p in json.loads(r.stdout)] == [(1, 40), (0, 40)]
        assert np.array_equal(q.ecdf("d", HUGE).cumulative, exact_counts(x))
        sp.kill(0, hard=True)
        sp.restart(0)  # the repair is on disk
        assert [s["info"]["clients"] for s in querier(sp).status("d")] == [40, 40]
        assert np.array_equal(querier(sp).ecdf("d", HUGE).cumulative, exact_counts(x))
