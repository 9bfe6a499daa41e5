"""Releases of the ECDF service: validate a request into a plan, then compute one server's part of it.

What it does
    :func:`plan_release` checks a parsed ``prepare`` request
    (:class:`pairwise.protocols.ecdf.ops.PrepareRequest`, whose fields are
    checked on their own when it is parsed) against the dataset: its series,
    grid, thresholds or cuts on that grid, tolerate below its m.  It builds
    the noise circuits or Polya tables the release will need, so an
    impossible request is refused before any budget is reserved.
    It returns a :class:`ReleasePlan` with the exact charge.

    :func:`run_release` computes this server's part over a
    :class:`pairwise.protocols.ecdf.dataset.Snapshot` ([BMR25]):

    * ``ecdf``, ``mechanism="paper"``: [BMR25, Theorem 3.1 / Eq. (2)] on a grid
      of 2^g thresholds, per-node budget eps / (g + 1), the noise held as
      additive shares; each series is charged eps;
    * ``ecdf``, ``mechanism="hierarchical"`` or ``"kary"``: noisy counts of
      every node of a tree over the grid, opened, eps / (2h) per node;
    * ``counts``: noisy counts of Q threshold groups of several series
      ([BMR25, Alg. 2, lines 7-9]), charged 2 |series| eps_v.

    Noise no single server knows (:mod:`pairwise.protocols.ecdf.noise`): with
    m = 2 one garbled-circuit session per release
    (:mod:`pairwise.protocols.ecdf.peers`), with m > 2 Polya shares.  The
    reply states each series' node-noise law (``noise_laws``), from which the
    querier computes intervals.  Each mechanism's sensitivity argument:
    ``docs/ecdf-server.md``, "Releases".

Security model
    See :mod:`pairwise.protocols.ecdf.server`.  Everything published next to
    a release (grid, thresholds, scales, deltas, n) is a function of public
    parameters and the public client count.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from pairwise.dp.kary import tree_radices
from pairwise.mpc.errors import ChannelError

from .dataset import Dataset, Snapshot
from .noise import (
    MAX_VALUE_EPSILON,
    discrete_laplace_alpha,
    gc_noise_shares,
    gc_noisy_sum,
    noise_share,
    noise_variance,
    noisy_sum_circuit,
    polya_guarantee,
    polya_shape,
    polya_table,
    value_epsilon,
)
from .ops import MAX_SERIES, MECHANISMS, PrepareRequest, check_rid, parse_thresholds
from .shares import MAX_GRID_BITS, grid_points, reduce_mod, to_signed
from .wire import QueryRefused, ServerUnavailable

__all__ = [
    "LAMBDA",
    "MAX_SERIES",
    "MECHANISMS",
    "ReleasePlan",
    "check_rid",
    "mechanism_radices",
    "parse_thresholds",
    "plan_release",
    "release_points",
    "run_release",
]

#: Statistical security of the in-circuit noise: delta <= 2^-LAMBDA per release part.
LAMBDA = 40


def mechanism_radices(mechanism: str, grid_bits: int) -> tuple[int, ...] | None:
    """The tree of a node-release mechanism on 2^g thresholds (public): None for the paper's path sums."""
    if mechanism == "paper":
        return None
    if mechanism == "hierarchical":
        return (2,) * int(grid_bits)
    if mechanism == "kary":
        return tree_radices(int(grid_bits))
    raise QueryRefused(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")


@dataclass
class ReleasePlan:
    """A validated release request (see :func:`plan_release`)."""

    rid: str
    kind: str
    series: list[str]
    grid_bits: int
    charge: Fraction
    tolerate: int = 0
    mechanism: str = "paper"
    thresholds: np.ndarray | None = None
    cuts: list[int] = field(default_factory=list)
    epsilon: Fraction = Fraction(0)  # ecdf: per series; counts: per value
    servers: list[tuple[str, int]] | None = None
    radices: tuple[int, ...] | None = None  # ecdf with a node-release mechanism (hierarchical, kary)


def _grid_bits(ds: Dataset, req: PrepareRequest) -> int:
    g = req.grid_bits
    if g is None:
        g = ds.record.grid_bits if ds.scheme == "pointwise" else ds.n
    if not 1 <= g <= min(ds.n, MAX_GRID_BITS):
        raise QueryRefused(f"grid_bits must be in [1, {min(ds.n, MAX_GRID_BITS)}], got {g!r}")
    if ds.scheme == "pointwise" and g != ds.record.grid_bits:
        raise QueryRefused(f"the pointwise round of {ds.name!r} was sent for grid_bits {ds.record.grid_bits}")
    return g


def plan_release(ds: Dataset, req: PrepareRequest) -> ReleasePlan:
    """Check a parsed ``prepare`` request against ``ds`` (its own bounds); raises before anything is reserved."""
    rid, servers, kind = req.rid, req.servers, req.kind
    if servers is not None and len(servers) != ds.m:
        raise QueryRefused(f"dataset {ds.name!r} is shared among m = {ds.m} servers, the request lists {len(servers)}")
    g = _grid_bits(ds, req)
    tol = req.tolerate
    if not 0 <= tol < ds.m or (ds.m == 2 and tol):
        raise QueryRefused(f"tolerate must be an integer in [0, m-1) (0 for two servers), got {tol!r}")
    names = list(req.series)
    for s in names:
        ds.series_weight(s)
    if kind == "ecdf":
        mech = req.mechanism
        thr = parse_thresholds(None if req.thresholds is None else list(req.thresholds), 1 << g)
        rad = mechanism_radices(mech, g)
        if ds.scheme == "pointwise":
            if rad is not None and thr.size != (1 << g):
                raise QueryRefused(f"the {mech} mechanism needs the whole grid")
            need = thr if rad is None else np.arange(1 << g)
            if not np.isin(need, ds.record.thresholds).all():
                raise QueryRefused("the pointwise round does not cover the requested thresholds")
        eps = req.epsilon
        plan = ReleasePlan(
            rid,
            kind,
            names,
            g,
            eps * len(names),
            tol,
            mech,
            thr,
            epsilon=eps,
            servers=None if servers is None else list(servers),
            radices=rad,
        )
        changed = g + 1 if rad is None else 2 * len(rad)
        specs = [(value_epsilon(eps, changed), ds.series_weight(s), changed) for s in names]
    else:
        cuts, N = list(req.cuts), 1 << g
        if any(c >= N for c in cuts):
            raise QueryRefused(f"cuts must be a list of at most 1024 grid indices in [0, {N - 1}]")
        if ds.scheme == "pointwise":
            raise QueryRefused("counts releases need FSS keys (dcf or mshare), not a pointwise round")
        eps_v = req.epsilon_per_value
        plan = ReleasePlan(
            rid,
            kind,
            names,
            g,
            2 * len(names) * eps_v,
            tol,
            cuts=cuts,
            epsilon=eps_v,
            servers=None if servers is None else list(servers),
        )
        specs = [(min(eps_v, MAX_VALUE_EPSILON), ds.series_weight(s), 2) for s in names]
    # build (and cache) the noise circuits or Polya tables now: an impossible setting is refused before
    # any budget is reserved
    for eps_v, S, changed in specs:
        if ds.m == 2:
            noisy_sum_circuit(ds.l, eps_v, S, changed, LAMBDA)
        else:
            polya_table(polya_shape(ds.m, tol), eps_v, S)
    return plan


def release_points(ds: Dataset, plan: ReleasePlan) -> np.ndarray:
    """The domain points at which :func:`run_release` reads the cumulative shares of ``plan`` (public:
    a function of the grid and the requested thresholds or cuts only)."""
    pts = grid_points(ds.n, plan.grid_bits)
    if plan.kind == "ecdf":
        return pts[plan.thresholds] if plan.radices is None else pts
    return pts[np.array(plan.cuts + [(1 << plan.grid_bits) - 1], dtype=np.int64)]


def _cum(ds: Dataset, snap: Snapshot, series: str, points: np.ndarray, timings: dict) -> np.ndarray:
    t0 = time.perf_counter()
    try:
        out = None
        for b in ds.base_series(series):
            c = snap.shares[b].cumulative_shares(points, None)
            out = c if out is None else out + c
        return reduce_mod(out, ds.l)
    finally:
        timings["shares"] = timings.get("shares", 0.0) + time.perf_counter() - t0


def _noise(
    ds: Dataset, plan: ReleasePlan, specs: list[dict], open_peer, server_id: int, timings: dict
) -> tuple[list[np.ndarray], dict]:
    """Run every noise spec {mode: masked|open, values|count, eps_v, S, changed}.

    Returns per spec the uint64 result (masked: noise share; open with m = 2:
    the opened noisy value mod 2^l; open with m > 2: own value share + noise
    share) and a report (delta, variances, peer bytes).
    """
    t0 = time.perf_counter()
    m, l = ds.m, ds.l
    out: list[np.ndarray] = []
    report = {
        "delta": 0.0,
        "deltas": [],
        "variances": [],
        "laws": [],
        "and_gates": 0,
        "peer_bytes": 0,
        "noise": "polya" if m > 2 else "gc",
    }
    try:
        if m == 2:
            session, ch, label = open_peer()
            try:
                for p in specs:
                    nsc = noisy_sum_circuit(l, p["eps_v"], p["S"], p["changed"], LAMBDA)
                    if p["mode"] == "masked":
                        vals, res = gc_noise_shares(session, nsc, p["count"])
                    else:
                        vals, res = gc_noisy_sum(session, nsc, p["values"])
                    out.append(vals)
                    report["deltas"].append(p["changed"] * nsc.guarantee.delta)
                    report["delta"] += p["changed"] * nsc.guarantee.delta
                    report["variances"].append(noise_variance(p["eps_v"], p["S"]))
                    report["laws"].append(
                        {
                            "a": discrete_laplace_alpha(p["eps_v"], p["S"]),
                            "shape": 1.0,
                            "tv": float(nsc.guarantee.tv_to_ideal or 0.0),
                        }
                    )
                    report["and_gates"] += 0 if res is None else res.and_gates
                st = ch.stats()
                report["peer_bytes"] = st["bytes_sent"] + st["bytes_received"]
            except ChannelError as exc:
                raise ServerUnavailable(f"garbled-circuit session with {label} failed: {exc}") from exc
            finally:
                session.close()
            return out, report
        shape = polya_shape(m, plan.tolerate)
        for p in specs:
            table = polya_table(shape, p["eps_v"], p["S"])
            n = p["count"] if p["mode"] == "masked" else p["values"].size
            share = reduce_mod(noise_share(table, n).astype(np.uint64), l)
            out.append(share if p["mode"] == "masked" else reduce_mod(p["values"] + share, l))
            report["deltas"].append(p["changed"] * polya_guarantee(table, m))
            report["delta"] += p["changed"] * polya_guarantee(table, m)
            report["variances"].append(noise_variance(p["eps_v"], p["S"], shape * m))
            report["laws"].append(
                {"a": table.alpha, "shape": float(shape * m), "tv": math.nextafter(2 * m * table.tv_bound, math.inf)}
            )
        return out, report
    finally:
        timings["noise"] = timings.get("noise", 0.0) + time.perf_counter() - t0


def run_release(ds: Dataset, snap: Snapshot, plan: ReleasePlan, open_peer, server_id: int) -> tuple[dict, np.ndarray]:
    """This server's part of a charged release: (reply header, values to send after it).

    ``open_peer()`` (m = 2) returns (two-party session, its channel, label of
    the other server).  The header's ``encoding`` says how the querier
    combines the servers' arrays (``shares``: add mod 2^l; ``values``: equal
    opened values).
    """
    t0 = time.perf_counter()
    timings: dict = dict(snap.timings)  # the share evaluation on the cluster, done while preparing
    g = plan.grid_bits
    L, N = g, 1 << g
    pts = grid_points(ds.n, g)
    head = {
        "ok": True,
        "server_id": server_id,
        "kind": plan.kind,
        "grid_bits": g,
        "clients": snap.count,
        "epsilon": str(plan.charge),
        "output_bits": ds.l,
        "digest": snap.digest,
    }
    if snap.cluster is not None:
        head["cluster"] = snap.cluster
    if plan.kind == "ecdf":
        eps, names = plan.epsilon, plan.series
        specs, extra = [], []
        if plan.radices is None:
            B = plan.thresholds
            offs = np.concatenate([[0], np.cumsum([1 << (L - lv) for lv in range(L + 1)])])
            node = np.concatenate([offs[lv] + (B >> lv) for lv in range(L + 1)])
            uniq, inv = np.unique(node, return_inverse=True)
            eps_v = value_epsilon(eps, L + 1)
            for name in names:
                extra.append(_cum(ds, snap, name, pts[B], timings))
                specs.append(
                    {
                        "mode": "masked",
                        "count": uniq.size,
                        "eps_v": eps_v,
                        "S": ds.series_weight(name),
                        "changed": L + 1,
                    }
                )
            res, rep = _noise(ds, plan, specs, open_peer, server_id, timings)
            parts = []
            for c, e in zip(extra, res):
                path = e[inv].reshape(L + 1, B.size).sum(axis=0, dtype=np.uint64)
                parts.append(reduce_mod(c + path, ds.l))
            vals = np.concatenate(parts)
            head.update(encoding="shares", thresholds=B.tolist(), nodes=int(uniq.size))
        else:
            rad = plan.radices
            h = len(rad)
            eps_v = value_epsilon(eps, 2 * h)
            levels_n, roots = [], []
            for name in names:
                c = _cum(ds, snap, name, pts, timings)
                levels = [reduce_mod(c - np.concatenate([[np.uint64(0)], c[:-1]]), ds.l)]
                for k in rad:
                    levels.append(reduce_mod(levels[-1].reshape(-1, k).sum(axis=1, dtype=np.uint64), ds.l))
                root_public = name == "all"  # the root is n, public; other series noise it too
                noised = levels[:h] if root_public else levels[: h + 1]
                levels_n.append(len(noised))
                roots.append(root_public)
                specs.append(
                    {
                        "mode": "open",
                        "values": np.concatenate(noised),
                        "eps_v": eps_v,
                        "S": ds.series_weight(name),
                        "changed": 2 * h,
                    }
                )
            res, rep = _noise(ds, plan, specs, open_peer, server_id, timings)
            enc = "values" if ds.m == 2 else "shares"
            vals = np.concatenate([to_signed(v, ds.l) if enc == "values" else v for v in res])
            head.update(encoding=enc, levels=levels_n, root_public=roots, radices=list(rad))
        head.update(
            series=names,
            value_epsilon=str(eps_v),
            variances=rep["variances"],
            noise_laws=rep["laws"],
            deltas=rep["deltas"],
            epsilon_per_series=str(eps),
        )
    else:
        bounds = np.array(plan.cuts + [N - 1], dtype=np.int64)
        eps_v = min(plan.epsilon, MAX_VALUE_EPSILON)
        specs = []
        for s in plan.series:
            c = _cum(ds, snap, s, pts[bounds], timings)
            cnt = reduce_mod(c - np.concatenate([[np.uint64(0)], c[:-1]]), ds.l)
            specs.append({"mode": "open", "values": cnt, "eps_v": eps_v, "S": ds.series_weight(s), "changed": 2})
        res, rep = _noise(ds, plan, specs, open_peer, server_id, timings)
        enc = "values" if ds.m == 2 else "shares"
        vals = np.concatenate([to_signed(v, ds.l) if enc == "values" else v for v in res])
        head.update(
            encoding=enc,
            series=plan.series,
            groups=len(plan.cuts) + 1,
            value_epsilon=str(eps_v),
            variances=rep["variances"],
            noise_laws=rep["laws"],
        )
    head.update(
        delta=rep["delta"],
        peer_bytes=rep["peer_bytes"],
        and_gates=rep["and_gates"],
        noise=rep["noise"],
        count=int(vals.size),
        timings=timings,
        seconds=time.perf_counter() - t0 + snap.timings.get("cluster", 0.0),
    )  # + the cluster, while prepared
    return head, (vals.astype(np.int64) if head["encoding"] == "values" else vals.astype(np.uint64))
