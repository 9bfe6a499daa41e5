"""The multi-server differentially private ECDF service: one server process.

What it does
    m >= 2 servers hold the key shares of n clients' values (uploaded over TCP
    by one or more client processes) and release noisy ECDFs, per dataset,
    under a per-dataset privacy budget (dp-ecdf, Barczewski, Mawass, Ramon):

    * **Data** (:mod:`pairwise.protocols.ecdf.shares`): each client sends one key per
      server and series -- a DCF key of f(t) = w [t >= x] for m = 2 (the FSS
      strategy of Sec. 4.2), PRG-compressed additive shares of w e_x for
      m > 2, or, for the pointwise baseline of Sec. 4.1, additive shares of
      w [x <= t] for each queried t.  A series is a weighting of the records:
      ``all`` (w = 1), ``pos``/``neg`` (w = label, 1 - label: the two ECDFs of
      the ROC curve, Sec. 5.1; ``all`` is then pos + neg) and ``e1``/``e0``
      (w = fixed-point predicted probabilities, the expected counts of
      Hosmer-Lemeshow, Alg. 2).  Each server evaluates its keys locally and
      obtains additive shares mod 2^l of the weighted cumulative counts
      C(tau) = sum_i w_i [x_i <= tau] at the thresholds it needs.
    * **Releases** (request ``kind``):
      - ``ecdf`` with ``mechanism="paper"`` (default): Theorem 3.1 / Eq. (2)
        on a grid of N = 2^g thresholds (L = g): every node of the binary
        tree on the paths of the requested thresholds gets discrete Laplace
        noise of per-value budget eps / (L + 1); the servers hold the node
        noise only as additive shares, add each threshold's L + 1 path shares
        to its count share, and send the querier shares of
        C(tau_i) + sum_l eta_{ceil(i / 2^l), l}.  Answering a subset B of the
        grid releases a subset of Eq. (2) (still eps-DP); the whole grid is
        the whole noisy ECDF.  One request may name several series (the ROC's
        pos and neg): eps is charged per series, all or nothing.
      - ``ecdf`` with ``mechanism="hierarchical"``: the servers open noisy
        counts of every dyadic node (Hay et al. 2010; per-value budget
        eps / (2L); the root is the public n for series ``all``), which the
        querier makes consistent (:func:`pairwise.dp.tree.consistent_prefix_sums`).
      - ``counts``: noisy counts of Q threshold groups of several series,
        each value with its own budget eps_v (Alg. 2, lines 7-9): a record
        changes at most 2 groups per series, so the charge is
        2 |series| eps_v.
    * **Noise no single server knows** (:mod:`pairwise.protocols.ecdf.noise`): with
      m = 2 the servers run one garbled circuit per release (server 0
      garbles, server 1 evaluates, one SIMD execution over all B noisy
      values, :class:`pairwise.mpc.twopc.GarblerSession`), adding in-circuit discrete
      Laplace noise from both servers' CSPRNG bits; with m > 2 each server
      adds a share G - G' of Polya NB(1/(m - t), a) variables (exactly
      discrete Laplace when summed over m servers with t = 0).
    * **Budget**: every server keeps, per dataset, the epsilon spent and
      refuses a release that would exceed its configured budget
      (:class:`pairwise.protocols.ecdf.wire.BudgetExceeded`).  A release is first
      *prepared* on every server (budget reserved, client set compared) and
      only then *run*, so a refusal by any server aborts the release before
      any noise is drawn; the charge becomes final when the run starts.
    * **Failures**: a client whose key is malformed is rejected (the others
      are kept); a duplicate client id is rejected; the querier releases only
      over clients accepted by every server (it intersects the servers' client
      sets when their digests differ); a server that is down makes the release
      fail with an error naming it; every wait has a timeout.

Security / trust model
    Semi-honest servers, clients and querier; the network between them is
    assumed authentic and private (TLS or a trusted network; the channel has
    no encryption of its own).  The servers' addresses for the two-party
    noise come from the querier's request, so a querier outside the model
    could point server 0 at an impostor: deploy with authenticated channels.
    * m = 2: a single server learns nothing about the clients' values
      (DCF keys) and nothing about the noise (it is a function of both
      servers' random bits inside the garbled circuit); it sees the opened
      noisy values in the hierarchical and counts releases (which the querier
      receives anyway) and only uniformly masked values in the paper
      release.  The two servers colluding learn all values.
    * m > 2: values are hidden from any m - 1 servers (``mshare`` keys).  The
      querier sees count + sum of the m noise shares: exactly discrete
      Laplace with t = 0 (eps-DP against the querier alone); with
      ``tolerate = t`` the release stays eps-DP against the querier together
      with any t servers (at the price of m/(m - t) times the variance).
    * DP guarantees are for neighbouring datasets that differ in one
      client's record (replace-one), n public (as in dp-ecdf; n is the number
      of clients the querier is told).  The in-circuit noise and the Polya
      tables are finite-precision, so each release is (eps, delta)-DP with the
      delta reported in its reply (about 2^-40 or less).

Command line: ``pairwise ecdf serve --server-id I --listen HOST:PORT
[--budget E] [--dataset-budget NAME=E ...] [--timeout S]`` (see
:mod:`pairwise.protocols.commands.ecdf`); the server prints one JSON line
``{"event": "listening", "server_id": I, "host": ..., "port": ...}`` when it
accepts connections.
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from pairwise.mpc.channel import TCPChannel, TCPListener, handshake
from pairwise.mpc.errors import ChannelError, ChannelTimeout, PeerClosed, ProtocolError

from .noise import (
    MAX_VALUE_EPSILON,
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
from .shares import (
    MAX_GRID_BITS,
    MSHARE_MAX_BITS,
    PointwiseShares,
    grid_points,
    parse_keys,
    reduce_mod,
    to_signed,
)
from .wire import (
    PROTOCOL_DIGEST,
    ROLE_CLIENT,
    ROLE_PEER,
    ROLE_QUERIER,
    ROLE_SERVER,
    SESSION_ID,
    BudgetExceeded,
    DatasetError,
    QueryRefused,
    ServerUnavailable,
    connect,
    format_address,
    parse_epsilon,
    recv_json,
    send_json,
)

__all__ = ["ECDFServer", "DEFAULT_BUDGET", "MAX_SERIES", "LAMBDA"]

#: Default per-dataset privacy budget of a server (total epsilon).
DEFAULT_BUDGET = Fraction(10)
#: Series per dataset.
MAX_SERIES = 8
#: Statistical security of the in-circuit noise: delta <= 2^-LAMBDA per release part.
LAMBDA = 40
_NAME = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
_SERIES = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_MAX_CLIENTS = 10_000_000
_MAX_REJECT_REPORT = 100


def _fmt_eps(x: Fraction) -> str:
    return f"{float(x):.6g}"


@dataclass
class _Dataset:
    name: str
    scheme: str
    m: int
    n: int
    l: int
    series: dict[str, int]
    budget: Fraction
    grid_bits: int | None = None  # pointwise rounds
    thresholds: np.ndarray | None = None  # pointwise: grid indices of the round
    round: str | None = None
    ids: list[int] = field(default_factory=list)
    id_rows: dict[int, int] = field(default_factory=dict)
    parts: dict[str, list] = field(default_factory=dict)
    cache: dict[str, object] = field(default_factory=dict)
    spent: Fraction = Fraction(0)
    reserved: dict[str, Fraction] = field(default_factory=dict)

    def params(self) -> tuple:
        return (self.scheme, self.m, self.n, self.l, tuple(sorted(self.series.items())))

    def shares(self, series: str):
        got = self.cache.get(series)
        if got is None:
            parts = self.parts[series]
            if not parts:
                raise DatasetError(f"dataset {self.name!r} holds no clients yet")
            got = type(parts[0]).concat(parts) if len(parts) > 1 else parts[0]
            self.parts[series] = [got]
            self.cache[series] = got
        return got

    def series_weight(self, name: str) -> int:
        if name in self.series:
            return self.series[name]
        if name == "all" and "pos" in self.series and "neg" in self.series:
            return 1
        raise DatasetError(f"dataset {self.name!r} has no series {name!r} (it has {sorted(self.series)})")

    def info(self) -> dict:
        return {"dataset": self.name, "scheme": self.scheme, "m": self.m, "domain_bits": self.n,
                "output_bits": self.l, "series": dict(self.series), "clients": len(self.ids),
                "budget": str(self.budget), "spent": str(self.spent),
                "reserved": str(sum(self.reserved.values(), Fraction(0))),
                "grid_bits": self.grid_bits, "round": self.round}


@dataclass
class _Query:
    rid: str
    ds: _Dataset
    req: dict
    charge: Fraction
    count: int  # clients in the snapshot (rows 0..count-1)
    round: str | None
    servers: list[tuple[str, int]]


class ECDFServer:
    """One server of the ECDF service (see the module docstring); ``serve_forever`` runs it."""

    def __init__(self, server_id: int, host: str = "127.0.0.1", port: int = 0, *,
                 budget: Fraction | float | str = DEFAULT_BUDGET, dataset_budgets: dict | None = None,
                 timeout: float = 120.0, log=None) -> None:
        if isinstance(server_id, bool) or not isinstance(server_id, int) or not 0 <= server_id < 255:
            raise ValueError(f"server id must be an integer in [0, 254], got {server_id!r}")
        self.server_id = server_id
        self.budget = parse_epsilon(budget, "budget")
        self.dataset_budgets = {str(k): parse_epsilon(v, f"budget of dataset {k!r}")
                                for k, v in (dataset_budgets or {}).items()}
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.timeout = float(timeout)
        self.listener = TCPListener(host, port)
        self.host, self.port = host, self.listener.port
        self._lock = threading.Lock()
        self._datasets: dict[str, _Dataset] = {}
        self._peers: dict[str, tuple[TCPChannel, float]] = {}
        self._peer_cv = threading.Condition()
        self._stop = threading.Event()
        self._tls = threading.local()  # per-connection-thread release timings
        self._log = log if log is not None else (lambda msg: print(f"ecdf-server {server_id}: {msg}",
                                                                    file=sys.stderr, flush=True))

    # ------------------------------------------------------------------ lifecycle
    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def serve_forever(self) -> None:
        """Accept connections until :meth:`stop`; each connection is served by its own thread."""
        try:
            while not self._stop.is_set():
                try:
                    ch = self.listener.accept(timeout=0.5, recv_timeout=self.timeout)
                except ChannelTimeout:
                    continue
                except ChannelError as exc:
                    if self._stop.is_set():
                        break
                    self._log(f"accept failed: {exc}")
                    continue
                threading.Thread(target=self._serve_connection, args=(ch,), daemon=True,
                                 name=f"ecdf-conn-{ch.peer}").start()
        finally:
            self.listener.close()

    def stop(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------------ connections
    def _serve_connection(self, ch: TCPChannel) -> None:
        try:
            hs = handshake(ch, ROLE_SERVER, SESSION_ID, PROTOCOL_DIGEST, extra_label="protocol",
                           timeout=min(self.timeout, 30.0))
        except (ChannelError, ValueError) as exc:
            self._log(f"handshake with {ch.peer} failed: {exc}")
            ch.close()
            return
        if hs.peer_role == ROLE_PEER:
            self._accept_peer(ch)
            return
        if hs.peer_role not in (ROLE_CLIENT, ROLE_QUERIER):
            self._log(f"{ch.peer} claims unknown role {hs.peer_role!r}; closing")
            ch.close()
            return
        query: _Query | None = None
        try:
            while True:
                try:
                    req = recv_json(ch, timeout=self.timeout)
                except PeerClosed:
                    break
                op = req.get("op")
                try:
                    if op == "upload":
                        self._op_upload(ch, req)
                    elif op == "pointwise":
                        self._op_pointwise(ch, req)
                    elif op == "status":
                        send_json(ch, self._op_status(req))
                    elif op == "prepare":
                        if query is not None:
                            raise QueryRefused("a release is already prepared on this connection")
                        query = self._op_prepare(req)
                        send_json(ch, {"ok": True, "clients": query.count, "digest": self._digest(query),
                                       "info": query.ds.info(), "server_id": self.server_id})
                    elif op == "list":
                        if query is None:
                            raise QueryRefused("list needs a prepared release")
                        ids = np.array(query.ds.ids[:query.count], dtype=np.uint64)
                        send_json(ch, {"ok": True, "count": int(ids.size)})
                        ch.send_array(ids)
                    elif op == "go":
                        if query is None:
                            raise QueryRefused("go needs a prepared release")
                        rows = None
                        if req.get("restrict"):
                            k = int(req.get("count", -1))
                            if not 0 <= k <= query.count:
                                raise ProtocolError(f"restricted client count {k} out of range")
                            ids = ch.recv_array(np.uint64, k)
                            rows = self._rows(query, ids)
                        q, query = query, None
                        self._commit(q)
                        self._run_release(ch, q, rows)
                    elif op == "abort":
                        if query is not None:
                            self._unreserve(query)
                            query = None
                        send_json(ch, {"ok": True})
                    else:
                        raise QueryRefused(f"unknown operation {op!r}")
                except ValueError as exc:  # ECDFError, ShareParameterError, NoiseSetupError, bad parameters
                    code = ("budget" if isinstance(exc, BudgetExceeded) else
                            "dataset" if isinstance(exc, DatasetError) else "refused")
                    self._log(f"{op} from {ch.peer} refused: {exc}")
                    send_json(ch, {"ok": False, "error": str(exc), "code": code, "server_id": self.server_id})
                    if op in ("upload", "pointwise"):
                        break  # bulk frames may still be in flight: end the connection cleanly
                except ServerUnavailable as exc:
                    self._log(f"{op} from {ch.peer} failed: {exc}")
                    send_json(ch, {"ok": False, "error": str(exc), "code": "unavailable",
                                   "server_id": self.server_id})
        except ChannelError as exc:
            self._log(f"connection {ch.peer}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the server; report it
            self._log(f"internal error on connection {ch.peer}: {type(exc).__name__}: {exc}")
            try:
                send_json(ch, {"ok": False, "error": f"internal server error: {type(exc).__name__}: {exc}",
                               "code": "internal", "server_id": self.server_id})
            except ChannelError:
                pass
        finally:
            if query is not None:
                self._unreserve(query)
            ch.close()

    # ------------------------------------------------------------------ datasets
    def _budget_for(self, name: str) -> Fraction:
        return self.dataset_budgets.get(name, self.budget)

    def _check_meta(self, req: dict, pointwise: bool) -> tuple[str, str, int, int, int, dict[str, int]]:
        name = req.get("dataset")
        if not isinstance(name, str) or not _NAME.match(name):
            raise DatasetError(f"dataset id must be 1-128 characters [A-Za-z0-9_.:/-], got {name!r}")
        scheme = req.get("scheme")
        want = ("pointwise",) if pointwise else ("dcf", "mshare")
        if scheme not in want:
            raise QueryRefused(f"scheme must be one of {want}, got {scheme!r}")
        m, sid, n, l = (req.get(k) for k in ("m", "server_id", "domain_bits", "output_bits"))
        for key, v, lo, hi in (("m", m, 2, 254), ("server_id", sid, 0, 253), ("domain_bits", n, 1, 32),
                               ("output_bits", l, 8, 64)):
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise QueryRefused(f"{key} must be an integer in [{lo}, {hi}], got {v!r}")
        if sid != self.server_id:
            raise QueryRefused(f"these keys are for server {sid}, but this is server {self.server_id}: "
                               "list the servers in the order of their --server-id")
        if sid >= m:
            raise QueryRefused(f"server id {sid} is not below m = {m}")
        if scheme == "dcf" and m != 2:
            raise QueryRefused("the dcf scheme needs exactly 2 servers; use mshare for m > 2")
        if scheme == "mshare" and n > MSHARE_MAX_BITS:
            raise QueryRefused(f"mshare keys need domain bits <= {MSHARE_MAX_BITS}, got {n}")
        series = req.get("series")
        if not isinstance(series, list) or not 1 <= len(series) <= MAX_SERIES:
            raise QueryRefused(f"series must be a list of 1..{MAX_SERIES} entries")
        out: dict[str, int] = {}
        for s in series:
            if not isinstance(s, dict):
                raise QueryRefused("each series must be an object {name, max_weight}")
            sname, w = s.get("name"), s.get("max_weight")
            if not isinstance(sname, str) or not _SERIES.match(sname) or sname in out:
                raise QueryRefused(f"bad or repeated series name {sname!r}")
            if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w < (1 << (l - 1)):
                raise QueryRefused(f"max_weight of series {sname!r} must be in [1, 2^{l - 1})")
            out[sname] = w
        return name, scheme, m, n, l, out

    def _get_or_create(self, name, scheme, m, n, l, series) -> _Dataset:
        with self._lock:
            ds = self._datasets.get(name)
            if ds is None:
                ds = _Dataset(name, scheme, m, n, l, series, self._budget_for(name),
                              parts={s: [] for s in series})
                self._datasets[name] = ds
            elif ds.params() != (scheme, m, n, l, tuple(sorted(series.items()))):
                raise DatasetError(
                    f"dataset {name!r} exists with scheme {ds.scheme}, m={ds.m}, domain bits {ds.n}, "
                    f"output bits {ds.l}, series {ds.series}; this upload does not match")
            return ds

    def _recv_chunks(self, ch: TCPChannel, req: dict) -> list[int]:
        chunks = req.get("chunks")
        if not isinstance(chunks, list) or any(isinstance(k, bool) or not isinstance(k, int) or k < 1
                                                 for k in chunks):
            raise QueryRefused("chunks must be a list of positive client counts")
        if sum(chunks) > _MAX_CLIENTS:
            raise QueryRefused(f"at most {_MAX_CLIENTS} clients per upload")
        return chunks

    def _accept_rows(self, ds: _Dataset, ids: np.ndarray, ok: np.ndarray, reasons: dict[int, str],
                     parts: dict[str, object]) -> tuple[int, list]:
        """Under the lock: drop duplicate ids, append the accepted rows. Returns (accepted, rejected)."""
        rejected = [(int(ids[i]), reasons[i]) for i in sorted(reasons)]
        take = []
        with self._lock:
            seen = ds.id_rows
            batch_seen: set[int] = set()
            for i in np.flatnonzero(ok):
                cid = int(ids[i])
                if cid in seen or cid in batch_seen:
                    rejected.append((cid, f"duplicate client id {cid}"))
                    continue
                batch_seen.add(cid)
                take.append(int(i))
            if take:
                pos = np.cumsum(ok) - 1  # row of client i within the parsed (kept) shares
                rows = pos[np.array(take)]
                for s, sh in parts.items():
                    ds.parts[s].append(sh.take(rows))
                    ds.cache.pop(s, None)
                for i in take:
                    ds.id_rows[int(ids[i])] = len(ds.ids)
                    ds.ids.append(int(ids[i]))
        return len(take), rejected

    def _op_upload(self, ch: TCPChannel, req: dict) -> None:
        name, scheme, m, n, l, series = self._check_meta(req, pointwise=False)
        chunks = self._recv_chunks(ch, req)
        ds = self._get_or_create(name, scheme, m, n, l, series)
        send_json(ch, {"ok": True, "ready": True})
        names = list(series)
        accepted, rejected = 0, []
        for k in chunks:
            ids = ch.recv_array(np.uint64, k)
            lens = ch.recv_array(np.uint32, (k, len(names))).astype(np.int64)
            total = int(lens.sum())
            data = ch.recv_frame(max_size=total)
            if len(data) != total:
                raise ProtocolError(f"key frame of {len(data)} bytes, announced {total}")
            offs = np.concatenate([[0], np.cumsum(lens.reshape(-1))])
            ok = np.ones(k, dtype=bool)
            reasons: dict[int, str] = {}
            parsed = {}
            for j, s in enumerate(names):
                blobs = [bytes(data[offs[i * len(names) + j]: offs[i * len(names) + j + 1]]) for i in range(k)]
                shares, kept, bad = parse_keys(scheme, blobs, party=self.server_id, m=m, n=n, l=l)
                for i, why in bad.items():
                    ok[i] = False
                    reasons.setdefault(i, f"series {s}: {why}")
                parsed[s] = (shares, kept)
            # align every series on the clients whose keys are good in all series
            good = np.flatnonzero(ok)
            aligned = {}
            for s, (shares, kept) in parsed.items():
                where = {c: r for r, c in enumerate(kept)}
                aligned[s] = shares.take(np.array([where[i] for i in good], dtype=np.intp))
            a, r = self._accept_rows(ds, ids, ok, reasons, aligned)
            accepted += a
            rejected += r
        self._log(f"upload to {name!r}: accepted {accepted} client(s), rejected {len(rejected)}")
        send_json(ch, {"ok": True, "accepted": accepted, "rejected_count": len(rejected),
                       "rejected": [{"client": c, "reason": why} for c, why in rejected[:_MAX_REJECT_REPORT]],
                       "clients": len(ds.ids)})

    def _op_pointwise(self, ch: TCPChannel, req: dict) -> None:
        name, scheme, m, n, l, series = self._check_meta(req, pointwise=True)
        g = req.get("grid_bits")
        if isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= min(n, MAX_GRID_BITS):
            raise QueryRefused(f"grid_bits must be in [1, {min(n, MAX_GRID_BITS)}], got {g!r}")
        thr = self._thresholds(req.get("thresholds"), 1 << g)
        rnd = req.get("round")
        if not isinstance(rnd, str) or not 1 <= len(rnd) <= 64:
            raise QueryRefused("round must be a short string naming this query round")
        chunks = self._recv_chunks(ch, req)
        ds = self._get_or_create(name, scheme, m, n, l, series)
        with self._lock:
            if ds.round != rnd:  # a new query round: fresh shares from every client (budget persists)
                if ds.reserved:
                    raise QueryRefused(f"dataset {name!r} has a release in progress; retry the round later")
                ds.round, ds.grid_bits, ds.thresholds = rnd, g, thr
                ds.ids, ds.id_rows, ds.cache = [], {}, {}
                ds.parts = {s: [] for s in series}
            elif ds.grid_bits != g or not np.array_equal(ds.thresholds, thr):
                raise DatasetError(f"round {rnd!r} of {name!r} uses other thresholds")
        send_json(ch, {"ok": True, "ready": True})
        pts = grid_points(n, g)[thr]
        names = list(series)
        accepted, rejected = 0, []
        for k in chunks:
            ids = ch.recv_array(np.uint64, k)
            word = np.uint32 if l <= 32 else np.uint64  # shares travel as 4-byte words when they fit
            vals = ch.recv_array(word, (k, len(names), thr.size)).astype(np.uint64)
            bad = (vals > np.uint64((1 << l) - 1)).any(axis=(1, 2)) if l < 64 else np.zeros(k, bool)
            ok = ~bad
            reasons = {int(i): f"share not below 2^{l}" for i in np.flatnonzero(bad)}
            good = np.flatnonzero(ok)
            parts = {s: PointwiseShares(pts, vals[good, j, :].copy(), l) for j, s in enumerate(names)}
            a, r = self._accept_rows(ds, ids, ok, reasons, parts)
            accepted += a
            rejected += r
        self._log(f"pointwise round {rnd!r} of {name!r}: accepted {accepted}, rejected {len(rejected)}")
        send_json(ch, {"ok": True, "accepted": accepted, "rejected_count": len(rejected),
                       "rejected": [{"client": c, "reason": why} for c, why in rejected[:_MAX_REJECT_REPORT]],
                       "clients": len(ds.ids)})

    def _op_status(self, req: dict) -> dict:
        name = req.get("dataset")
        with self._lock:
            if name is None:
                return {"ok": True, "server_id": self.server_id,
                        "datasets": [d.info() for d in self._datasets.values()]}
            ds = self._datasets.get(name)
            if ds is None:
                raise DatasetError(f"server {self.server_id} has no dataset {name!r}")
            return {"ok": True, "server_id": self.server_id, "info": ds.info()}

    # ------------------------------------------------------------------ releases: prepare / budget
    @staticmethod
    def _thresholds(value, N: int) -> np.ndarray:
        if value is None:
            return np.arange(N, dtype=np.int64)
        if not isinstance(value, list) or not value or len(value) > N:
            raise QueryRefused(f"thresholds must be a non-empty list of at most {N} grid indices")
        if any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise QueryRefused("thresholds must be integers (grid indices)")
        arr = np.array(value, dtype=np.int64)
        if arr.min() < 0 or arr.max() >= N:
            raise QueryRefused(f"thresholds must be grid indices in [0, {N - 1}]")
        return np.unique(arr)

    def _grid_bits(self, ds: _Dataset, req: dict) -> int:
        g = req.get("grid_bits")
        if g is None:
            g = ds.grid_bits if ds.scheme == "pointwise" else ds.n
        if isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= min(ds.n, MAX_GRID_BITS):
            raise QueryRefused(f"grid_bits must be in [1, {min(ds.n, MAX_GRID_BITS)}], got {g!r}")
        if ds.scheme == "pointwise" and g != ds.grid_bits:
            raise QueryRefused(f"the pointwise round of {ds.name!r} was sent for grid_bits {ds.grid_bits}")
        return g

    def _op_prepare(self, req: dict) -> _Query:
        rid = req.get("rid")
        if not isinstance(rid, str) or not re.fullmatch(r"[0-9a-f]{16,64}", rid):
            raise QueryRefused("rid must be 16-64 lowercase hex digits")
        servers = req.get("servers")
        if (not isinstance(servers, list) or not 2 <= len(servers) <= 254
                or any(not isinstance(a, list) or len(a) != 2 or not isinstance(a[0], str)
                       or isinstance(a[1], bool) or not isinstance(a[1], int) for a in servers)):
            raise QueryRefused("servers must be a list of [host, port] pairs")
        servers = [(a[0], a[1]) for a in servers]
        name = req.get("dataset")
        with self._lock:
            ds = self._datasets.get(name) if isinstance(name, str) else None
        if ds is None:
            raise DatasetError(f"server {self.server_id} has no dataset {name!r} (upload the clients' keys first)")
        if len(servers) != ds.m:
            raise QueryRefused(f"dataset {name!r} is shared among m = {ds.m} servers, the request lists {len(servers)}")
        kind = req.get("kind")
        g = self._grid_bits(ds, req)
        if kind == "ecdf":
            mech = req.get("mechanism", "paper")
            if mech not in ("paper", "hierarchical"):
                raise QueryRefused(f"mechanism must be 'paper' or 'hierarchical', got {mech!r}")
            names = self._ecdf_series(req)
            for s_name in names:
                ds.series_weight(s_name)
            thr = self._thresholds(req.get("thresholds"), 1 << g)
            if mech == "hierarchical" and thr.size != (1 << g) and ds.scheme == "pointwise":
                raise QueryRefused("the hierarchical mechanism needs the whole grid")
            if ds.scheme == "pointwise":
                need = thr if mech == "paper" else np.arange(1 << g)
                if not np.isin(need, ds.thresholds).all():
                    raise QueryRefused("the pointwise round does not cover the requested thresholds")
            charge = parse_epsilon(req.get("epsilon")) * len(names)
        elif kind == "counts":
            series = req.get("series")
            if not isinstance(series, list) or not 1 <= len(series) <= MAX_SERIES or \
                    any(not isinstance(s, str) for s in series) or len(set(series)) != len(series):
                raise QueryRefused("series must be a list of distinct series names for a counts release")
            for s in series:
                ds.series_weight(s)
            cuts = req.get("cuts")
            N = 1 << g
            if not isinstance(cuts, list) or len(cuts) > 1024 or \
                    any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < N for c in cuts):
                raise QueryRefused(f"cuts must be a list of at most 1024 grid indices in [0, {N - 1}]")
            if any(b < a for a, b in zip(cuts, cuts[1:])):
                raise QueryRefused("cuts must be non-decreasing")
            if ds.scheme == "pointwise":
                raise QueryRefused("counts releases need FSS keys (dcf or mshare), not a pointwise round")
            eps_v = parse_epsilon(req.get("epsilon_per_value"), "epsilon_per_value")
            charge = 2 * len(series) * eps_v
        else:
            raise QueryRefused(f"kind must be 'ecdf' or 'counts', got {kind!r}")
        tol = req.get("tolerate", 0)
        if isinstance(tol, bool) or not isinstance(tol, int) or not 0 <= tol < ds.m or (ds.m == 2 and tol):
            raise QueryRefused(f"tolerate must be an integer in [0, m-1) (0 for two servers), got {tol!r}")
        self._precheck_noise(ds, req, g)
        with self._lock:
            used = ds.spent + sum(ds.reserved.values(), Fraction(0))
            if used + charge > ds.budget:
                raise BudgetExceeded(
                    f"privacy budget of dataset {name!r} exhausted on server {self.server_id}: "
                    f"spent {_fmt_eps(ds.spent)}"
                    + (f" (+{_fmt_eps(used - ds.spent)} reserved)" if used != ds.spent else "")
                    + f", this release needs {_fmt_eps(charge)}, budget {_fmt_eps(ds.budget)}")
            if rid in ds.reserved:
                raise QueryRefused(f"release {rid} is already prepared")
            ds.reserved[rid] = charge
            count = len(ds.ids)
        if count == 0:
            self._unreserve_raw(ds, rid)
            raise DatasetError(f"dataset {name!r} holds no clients")
        return _Query(rid, ds, req, charge, count, ds.round, servers)

    @staticmethod
    def _ecdf_series(req: dict) -> list[str]:
        """Series of an ecdf release: one name, or a list of distinct names released together."""
        value = req.get("series", "all")
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not 1 <= len(names) <= MAX_SERIES or \
                any(not isinstance(v, str) for v in names) or len(set(names)) != len(names):
            raise QueryRefused("series must be a series name or a list of distinct names")
        return names

    def _precheck_noise(self, ds: _Dataset, req: dict, g: int) -> None:
        """Build (and cache) the noise circuits or Polya tables now, so that an impossible noise setting is
        refused before any budget is charged."""
        L = g
        if req["kind"] == "ecdf":
            eps = parse_epsilon(req.get("epsilon"))
            changed = L + 1 if req.get("mechanism", "paper") == "paper" else 2 * L
            specs = [(value_epsilon(eps, changed), ds.series_weight(v), changed) for v in self._ecdf_series(req)]
        else:
            eps_v = min(parse_epsilon(req.get("epsilon_per_value")), MAX_VALUE_EPSILON)
            specs = [(eps_v, ds.series_weight(s), 2) for s in req["series"]]
        for eps_v, S, changed in specs:
            if ds.m == 2:
                noisy_sum_circuit(ds.l, eps_v, S, changed, LAMBDA)
            else:
                polya_table(polya_shape(ds.m, int(req.get("tolerate", 0))), eps_v, S)

    def _digest(self, q: _Query) -> str:
        ids = np.sort(np.array(q.ds.ids[:q.count], dtype=np.uint64)).astype("<u8")
        return hashlib.sha256(ids.tobytes()).hexdigest()

    def _rows(self, q: _Query, ids: np.ndarray) -> np.ndarray:
        rows = []
        for cid in ids.tolist():
            r = q.ds.id_rows.get(int(cid))
            if r is None or r >= q.count:
                raise QueryRefused(f"client {cid} is not among this server's accepted clients")
            rows.append(r)
        if len(set(rows)) != len(rows):
            raise QueryRefused("the restricted client list repeats a client")
        return np.array(sorted(rows), dtype=np.intp)

    def _unreserve_raw(self, ds: _Dataset, rid: str) -> None:
        with self._lock:
            ds.reserved.pop(rid, None)

    def _unreserve(self, q: _Query) -> None:
        self._unreserve_raw(q.ds, q.rid)

    def _commit(self, q: _Query) -> None:
        with self._lock:
            if q.ds.reserved.pop(q.rid, None) is None:
                raise QueryRefused("the release was not prepared")
            if q.ds.round != q.round:
                raise QueryRefused("a new pointwise round replaced the data; prepare the release again")
            q.ds.spent += q.charge
        self._log(f"release {q.rid} on {q.ds.name!r}: charged {_fmt_eps(q.charge)}, "
                  f"spent {_fmt_eps(q.ds.spent)} of {_fmt_eps(q.ds.budget)}")

    # ------------------------------------------------------------------ peers (m = 2)
    def _accept_peer(self, ch: TCPChannel) -> None:
        try:
            msg = recv_json(ch, timeout=min(self.timeout, 30.0))
            rid = msg.get("rid")
            if msg.get("op") != "peer" or not isinstance(rid, str) or not re.fullmatch(r"[0-9a-f]{16,64}", rid):
                raise ProtocolError("expected a peer hello {op: peer, rid}")
        except ChannelError as exc:
            self._log(f"peer connection {ch.peer} failed: {exc}")
            ch.close()
            return
        with self._peer_cv:
            now = time.monotonic()
            for old, (och, t0) in list(self._peers.items()):
                if now - t0 > 2 * self.timeout:
                    och.close()
                    del self._peers[old]
            self._peers[rid] = (ch, now)
            self._peer_cv.notify_all()

    def _wait_peer(self, rid: str, label: str) -> TCPChannel:
        deadline = time.monotonic() + self.timeout
        with self._peer_cv:
            while rid not in self._peers:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerUnavailable(f"{label} did not connect for release {rid} within {self.timeout:g} s")
                self._peer_cv.wait(timeout=min(left, 1.0))
            ch, _ = self._peers.pop(rid)
        return ch

    def _peer_session(self, q: _Query):
        from pairwise.mpc.twopc import EvaluatorSession, GarblerSession

        sid = SESSION_ID + b"/" + q.rid.encode()
        if self.server_id == 0:
            addr = tuple(q.servers[1])
            label = f"peer server 1 ({format_address(addr)})"
            ch = connect(addr, ROLE_PEER, label=label, connect_timeout=min(self.timeout, 10.0), timeout=self.timeout)
            send_json(ch, {"op": "peer", "rid": q.rid, "server_id": 0})
            try:
                return GarblerSession(ch, session_id=sid), ch
            except ChannelError as exc:
                ch.close()
                raise ServerUnavailable(f"{label}: {exc}") from exc
        label = f"peer server 0 ({format_address(tuple(q.servers[0]))})"
        ch = self._wait_peer(q.rid, label)
        try:
            return EvaluatorSession(ch, session_id=sid), ch
        except ChannelError as exc:
            ch.close()
            raise ServerUnavailable(f"{label}: {exc}") from exc

    # ------------------------------------------------------------------ releases: run
    def _cum(self, ds: _Dataset, series: str, points: np.ndarray, rows) -> np.ndarray:
        if not hasattr(self._tls, "timing"):
            self._tls.timing = {}
        t0 = time.perf_counter()
        try:
            return self._cum_raw(ds, series, points, rows)
        finally:
            self._tls.timing["shares"] = self._tls.timing.get("shares", 0.0) + time.perf_counter() - t0

    def _cum_raw(self, ds: _Dataset, series: str, points: np.ndarray, rows) -> np.ndarray:
        if series in ds.series:
            return ds.shares(series).cumulative_shares(points, rows)
        ds.series_weight(series)  # raises if unknown
        return reduce_mod(ds.shares("pos").cumulative_shares(points, rows)
                          + ds.shares("neg").cumulative_shares(points, rows), ds.l)

    def _noise(self, q: _Query, plans: list[dict]) -> tuple[list[np.ndarray], dict]:
        """Run every noise plan: {mode: masked|open, values|count, eps_v, S, changed}.

        Returns per plan the uint64 result (masked: noise share; open with
        m = 2: the opened noisy value mod 2^l; open with m > 2: own value share
        + noise share) and a report (delta, variances, peer bytes).
        """
        if not hasattr(self._tls, "timing"):
            self._tls.timing = {}
        t_noise = time.perf_counter()
        try:
            return self._noise_raw(q, plans)
        finally:
            self._tls.timing["noise"] = self._tls.timing.get("noise", 0.0) + time.perf_counter() - t_noise

    def _noise_raw(self, q: _Query, plans: list[dict]) -> tuple[list[np.ndarray], dict]:
        ds = q.ds
        m, l = ds.m, ds.l
        out: list[np.ndarray] = []
        report = {"delta": 0.0, "deltas": [], "variances": [], "and_gates": 0, "peer_bytes": 0,
                  "noise": "polya" if m > 2 else "gc"}
        if m == 2:
            session, ch = self._peer_session(q)
            try:
                for p in plans:
                    nsc = noisy_sum_circuit(l, p["eps_v"], p["S"], p["changed"], LAMBDA)
                    if p["mode"] == "masked":
                        res_vals, res = gc_noise_shares(session, nsc, p["count"])
                    else:
                        res_vals, res = gc_noisy_sum(session, nsc, p["values"])
                    out.append(res_vals)
                    report["deltas"].append(p["changed"] * nsc.guarantee.delta)
                    report["delta"] += p["changed"] * nsc.guarantee.delta
                    report["variances"].append(noise_variance(p["eps_v"], p["S"]))
                    report["and_gates"] += 0 if res is None else res.and_gates
                st = ch.stats()
                report["peer_bytes"] = st["bytes_sent"] + st["bytes_received"]
            except ChannelError as exc:
                other = 1 - self.server_id
                raise ServerUnavailable(f"garbled-circuit session with peer server {other} "
                                        f"({format_address(tuple(q.servers[other]))}) failed: {exc}") from exc
            finally:
                session.close()
            return out, report
        tol = int(q.req.get("tolerate", 0))
        shape = polya_shape(m, tol)
        for p in plans:
            table = polya_table(shape, p["eps_v"], p["S"])
            n = p["count"] if p["mode"] == "masked" else p["values"].size
            share = reduce_mod(noise_share(table, n).astype(np.uint64), l)
            out.append(share if p["mode"] == "masked" else reduce_mod(p["values"] + share, l))
            report["deltas"].append(p["changed"] * polya_guarantee(table, m))
            report["delta"] += p["changed"] * polya_guarantee(table, m)
            report["variances"].append(noise_variance(p["eps_v"], p["S"], shape * m))
        return out, report

    def _run_release(self, ch: TCPChannel, q: _Query, rows) -> None:
        t0 = time.perf_counter()
        self._tls.timing = {}
        ds, req = q.ds, q.req
        if rows is None:
            rows = np.arange(q.count, dtype=np.intp)
        g = self._grid_bits(ds, req)
        L, N = g, 1 << g
        pts = grid_points(ds.n, g)
        head = {"ok": True, "server_id": self.server_id, "kind": req["kind"], "grid_bits": g,
                "clients": int(rows.size), "epsilon": str(q.charge), "output_bits": ds.l}
        if req["kind"] == "ecdf":
            names = self._ecdf_series(req)
            mech = req.get("mechanism", "paper")
            eps = parse_epsilon(req["epsilon"])
            plans, extra = [], []
            if mech == "paper":
                B = self._thresholds(req.get("thresholds"), N)
                offs = np.concatenate([[0], np.cumsum([1 << (L - lv) for lv in range(L + 1)])])
                node = np.concatenate([offs[lv] + (B >> lv) for lv in range(L + 1)])
                uniq, inv = np.unique(node, return_inverse=True)
                eps_v = value_epsilon(eps, L + 1)
                for name in names:
                    extra.append(self._cum(ds, name, pts[B], rows))
                    plans.append({"mode": "masked", "count": uniq.size, "eps_v": eps_v,
                                  "S": ds.series_weight(name), "changed": L + 1})
                res, rep = self._noise(q, plans)
                parts = []
                for c, e in zip(extra, res):
                    path = e[inv].reshape(L + 1, B.size).sum(axis=0, dtype=np.uint64)
                    parts.append(reduce_mod(c + path, ds.l))
                vals = np.concatenate(parts)
                head.update(encoding="shares", thresholds=B.tolist(), nodes=int(uniq.size))
            else:
                changed = 2 * L
                eps_v = value_epsilon(eps, changed)
                levels_n, roots = [], []
                for name in names:
                    c = self._cum(ds, name, pts, rows)
                    h = reduce_mod(c - np.concatenate([[np.uint64(0)], c[:-1]]), ds.l)
                    levels = [h]
                    while levels[-1].size > 1:
                        lv = levels[-1]
                        levels.append(reduce_mod(lv[0::2] + lv[1::2], ds.l))
                    root_public = name == "all"  # the root is n, public; other series noise it too
                    noised = levels[:L] if root_public else levels[:L + 1]
                    levels_n.append(len(noised))
                    roots.append(root_public)
                    plans.append({"mode": "open", "values": np.concatenate(noised), "eps_v": eps_v,
                                  "S": ds.series_weight(name), "changed": changed})
                res, rep = self._noise(q, plans)
                enc = "values" if ds.m == 2 else "shares"
                vals = np.concatenate([to_signed(v, ds.l) if enc == "values" else v for v in res])
                head.update(encoding=enc, levels=levels_n, root_public=roots)
            head.update(series=names, value_epsilon=str(eps_v), variances=rep["variances"],
                        deltas=rep["deltas"], epsilon_per_series=str(eps))
        else:
            series = req["series"]
            cuts = [int(c) for c in req["cuts"]]
            bounds = np.array(cuts + [N - 1], dtype=np.int64)
            eps_v = min(parse_epsilon(req["epsilon_per_value"]), MAX_VALUE_EPSILON)
            plans = []
            for s in series:
                c = self._cum(ds, s, pts[bounds], rows)
                cnt = reduce_mod(c - np.concatenate([[np.uint64(0)], c[:-1]]), ds.l)
                plans.append({"mode": "open", "values": cnt, "eps_v": eps_v, "S": ds.series_weight(s), "changed": 2})
            res, rep = self._noise(q, plans)
            enc = "values" if ds.m == 2 else "shares"
            vals = np.concatenate([to_signed(v, ds.l) if enc == "values" else v for v in res])
            head.update(encoding=enc, series=series, groups=len(cuts) + 1, value_epsilon=str(eps_v),
                        variances=rep["variances"])
        head.update(delta=rep["delta"], peer_bytes=rep["peer_bytes"], and_gates=rep["and_gates"],
                    noise=rep["noise"], count=int(vals.size), seconds=time.perf_counter() - t0,
                    timings=dict(self._tls.timing))
        send_json(ch, head)
        ch.send_array(vals.astype(np.int64) if head["encoding"] == "values" else vals.astype(np.uint64))
