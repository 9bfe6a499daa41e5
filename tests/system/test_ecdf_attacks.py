"""The attacks of issue 22 on the ECDF service, each against real server processes.

A hostile client certificate, a hostile querier and strangers without any
certificate try to exhaust a server's memory, lock the analyst out, delete
other owners' data, or fool an owner's upload.  Servers are ``python -m
pairwise ecdf serve`` processes (:class:`pairwise.protocols.ecdf.client.ServerProcesses`);
the attackers speak the wire protocol directly.  Memory is read from
``/proc/PID/status`` (VmRSS) against a stated bound far above what a server
needs; no test measures time, every wait is bounded.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from pairwise.protocols.ecdf.client import ECDFQuerier, ServerProcesses, make_series, upload
from pairwise.protocols.ecdf.shares import mshare_client_keys
from pairwise.protocols.ecdf.sources import ArraySource
from pairwise.protocols.ecdf.uploader import upload_source
from pairwise.protocols.ecdf.wire import ROLE_CLIENT, chunk_clients, connect, recv_json, send_json

NB = 6
HUGE = 1e4
#: what staging may add to a server's resident memory while two connections hold staged uploads
STAGING_RSS_BOUND_MIB = 64


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def exact_counts(x, bits: int = NB) -> np.ndarray:
    return np.array([(np.asarray(x) <= t).sum() for t in range(1 << bits)], dtype=float)


# --------------------------------------------------------------------------- staging memory
def _stage(addr, header: dict, keys: list[bytes], tls=None):
    """Stage ``keys`` (one series) as a client and never commit: (staged reply or refusal, channel)."""
    ch = connect(addr, ROLE_CLIENT, label="server", connect_timeout=10, timeout=120, tls=tls)
    send_json(ch, header)
    reply = recv_json(ch)
    if not reply["ok"]:
        return reply, ch
    c0 = 0
    for k in header["chunks"]:
        part = keys[c0 : c0 + k]
        ch.send_array(np.arange(c0, c0 + k, dtype=np.uint64) + header["_id0"])
        ch.send_array(np.array([[len(b)] for b in part], dtype=np.uint32))
        ch.send(b"".join(part))
        c0 += k
    reply = recv_json(ch)
    ch.recv_array(np.uint64, int(reply["rejected_count"]))
    return reply, ch


def _staged_files(pid: int, directory) -> int:
    """How many unlinked files in ``directory`` (staged uploads) process ``pid`` holds open."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        n += target.startswith(str(directory)) and target.endswith("(deleted)")
    return n


def _header(dataset: str, m: int, clients: int, per_client: int, id0: int) -> dict:
    cap = chunk_clients(per_client)
    return {
        "op": "upload",
        "dataset": dataset,
        "scheme": "mshare",
        "m": m,
        "server_id": 0,
        "domain_bits": 16,
        "output_bits": 64,
        "append": False,
        "meta": {},
        "series": [{"name": "all", "max_weight": 1}],
        "chunks": [min(cap, clients - c) for c in range(0, clients, cap)],
        "upload_id": os.urandom(16).hex(),
        "_id0": id0,
    }


def _vector_key(party: int, m: int) -> bytes:
    """A well-formed mshare vector key (n = 16, l = 64): 524,294 bytes."""
    return bytes((1, 0x22, party, m, 16, 64)) + os.urandom(8 << 16)


def test_staging_mshare_vector_keys_without_committing_does_not_grow_the_server(tmp_path):
    """Issue 22: a client certificate stages 524,294-byte mshare vector keys (accepted even with 2 servers)
    from two connections and never commits: +1.06 MB per staged client.  Now two servers refuse mshare keys,
    also under headers that claim a set of three (a server knows its set: --num-servers); three servers keep
    staged keys on disk (vector keys only at the positions the public rotation gives them), so the server's
    memory grows by less than STAGING_RSS_BOUND_MIB, and within the per-server budget (--max-staged-bytes):
    one more upload is told busy until the staged ones are gone."""
    clients = 150
    with ServerProcesses(2, timeout=120, tls=True) as sp:
        pid = sp.pids[0]
        before = rss_mib(pid)
        held, replies = [], []
        for c in range(2):
            reply, ch = _stage(
                sp.addresses[0],
                _header(f"huge-{c}", 2, clients, 524294, c * clients),
                [_vector_key(0, 2)] * clients,
                tls=sp.client_tls,
            )
            held.append(ch)
            replies.append(reply)
        # the same vector keys under headers that claim m = 3: two servers stage no mshare key either
        keys = mshare_client_keys(np.zeros(3 * clients, np.int64), None, m=3, domain_bits=16, output_bits=64)[0]
        for c in range(2):
            reply, ch = _stage(
                sp.addresses[0], _header(f"claims-3-{c}", 3, 3 * clients, 524294, 10**6), keys, tls=sp.client_tls
            )
            held.append(ch)
            replies.append(reply)
        del keys
        grew = rss_mib(pid) - before
        for ch in held:
            ch.close()
        assert grew < STAGING_RSS_BOUND_MIB, f"server 0 grew by {grew:.0f} MiB with {2 * clients} clients staged"
        for reply in replies[:2]:
            assert not reply["ok"] and "mshare keys are for 3 or more servers" in reply["error"], reply
        for reply in replies[2:]:
            assert not reply["ok"] and "for m = 3 servers, but server 0 is one of 2" in reply["error"], reply
    # 160 MiB for the staged uploads of the server: the three below (2 x 78.6 MB + 8.4 MB) fit, a fourth does not
    with ServerProcesses(
        3,
        budget="1000000",
        timeout=120,
        state_dir=tmp_path / "state",
        extra_args=("--max-staged-bytes", "160M", "--accept-unverified"),
    ) as sp:
        pid = sp.pids[0]
        x = np.random.default_rng(1).integers(0, 1 << NB, 40)
        upload(sp.addresses, "honest", x, domain_bits=NB)
        before = rss_mib(pid)
        held = []
        for c in range(2):  # keys as the public rotation gives them: a vector at positions 0, 3, 6, ... of server 0
            keys = mshare_client_keys(np.zeros(3 * clients, np.int64), None, m=3, domain_bits=16, output_bits=64)[0]
            reply, ch = _stage(sp.addresses[0], _header(f"big-{c}", 3, 3 * clients, 524294, c * 3 * clients), keys)
            del keys
            held.append(ch)
            assert reply["ok"] and reply["accepted"] == 3 * clients, reply
        # a vector key at every position: only those of the rotation are staged
        reply, ch = _stage(sp.addresses[0], _header("every", 3, 48, 524294, 10**6), [_vector_key(0, 3)] * 48)
        held.append(ch)
        assert reply["accepted"] == 16 and reply["rejected_count"] == 32, reply
        assert "holds the vector key of the clients at upload positions p = 0 mod 3" in reply["rejected"][0]["reason"]
        grew = rss_mib(pid) - before
        print(f"staged {2 * clients} vector keys: server 0 grew by {grew:.1f} MiB")
        assert grew < STAGING_RSS_BOUND_MIB, f"server 0 grew by {grew:.0f} MiB with {2 * clients} vector keys staged"
        q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10)
        assert np.array_equal(q.ecdf("honest", HUGE).cumulative, exact_counts(x))  # still serving
        assert _staged_files(pid, tmp_path / "state") == 3
        # the per-server budget: one more upload while the three are staged is told busy, before a key is read
        fourth = _header("fourth", 3, 48, 524294, 2 * 10**6)
        reply, ch = _stage(sp.addresses[0], fourth, [_vector_key(0, 3)] * 48)
        ch.close()
        assert not reply["ok"] and "is staging other uploads" in reply["error"] and "retry later" in reply["error"]
        for ch in held:
            ch.close()
        for _ in range(300):  # the staged files go with their connections
            if not _staged_files(pid, tmp_path / "state"):
                break
            time.sleep(0.1)
        else:
            pytest.fail("server 0 still holds staged files after the connections closed")
        assert q.holders("big-0") == [False, False, False]
        # their reservations went with them: the fourth upload now stages
        reply, ch = _stage(sp.addresses[0], dict(fourth, upload_id=os.urandom(16).hex()), [_vector_key(0, 3)] * 48)
        ch.close()
        assert reply["ok"] and reply["accepted"] == 16, reply


def test_a_staged_upload_beyond_the_staging_budget_is_refused_before_any_key_is_read():
    with ServerProcesses(
        2, timeout=60, extra_args=("--max-staged-bytes", "1M", "--max-staged-bytes-per-connection", "512K")
    ) as sp:
        x = np.arange(4000) % (1 << NB)  # 4000 dcf keys of 2 x 16 + ... bytes: more than 512 KiB
        with pytest.raises(Exception, match="more than the 524288 bytes one connection may stage"):
            upload(sp.addresses, "big", x, domain_bits=NB)
        small = upload(sp.addresses, "small", x[:100], domain_bits=NB)
        assert small.accepted == [100, 100]


class _HeldSource(ArraySource):
    """Clients whose keys are made only once ``go`` is set: the upload's headers (and reservations) wait."""

    def __init__(self, values) -> None:
        super().__init__(values, make_series(), np.arange(len(values), dtype=np.uint64))
        self.started, self.go = threading.Event(), threading.Event()

    def blocks(self, size):
        self.started.set()
        if not self.go.wait(120):
            raise TimeoutError("never released")
        yield from super().blocks(size)


def test_the_servers_check_of_vdpf_keys_reserves_its_memory_before_any_key_is_read():
    """Checking a client's vdpf keys expands them on the whole domain: a Hosmer-Lemeshow upload with 2^16
    weight steps on 2^20 points took server 0 from 54 MB to 1.41 GB (2 clients, 154 s), and nothing bounded
    how many such checks ran at once.  Now each upload reserves its check's memory from its header
    (--max-check-memory): too large is refused, one that does not fit beside the checks in progress is busy."""
    with ServerProcesses(2, budget="1000000", timeout=120, extra_args=("--max-check-memory", "20M")) as sp:
        pid = sp.pids[0]
        before = rss_mib(pid)
        rng = np.random.default_rng(3)
        with pytest.raises(Exception, match="more than the 20971520 bytes this server gives its checks"):
            upload(
                sp.addresses,
                "hl",
                rng.integers(0, 1 << 20, 4),
                labels=rng.integers(0, 2, 4),
                probabilities=rng.random(4),
                prob_bits=16,
                domain_bits=20,
            )
        assert rss_mib(pid) - before < 16  # refused from the header: no key made, read or expanded
        # an ECDF on 2^10 points reserves 14 MiB: one at a time within 20 MiB
        x = rng.integers(0, 1 << 10, 50)
        held = _HeldSource(x)
        out = {}
        t = threading.Thread(target=lambda: out.update(r=upload_source(sp.addresses, "first", held, domain_bits=10)))
        t.start()
        try:
            assert held.started.wait(60)
            with pytest.raises(Exception, match="is checking other uploads .* retry later"):
                upload(sp.addresses, "second", x, domain_bits=10)
        finally:
            held.go.set()
            t.join(120)
        assert out["r"].accepted == [50, 50]
        assert upload(sp.addresses, "second", x, domain_bits=10).accepted == [50, 50]  # released with the commit
        q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10)
        assert np.array_equal(q.ecdf("second", HUGE).cumulative, exact_counts(x, 10))


# --------------------------------------------------------------------------- strangers
def test_eighty_idle_strangers_on_eighty_addresses_do_not_lock_the_analyst_out():
    """Issue 22: idle TCP connections without a certificate locked the analyst out for as long as they lasted
    (and she was told AuthenticationError, 'rejected our certificate').  80 of them from 127.0.0.2 ...
    127.0.0.81 against a TLS server with 8 serving slots (an authentication stage of 24): newcomers take
    the place of connections that have been authenticating for 2 s, so the analyst is served -- as busy
    retries within her connect timeout, never an authentication failure."""
    import socket

    from pairwise.mpc.errors import AuthenticationError

    with ServerProcesses(2, budget="1000000", timeout=60, tls=True, extra_args=("--max-connections", "8")) as sp:
        x = np.random.default_rng(3).integers(0, 1 << NB, 60)
        upload(sp.addresses, "d", x, domain_bits=NB, tls=sp.client_tls)
        host, port = sp.addresses[0]
        strangers = []
        try:
            for k in range(80):
                strangers.append(
                    socket.create_connection((host, port), timeout=10, source_address=(f"127.0.0.{2 + k}", 0))
                )
            q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=60, tls=sp.querier_tls)
            try:
                status = q.status("d")
                rel = q.ecdf("d", HUGE)
            except AuthenticationError as exc:  # what main said
                pytest.fail(f"the analyst was told {exc!r}")
            assert [s["info"]["clients"] for s in status] == [60, 60]
            assert np.array_equal(rel.cumulative, exact_counts(x))
        finally:
            for s in strangers:
                s.close()
        assert "its place was taken by a newer connection" in sp.logs(0)


# --------------------------------------------------------------------------- repair
def _drop(addr, dataset: str, upload_id: str, servers, tls) -> dict:
    """The repair request ``drop_upload`` sent straight to one server, as a hostile querier may."""
    from pairwise.protocols.ecdf.wire import ROLE_QUERIER

    ch = connect(addr, ROLE_QUERIER, label="server", connect_timeout=10, timeout=120, tls=tls)
    try:
        send_json(
            ch,
            {"op": "drop_upload", "dataset": dataset, "upload_id": upload_id, "servers": [[h, p] for h, p in servers]},
        )
        return recv_json(ch)
    finally:
        ch.close()


def test_a_querier_cannot_drop_an_upload_that_every_server_holds(tmp_path):
    """Issue 22: `drop_upload` (the repair op) deleted an upload that every server held -- all the clients of a
    dataset, on both servers.  Now each server asks the others first and refuses; pointing it at an impostor
    that would claim to lack the upload fails the name pinning, and nothing is dropped either."""
    import json
    import subprocess
    import sys

    from pairwise.mpc.tls import create_certificate

    x = np.random.default_rng(4).integers(0, 1 << NB, 120)
    with ServerProcesses(2, budget="1000000", timeout=60, tls=True) as sp:
        up = upload(sp.addresses, "d", x, domain_bits=NB, tls=sp.client_tls)
        for j in range(2):
            reply = _drop(sp.addresses[j], "d", up.upload_id, sp.addresses, sp.querier_tls)
            assert not reply["ok"] and "every server holds upload" in reply["error"], reply
        create_certificate(sp.tls_dir, "impostor", "server", days=1)
        imp = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pairwise",
                "ecdf",
                "serve",
                "--server-id",
                "1",
                "--listen",
                "127.0.0.1:0",
                "--tls",
                sp.tls_dir,
                "--name",
                "impostor",
                "--exit-with-parent",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            line = json.loads(imp.stdout.readline())
            reply = _drop(
                sp.addresses[0], "d", up.upload_id, [sp.addresses[0], (line["host"], line["port"])], sp.querier_tls
            )
            assert not reply["ok"] and "nothing was dropped" in reply["error"], reply
            assert "not the expected peer" in reply["error"]
        finally:
            imp.kill()
            imp.wait(timeout=30)
        q = ECDFQuerier(sp.addresses, timeout=120, connect_timeout=10, tls=sp.querier_tls)
        assert [s["info"]["clients"] for s in q.status("d")] == [120, 120]
        assert np.array_equal(q.ecdf("d", HUGE).cumulative, exact_counts(x))
