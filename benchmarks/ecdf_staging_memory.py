"""Issue 22's staging attack against real ECDF servers: stage mshare vector keys, never commit, read the RSS.

The attack of issue 22 (item 3): a client certificate opens two
connections to server 0, stages ``mshare`` vector keys (n = 16, l = 64:
524,294 bytes each) on both and never commits.  It grew a server from 254 MB
to 1,096 MB in 5 s (about 1.06 MB per staged client).  Each scenario starts
real ``ecdf serve`` processes (:class:`pairwise.protocols.ecdf.client.ServerProcesses`,
``--state`` in a temporary directory), reads server 0's ``VmRSS`` from
``/proc``, runs the attack from two connections that stay open, reads
``VmRSS`` again (and the bytes of the unlinked staged files server 0 holds),
then closes the connections.  Scenarios:

* ``m2``: the attack as filed (two servers, ``m = 2`` in the header);
* ``m3``: three servers, the keys as the public rotation gives them (a
  vector key at positions 0, 3, 6, ... of server 0, seed keys elsewhere);
* ``m3-claimed``: the same ``m = 3`` headers sent to server 0 of a
  two-server set.

``--part check`` measures instead the servers' check of honest ``vdpf``
uploads (ECDF, ROC, Hosmer-Lemeshow): server 0's peak resident memory during
the upload (``VmHWM`` after ``clear_refs``, after a warm-up upload that loads
the compiled check) against the memory the upload reserves
(:func:`pairwise.protocols.ecdf.validation.check_memory_bound`), and the
bytes the two servers exchange for the check per client.

    .venv/bin/python benchmarks/ecdf_staging_memory.py --vector-keys 400
    .venv/bin/python benchmarks/ecdf_staging_memory.py --part check

Prints one JSON line per scenario with the machine load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from pairwise.protocols.ecdf.client import ServerProcesses, upload
from pairwise.protocols.ecdf.ops import _per_client
from pairwise.protocols.ecdf.shares import mshare_client_keys
from pairwise.protocols.ecdf.uploader import _vdpf_chunk
from pairwise.protocols.ecdf.validation import check_memory_bound, layout_for
from pairwise.protocols.ecdf.wire import ROLE_CLIENT, chunk_clients, connect, recv_json, send_json

VECTOR_KEY_BYTES = 524294


def rss_mib(pid: int, key: str = "VmRSS:") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key}")


def staged_file_bytes(pid: int, directory: str) -> int:
    """Bytes of the unlinked files under ``directory`` that ``pid`` holds open (its staged uploads)."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith(directory) and target.endswith("(deleted)"):
                total += os.stat(f"/proc/{pid}/fd/{fd}").st_size
        except OSError:
            continue
    return total


def header(dataset: str, m: int, clients: int, id0: int) -> dict:
    cap = chunk_clients(VECTOR_KEY_BYTES)
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


def stage(addr, hdr: dict, keys: list[bytes], tls) -> tuple[dict, object]:
    """Stage ``keys`` as one client connection and never commit: (the server's last reply, the open channel)."""
    ch = connect(addr, ROLE_CLIENT, label="server 0", connect_timeout=30, timeout=600, tls=tls)
    hdr = dict(hdr)
    id0 = hdr.pop("_id0")
    send_json(ch, hdr)
    reply = recv_json(ch)
    if not reply["ok"]:
        return reply, ch
    c0 = 0
    for k in hdr["chunks"]:
        part = keys[c0 : c0 + k]
        ch.send_array(np.arange(c0, c0 + k, dtype=np.uint64) + id0)
        ch.send_array(np.array([[len(b)] for b in part], dtype=np.uint32))
        ch.send(b"".join(part))
        c0 += k
    reply = recv_json(ch)
    ch.recv_array(np.uint64, int(reply["rejected_count"]))
    return reply, ch


def run(scenario: str, vector_keys: int) -> dict:
    servers, m = {"m2": (2, 2), "m3": (3, 3), "m3-claimed": (2, 3)}[scenario]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ecdf-staging-") as state:
        with ServerProcesses(
            servers,
            timeout=600,
            state_dir=state,
            tls=True,
            extra_args=("--accept-unverified",) if servers > 2 else (),
        ) as sp:
            pid = sp.pids[0]
            time.sleep(1.0)
            before = rss_mib(pid)
            clients = vector_keys * m  # so that server 0 is sent ``vector_keys`` vector keys per connection
            if m == 2:
                keys = [bytes((1, 0x22, 0, 2, 16, 64)) + os.urandom(8 << 16)] * clients
            else:  # what an honest m-party client sends server 0: vectors at p = 0 mod m, seed keys elsewhere
                keys = mshare_client_keys(np.zeros(clients, np.int64), None, m=m, domain_bits=16, output_bits=64)[0]
            t0 = time.monotonic()
            held, replies = [], []
            for c in range(2):
                reply, ch = stage(sp.addresses[0], header(f"attack-{c}", m, clients, c * clients), keys, sp.client_tls)
                held.append(ch)
                replies.append(reply)
            seconds = time.monotonic() - t0
            del keys
            time.sleep(1.0)
            after = rss_mib(pid)
            on_disk = staged_file_bytes(pid, state)
            for ch in held:
                ch.close()
    return {
        "scenario": scenario,
        "servers": servers,
        "m_in_header": m,
        "connections": 2,
        "vector_keys_per_connection": vector_keys,
        "clients_per_connection": vector_keys * m,
        "bytes_sent_per_connection_approx": vector_keys * VECTOR_KEY_BYTES,
        "replies": [{k: r.get(k) for k in ("ok", "error", "accepted", "rejected_count") if k in r} for r in replies],
        "rss_before_mib": round(before, 1),
        "rss_after_mib": round(after, 1),
        "rss_growth_mib": round(after - before, 1),
        "staged_on_disk_mib": round(on_disk / 2**20, 1),
        "seconds": round(seconds, 2),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


CHECK_CASES = [("ecdf", 10, 0, 2000), ("roc", 10, 0, 2000), ("hl", 12, 8, 200), ("ecdf", 20, 0, 4), ("hl", 16, 12, 4)]


def run_check(kind: str, n: int, b: int, clients: int) -> dict:
    """One honest vdpf upload: server 0's peak memory during it, the reserved bound, the check bytes."""
    rng = np.random.default_rng(1)
    series = {"ecdf": {"all": 1}, "roc": {"pos": 1, "neg": 1}}.get(
        kind, {"pos": 1, "neg": 1, "e1": 1 << b, "e0": 1 << b}
    )
    load_before = os.getloadavg()
    with ServerProcesses(2, timeout=600, tls=True) as sp:
        upload(sp.addresses, "warm", rng.integers(0, 64, 10), domain_bits=6, tls=sp.client_tls)  # loads the JIT
        time.sleep(0.5)
        pid = sp.pids[0]
        base = rss_mib(pid)
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
        kw: dict = {}
        if kind != "ecdf":
            kw["labels"] = rng.integers(0, 2, clients)
        if kind == "hl":
            kw.update(probabilities=rng.random(clients), prob_bits=b)
        t0 = time.monotonic()
        rep = upload(
            sp.addresses, "t", rng.integers(0, 1 << n, clients), domain_bits=n, timeout=600, tls=sp.client_tls, **kw
        )
        seconds = time.monotonic() - t0
        peak = rss_mib(pid, "VmHWM:")
    per = _per_client("vdpf", n, 32, series)
    chunk = min(clients, _vdpf_chunk(series, n, 32, 10**9))
    return {
        "series": kind,
        "domain_bits": n,
        "prob_bits": b or None,
        "clients": clients,
        "accepted": rep.accepted,
        "rss_before_mib": round(base, 1),
        "peak_growth_mib": round(peak - base, 1),
        "reserved_bound_mib": round(check_memory_bound(layout_for(series, n, 32), chunk * per) / 2**20, 1),
        "check_bytes_per_client": [round(x / clients, 2) for x in rep.check_bytes],
        "seconds": round(seconds, 2),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vector-keys", type=int, default=400, help="vector keys per connection (default 400)")
    ap.add_argument("--scenario", nargs="+", default=["m2", "m3", "m3-claimed"])
    ap.add_argument("--part", choices=["staging", "check"], default="staging")
    args = ap.parse_args()
    if args.part == "check":
        for case in CHECK_CASES:
            print(json.dumps(run_check(*case)), flush=True)
        return
    for s in args.scenario:
        print(json.dumps(run(s, args.vector_keys)), flush=True)


if __name__ == "__main__":
    main()
