"""The querier of the multi-server ECDF service: releases, their post-processing, ledger agreement.

What it does
    :class:`ECDFQuerier` asks the servers for releases over data they already
    hold ([BMR25]): prepare on every server (parameters validated, dataset
    snapshot, budget reserved), compare the
    servers' dataset digests -- refuse if they differ, naming the dataset and
    the servers, with nothing charged -- and their ledger digests (if they
    differ, make the ledgers agree first, :mod:`pairwise.protocols.ecdf.ledger`),
    with two servers have server 0 reach server 1 (``link``), then ``go``; sum the servers' shares mod 2^l (or check that both opened
    the same noisy values) and post-process:
    :meth:`ECDFQuerier.ecdf` / :meth:`ECDFQuerier.ecdf_many` (Theorem 3.1
    tree, or the consistent hierarchical tree, then Eq. (3) smoothing),
    quantiles by Algorithm 1 (:meth:`ECDFRelease.quantiles`), intervals from
    the node law the servers state (:meth:`ECDFRelease.interval`, ``band``,
    ``quantile_intervals``; :mod:`pairwise.protocols.ecdf.estimates`),
    :meth:`ECDFQuerier.roc` (positives and negatives as two ECDFs with eps/2
    each, Sec. 5.1; the AUC as a plug-in pair count with its interval) and :meth:`ECDFQuerier.hosmer_lemeshow` (Algorithm 2: an
    ECDF of the predicted probabilities with (L + 1) eps', Q - 1 quantile
    cuts, then the 4Q group statistics with eps' each, eps' = eps / (L + 9)).

Progress
    Every release method takes ``progress=None``, a ``progress(done, total)``
    callback over the ``m + 2`` public stages of a request (no value is
    reported); the stages: ``docs/ecdf-server.md``, "The querier".

Security model
    Semi-honest parties (see :mod:`pairwise.protocols.ecdf.server`).  The
    querier learns only the released noisy values (and n); everything it
    computes afterwards is post-processing.

Follows
    [BMR25, Eq. (2), Theorem 3.1, Eq. (3), Sec. 4.1-4.3 (Algorithm 1),
    Sec. 5.1 (ROC), Sec. 5.2 (Algorithm 2)].
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from pairwise.dp.ecdf import auc as trapezoid_auc
from pairwise.dp.ecdf import (
    hosmer_lemeshow_statistic,
    inverse_ecdf,
    smooth_ecdf,
)
from pairwise.dp.ecdf_intervals import NoiseLaw, auc_estimate, check_alpha
from pairwise.dp.kary import consistent_prefix, level_sizes
from pairwise.dp.validate import check_int, is_int
from pairwise.mpc.errors import ChannelError

from .estimates import NoiseMap, auc_method, ecdf_band, quantile_interval, roc_auc_interval
from .ops import (
    LEDGER_PAGE,
    MECHANISMS,
    AbortRequest,
    AdoptRequest,
    DropUploadRequest,
    GoRequest,
    LedgerRequest,
    LinkRequest,
    PrepareRequest,
    StatusRequest,
    UploadsRequest,
)
from .shares import MAX_GRID_BITS, grid_points, reduce_mod, to_signed
from .wire import (
    ROLE_QUERIER,
    BudgetExceeded,
    DatasetError,
    DatasetMismatch,
    ECDFError,
    QueryRefused,
    ServerUnavailable,
    call,
    call_ok,
    connect_all,
    parse_epsilon,
    parse_servers,
    raise_refusal,
    send_json,
    server_label,
)

__all__ = [
    "CountsRelease",
    "ECDFQuerier",
    "ECDFRelease",
    "HLRelease",
    "ROCRelease",
    "progress_part",
    "roc_points",
]

#: Times a release is prepared again when the servers' dataset digests differ (an upload commit in flight).
PREPARE_RETRIES = 3


def progress_part(progress, index: int, parts: int):
    """Part ``index`` (0-based) of ``parts`` equal parts of one ``progress(done, total)`` run, or None.

    A callback for the part's own ``(done, total)`` that reports
    ``(index * total + done, parts * total)`` to ``progress``: several
    requests of the same number of stages on one progress bar.
    """
    if progress is None:
        return None
    return lambda done, total: progress(index * total + done, parts * total)


@dataclass
class ECDFRelease:
    """A noisy ECDF released by the servers, with its post-processing.

    ``cumulative[k]`` is the noisy weighted count C(tau) at grid threshold
    ``thresholds[k]`` (domain point ``points[k]``); ``ecdf`` = cumulative / n;
    ``smoothed_counts`` = Eq. (3) smoothing (p = ``smoothing``, leaf space,
    bounds [0, n]); ``smoothed`` = smoothed_counts / n.
    """

    dataset: str
    series: str
    mechanism: str
    domain_bits: int
    grid_bits: int
    thresholds: np.ndarray
    points: np.ndarray
    cumulative: np.ndarray
    n: int
    epsilon: float
    delta: float
    node_variance: float
    smoothed_counts: np.ndarray
    noise: str
    servers: int
    bytes: dict = field(default_factory=dict)
    seconds: float = 0.0
    server_timings: list = field(default_factory=list)
    noise_map: NoiseMap | None = None  # the public noise structure the servers stated (None: not stated)

    @property
    def ecdf(self) -> np.ndarray:
        return self.cumulative / self.n

    @property
    def smoothed(self) -> np.ndarray:
        return self.smoothed_counts / self.n

    @property
    def mse_per_threshold(self) -> float | None:
        """Theorem 3.1: (L + 1) Var(node noise) in counts^2 (paper mechanism)."""
        if self.mechanism != "paper":
            return None
        return (self.grid_bits + 1) * self.node_variance

    def quantiles(self, qs) -> np.ndarray:
        """Algorithm 1 on the smoothed ECDF: the first released threshold (grid index) where F >= q."""
        from pairwise.dp.bounds import validate_quantile_levels

        validate_quantile_levels(np.atleast_1d(np.asarray(qs, dtype=float)).tolist())
        return np.asarray(inverse_ecdf(self.smoothed, qs, thresholds=self.thresholds))

    def radii(self, alpha: float = 0.05) -> np.ndarray | None:
        """Per-threshold radii in counts: |cumulative - exact| <= r with probability >= 1 - alpha each
        (public: mechanism, grid, epsilon, alpha); None if the interval is not computed."""
        return None if self.noise_map is None else self.noise_map.radii(self.thresholds, alpha)

    def interval(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray] | None:
        """Pointwise (1 - alpha) intervals of the ECDF at each released threshold (fractions, in [0, 1])."""
        r = self.radii(alpha)
        if r is None:
            return None
        return np.clip((self.cumulative - r) / self.n, 0, 1), np.clip((self.cumulative + r) / self.n, 0, 1)

    def band(self, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray] | None:
        """A simultaneous (1 - alpha) band over the released thresholds (monotone envelope)."""
        r = None if self.noise_map is None else self.noise_map.band_radii(self.thresholds, alpha)
        return None if r is None else ecdf_band(self.cumulative, r, self.n)

    def interval_method(self, alpha: float = 0.05) -> str:
        return (
            "not computed: the servers did not state the noise law"
            if self.noise_map is None
            else self.noise_map.method(alpha)
        )

    def quantile_intervals(self, qs, alpha: float = 0.05) -> list[tuple[int, int]] | None:
        """Grid-index intervals of the true quantiles (test inversion, alpha / 2 per side; whole grid only)."""
        N = 1 << self.grid_bits
        if self.noise_map is None or not np.array_equal(self.thresholds, np.arange(N)):
            return None
        nm = self.noise_map  # two thresholds' values are coupled: 2 (L + 1) path nodes, or every tree node
        r = nm.radii(self.thresholds, check_alpha(alpha), nm.nodes if nm.radices else 2 * nm.threshold_values)
        if r is None:
            return None
        return [quantile_interval(self.cumulative, r, float(q) * self.n) for q in np.atleast_1d(qs)]

    def as_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "series": self.series,
            "mechanism": self.mechanism,
            "domain_bits": self.domain_bits,
            "grid_bits": self.grid_bits,
            "thresholds": self.thresholds.tolist(),
            "cumulative": self.cumulative.tolist(),
            "dp": self.ecdf.tolist(),
            "smoothed": self.smoothed.tolist(),
            "n": self.n,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "noise": self.noise,
            "servers": self.servers,
            "bytes": self.bytes,
            "seconds": self.seconds,
        }


@dataclass
class CountsRelease:
    """Noisy group counts (Alg. 2 lines 7-9): ``values[series]`` has one entry per group."""

    dataset: str
    cuts: np.ndarray
    values: dict[str, np.ndarray]
    epsilon_per_value: float
    epsilon: float
    delta: float
    bytes: dict = field(default_factory=dict)


@dataclass
class ROCRelease:
    """A private ROC curve (Sec. 5.1): two eps/2 ECDFs, smoothed, turned into (FPR, TPR) points.

    ``auc``: the plug-in U^ / (n^_pos n^_neg) of the raw releases (unbiased
    numerator; :func:`pairwise.dp.ecdf_intervals.auc_estimate`), with its
    ``auc_interval`` at ``alpha`` (None beyond 2^10 thresholds, see
    ``auc_interval_method``).  ``auc_smoothed``: the trapezoids under the
    smoothed curve (the service's AUC before issue 25), biased towards 1/2
    when the noise is large (``benchmarks/RESULTS.md``).
    """

    fpr: np.ndarray
    tpr: np.ndarray
    auc: float
    positives: ECDFRelease
    negatives: ECDFRelease
    epsilon: float
    delta: float
    auc_smoothed: float = float("nan")
    auc_interval: tuple[float, float] | None = None
    auc_interval_method: str = ""
    alpha: float = 0.05

    def as_dict(self) -> dict:
        return {
            "fpr": self.fpr.tolist(),
            "tpr": self.tpr.tolist(),
            "auc": self.auc,
            "auc_interval": None if self.auc_interval is None else list(self.auc_interval),
            "auc_interval_method": self.auc_interval_method,
            "auc_smoothed": self.auc_smoothed,
            "alpha": self.alpha,
            "epsilon": self.epsilon,
            "delta": self.delta,
        }


@dataclass
class HLRelease:
    """Algorithm 2's output over the servers: the statistic and everything it published."""

    statistic: float
    cuts: np.ndarray
    o1: np.ndarray
    e1: np.ndarray
    o0: np.ndarray
    e0: np.ndarray
    epsilon: float
    epsilon_prime: float
    delta: float
    ecdf: ECDFRelease


def roc_points(cum_pos, cum_neg, higher_is_positive: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """ROC points from cumulative class counts at increasing thresholds (last entry = class total).

    ``higher_is_positive``: a score above the threshold predicts the positive
    class, TPR(t) = 1 - F_pos(t), FPR(t) = 1 - F_neg(t), traversed from the
    highest threshold ((0, 0)) down to "everything positive" ((1, 1)).
    Otherwise the paper's convention TPR = F_pos(t), FPR = F_neg(t).  The
    area under the curve (trapezoids) is P[s_pos > s_neg] + P[tie]/2 for
    exact counts.
    """
    p = np.asarray(cum_pos, dtype=float)
    q = np.asarray(cum_neg, dtype=float)
    if p[-1] <= 0 or q[-1] <= 0:
        raise ECDFError(
            "the ROC curve needs a positive total of positives and of negatives "
            "(the noisy totals are not positive: raise epsilon)"
        )
    fp, fn = p / p[-1], q / q[-1]
    if higher_is_positive:
        tpr = np.concatenate([1.0 - fp[::-1], [1.0]])
        fpr = np.concatenate([1.0 - fn[::-1], [1.0]])
    else:
        tpr = np.concatenate([[0.0], fp])
        fpr = np.concatenate([[0.0], fn])
    return fpr, tpr


class ECDFQuerier:
    """The querier: releases noisy ECDFs (and applications) from the m servers."""

    def __init__(
        self, servers, *, timeout: float = 300.0, connect_timeout: float = 5.0, tls=None, insecure: bool = False
    ) -> None:
        """``tls``: this querier's :class:`pairwise.mpc.tls.TLSConfig` (a ``querier`` certificate), or None
        for plaintext (loopback only unless ``insecure``)."""
        self.servers = parse_servers(servers)
        self.tls, self.insecure = tls, bool(insecure)
        self.m = len(self.servers)
        if not timeout > 0 or not connect_timeout > 0:
            raise ValueError("timeouts must be positive")
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)

    # ------------------------------------------------------------------ validation (before any connection)
    def _check(
        self, *, series=None, thresholds=None, grid_bits=None, mechanism="paper", smoothing=2, tolerate=0
    ) -> None:
        """Querier-side checks of a release's public parameters: a bad request never reaches a server,
        so nothing is reserved or charged (the servers check again before they charge).  Raises
        :class:`QueryRefused`, as a server would."""
        if mechanism not in MECHANISMS:
            raise QueryRefused(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        if smoothing not in (None, 1, 2):
            raise QueryRefused(f"smoothing must be None, 1 or 2 (Eq. 3's p), got {smoothing!r}")
        if not is_int(tolerate) or not 0 <= tolerate < self.m or (self.m == 2 and tolerate):
            raise QueryRefused(f"tolerate must be an integer in [0, m) (0 for two servers), got {tolerate!r}")
        if grid_bits is not None:
            check_int(grid_bits, "grid_bits", lo=1, hi=MAX_GRID_BITS, error=QueryRefused)
        if series is not None and (
            not series or len(set(series)) != len(series) or any(not isinstance(x, str) or not x for x in series)
        ):
            raise QueryRefused(f"series must be distinct non-empty names, got {series!r}")
        if thresholds is not None:
            t = np.asarray(thresholds)
            if t.size == 0 or not np.issubdtype(t.dtype, np.integer) or (t < 0).any():
                raise QueryRefused("thresholds must be a non-empty list of non-negative grid indices")
            top = (1 << int(grid_bits)) - 1 if grid_bits is not None else None
            if top is not None and (t > top).any():
                raise QueryRefused(f"thresholds must be grid indices in [0, {top}] for grid_bits {grid_bits}")

    # ------------------------------------------------------------------ plumbing
    def _open(self) -> list:
        return connect_all(
            self.servers, ROLE_QUERIER, self.connect_timeout, self.timeout, tls=self.tls, insecure=self.insecure
        )

    def _call(self, j: int, ch, msg: dict | None) -> dict:
        return call(self.servers, j, ch, msg, self.timeout)

    def _ok(self, j: int, ch, msg: dict | None) -> dict:
        return call_ok(self.servers, j, ch, msg, self.timeout)

    def status(self, dataset: str | None = None) -> list[dict]:
        """Each server's view of ``dataset`` (clients, series, budget, spent) or of all its datasets.

        For one dataset, the servers' ledgers are made to agree first (each
        adopts the charges only another server recorded, e.g. after a crash
        in the middle of a release), so ``spent`` is the same everywhere.
        """
        chans = self._open()
        try:
            msg = StatusRequest(dataset).to_json()
            out = [self._ok(j, ch, msg) for j, ch in enumerate(chans)]
            if dataset is not None and len({r["info"]["ledger"] for r in out}) > 1:
                self._reconcile(chans, dataset)
                out = [self._ok(j, ch, msg) for j, ch in enumerate(chans)]
            return out
        finally:
            for ch in chans:
                ch.close()

    def repair(self, dataset: str, *, dry_run: bool = False) -> list[dict]:
        """Make the servers hold the same uploads of ``dataset`` again, by dropping the uploads that not
        every server committed (an upload or append interrupted between the servers' commits).

        Refused, with nothing dropped, if a server does not hold the dataset
        at all (a lost state is not repaired by deleting the other servers'
        clients) or if the servers have no upload in common.  Each server
        checks with the others itself before it drops an upload
        (:meth:`pairwise.protocols.ecdf.handlers.Session.drop_upload`): one
        that every server holds is refused, whoever asks.  Charges are
        kept: every ledger entry stays.  Returns per server ``{"server_id",
        "dropped": [upload ids], "clients"}`` (``clients`` after the repair;
        with ``dry_run`` nothing is dropped and ``clients`` is today's count).
        Run it when no upload to the dataset is in progress: an upload still
        committing on one server looks the same as an interrupted one.
        """
        chans = self._open()
        try:
            held = [self._ok(j, ch, UploadsRequest(dataset).to_json()) for j, ch in enumerate(chans)]
            sets = [set(r["uploads"]) for r in held]
            common = set.intersection(*sets) if sets else set()
            if not common:
                raise DatasetError(
                    f"the servers hold no upload of {dataset!r} in common: this is not an interrupted "
                    "commit; upload the data again under a new dataset id (it draws from the same data owner's budget, which a new id does not renew)"
                )
            out = []
            for j, (ch, r) in enumerate(zip(chans, held)):
                extra = [u for u in r["uploads"] if u not in common]
                clients = r["clients"]
                for u in [] if dry_run else extra:
                    clients = self._ok(j, ch, DropUploadRequest(dataset, u, tuple(self.servers)).to_json())["clients"]
                out.append({"server_id": int(r["server_id"]), "dropped": extra, "clients": int(clients)})
            return out
        finally:
            for ch in chans:
                ch.close()

    def holders(self, dataset: str) -> list[bool]:
        """Whether each server holds a dataset of this id."""
        chans = self._open()
        try:
            out = []
            for j, ch in enumerate(chans):
                r = self._call(j, ch, StatusRequest(dataset).to_json())
                if not r.get("ok") and r.get("code") != "unknown":
                    raise_refusal(server_label(self.servers, j), r)
                out.append(bool(r.get("ok")))
            return out
        finally:
            for ch in chans:
                ch.close()

    def _reconcile(self, chans: list, dataset: str) -> None:
        """Make every server's ledger of ``dataset`` the union of all of them, each release id at its largest
        charge on any server (charges are only ever added or raised)."""
        have: list[dict[str, Fraction]] = []
        for j, ch in enumerate(chans):
            entries: dict[str, Fraction] = {}
            while True:
                r = self._ok(j, ch, LedgerRequest(dataset, len(entries)).to_json())
                entries.update((rid, Fraction(eps)) for rid, eps in r["entries"])
                if not r.get("more") or not r["entries"]:
                    break
            have.append(entries)
        union: dict[str, Fraction] = {}
        for entries in have:
            for rid, eps in entries.items():
                union[rid] = max(eps, union.get(rid, eps))
        for j, ch in enumerate(chans):
            missing = [(rid, eps) for rid, eps in sorted(union.items()) if have[j].get(rid, 0) < eps]
            for k in range(0, len(missing), LEDGER_PAGE):
                self._ok(j, ch, AdoptRequest(dataset, tuple(missing[k : k + LEDGER_PAGE])).to_json())

    def _mismatch(self, dataset: str, replies: list[dict]) -> DatasetMismatch:
        views = []
        for j, r in enumerate(replies):
            if r.get("ok"):
                views.append(
                    f"{server_label(self.servers, j)} holds {r['clients']} clients (digest {r['digest'][:12]})"
                )
            else:
                views.append(f"{server_label(self.servers, j)}: {r.get('error', 'refused')}")
        return DatasetMismatch(
            f"dataset {dataset!r} differs between the servers: "
            + "; ".join(views)
            + ". The release is refused and nothing was charged. The servers hold different uploads under this "
            "id: after an upload interrupted between the servers' commits, `pairwise ecdf repair` drops the "
            "uploads not every server holds (ECDFQuerier.repair); after a server's state was lost or replaced, "
            "upload the data again under a new dataset id (it draws from the same data owner's budget, which a new id does not renew)"
        )

    def _shared_cluster(self, replies: list[dict]) -> str:
        """Why the release must stop if two servers evaluate their keys on one Dask cluster, else ''."""
        seen: dict[str, int] = {}
        for j, r in enumerate(replies):
            cid = r.get("cluster_id") if r.get("ok") else None
            if not cid:
                continue
            if cid in seen:
                return (
                    f"{server_label(self.servers, seen[cid])} and {server_label(self.servers, j)} evaluate their "
                    f"keys on one Dask cluster (scheduler {cid}): a worker holding both servers' key shares "
                    "could reconstruct the clients' values. The release is refused and nothing was charged; "
                    "give each server a cluster of its own (ecdf serve --cluster local, or its own scheduler)"
                )
            seen[cid] = j
        return ""

    def _prepare(self, chans: list, dataset: str, request: PrepareRequest) -> list[dict]:
        """Prepare on every server until all agree on the dataset; returns their replies.

        Dataset digests that differ are retried a few times (an append may be
        committed on one server and not yet on another), then refused with
        :class:`DatasetMismatch`.  Ledgers that differ are reconciled once
        (every reservation released first), then the release proceeds: each
        server has checked its own budget, so agreement is not needed for
        safety, only for consistent reports.
        """
        mismatches, reconciled = 0, False
        while True:
            prep = replace(
                request, rid=os.urandom(12).hex(), dataset=dataset, servers=tuple((h, p) for h, p in self.servers)
            ).to_json()
            for j, ch in enumerate(chans):
                try:
                    send_json(ch, prep)
                except ChannelError as exc:
                    raise ServerUnavailable(
                        f"{server_label(self.servers, j)} failed during the request: {exc}"
                    ) from exc
            replies = [self._call(j, ch, None) for j, ch in enumerate(chans)]
            ok = [bool(r.get("ok")) for r in replies]
            shared = self._shared_cluster(replies)
            if shared:
                for j, ch in enumerate(chans):
                    if ok[j]:
                        self._call(j, ch, AbortRequest().to_json())
                raise QueryRefused(shared)
            same = all(ok) and len({r["digest"] for r in replies}) == 1
            if same and (reconciled or len({r["ledger"] for r in replies}) == 1):
                return replies
            for j, ch in enumerate(chans):  # release every reservation before deciding what to do
                if ok[j]:
                    self._call(j, ch, AbortRequest().to_json())
            if same:
                self._reconcile(chans, dataset)
                reconciled = True
                continue
            unknown = [j for j, r in enumerate(replies) if not ok[j] and r.get("code") == "unknown"]
            refused = [j for j in range(len(chans)) if not ok[j] and j not in unknown]
            if refused or len(unknown) == len(chans):
                j = (refused or unknown)[0]
                raise_refusal(server_label(self.servers, j), replies[j])
            if mismatches == PREPARE_RETRIES:
                raise self._mismatch(dataset, replies)
            time.sleep(0.25 * 2**mismatches)
            mismatches += 1

    def release(
        self, dataset: str, request: PrepareRequest | dict, progress=None
    ) -> tuple[np.ndarray, list[dict], dict]:
        """Prepare / compare / go on every server; returns (combined int64 values, headers, info).

        ``request``: the release's :class:`pairwise.protocols.ecdf.ops.PrepareRequest` (its ``rid``,
        ``dataset`` and ``servers`` are filled in per attempt), or its JSON fields as a dict.
        ``progress(done, total)``: the ``m + 2`` stages (module docstring).
        """
        if isinstance(request, dict):
            request = PrepareRequest.from_json(dict(request, op="prepare", rid="0" * 24, dataset=dataset))
        stages = self.m + 2
        if progress:
            progress(0, stages)
        chans = self._open()
        t0 = time.perf_counter()
        try:
            replies = self._prepare(chans, dataset, request)
            if progress:
                progress(1, stages)
            info = replies[0]["info"]
            if self.m == 2:  # server 0 reaches server 1 (and checks who it is) before anything is charged
                linked = self._call(0, chans[0], LinkRequest().to_json())
                if not linked.get("ok"):
                    for j, ch in enumerate(chans):
                        self._call(j, ch, AbortRequest().to_json())
                    raise_refusal(server_label(self.servers, 0), linked)
            for j, ch in enumerate(chans):
                try:
                    send_json(ch, GoRequest().to_json())
                except ChannelError as exc:
                    raise ServerUnavailable(
                        f"{server_label(self.servers, j)} failed during the request: {exc}"
                    ) from exc
            if progress:
                progress(2, stages)
            heads, arrays = [], []
            for j, ch in enumerate(chans):
                h = self._ok(j, ch, None)
                dt = np.int64 if h["encoding"] == "values" else np.uint64
                try:
                    arrays.append(ch.recv_array(dt, int(h["count"])))
                except ChannelError as exc:
                    raise ServerUnavailable(
                        f"{server_label(self.servers, j)} failed sending its result: {exc}"
                    ) from exc
                heads.append(h)
                if progress:
                    progress(3 + j, stages)
            l = int(heads[0]["output_bits"])
            if heads[0]["encoding"] == "values":
                for j in range(1, len(arrays)):
                    if not np.array_equal(arrays[j], arrays[0]):
                        raise QueryRefused(f"servers 0 and {j} opened different noisy values (inconsistent state)")
                combined = arrays[0].astype(np.int64)
            else:
                total = np.zeros(arrays[0].size, dtype=np.uint64)
                for a in arrays:
                    total += a
                combined = to_signed(reduce_mod(total, l), l)
            st = [ch.stats() for ch in chans]
            meta = {
                "info": info,
                "clients": int(heads[0]["clients"]),
                "seconds": time.perf_counter() - t0,
                "bytes": {
                    "querier": sum(s["bytes_sent"] + s["bytes_received"] for s in st),
                    # the peer channel is counted by both servers; report it once
                    "servers": max(int(h.get("peer_bytes", 0)) for h in heads),
                },
            }
            return combined, heads, meta
        finally:
            for ch in chans:
                ch.close()

    # ------------------------------------------------------------------ ECDF
    def ecdf(
        self,
        dataset: str,
        epsilon,
        *,
        series: str = "all",
        thresholds=None,
        grid_bits: int | None = None,
        mechanism: str = "paper",
        smoothing: int | None = 2,
        tolerate: int = 0,
        progress=None,
    ) -> ECDFRelease:
        """Release the noisy ECDF of ``series`` at grid ``thresholds`` (default: the whole grid).

        ``progress(done, total)``: the request's stages (module docstring).
        """
        return self.ecdf_many(
            dataset,
            epsilon,
            [series],
            thresholds=thresholds,
            grid_bits=grid_bits,
            mechanism=mechanism,
            smoothing=smoothing,
            tolerate=tolerate,
            progress=progress,
        )[0]

    def ecdf_many(
        self,
        dataset: str,
        epsilon_each,
        series: list[str],
        *,
        thresholds=None,
        grid_bits: int | None = None,
        mechanism: str = "paper",
        smoothing: int | None = 2,
        tolerate: int = 0,
        progress=None,
    ) -> list[ECDFRelease]:
        """Release several series' ECDFs in one request (epsilon_each per series, one budget check).

        The servers reserve len(series) * epsilon_each at once, so either all
        series are released or none is (and, for m = 2, all their noise comes
        from one garbled-circuit session).  ``progress(done, total)``: the
        request's stages (module docstring).
        """
        eps = parse_epsilon(epsilon_each)
        series = list(series)
        self._check(
            series=series,
            thresholds=thresholds,
            grid_bits=grid_bits,
            mechanism=mechanism,
            smoothing=smoothing,
            tolerate=tolerate,
        )
        req = PrepareRequest(
            kind="ecdf",
            rid="",
            dataset=dataset,
            series=tuple(series),
            epsilon=eps,
            mechanism=mechanism,
            grid_bits=None if grid_bits is None else int(grid_bits),
            tolerate=int(tolerate),
            thresholds=None if thresholds is None else tuple(int(t) for t in np.asarray(thresholds).ravel()),
        )
        vals, heads, meta = self.release(dataset, req, progress)
        h = heads[0]
        g = int(h["grid_bits"])
        n = meta["clients"]
        L, N = g, 1 << g
        info = meta["info"]
        nb = int(info["domain_bits"])
        out = []
        start = 0
        laws = h.get("noise_laws")
        for k, name in enumerate(h["series"]):
            var = float(h["variances"][k])
            law = None if laws is None else NoiseLaw(float(laws[k]["a"]), float(laws[k]["shape"]), float(laws[k]["tv"]))
            if mechanism == "paper":
                thr = np.array(h["thresholds"], dtype=np.int64)
                cum = vals[start : start + thr.size].astype(float)
                start += thr.size
                nmap = None if law is None else NoiseMap(mechanism, g, law)
            else:
                rad = tuple(int(r) for r in h.get("radices", [2] * L))
                levels, variances = [], []
                for w in level_sizes(rad)[: int(h["levels"][k])]:
                    levels.append(vals[start : start + w].astype(float))
                    variances.append(var)
                    start += w
                if h["root_public"][k]:
                    levels.append(np.array([float(n)]))
                    variances.append(0.0)
                full = consistent_prefix(levels, variances, rad)
                thr = np.arange(N) if thresholds is None else np.unique(np.asarray(thresholds, dtype=np.int64))
                cum = full[thr]
                nmap = None if law is None else NoiseMap(mechanism, g, law, rad, bool(h["root_public"][k]))
            sm = cum.astype(float) if smoothing is None else smooth_ecdf(cum, smoothing, lower=0.0, upper=float(n))
            out.append(
                ECDFRelease(
                    dataset,
                    name,
                    mechanism,
                    nb,
                    g,
                    thr,
                    grid_points(nb, g)[thr],
                    cum,
                    n,
                    float(Fraction(h["epsilon_per_series"])),
                    float(h["deltas"][k]),
                    var,
                    np.asarray(sm, dtype=float),
                    str(h["noise"]),
                    self.m,
                    meta["bytes"],
                    meta["seconds"],
                    [dict(x.get("timings", {}), total=x.get("seconds")) for x in heads],
                    nmap,
                )
            )
        return out

    def counts(
        self,
        dataset: str,
        cuts,
        epsilon_per_value,
        series,
        *,
        grid_bits: int | None = None,
        tolerate: int = 0,
        progress=None,
    ) -> CountsRelease:
        """Noisy counts of the groups (b_{q-1}, b_q] of grid indices (b_0 = -1, b_Q = last) per series.

        ``progress(done, total)``: the request's stages (module docstring).
        """
        eps_v = parse_epsilon(epsilon_per_value, "epsilon_per_value")
        series = list(series)
        c = np.asarray(cuts)
        if c.size and (not np.issubdtype(c.dtype, np.integer) or (c < 0).any() or (np.diff(c.ravel()) < 0).any()):
            raise ECDFError("cuts must be non-decreasing non-negative grid indices")
        self._check(series=series, grid_bits=grid_bits, tolerate=tolerate)
        cuts = [int(x) for x in c.ravel()]
        req = PrepareRequest(
            kind="counts",
            rid="",
            dataset=dataset,
            series=tuple(series),
            cuts=tuple(cuts),
            epsilon_per_value=eps_v,
            grid_bits=None if grid_bits is None else int(grid_bits),
            tolerate=int(tolerate),
        )
        vals, heads, meta = self.release(dataset, req, progress)
        Q = len(cuts) + 1
        out = {s: vals[i * Q : (i + 1) * Q].astype(float) for i, s in enumerate(series)}
        return CountsRelease(
            dataset,
            np.array(cuts),
            out,
            float(eps_v),
            float(Fraction(heads[0]["epsilon"])),
            float(heads[0]["delta"]),
            meta["bytes"],
        )

    # ------------------------------------------------------------------ applications
    def roc(
        self,
        dataset: str,
        epsilon,
        *,
        smoothing: int = 2,
        higher_is_positive: bool = True,
        grid_bits: int | None = None,
        mechanism: str = "paper",
        tolerate: int = 0,
        progress=None,
        alpha: float = 0.05,
    ) -> ROCRelease:
        """Sec. 5.1: release the positives' and the negatives' ECDFs with eps/2 each, then the ROC curve.

        One request for both classes; ``progress(done, total)``: its stages (module docstring).
        The AUC is the plug-in estimate with its (1 - ``alpha``) interval (:class:`ROCRelease`).
        """
        alpha = check_alpha(alpha)
        eps = parse_epsilon(epsilon)
        parse_epsilon(eps / 2, "epsilon / 2 (each class)")
        pos, neg = self.ecdf_many(
            dataset,
            eps / 2,
            ["pos", "neg"],
            grid_bits=grid_bits,
            mechanism=mechanism,
            smoothing=smoothing,
            tolerate=tolerate,
            progress=progress,
        )
        fpr, tpr = roc_points(pos.smoothed_counts, neg.smoothed_counts, higher_is_positive)
        above, below = (pos, neg) if higher_is_positive else (neg, pos)
        n = pos.n
        est = auc_estimate(above.cumulative, below.cumulative, n)
        iv, why = None, "not computed: the servers did not state the noise law"
        if above.noise_map is not None and below.noise_map is not None:
            why = auc_method(above.noise_map, below.noise_map, alpha)
            r = roc_auc_interval(above.cumulative, below.cumulative, n, above.noise_map, below.noise_map, alpha)
            if r is not None:
                iv, why = r.interval, r.method
        return ROCRelease(
            fpr, tpr, est, pos, neg, float(eps), pos.delta + neg.delta, trapezoid_auc(fpr, tpr), iv, why, alpha
        )

    def hosmer_lemeshow(
        self, dataset: str, epsilon, *, Q: int = 10, smoothing: int = 2, tolerate: int = 0, progress=None
    ) -> HLRelease:
        """Algorithm 2 over the servers (dataset uploaded with labels and probabilities).

        eps' = eps / (L + 9) with L the dataset's domain bits (the grid of the
        probabilities): line 5 releases the ECDF of the binned probabilities
        with (L + 1) eps' (Theorem 3.1: node scale 1/eps') and cuts it at
        q/Q by Algorithm 1; lines 7-9 release O1, O0 (counts) and E1, E0
        (sums of probabilities on a 2^-b grid) of every group with eps' per
        value -- 8 eps' in total, as in Theorem 5.1.  ``progress(done, total)``:
        the stages of both requests, as one run (module docstring).
        """
        eps = parse_epsilon(epsilon)
        check_int(Q, "Q", lo=2, hi=1024, error=ECDFError)
        self._check(smoothing=smoothing, tolerate=tolerate)
        status = self.status(dataset)
        info = status[0]["info"]
        if "e1" not in info["series"]:
            raise ECDFError(f"dataset {dataset!r} was not uploaded with probabilities and labels")
        L = int(info["domain_bits"])
        scale = float(info["series"]["e1"])
        eps_p = eps / (L + 9)
        if L > MAX_GRID_BITS:
            raise ECDFError(f"Hosmer-Lemeshow needs the whole grid: domain bits {L} > {MAX_GRID_BITS}")
        for st in status:  # two releases: refuse before the first if the second could not be afforded
            i = st["info"]
            left = Fraction(i["budget"]) - Fraction(i["spent"]) - Fraction(i["reserved"])
            if left < eps:
                raise BudgetExceeded(
                    f"server {st['server_id']}: dataset {dataset!r} has {float(left):g} of its "
                    f"privacy budget left; Hosmer-Lemeshow needs {float(eps):g}"
                )
        rel = self.ecdf(
            dataset,
            (L + 1) * eps_p,
            series="all",
            smoothing=smoothing,
            tolerate=tolerate,
            progress=progress_part(progress, 0, 2),
        )
        cuts = np.sort(np.asarray(inverse_ecdf(rel.smoothed, np.arange(1, Q) / Q), dtype=np.int64))
        cr = self.counts(
            dataset, cuts, eps_p, ["pos", "neg", "e1", "e0"], tolerate=tolerate, progress=progress_part(progress, 1, 2)
        )
        o1, o0 = cr.values["pos"], cr.values["neg"]
        e1, e0 = cr.values["e1"] / scale, cr.values["e0"] / scale
        stat = hosmer_lemeshow_statistic(o1, e1, o0, e0)
        return HLRelease(stat, cuts, o1, e1, o0, e0, rel.epsilon + cr.epsilon, float(eps_p), rel.delta + cr.delta, rel)
