"""The upload requests of one ECDF server connection: stage the keys or shares of an upload, then commit or discard.

What it does
    :class:`UploadHandlers` is a mixin of :class:`pairwise.protocols.ecdf.handlers.Session`
    (ops ``upload`` / ``pointwise``, then ``commit`` or ``discard``; the steps
    are listed in :mod:`pairwise.protocols.ecdf.handlers`):

    * :meth:`UploadHandlers.op_upload`: the header claims the dataset (or a
      new round of it), reserves the most disk its chunks can take, then reads
      the chunks one at a time -- ids, key lengths, keys (or the pointwise
      share words) -- and stages the clients it accepts, replying with the
      rejected positions;
    * ``vdpf`` keys are checked by both servers together, chunk by chunk
      (:mod:`pairwise.protocols.ecdf.validation`);
    * :meth:`UploadHandlers.op_commit` drops the union of the servers'
      rejected positions and commits the rest in one transaction;
      :meth:`UploadHandlers.discard` forgets a staged upload.

Security model
    See :mod:`pairwise.protocols.ecdf.server`.  Every frame size is bounded by
    the header before it is read (:func:`pairwise.protocols.ecdf.wire.chunk_clients`),
    and a malformed key rejects its client, not the upload.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pairwise.mpc.errors import ProtocolError

from .dataset import Dataset, split_keys
from .ops import CommitRequest, DiscardRequest, PointwiseRequest, UploadRequest
from .peers import open_verify_link
from .shares import KIND_VECTOR, parse_keys
from .staging import StagedUpload
from .storage import ChunkRecord, DatasetRecord
from .validation import VDPFSeries, check_chunk, check_memory_bound, layout_for
from .wire import (
    UPLOAD_FRAME_MAX,
    DatasetError,
    DatasetExists,
    QueryRefused,
    key_lengths,
    send_json,
)

if TYPE_CHECKING:
    from pairwise.mpc.channel import TCPChannel

    from .handlers import ServerState

__all__ = ["UploadHandlers"]

_MAX_REJECT_REPORT = 100


def _reject_report(rejected: list[tuple[int, str]]) -> list[dict]:
    return [{"client": c, "reason": why} for c, why in rejected[:_MAX_REJECT_REPORT]]


_WARM = threading.Event()


def _warm_up_check() -> None:
    """Load the compiled VDPF check loops (numba, about 40 MB) in the background, once per process, when the
    first verified upload arrives: while its header round trip runs, not at start (a server that never sees
    a vdpf upload, e.g. one of three, never loads them)."""
    if not _WARM.is_set():
        _WARM.set()
        from pairwise.fss.vdpf import compiled_kernels

        threading.Thread(target=compiled_kernels, daemon=True, name="ecdf-warm-up").start()


class UploadHandlers:
    """Mixin of :class:`pairwise.protocols.ecdf.handlers.Session`: its upload requests (module docstring)."""

    if TYPE_CHECKING:  # provided by the session
        state: ServerState
        ch: TCPChannel
        owner: str
        staged: StagedUpload | None
        sid: int
        on_channel: Callable[[Any], None]

    # ------------------------------------------------------------------ uploads
    def op_upload(self, req: UploadRequest) -> None:
        st = self.state
        pointwise = isinstance(req, PointwiseRequest)
        name, scheme, m, n, l = req.dataset, req.scheme, req.m, req.domain_bits, req.output_bits
        series = req.series_weights
        if req.server_id != self.sid:
            raise QueryRefused(
                f"these keys are for server {req.server_id}, but this is server {self.sid}: "
                "list the servers in the order of their --server-id"
            )
        if m != st.num_servers:  # keys of a kind this server set does not use (mshare vectors on two servers)
            raise QueryRefused(
                f"this upload is for m = {m} servers, but server {self.sid} is one of {st.num_servers} "
                f"(ecdf serve --num-servers): "
                + (
                    "two servers take vdpf keys, which both servers check before they accept a client"
                    if st.num_servers == 2
                    else f"list all {st.num_servers} servers"
                )
            )
        if scheme != "vdpf" and not st.accept_unverified:  # a client the servers cannot check moves any count
            raise QueryRefused(
                f"this server accepts only uploads it can check (vdpf keys, two servers), not {scheme!r}: "
                "the servers cannot check such clients, so one of them could move every released count by "
                "any amount; start every server with --accept-unverified to accept them anyway"
            )
        upload_id, append, meta = req.upload_id, req.append, req.meta
        if self.staged is not None:
            raise QueryRefused("an upload is already staged on this connection")
        g = thr = rnd = None
        if pointwise:
            g, rnd = req.grid_bits, req.round
            thr = np.array(req.thresholds, dtype=np.int64)
            lens_allowed: tuple[int, ...] = ()
        else:
            lens_allowed = key_lengths(scheme, n, l, series)
        chunks = list(req.chunks)
        params = (scheme, m, n, l, tuple(sorted(series.items())))
        with st.lock:
            ds = st.datasets.get(name)
            create = replace_round = False
            if ds is None:
                if append:
                    raise DatasetError(f"server {self.sid} has no dataset {name!r} to append to")
                if name in st.claims:
                    raise DatasetError(f"dataset {name!r} is being created by another upload right now")
                record = DatasetRecord(
                    name,
                    scheme,
                    m,
                    n,
                    l,
                    dict(series),
                    st.budget_for(name),
                    meta,
                    grid_bits=g,
                    thresholds=None if thr is None else thr.tolist(),
                    round=rnd,
                )
                create = True
            else:
                if ds.params() != params:
                    r = ds.record
                    raise DatasetError(
                        f"dataset {name!r} exists with scheme {r.scheme}, m={r.m}, domain bits {r.n}, "
                        f"output bits {r.l}, series {r.series}; this upload does not match"
                    )
                if pointwise and rnd != ds.record.round:
                    if append:
                        raise DatasetError(
                            f"round {rnd!r} is not the current round {ds.record.round!r} of "
                            f"{name!r}: append only adds clients to the current round"
                        )
                    if name in st.claims:
                        raise DatasetError(f"dataset {name!r} is being replaced by another upload right now")
                    record = replace(ds.record, grid_bits=g, thresholds=thr.tolist(), round=rnd, meta=meta)
                    replace_round = True
                elif not append:
                    raise DatasetExists(
                        f"dataset {name!r} already exists on server {self.sid} ({ds.count} clients; datasets are "
                        "sealed once uploaded): release over it without uploading (ecdf query), or append new "
                        "clients explicitly (--append). "
                        + (
                            "The same people uploaded under another dataset id draw from the same data owner's "
                            "budget (--budget-per-owner): a new id does not renew it"
                            if st.ledger.owner_budget is not None
                            else "This server has no per-owner budget (--budget-per-owner none): a new dataset id "
                            "is for other people's data only, the same people under it would get a fresh budget"
                        )
                    )
                else:
                    record = ds.record
                    if meta and meta != (ds.record.meta or {}):
                        # e.g. another public domain: its clients would sit on another grid than the stored ones
                        raise DatasetError(
                            f"dataset {name!r} was uploaded with the public metadata {ds.record.meta or {}}; an "
                            f"append must declare the same (its clients must be quantized on the same public "
                            f"domain and grid), got {meta}"
                        )
                    if pointwise and (ds.record.grid_bits != g or ds.record.thresholds != thr.tolist()):
                        raise DatasetError(f"round {rnd!r} of {name!r} uses other thresholds")
            if create or replace_round:
                st.claims[name] = upload_id
        # claims on client ids: the live dataset for an append, a fresh one for a new dataset or round
        target = ds if ds is not None and not replace_round else Dataset(record, self.sid, new=True)
        staged = StagedUpload(
            upload_id,
            record,
            create,
            replace_round,
            dataset=target,
            live=ds,
            announced=sum(chunks),
            per_client=req.per_client(),
        )
        try:
            # the most this upload can stage, from its header alone: reserved before a single key is read
            bound = self._staged_bound(req, lens_allowed)
            st.staging.reserve(bound, self.sid)
            staged.reserved = bound
            staged.file = st.staging.open()
            if scheme == "vdpf":
                need = check_memory_bound(layout_for(series, n, l), max(chunks) * req.per_client())
                st.staging.reserve_check(need, self.sid)
                staged.check_reserved = need
                _warm_up_check()
            if scheme == "vdpf" and self.sid == 0:  # server 0 opens the upload's check with server 1 before "ready"
                staged.verify = self._verify_link(req)
        except BaseException:
            self._release(staged)
            raise
        self.staged = staged
        st.stage(name, upload_id, +1)
        staged.registered = True
        send_json(self.ch, {"ok": True, "ready": True})
        rejected: list[tuple[int, str]] = []
        rejected_pos: list[int] = []
        base = 0
        for k in chunks:
            if pointwise:
                bad = self._recv_pointwise(k, series, l, thr, base)
            elif scheme == "vdpf":
                bad = self._recv_verified(k, series, n, l, base, chunks)
            else:
                bad = self._recv_keys(k, series, scheme, m, n, l, lens_allowed, base)
            for pos, cid, why in bad:
                rejected.append((cid, why))
                rejected_pos.append(pos)
            base += k
        staged.rejected = np.array(rejected_pos, dtype=np.int64)
        if staged.check_reserved:  # checked: until the commit it holds only its histograms (2^n words per series)
            keep = 8 * (1 << n) * len(series)
            st.staging.release_check(staged.check_reserved - keep)
            staged.check_reserved = keep
        if staged.verify is not None:
            v = staged.verify
            st.log(
                f"upload {upload_id}: checked {sum(chunks)} clients' keys with {v.label} in "
                f"{staged.check_seconds:.2f} s ({v.waited:.2f} s of it waiting for that server), "
                f"{v.bytes()} bytes on the check channel"
            )
        send_json(
            self.ch,
            {
                "ok": True,
                "staged": True,
                "accepted": staged.accepted,
                "check_bytes": 0 if staged.verify is None else staged.verify.bytes(),
                "rejected_count": len(rejected),
                "rejected": _reject_report(rejected),
            },
        )
        self.ch.send_array(np.array(rejected_pos, dtype=np.uint64))

    def _staged_bound(self, req: UploadRequest, lens_allowed: tuple[int, ...]) -> int:
        """The most disk bytes ``req`` can stage: 16 bytes of id and position per client, plus its keys at their
        largest (``mshare``: a vector key only for the positions p = server id mod m, a seed key elsewhere)."""
        K, S = sum(req.chunks), len(req.series)
        if isinstance(req, PointwiseRequest):
            return 16 * K + 8 * K * S * len(req.thresholds)
        if req.scheme == "mshare":
            vec = max(0, (K - self.sid + req.m - 1) // req.m)
            return 16 * K + S * (vec * max(lens_allowed) + (K - vec) * min(lens_allowed))
        return 16 * K + S * K * max(lens_allowed)

    def _stage(self, ids: np.ndarray, ok: np.ndarray, reasons: dict[int, str], raw, base: int, histograms=None) -> list:
        """Claim the ids of the parsed-good clients and append them to the staged file.

        ``raw(rows)``: series -> (lens, bytes) of those rows; ``histograms(rows)`` (vdpf): add those rows to
        the upload's histograms.  Returns [(position, id, reason)] for the clients not staged.
        """
        staged = self.staged
        good = np.flatnonzero(ok)
        claimed, dup = staged.dataset.claim(ids[good], id(staged))
        for j, why in dup.items():
            reasons[int(good[j])] = why
        rows = good[claimed]
        if rows.size:
            staged.file.put(ids[rows], base + rows.astype(np.int64), raw(rows))
            staged.accepted += int(rows.size)
            if histograms is not None:
                histograms(rows)
        return [(base + i, int(ids[i]), reasons[i]) for i in sorted(reasons)]

    def _recv_key_frames(self, k, S, per_client):
        """One chunk's ids, key lengths (k, S) and keys (one bytes object per client and series, client-major).

        Honest keys fill at most ``k * per_client`` bytes, which the header's chunk bound keeps within
        UPLOAD_FRAME_MAX; the frame may use the rest of UPLOAD_FRAME_MAX, so a key of the wrong length is its
        client's problem (rejected when parsed), not the upload's.
        """
        ids = self.ch.recv_array(np.uint64, k)
        lens = self.ch.recv_array(np.uint32, (k, S)).astype(np.int64)
        limit = max(k * per_client, UPLOAD_FRAME_MAX)
        if int(lens.sum()) > limit:
            raise ProtocolError(
                f"a key frame of {int(lens.sum())} bytes exceeds the {limit} bytes of {k} clients' keys"
            )
        total = int(lens.sum())  # <= UPLOAD_FRAME_MAX (k per_client <= UPLOAD_FRAME_MAX by the chunk bound)
        data = self.ch.recv_frame(max_size=total)
        if len(data) != total:
            raise ProtocolError(f"key frame of {len(data)} bytes, announced {total}")
        return ids, lens, split_keys(lens.reshape(-1), bytes(data))

    def _recv_keys(self, k, series, scheme, m, n, l, lens_allowed, base):
        names = list(series)
        S = len(names)
        ids, lens, flat = self._recv_key_frames(k, S, S * max(lens_allowed))
        ok = np.ones(k, dtype=bool)
        reasons: dict[int, str] = {}
        for j, s in enumerate(names):
            shares, kept, bad = parse_keys(scheme, flat[j::S], party=self.sid, m=m, n=n, l=l)
            for i, why in bad.items():
                ok[i] = False
                reasons.setdefault(i, f"series {s}: {why}")
            if scheme == "mshare":  # the public rotation: this server holds vector keys at positions p = id mod m
                mine = (base + np.asarray(kept, dtype=np.int64)) % m == self.sid
                for i, vector, want in zip(kept, shares.kinds == KIND_VECTOR, mine):
                    if vector != want:
                        ok[i] = False
                        reasons.setdefault(
                            i,
                            f"series {s}: mshare key {i}: server {self.sid} holds the vector key "
                            f"of the clients at upload positions p = {self.sid} mod {m} and a seed "
                            f"key otherwise; position {base + i} sent a "
                            f"{'vector' if vector else 'seed'} key",
                        )
            del shares

        def raw(rows):
            return {s: (lens[rows, j], b"".join(flat[int(i) * S + j] for i in rows)) for j, s in enumerate(names)}

        return self._stage(ids, ok, reasons, raw, base)

    def _verify_link(self, req: UploadRequest):
        """Server 0: open this upload's check with server 1 (its configured address, else the uploader's list)."""
        st = self.state
        addr = st.peers.get(1) or (req.servers[1] if req.servers else None)
        if addr is None:
            raise QueryRefused(
                "server 0 does not know server 1's address to check the upload's keys with "
                "(configure --peer 1=HOST:PORT, or send the servers' list)"
            )
        link = open_verify_link(
            req.upload_id,
            req.chunks,
            tuple(addr),
            st.policy,
            connect_timeout=min(st.timeout, 10.0),
            timeout=st.timeout,
            tls=st.tls,
            insecure=st.insecure,
            dial=st.dial,
        )
        self.on_channel(link.ch)
        return link

    def _recv_verified(self, k, series, n, l, base, chunks):
        """One chunk of ``vdpf`` keys: parse, evaluate, compare digests with the other server, then stage
        the raw keys of the clients both servers accept (a release expands them again from storage)."""
        staged = self.staged
        if staged.verify is None:  # server 1: server 0 opened the check when it accepted the header
            staged.verify = self.state.hub.verify_link(staged.upload_id, chunks, "peer server 0")
            self.on_channel(staged.verify.ch)
        names = list(series)
        S = len(names)
        ids, lens, flat = self._recv_key_frames(k, S, staged.per_client)
        t0 = time.perf_counter()
        ok, reasons, shares = check_chunk(
            {s: flat[j::S] for j, s in enumerate(names)},
            layout_for(series, n, l),
            self.sid,
            staged.verify,
            staged.checked,
        )
        staged.check_seconds += time.perf_counter() - t0
        staged.checked += 1
        accepted = np.flatnonzero(ok)

        def raw(rows):
            return {s: (lens[rows, j], b"".join(flat[int(i) * S + j] for i in rows)) for j, s in enumerate(names)}

        def histograms(rows):  # the staged rows' part of the check's histograms (rows: among the accepted)
            taken = np.searchsorted(accepted, rows)
            for s, sh in shares.items():
                h = sh.take(taken).hist
                staged.hists[s] = h.copy() if s not in staged.hists else staged.hists[s] + h

        if staged.hists is None:
            staged.hists = {}
        return self._stage(ids, ok, reasons, raw, base, histograms)

    def _recv_pointwise(self, k, series, l, thr, base):
        names = list(series)
        ids = self.ch.recv_array(np.uint64, k)
        word = np.uint32 if l <= 32 else np.uint64  # shares travel as 4-byte words when they fit
        vals = self.ch.recv_array(word, (k, len(names), thr.size)).astype(np.uint64)
        bad = (vals > np.uint64((1 << l) - 1)).any(axis=(1, 2)) if l < 64 else np.zeros(k, bool)
        reasons = {int(i): f"share not below 2^{l}" for i in np.flatnonzero(bad)}

        def raw(rows):
            return {
                s: (np.zeros(0, np.int64), np.ascontiguousarray(vals[rows, j, :], dtype="<u8").tobytes())
                for j, s in enumerate(names)
            }

        return self._stage(ids, ~bad, reasons, raw, base)

    def op_commit(self, req: CommitRequest) -> None:
        st, staged = self.state, self.staged
        if staged is None or req.upload_id != staged.upload_id:
            raise QueryRefused("commit needs the upload staged on this connection")
        d = req.drop
        announced = staged.announced
        if not d <= announced:
            raise ProtocolError(f"drop count {d!r} out of range")
        drop = np.unique(self.ch.recv_array(np.uint64, d).astype(np.int64))
        if d and (drop.max() >= announced):
            raise ProtocolError("a dropped position lies outside the upload")
        self.staged = None
        # the clients this server staged and no server rejected
        kept = staged.accepted - int(np.setdiff1d(drop, staged.rejected, assume_unique=True).size)
        ids: list[np.ndarray] = []
        try:
            live = staged.live
            if live is not None and not staged.replace and live.record.round != staged.record.round:
                raise DatasetError(f"a new round of {staged.record.name!r} replaced the one this upload appends to")
            if kept:

                def records():  # one staged chunk in memory at a time
                    for c in staged.file.chunks():
                        c = c.drop(drop)
                        if c.ids.size:
                            ids.append(c.ids)
                            yield ChunkRecord(staged.upload_id, len(ids) - 1, c.ids, c.raw)

                st.storage.commit_upload(
                    staged.record,
                    staged.upload_id,
                    records(),
                    create=staged.create,
                    replace=staged.replace,
                    owner=self.owner,
                )
                target = staged.dataset if staged.create else live
                # vdpf: the check's histograms are the upload's shares, unless the commit drops clients this
                # server staged (another server rejected them); then the next release expands the stored keys
                hists = staged.hists if kept == staged.accepted else None
                target.add_upload(
                    staged.upload_id,
                    ids,
                    token=id(staged),
                    record=staged.record,
                    replace=staged.replace,
                    parsed=None
                    if hists is None
                    else {s: VDPFSeries(h, kept, staged.record.l) for s, h in hists.items()},
                )
                if staged.create:
                    st.ledger.load(staged.record.name)
                    with st.lock:
                        st.datasets[staged.record.name] = target
        finally:
            self._release(staged)
        ds = st.datasets.get(staged.record.name)
        what = "new round of" if staged.replace else ("new dataset" if staged.create else "append to")
        st.log(f"upload {staged.upload_id} ({what} {staged.record.name!r}): committed {kept} client(s)")
        send_json(
            self.ch,
            {
                "ok": True,
                "accepted": kept,
                "clients": 0 if ds is None else ds.count,
                "digest": None if ds is None else ds.digest(),
            },
        )

    def _release(self, staged: StagedUpload) -> None:
        """Forget a staged upload: its check channel, its claimed ids, its claim on a new dataset id, its disk and
        reserved bytes."""
        if staged.verify is not None:
            staged.verify.close()
        elif staged.record.scheme == "vdpf":
            self.state.hub.forget_link(staged.upload_id)
        staged.dataset.unclaim(id(staged))
        with self.state.lock:
            if self.state.claims.get(staged.record.name) == staged.upload_id:
                del self.state.claims[staged.record.name]
        if staged.file is not None:
            staged.file.close()
            staged.file = None
        if getattr(staged, "registered", False):
            self.state.stage(staged.record.name, staged.upload_id, -1)
            staged.registered = False
        self.state.staging.release(staged.reserved)
        staged.reserved = 0
        self.state.staging.release_check(staged.check_reserved)
        staged.check_reserved = 0

    def op_discard(self, req: DiscardRequest) -> None:
        self.discard()
        send_json(self.ch, {"ok": True})

    def discard(self) -> None:
        if self.staged is not None:
            staged, self.staged = self.staged, None
            self._release(staged)
