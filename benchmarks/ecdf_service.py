"""Benchmark of the multi-server ECDF service: communication (FSS vs pointwise) and end-to-end time.

Usage (from the repository root, project venv)::

    .venv/bin/python benchmarks/ecdf_service.py              # both parts (several minutes)
    .venv/bin/python benchmarks/ecdf_service.py --part comm  # communication table only
    .venv/bin/python benchmarks/ecdf_service.py --part e2e --n 100000
    .venv/bin/python benchmarks/ecdf_service.py --part e2e --n 100000 --cluster local:2 --only dcf10

Everything runs for real: m server processes on loopback
(``python -m pairwise ecdf serve``), this process as the clients and
the querier, bytes counted on the wire by the channels (frame prefixes
included).

Part ``comm`` ([BMR25, Sec. 4.1 vs 4.2]): for n clients and a query of |B|
thresholds of a 2^10 grid,
  * FSS: the one-time key upload (n keys per server), then the release of |B|
    thresholds (querier <-> servers, and server <-> server for the noise);
  * pointwise: the query round's upload (every client sends |B| shares to each
    server, every time a query is asked), then the same release.
Part ``e2e``: end-to-end time for n clients (key generation, upload, a
release of the whole ECDF over a 2^g grid), with the servers' own timings
(share evaluation vs noise).  The servers keep their state in SQLite
(``--state`` in a temporary directory: every upload and every ledger entry is
committed with fsync) unless ``--memory`` is given; ``--tls`` runs every
connection (uploads, querier, server-to-server 2PC) in mutual TLS 1.3 with a
throwaway CA.  ``--cluster local:N`` runs every e2e case twice in one run,
without and with a Dask LocalCluster of N workers per server (``ecdf serve
--cluster local:N``: the release evaluates the key shards on the workers while
it is prepared; "server shares s" is then that evaluation), on the same data.
On one machine the two servers already evaluate in parallel, so m servers with
N workers each want m x N cores.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from pairwise.protocols.ecdf.client import (
    ECDFQuerier,
    ServerProcesses,
    make_keys,
    make_series,
    send_keys,
    upload_pointwise,
)
from pairwise.protocols.ecdf.shares import key_bytes

DOMAIN = 10


def _mb(b: float) -> str:
    return f"{b / 1e6:.3f}"


def comm(ns, Bs, ms, eps: float = 1.0) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for m in ms:
        with ServerProcesses(m, budget="1000000", timeout=600, extra_args=("--accept-unverified",)) as sp:
            q = ECDFQuerier(sp.addresses, timeout=900)
            for n in ns:
                x = rng.integers(0, 1 << DOMAIN, n)
                scheme = "vdpf" if m == 2 else "mshare"
                keys = make_keys(x, make_series(), scheme=scheme, m=m, domain_bits=DOMAIN)
                rep = send_keys(
                    sp.addresses,
                    f"fss-{n}",
                    scheme=scheme,
                    domain_bits=DOMAIN,
                    output_bits=32,
                    series_meta={"all": 1},
                    ids=np.arange(n, dtype=np.uint64),
                    keys=keys,
                )
                for B in Bs:
                    thr = np.unique(np.linspace(0, (1 << DOMAIN) - 1, B).round().astype(int))
                    rel = q.ecdf(f"fss-{n}", eps, thresholds=thr)
                    pw = upload_pointwise(
                        sp.addresses, f"pw-{n}", x, grid_bits=DOMAIN, domain_bits=DOMAIN, thresholds=thr
                    )
                    prel = q.ecdf(f"pw-{n}", eps, thresholds=thr)
                    row = {
                        "m": m,
                        "n": n,
                        "B": int(thr.size),
                        "scheme": scheme,
                        "key_bytes": (len(keys[0]["all"][0]) if m == 2 else key_bytes(scheme, DOMAIN, 32, vector=True)),
                        "fss_upload": rep.bytes,
                        "fss_querier": rel.bytes["querier"],
                        "fss_servers": rel.bytes["servers"],
                        "pw_upload": pw.bytes,
                        "pw_querier": prel.bytes["querier"],
                        "pw_servers": prel.bytes["servers"],
                    }
                    rows.append(row)
                    print(row, flush=True)
    return rows


def e2e(
    n: int,
    m: int,
    grid_bits: int,
    eps: float = 1.0,
    durable: bool = True,
    tls: bool = False,
    cluster: str | None = None,
) -> dict:
    rng = np.random.default_rng(1)
    x = rng.integers(0, 1 << DOMAIN, n)
    with (
        tempfile.TemporaryDirectory() as state,
        ServerProcesses(
            m,
            budget="1000000",
            timeout=900,
            state_dir=state if durable else None,
            tls=tls,
            cluster=cluster,
            startup_timeout=300,
            extra_args=("--accept-unverified",) if m > 2 else (),  # three servers: unchecked mshare keys
        ) as sp,
    ):
        t0 = time.perf_counter()
        scheme = "vdpf" if m == 2 else "mshare"
        keys = make_keys(x, make_series(), scheme=scheme, m=m, domain_bits=DOMAIN)
        t_keys = time.perf_counter() - t0
        rep = send_keys(
            sp.addresses,
            "e2e",
            scheme=scheme,
            domain_bits=DOMAIN,
            output_bits=32,
            series_meta={"all": 1},
            ids=np.arange(n, dtype=np.uint64),
            keys=keys,
            tls=sp.client_tls,
        )
        t_up = time.perf_counter() - t0 - t_keys
        q = ECDFQuerier(sp.addresses, timeout=1800, tls=sp.querier_tls)
        t1 = time.perf_counter()
        rel = q.ecdf("e2e", eps, grid_bits=grid_bits)
        t_rel = time.perf_counter() - t1
        total = time.perf_counter() - t0
    exact = np.array([(x <= (t + 1) * (1 << (DOMAIN - grid_bits)) - 1).sum() for t in range(1 << grid_bits)])
    rmse = float(np.sqrt(np.mean((rel.cumulative - exact) ** 2)))
    row = {
        "n": n,
        "m": m,
        "grid_bits": grid_bits,
        "state": "sqlite" if durable else "memory",
        "tls": tls,
        "cluster": cluster,
        "keygen_s": t_keys,
        "upload_s": t_up,
        "release_s": t_rel,
        "total_s": total,
        "server_timings": rel.server_timings,
        "upload_bytes": rep.bytes,
        "querier_bytes": rel.bytes["querier"],
        "server_bytes": rel.bytes["servers"],
        "rmse_counts": rmse,
        "theorem31_rmse": float(np.sqrt(rel.mse_per_threshold)),
        "scheme": scheme,
        "check_bytes": (rep.check_bytes or [0])[0],
        "keys_per_s_per_server": n / t_up,
    }
    print(row, flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["comm", "e2e", "all"], default="all")
    ap.add_argument("--n", type=int, default=100_000, help="clients of the end-to-end run")
    ap.add_argument("--memory", action="store_true", help="servers without --state (in-memory SQLite)")
    ap.add_argument("--tls", action="store_true", help="every connection in mutual TLS (throwaway CA)")
    ap.add_argument(
        "--cluster",
        metavar="local[:N]",
        help="part e2e: run every case twice, without and with each server evaluating its keys on a "
        "Dask LocalCluster of its own (ecdf serve --cluster local:N)",
    )
    ap.add_argument(
        "--only",
        choices=["dcf8", "dcf10", "vdpf8", "vdpf10", "mshare10"],
        action="append",
        help="part e2e: only these cases (repeatable; default all three: m = 2 on 2^8 and 2^10 grids, "
        "m = 3 with at most 10^4 clients on 2^10)",
    )
    args = ap.parse_args()
    if args.part in ("comm", "all"):
        rows = comm([1000, 10000], [1, 16, 256, 1024], [2]) + comm([1000], [1, 16, 256, 1024], [3])
        print(
            "\n| m | n | \\|B\\| | FSS key bytes/client/server | FSS upload MB (once) | FSS release querier KB | "
            "FSS release server-server MB | pointwise upload MB (per query) | pointwise release querier KB | "
            "pointwise server-server MB | pointwise / FSS client bytes |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['m']} | {r['n']} | {r['B']} | {r['key_bytes']} | {_mb(r['fss_upload'])} | "
                f"{r['fss_querier'] / 1e3:.1f} | {_mb(r['fss_servers'])} | {_mb(r['pw_upload'])} | "
                f"{r['pw_querier'] / 1e3:.1f} | {_mb(r['pw_servers'])} | {r['pw_upload'] / r['fss_upload']:.2f} |"
            )
    if args.part in ("e2e", "all"):
        durable = not args.memory
        if args.cluster is not None:
            from pairwise.protocols.cluster import parse_cluster

            if not parse_cluster(args.cluster).local:
                ap.error("--cluster takes local or local:N (every server starts a cluster of its own)")
        cases = {"vdpf8": (args.n, 2, 8), "vdpf10": (args.n, 2, 10), "mshare10": (min(args.n, 10_000), 3, 10)}
        cases.update(dcf8=cases["vdpf8"], dcf10=cases["vdpf10"])  # the names before verified keys (m = 2)
        if not args.only:
            args.only = ["vdpf8", "vdpf10", "mshare10"]
        clusters = [None] if args.cluster is None else [None, args.cluster]
        rows = [
            e2e(*cases[c], durable=durable, tls=args.tls, cluster=cl)
            for c in (args.only or list(cases))
            for cl in clusters
        ]
        print(
            "\n| n | m | grid | cluster (per server) | keygen s | upload s | release s | server shares s "
            "(per server) | server noise s | total s | upload MB | server-server MB | RMSE (counts) | Thm 3.1 RMSE |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            sh = " / ".join(f"{t.get('shares', 0):.1f}" for t in r["server_timings"])
            no = " / ".join(f"{t.get('noise', 0):.1f}" for t in r["server_timings"])
            print(
                f"| {r['n']} | {r['m']} | 2^{r['grid_bits']} | {r['cluster'] or '-'} | {r['keygen_s']:.2f} | "
                f"{r['upload_s']:.2f} | {r['release_s']:.2f} | {sh} | {no} | {r['total_s']:.2f} | "
                f"{_mb(r['upload_bytes'])} | {_mb(r['server_bytes'])} | {r['rmse_counts']:.1f} | "
                f"{r['theorem31_rmse']:.1f} |"
            )


if __name__ == "__main__":
    main()
