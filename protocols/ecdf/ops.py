"""The requests of the ECDF service: one frozen dataclass per operation, built by clients, parsed by servers.

What it does
    Every JSON control frame a client, querier or server sends to a server is
    one of the request types below (:data:`REQUESTS` maps the ``op`` to its
    type).  The sending side builds the dataclass and sends
    :meth:`Request.to_json`; the receiving side parses the frame with
    :func:`parse_request` (``from_json`` of the op's type), which checks every
    field for type and range -- a ``bool`` is never an integer -- before any
    handler runs, and raises the error the handlers always raised
    (:class:`pairwise.protocols.ecdf.wire.QueryRefused`,
    :class:`~pairwise.protocols.ecdf.wire.DatasetError`, or
    :class:`pairwise.mpc.errors.ProtocolError` for a frame that breaks the
    protocol).  The handlers then read typed fields, never ``req.get``.

    What depends on the server's state is checked by the handler, not here:
    that the keys are for *this* server, a dataset's own bounds (a release's
    grid bits are at most the dataset's domain bits, thresholds and cuts lie
    on that grid, ``tolerate`` is below the dataset's m), a commit's drop
    count against the clients it announced.

    ``to_json`` writes the keys in the order the clients always wrote them,
    so the bytes on the wire are those of every earlier version.

Security model
    Parsing is the first line of defence against a deviating peer: sizes
    that shape a later bulk frame (chunks, drop counts, key lengths) are
    bounded here, and nothing is allocated from an announced size
    (:mod:`pairwise.protocols.ecdf.wire`).  Nothing here is secret.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from pairwise.dp.validate import check_int, is_int
from pairwise.mpc.errors import ProtocolError

from .shares import MAX_GRID_BITS, MSHARE_MAX_BITS, ShareParameterError
from .wire import DatasetError, QueryRefused, UnknownDataset, chunk_clients, key_lengths, parse_epsilon

__all__ = [
    "LEDGER_PAGE",
    "MAX_CLIENTS",
    "MAX_SERIES",
    "MECHANISMS",
    "META_MAX",
    "REQUESTS",
    "AbortRequest",
    "AdoptRequest",
    "CommitRequest",
    "DiscardRequest",
    "DropUploadRequest",
    "GoRequest",
    "HoldsRequest",
    "LedgerRequest",
    "LinkRequest",
    "PeerHello",
    "VerifyHello",
    "PointwiseRequest",
    "PrepareRequest",
    "Request",
    "SeriesSpec",
    "StatusRequest",
    "UploadRequest",
    "UploadsRequest",
    "check_rid",
    "parse_peer_request",
    "parse_request",
    "parse_thresholds",
]

#: Clients per upload request.
MAX_CLIENTS = 10_000_000
#: Largest public metadata object of a dataset (JSON bytes).
META_MAX = 4096
#: Series per dataset.
MAX_SERIES = 8
#: ECDF release mechanisms: Theorem 3.1's path sums, the binary node tree (Hay et al.), the k-ary node tree.
MECHANISMS = ("paper", "hierarchical", "kary")
#: Ledger entries per ``ledger``/``adopt`` message.
LEDGER_PAGE = 2000
#: Largest epsilon of one adopted ledger entry.
ADOPT_MAX_EPSILON = Fraction(1 << 40)

_NAME = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
_SERIES = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_HEX_ID = re.compile(r"^[0-9a-f]{16,64}$")


# ----------------------------------------------------------------------------- field checks
def _int_in(obj: dict, key: str, lo: int, hi: int) -> int:
    return check_int(obj.get(key), key, lo=lo, hi=hi, error=QueryRefused)


def _hex_id(v: object, what: str) -> str:
    if not isinstance(v, str) or not _HEX_ID.match(v):
        raise QueryRefused(f"{what} must be 16-64 lowercase hex digits")
    return v


def check_rid(rid: object) -> str:
    """A release id: 16-64 lowercase hex digits (chosen by the querier)."""
    return _hex_id(rid, "rid")


def _dataset_name(v: object) -> str:
    """The id of a new dataset (uploads): 1-128 characters of a safe alphabet."""
    if not isinstance(v, str) or not _NAME.match(v):
        raise DatasetError(f"dataset id must be 1-128 characters [A-Za-z0-9_.:/-], got {v!r}")
    return v


def _dataset_ref(v: object) -> str:
    """The id of a dataset a request reads: any string (an id the server does not hold is refused there)."""
    if not isinstance(v, str):
        raise UnknownDataset(f"no dataset {v!r}: a dataset id is a string")
    return v


def parse_thresholds(value, N: int) -> np.ndarray:
    """Grid indices of a request (default: the whole grid), sorted and unique."""
    if value is None:
        return np.arange(N, dtype=np.int64)
    if not isinstance(value, (list, tuple)) or not value or len(value) > N:
        raise QueryRefused(f"thresholds must be a non-empty list of at most {N} grid indices")
    if any(not is_int(v) for v in value):
        raise QueryRefused("thresholds must be integers (grid indices)")
    arr = np.array(value, dtype=np.int64)
    if arr.min() < 0 or arr.max() >= N:
        raise QueryRefused(f"thresholds must be grid indices in [0, {N - 1}]")
    return np.unique(arr)


def _int_list(value: object, what: str, limit: int) -> tuple[int, ...]:
    """A list of at most ``limit`` non-negative integers (static part of thresholds and cuts)."""
    if not isinstance(value, list) or len(value) > limit:
        raise QueryRefused(f"{what} must be a list of at most {limit} grid indices")
    if any(not is_int(v) or v < 0 for v in value):
        raise QueryRefused(f"{what} must be non-negative integers (grid indices)")
    return tuple(value)


def _release_names(value: object, kind: str) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) and kind == "ecdf" else value
    if (
        not isinstance(names, list | tuple)
        or not 1 <= len(names) <= MAX_SERIES
        or any(not isinstance(v, str) for v in names)
        or len(set(names)) != len(names)
    ):
        raise QueryRefused(
            "series must be a series name or a list of distinct names"
            if kind == "ecdf"
            else "series must be a list of distinct series names for a counts release"
        )
    return tuple(names)


def _op(obj: dict, op: str) -> None:
    if obj.get("op") != op:
        raise ProtocolError(f"expected a {op!r} request, got op {obj.get('op')!r}")


# ----------------------------------------------------------------------------- the request types
class Request:
    """Base of the request types: ``op`` names the operation; ``to_json``/``from_json`` are the wire form."""

    op: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op}

    @classmethod
    def from_json(cls, obj: dict) -> Request:
        _op(obj, cls.op)
        return cls()


@dataclass(frozen=True)
class SeriesSpec:
    """A series of an upload: its name and the largest weight a client may give it (public)."""

    name: str
    max_weight: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "max_weight": self.max_weight}


def _series_specs(value: object, l: int) -> tuple[SeriesSpec, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_SERIES:
        raise QueryRefused(f"series must be a list of 1..{MAX_SERIES} entries")
    out: list[SeriesSpec] = []
    for s in value:
        if not isinstance(s, dict):
            raise QueryRefused("each series must be an object {name, max_weight}")
        sname, w = s.get("name"), s.get("max_weight")
        if not isinstance(sname, str) or not _SERIES.match(sname) or any(o.name == sname for o in out):
            raise QueryRefused(f"bad or repeated series name {sname!r}")
        if not is_int(w) or not 1 <= w < (1 << (l - 1)):
            raise QueryRefused(f"max_weight of series {sname!r} must be in [1, 2^{l - 1})")
        out.append(SeriesSpec(sname, w))
    return tuple(out)


def _chunks(value: object, per_client: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or any(not is_int(k) or k < 1 for k in value):
        raise QueryRefused("chunks must be a non-empty list of positive client counts")
    if sum(value) > MAX_CLIENTS:
        raise QueryRefused(f"at most {MAX_CLIENTS} clients per upload")
    cap = chunk_clients(per_client)
    if max(value) > cap:
        raise QueryRefused(f"a chunk of {max(value)} clients exceeds the limit of {cap} for these parameters")
    return tuple(value)


def _servers(value: object) -> tuple[tuple[str, int], ...] | None:
    """The servers' addresses as [[host, port], ...] (None: not given)."""
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not 2 <= len(value) <= 254
        or any(not isinstance(a, list) or len(a) != 2 or not isinstance(a[0], str) or not is_int(a[1]) for a in value)
    ):
        raise QueryRefused("servers must be a list of [host, port] pairs")
    return tuple((a[0], a[1]) for a in value)


@dataclass(frozen=True)
class UploadRequest(Request):
    """``upload``: stage one server's keys of a chunked upload (FSS keys: ``vdpf`` for two servers, ``mshare``
    for more).

    The header is followed by the chunks' bulk frames (ids, key lengths,
    keys), whose sizes follow from ``chunks`` and the scheme's key sizes.
    ``vdpf`` keys are verified by the two servers together
    (:mod:`pairwise.protocols.ecdf.validation`); ``servers`` (their
    addresses, in server-id order) tells server 0 where server 1 is unless
    it is configured (``--peer``).  ``dcf`` keys and two-server ``mshare``
    keys cannot be verified and are refused.
    """

    op: ClassVar[str] = "upload"
    SCHEMES: ClassVar[tuple[str, ...]] = ("vdpf", "mshare")

    dataset: str
    scheme: str
    m: int
    server_id: int
    domain_bits: int
    output_bits: int
    series: tuple[SeriesSpec, ...]
    chunks: tuple[int, ...]
    upload_id: str
    append: bool = False
    meta: dict = field(default_factory=dict)
    servers: tuple[tuple[str, int], ...] | None = None

    @property
    def series_weights(self) -> dict[str, int]:
        return {s.name: s.max_weight for s in self.series}

    def _head(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "dataset": self.dataset,
            "scheme": self.scheme,
            "m": self.m,
            "server_id": self.server_id,
            "domain_bits": self.domain_bits,
            "output_bits": self.output_bits,
        }

    def _tail(self) -> dict[str, Any]:
        out = {"series": [s.to_json() for s in self.series], "chunks": list(self.chunks), "upload_id": self.upload_id}
        if self.servers is not None:
            out["servers"] = [[h, p] for h, p in self.servers]
        return out

    def to_json(self) -> dict[str, Any]:
        return {**self._head(), "append": bool(self.append), "meta": dict(self.meta), **self._tail()}

    def per_client(self) -> int:
        """The most bytes one client adds to the largest bulk frame of a chunk (bounds the chunk size)."""
        return _per_client(self.scheme, self.domain_bits, self.output_bits, self.series_weights)

    @classmethod
    def _common(cls, obj: dict) -> dict[str, Any]:
        _op(obj, cls.op)
        name = _dataset_name(obj.get("dataset"))
        scheme = obj.get("scheme")
        if scheme == "dcf" and cls.op == "upload":
            raise QueryRefused(
                "dcf keys cannot be verified and are no longer accepted: two servers take vdpf keys, "
                "which both servers check before they accept a client (upgrade the uploading "
                "client; datasets stored with dcf keys can still be released)"
            )
        if scheme not in cls.SCHEMES:
            raise QueryRefused(f"scheme must be one of {cls.SCHEMES}, got {scheme!r}")
        m = _int_in(obj, "m", 2, 254)
        sid = _int_in(obj, "server_id", 0, 253)
        n = _int_in(obj, "domain_bits", 1, 32)
        l = _int_in(obj, "output_bits", 8, 64)
        if sid >= m:
            raise QueryRefused(f"server id {sid} is not below m = {m}")
        if scheme == "vdpf" and m != 2:
            raise QueryRefused("the vdpf scheme needs exactly 2 servers; use mshare for m > 2")
        if scheme == "mshare" and m == 2:  # a key kind two servers never use: one of them would hold 2^n words
            raise QueryRefused(
                "mshare keys are for 3 or more servers (two servers cannot check them): two servers "
                "take vdpf keys, which both servers check before they accept a client (scheme auto)"
            )
        if scheme == "mshare" and n > MSHARE_MAX_BITS:
            raise QueryRefused(f"mshare keys need domain bits <= {MSHARE_MAX_BITS}, got {n}")
        series = _series_specs(obj.get("series"), l)
        upload_id = _hex_id(obj.get("upload_id"), "upload_id")
        append = obj.get("append", False)
        if not isinstance(append, bool):
            raise QueryRefused("append must be true or false")
        meta = obj.get("meta", {})
        if not isinstance(meta, dict) or len(json.dumps(meta)) > META_MAX:
            raise QueryRefused(f"meta must be a JSON object of at most {META_MAX} bytes")
        if scheme == "vdpf":
            try:
                key_lengths(scheme, n, l, {s.name: s.max_weight for s in series})  # a layout the servers can verify
            except ShareParameterError as exc:
                raise QueryRefused(str(exc)) from None
        return dict(
            dataset=name,
            scheme=scheme,
            m=m,
            server_id=sid,
            domain_bits=n,
            output_bits=l,
            series=series,
            upload_id=upload_id,
            append=append,
            meta=meta,
            servers=_servers(obj.get("servers")),
        )

    @classmethod
    def from_json(cls, obj: dict) -> UploadRequest:
        f = cls._common(obj)
        per_client = _per_client(
            f["scheme"], f["domain_bits"], f["output_bits"], {s.name: s.max_weight for s in f["series"]}
        )
        return cls(chunks=_chunks(obj.get("chunks"), per_client), **f)


def _per_client(scheme: str, n: int, l: int, series: dict[str, int]) -> int:
    """The most bytes one client adds to a chunk's key frame: every series' largest key (vdpf: its bundle)."""
    if scheme == "vdpf":
        from .validation import layout_for

        lay = layout_for(series, n, l)
        return sum(lay.blob_bytes(s) for s in series)
    return len(series) * max(key_lengths(scheme, n, l))


@dataclass(frozen=True)
class PointwiseRequest(UploadRequest):
    """``pointwise``: stage one server's shares of a pointwise query round ([BMR25, Sec. 4.1]).

    Each chunk carries ids and one share word per client, series and
    threshold (4-byte words when ``output_bits <= 32``).
    """

    op: ClassVar[str] = "pointwise"
    SCHEMES: ClassVar[tuple[str, ...]] = ("pointwise",)

    grid_bits: int = 1
    thresholds: tuple[int, ...] = ()
    round: str = ""

    @property
    def word_bytes(self) -> int:
        return 4 if self.output_bits <= 32 else 8

    def to_json(self) -> dict[str, Any]:
        return {
            **self._head(),
            "grid_bits": self.grid_bits,
            "thresholds": list(self.thresholds),
            "round": self.round,
            "append": bool(self.append),
            "meta": dict(self.meta),
            **self._tail(),
        }

    def per_client(self) -> int:
        return len(self.series) * len(self.thresholds) * self.word_bytes

    @classmethod
    def from_json(cls, obj: dict) -> PointwiseRequest:
        f = cls._common(obj)
        n = f["domain_bits"]
        g = obj.get("grid_bits")
        if not is_int(g) or not 1 <= g <= min(n, MAX_GRID_BITS):
            raise QueryRefused(f"grid_bits must be in [1, {min(n, MAX_GRID_BITS)}], got {g!r}")
        thr = parse_thresholds(obj.get("thresholds"), 1 << g)
        rnd = obj.get("round")
        if not isinstance(rnd, str) or not 1 <= len(rnd) <= 64:
            raise QueryRefused("round must be a short string naming this query round")
        word = 4 if f["output_bits"] <= 32 else 8
        chunks = _chunks(obj.get("chunks"), len(f["series"]) * thr.size * word)
        return cls(chunks=chunks, grid_bits=g, thresholds=tuple(int(t) for t in thr), round=rnd, **f)


@dataclass(frozen=True)
class CommitRequest(Request):
    """``commit``: keep the staged upload ``upload_id`` without the ``drop`` positions that follow (an array)."""

    op: ClassVar[str] = "commit"

    upload_id: str
    drop: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "upload_id": self.upload_id, "drop": self.drop}

    @classmethod
    def from_json(cls, obj: dict) -> CommitRequest:
        _op(obj, cls.op)
        upload_id = obj.get("upload_id")
        if not isinstance(upload_id, str) or not _HEX_ID.match(upload_id):
            raise QueryRefused("commit needs the upload staged on this connection")
        d = obj.get("drop", 0)
        if not is_int(d) or d < 0 or d > MAX_CLIENTS:
            raise ProtocolError(f"drop count {d!r} out of range")
        return cls(upload_id, d)


@dataclass(frozen=True)
class DiscardRequest(Request):
    """``discard``: forget the upload staged on this connection."""

    op: ClassVar[str] = "discard"


@dataclass(frozen=True)
class StatusRequest(Request):
    """``status``: one dataset's public state and spend, or (``dataset`` None) every dataset's."""

    op: ClassVar[str] = "status"

    dataset: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "dataset": self.dataset}

    @classmethod
    def from_json(cls, obj: dict) -> StatusRequest:
        _op(obj, cls.op)
        name = obj.get("dataset")
        return cls(None if name is None else _dataset_ref(name))


@dataclass(frozen=True)
class PrepareRequest(Request):
    """``prepare``: validate a release, snapshot the dataset, reserve its charge.

    ``kind`` ``ecdf`` (fields ``series``, ``epsilon`` per series,
    ``mechanism``, ``thresholds``) or ``counts`` (``series``, ``cuts``,
    ``epsilon_per_value``); both take ``grid_bits`` (None: the dataset's)
    and ``tolerate``.  ``servers``: the querier's list of the servers, in
    server-id order (server 0 reaches server 1 there unless configured).
    """

    op: ClassVar[str] = "prepare"

    kind: str
    rid: str
    dataset: str
    series: tuple[str, ...]
    grid_bits: int | None = None
    tolerate: int = 0
    servers: tuple[tuple[str, int], ...] | None = None
    # ecdf
    epsilon: Fraction | None = None
    mechanism: str = "paper"
    thresholds: tuple[int, ...] | None = None
    # counts
    cuts: tuple[int, ...] = ()
    epsilon_per_value: Fraction | None = None

    def to_json(self) -> dict[str, Any]:
        if self.kind == "ecdf":
            body: dict[str, Any] = {
                "kind": "ecdf",
                "series": list(self.series),
                "epsilon": str(self.epsilon),
                "mechanism": self.mechanism,
                "grid_bits": self.grid_bits,
                "tolerate": self.tolerate,
                "thresholds": None if self.thresholds is None else list(self.thresholds),
            }
        else:
            body = {
                "kind": "counts",
                "series": list(self.series),
                "cuts": list(self.cuts),
                "epsilon_per_value": str(self.epsilon_per_value),
                "grid_bits": self.grid_bits,
                "tolerate": self.tolerate,
            }
        return {
            **body,
            "op": self.op,
            "rid": self.rid,
            "dataset": self.dataset,
            "servers": None if self.servers is None else [[h, p] for h, p in self.servers],
        }

    @classmethod
    def from_json(cls, obj: dict) -> PrepareRequest:
        _op(obj, cls.op)
        rid = check_rid(obj.get("rid"))
        name = _dataset_ref(obj.get("dataset"))
        servers = _servers(obj.get("servers"))
        kind = obj.get("kind")
        g = obj.get("grid_bits")
        if g is not None and (not is_int(g) or not 1 <= g <= MAX_GRID_BITS):
            raise QueryRefused(f"grid_bits must be in [1, {MAX_GRID_BITS}], got {g!r}")
        tol = obj.get("tolerate", 0)
        if not is_int(tol) or not 0 <= tol < 254:
            raise QueryRefused(f"tolerate must be an integer in [0, m-1) (0 for two servers), got {tol!r}")
        common = dict(rid=rid, dataset=name, grid_bits=g, tolerate=tol, servers=servers)
        if kind == "ecdf":
            mech = obj.get("mechanism", "paper")
            if mech not in MECHANISMS:
                raise QueryRefused(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mech!r}")
            names = _release_names(obj.get("series", "all"), kind)
            thr = obj.get("thresholds")
            if thr is not None:
                if not isinstance(thr, list) or not thr or len(thr) > (1 << MAX_GRID_BITS):
                    raise QueryRefused("thresholds must be a non-empty list of grid indices")
                if any(not is_int(v) for v in thr):
                    raise QueryRefused("thresholds must be integers (grid indices)")
                thr = tuple(thr)
            eps = parse_epsilon(obj.get("epsilon"))
            return cls(kind=kind, series=names, epsilon=eps, mechanism=mech, thresholds=thr, **common)
        if kind == "counts":
            names = _release_names(obj.get("series"), kind)
            cuts = obj.get("cuts")
            if not isinstance(cuts, list) or len(cuts) > 1024 or any(not is_int(c) or c < 0 for c in cuts):
                raise QueryRefused("cuts must be a list of at most 1024 non-negative grid indices")
            if any(b < a for a, b in zip(cuts, cuts[1:])):
                raise QueryRefused("cuts must be non-decreasing")
            eps_v = parse_epsilon(obj.get("epsilon_per_value"), "epsilon_per_value")
            return cls(kind=kind, series=names, cuts=tuple(cuts), epsilon_per_value=eps_v, **common)
        raise QueryRefused(f"kind must be 'ecdf' or 'counts', got {kind!r}")


@dataclass(frozen=True)
class LinkRequest(Request):
    """``link`` (two servers, to server 0): reach server 1 and check who it is, before anything is charged."""

    op: ClassVar[str] = "link"


@dataclass(frozen=True)
class GoRequest(Request):
    """``go``: charge the prepared release durably, then run it."""

    op: ClassVar[str] = "go"


@dataclass(frozen=True)
class AbortRequest(Request):
    """``abort``: release the prepared release's reservation (nothing charged)."""

    op: ClassVar[str] = "abort"


@dataclass(frozen=True)
class LedgerRequest(Request):
    """``ledger``: one page of a dataset's ledger, from entry ``offset`` (sorted by release id)."""

    op: ClassVar[str] = "ledger"

    dataset: str
    offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "dataset": self.dataset, "offset": self.offset}

    @classmethod
    def from_json(cls, obj: dict) -> LedgerRequest:
        _op(obj, cls.op)
        name = _dataset_ref(obj.get("dataset"))
        offset = obj.get("offset", 0)
        if not is_int(offset) or offset < 0:
            raise QueryRefused("offset must be a non-negative integer")
        return cls(name, offset)


@dataclass(frozen=True)
class AdoptRequest(Request):
    """``adopt``: add charges another server recorded, ``entries`` of (release id, epsilon)."""

    op: ClassVar[str] = "adopt"

    dataset: str
    entries: tuple[tuple[str, Fraction], ...]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "dataset": self.dataset, "entries": [[rid, str(eps)] for rid, eps in self.entries]}

    @classmethod
    def from_json(cls, obj: dict) -> AdoptRequest:
        _op(obj, cls.op)
        name = _dataset_ref(obj.get("dataset"))
        entries = obj.get("entries")
        if not isinstance(entries, list) or len(entries) > LEDGER_PAGE:
            raise QueryRefused(f"entries must be a list of at most {LEDGER_PAGE} [rid, epsilon] pairs")
        pairs = []
        for e in entries:
            if not isinstance(e, list) or len(e) != 2 or not isinstance(e[1], str):
                raise QueryRefused("each ledger entry must be [rid, epsilon]")
            try:
                eps = Fraction(e[1])
            except (ValueError, ZeroDivisionError):
                raise QueryRefused(f"bad epsilon {e[1]!r} in a ledger entry") from None
            if not 0 < eps <= ADOPT_MAX_EPSILON:
                raise QueryRefused(f"ledger entry epsilon {e[1]!r} out of range")
            pairs.append((check_rid(e[0]), eps))
        return cls(name, tuple(pairs))


@dataclass(frozen=True)
class UploadsRequest(Request):
    """``uploads``: the ids of a dataset's committed uploads on this server, and its client count."""

    op: ClassVar[str] = "uploads"

    dataset: str

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "dataset": self.dataset}

    @classmethod
    def from_json(cls, obj: dict) -> UploadsRequest:
        _op(obj, cls.op)
        return cls(_dataset_ref(obj.get("dataset")))


def _servers(value: object) -> tuple[tuple[str, int], ...] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not 2 <= len(value) <= 254
        or any(not isinstance(a, list) or len(a) != 2 or not isinstance(a[0], str) or not is_int(a[1]) for a in value)
    ):
        raise QueryRefused("servers must be a list of [host, port] pairs")
    return tuple((a[0], a[1]) for a in value)


@dataclass(frozen=True)
class DropUploadRequest(Request):
    """``drop_upload`` (repair): delete one committed upload of a dataset that not every server holds.

    The server asks every other server (:class:`HoldsRequest`) before it
    drops anything; ``servers`` (the querier's list, in server-id order) says
    where to reach those it has no ``--peer`` address for.
    """

    op: ClassVar[str] = "drop_upload"

    dataset: str
    upload_id: str
    servers: tuple[tuple[str, int], ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "dataset": self.dataset, "upload_id": self.upload_id}
        if self.servers is not None:
            out["servers"] = [[h, p] for h, p in self.servers]
        return out

    @classmethod
    def from_json(cls, obj: dict) -> DropUploadRequest:
        _op(obj, cls.op)
        name = _dataset_ref(obj.get("dataset"))
        return cls(name, _hex_id(obj.get("upload_id"), "upload_id"), _servers(obj.get("servers")))


@dataclass(frozen=True)
class HoldsRequest(Request):
    """``holds`` (server to server, before a repair drops anything): does the asked server hold upload
    ``upload_id`` of ``dataset``, committed or still staged?  ``server_id``: the asking server."""

    op: ClassVar[str] = "holds"

    dataset: str
    upload_id: str
    server_id: int

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "dataset": self.dataset, "upload_id": self.upload_id, "server_id": self.server_id}

    @classmethod
    def from_json(cls, obj: dict) -> HoldsRequest:
        _op(obj, cls.op)
        return cls(
            _dataset_ref(obj.get("dataset")),
            _hex_id(obj.get("upload_id"), "upload_id"),
            _int_in(obj, "server_id", 0, 253),
        )


@dataclass(frozen=True)
class PeerHello(Request):
    """``peer``: server 0's first message on a server-to-server channel, for release ``rid``."""

    op: ClassVar[str] = "peer"

    rid: str
    server_id: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "rid": self.rid, "server_id": self.server_id}

    @classmethod
    def from_json(cls, obj: dict) -> PeerHello:
        if obj.get("op") != cls.op or obj.get("server_id") != 0 or isinstance(obj.get("server_id"), bool):
            raise ProtocolError("expected a peer hello {op: peer, rid, server_id: 0}")
        return cls(check_rid(obj.get("rid")), 0)


@dataclass(frozen=True)
class VerifyHello(Request):
    """``verify``: server 0's first message on the channel that checks upload ``upload_id`` with server 1.

    ``chunks``: the upload's chunk sizes, which both servers must have been
    announced.  The 64-byte verifier key follows as one raw frame
    (:mod:`pairwise.protocols.ecdf.peers`); it is never in JSON and never logged.
    """

    op: ClassVar[str] = "verify"

    upload_id: str
    chunks: tuple[int, ...]
    server_id: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "upload_id": self.upload_id, "chunks": list(self.chunks), "server_id": self.server_id}

    @classmethod
    def from_json(cls, obj: dict) -> VerifyHello:
        if obj.get("op") != cls.op or obj.get("server_id") != 0 or isinstance(obj.get("server_id"), bool):
            raise ProtocolError("expected a verification hello {op: verify, upload_id, chunks, server_id: 0}")
        chunks = obj.get("chunks")
        if (
            not isinstance(chunks, list)
            or not chunks
            or len(chunks) > MAX_CLIENTS
            or any(not is_int(k) or k < 1 for k in chunks)
            or sum(chunks) > MAX_CLIENTS
        ):
            raise ProtocolError("a verification hello needs the upload's chunk sizes")
        return cls(_hex_id(obj.get("upload_id"), "upload_id"), tuple(chunks), 0)


#: op -> request type, for the requests of clients and queriers (the peer hello is read by the peer hub).
REQUESTS: dict[str, type[Request]] = {
    t.op: t
    for t in (
        UploadRequest,
        PointwiseRequest,
        CommitRequest,
        DiscardRequest,
        StatusRequest,
        PrepareRequest,
        LinkRequest,
        GoRequest,
        AbortRequest,
        LedgerRequest,
        AdoptRequest,
        UploadsRequest,
        DropUploadRequest,
    )
}


def parse_peer_request(obj: dict) -> PeerHello | HoldsRequest:
    """The first message another server sends on a server-to-server channel: a peer hello or a holds query."""
    return HoldsRequest.from_json(obj) if obj.get("op") == HoldsRequest.op else PeerHello.from_json(obj)


def parse_request(obj: dict) -> Request:
    """The typed request of a control frame (``op`` selects the type); raises as the handlers always did."""
    op = obj.get("op")
    kind = REQUESTS.get(op) if isinstance(op, str) else None
    if kind is None:
        raise QueryRefused(f"unknown operation {op!r}")
    return kind.from_json(obj)
