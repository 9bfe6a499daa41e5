"""Client validation (robust aggregation) for two ECDF servers: verifiable keys, the checks, the shares.

What it does
    The ``vdpf`` scheme (m = 2).  A client with value x (an n-bit domain point)
    sends each server verifiable DPF keys (:mod:`pairwise.fss.vdpf`, de
    Castro-Polychroniadou, EUROCRYPT 2022) of point functions with payload 1,
    one bundle per series (:class:`Layout`): ``all`` one key at x; ROC
    (``pos``/``neg``) one key at (y, x) on n + 1 bits, so pos is its upper and
    neg its lower half; Hosmer-Lemeshow (``e1``/``e0``, weight w in [0, 2^b])
    b + 1 keys at (w_j, x), w = sum_j c_j w_j, c = (1, 2, .., 2^(b-1), 1), e1
    from the upper and e0 = 2^b - w from the lower halves.  Each server
    expands every key on the full domain once, at upload (:class:`ChunkCheck`):
    the outputs give its share of every series' histogram (a release takes
    prefix sums, :class:`VDPFSeries`), and one 16-byte digest per client that
    the servers compare (:func:`accepted`).  The digest is a MAC, under a key
    the client never sees, of the keys' VDPF tags, their public parts and the
    linear checks: every key's outputs sum to 1, and all of a client's keys
    have the same marginal over x (one x).  An accepted client therefore adds
    exactly beta_s [x <= t] to series s for one x, beta_s in the series' public
    range ({1}; {0, 1} with pos + neg = 1; [0, 2^b] with e1 + e0 = 2^b);
    anyone else is rejected alone.

Security model
    Semi-honest servers, malicious clients (any bytes, any keys, any
    correction words).  Soundness error per client <= 2^-120: the VDPF's
    (ideal-cipher bound, :mod:`pairwise.fss.vdpf`), its tag (2^-126 per key),
    and the MAC (BLAKE2b keyed, 128-bit output, PRF).  Privacy: an accepted
    client's digests are equal, so each server learns only "valid" (and the
    public parameters) beyond its own key.  The verifier key is drawn by server
    0 (``os.urandom``) and sent to server 1 over the servers' mutual-TLS channel
    (:mod:`pairwise.protocols.ecdf.peers`); a client colluding with a server
    is outside the model.  docs/ecdf-validation.md has the argument.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pairwise.fss import VDPFKeyBatch, VDPFVerifier, vdpf_gen_batch, vdpf_key_bytes
from pairwise.fss.keys import KeyFormatError

from .shares import MAX_GRID_BITS, ShareParameterError, reduce_mod

__all__ = [
    "DIGEST_BYTES",
    "MAX_PROB_BITS",
    "SCHEME",
    "VDPF_MAX_DOMAIN_BITS",
    "VERIFY_KEY_BYTES",
    "ChunkCheck",
    "Layout",
    "VDPFSeries",
    "accepted",
    "check_chunk",
    "check_memory_bound",
    "layout_for",
    "load_series",
    "vdpf_client_keys",
]

SCHEME = "vdpf"
#: Domain bits of a verified dataset: a release grid is at most 2^MAX_GRID_BITS, verification costs O(2^n).
VDPF_MAX_DOMAIN_BITS = MAX_GRID_BITS
#: Largest b of a Hosmer-Lemeshow weight range [0, 2^b].
MAX_PROB_BITS = 16
#: Bytes of one client's digest (the value the servers exchange).
DIGEST_BYTES = 16
#: Bytes of the servers' secret for one upload: 32 for the VDPF tags, 32 for the digest MAC.
VERIFY_KEY_BYTES = 64
_PERSON = b"pairwise-ecdfv1"  # BLAKE2b personalization: this digest and nothing else


@dataclass(frozen=True)
class SeriesKeys:
    """How one series is read from a client's keys: ``source`` series holding ``count`` keys of ``bits``
    bits, the ``half`` of each key's domain it reads (None: all of it) and each key's coefficient."""

    source: str
    count: int
    bits: int
    half: int | None
    coefs: tuple[int, ...]


@dataclass(frozen=True)
class Layout:
    """The public map from a dataset's series to VDPF keys (see the module docstring)."""

    n: int
    l: int
    series: tuple[tuple[str, int], ...]
    reads: dict = field(default_factory=dict)  # series -> SeriesKeys

    def blob_bytes(self, s: str) -> int:
        """Bytes of series ``s``'s key bundle (0 for a series read from another one's keys)."""
        r = self.reads[s]
        return r.count * vdpf_key_bytes(r.bits, self.l) if r.source == s else 0

    @property
    def owners(self) -> list[str]:
        """The series that carry keys, in declaration order."""
        return [s for s, _ in self.series if self.reads[s].source == s]

    def lengths(self) -> tuple[int, ...]:
        """The key-bundle lengths a series of this layout may have (for the upload's frame bound)."""
        return tuple(sorted({self.blob_bytes(s) for s, _ in self.series}))


def layout_for(series: dict[str, int], n: int, l: int) -> Layout:
    """The layout of ``series`` (name -> max weight) on an n-bit domain with outputs mod 2^l.

    Supported: {all: 1}; {pos: 1, neg: 1}; {pos: 1, neg: 1, e1: 2^b, e0: 2^b}
    (1 <= b <= 16) -- what :func:`pairwise.protocols.ecdf.uploader.make_series`
    produces.  Anything else raises :class:`ShareParameterError`.
    """
    if not 1 <= n <= VDPF_MAX_DOMAIN_BITS:
        raise ShareParameterError(
            f"the vdpf scheme verifies every key on its full domain: domain bits must be in "
            f"[1, {VDPF_MAX_DOMAIN_BITS}] (a release grid has at most 2^{MAX_GRID_BITS} "
            f"thresholds), got {n}"
        )
    if not 8 <= l <= 64:
        raise ShareParameterError(f"output bits must be in [8, 64], got {l}")
    names = dict(series)
    reads: dict[str, SeriesKeys] = {}
    if names == {"all": 1}:
        reads["all"] = SeriesKeys("all", 1, n, None, (1,))
    elif set(names) in ({"pos", "neg"}, {"pos", "neg", "e1", "e0"}) and names["pos"] == names["neg"] == 1:
        reads["pos"] = SeriesKeys("pos", 1, n + 1, 1, (1,))
        reads["neg"] = SeriesKeys("pos", 1, n + 1, 0, (1,))
        if "e1" in names:
            S = names["e1"]
            b = S.bit_length() - 1
            if names["e0"] != S or S != 1 << b or not 1 <= b <= MAX_PROB_BITS:
                raise ShareParameterError(
                    f"e1 and e0 need one weight bound 2^b with 1 <= b <= {MAX_PROB_BITS}, got "
                    f"{names['e1']} and {names['e0']}"
                )
            coefs = tuple(1 << j for j in range(b)) + (1,)
            reads["e1"] = SeriesKeys("e1", b + 1, n + 1, 1, coefs)
            reads["e0"] = SeriesKeys("e1", b + 1, n + 1, 0, coefs)
    else:
        raise ShareParameterError(
            f"the vdpf scheme supports the series all (weight 1), pos/neg (1) and pos/neg/e1/e0 "
            f"(1 and 2^b); got {names}"
        )
    return Layout(n, l, tuple(series.items()), reads)


# ----------------------------------------------------------------------------- clients
def _points(values: object, n: int) -> np.ndarray:
    x = np.asarray(values)
    if x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.integer):
        raise ShareParameterError("values must be a non-empty 1-D array of integer domain points")
    if (x < 0).any() or (x.astype(np.uint64) >> np.uint64(n)).any():
        raise ShareParameterError(f"values must lie in the {n}-bit domain [0, {(1 << n) - 1}]")
    return x.astype(np.uint64)


def _weights(w: object, count: int, lo: int, hi: int, what: str) -> np.ndarray:
    a = np.asarray(w)
    if a.shape != (count,) or not np.issubdtype(a.dtype, np.integer) or (a < lo).any() or (a > hi).any():
        raise ShareParameterError(f"{what} must be {count} integers in [{lo}, {hi}]")
    return a.astype(np.uint64)


def vdpf_client_keys(
    values: object, series: dict[str, tuple], *, domain_bits: int, output_bits: int
) -> list[dict[str, list[bytes]]]:
    """Every client's key bundle per series for each of the two servers: ``keys[b][series][i]``.

    ``series`` maps a name to (weights or None, max weight), as
    :func:`pairwise.protocols.ecdf.uploader.make_series` returns it.
    """
    lay = layout_for({s: int(w) for s, (_, w) in series.items()}, domain_bits, output_bits)
    n, l = lay.n, lay.l
    x = _points(values, n)
    K = x.size
    top = np.uint64(1 << n)
    out: list[dict[str, list[bytes]]] = [{}, {}]
    for s, _ in lay.series:
        r = lay.reads[s]
        if r.source != s:
            out[0][s] = out[1][s] = [b""] * K
            continue
        if s == "all":
            alphas = [x]
        elif s == "pos":
            y = _weights(series["pos"][0], K, 0, 1, "labels")
            alphas = [x | (y * top)]
        else:  # e1: b low bits of w and one extra unit, so that every w in [0, 2^b] and nothing above is reachable
            S = r.coefs[-2] * 2
            w = _weights(series["e1"][0], K, 0, S, "e1 weights")
            extra = (w == np.uint64(S)).astype(np.uint64)
            low = w - extra
            alphas = [x | (((low >> np.uint64(j)) & np.uint64(1)) * top) for j in range(r.count - 1)]
            alphas.append(x | (extra * top))
        pairs = [vdpf_gen_batch(a, 1, r.bits, l) for a in alphas]
        for b in (0, 1):
            raw = np.concatenate([p[b].to_bytes_array() for p in pairs], axis=1)
            out[b][s] = [row.tobytes() for row in raw]
    return out


# ----------------------------------------------------------------------------- servers
def check_memory_bound(layout: Layout, chunk_bytes: int) -> int:
    """The most bytes of memory one server's check of one chunk of ``layout``'s keys takes (an upper bound).

    ``chunk_bytes``: the largest key frame of the upload (its header's largest chunk times one client's
    bytes).  Full-domain expansion of keys of B bits (:meth:`VDPFKeyBatch.iter_verify`: level buffers,
    check-hash slabs, leaf and position masks, outputs): 400 bytes per leaf of max(2^15, 2^B) leaves; per key a
    histogram share and its copy when rejected clients are taken out; with several keys per client, a
    block's marginals and their linear checks (:meth:`ChunkCheck.evaluate`); the frame, its split and its
    parsed keys (6 copies); the upload's histograms, 2^n words per series.  Public: a function of the
    header; reserved before the first key is read (:class:`pairwise.protocols.ecdf.staging.StagingBudget`).
    """
    keys = [(r.count, r.bits) for s, r in layout.reads.items() if r.source == s]
    top = max(bits for _, bits in keys)
    several = sum(count for count, _ in keys) > 1
    step = max(1, (1 << 19) >> top)  # clients per block of evaluate's marginals
    per_key = sum(count * (24 * (1 << bits) + (40 * step << layout.n if several else 0)) for count, bits in keys)
    return 400 * max(1 << 15, 1 << top) + per_key + 6 * int(chunk_bytes) + 8 * (1 << layout.n) * len(layout.series)


def _mask(l: int) -> np.uint64:
    return np.uint64((1 << l) - 1) if l < 64 else np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _le_words(values: np.ndarray, l: int) -> np.ndarray:
    """(K, m * ceil(l/8)) uint8: each row's values mod 2^l as little-endian words."""
    w = (l + 7) // 8
    v = np.ascontiguousarray(reduce_mod(values, l), dtype="<u8")
    return v.view(np.uint8).reshape(v.shape[0], -1, 8)[:, :, :w].reshape(v.shape[0], -1)


class ChunkCheck:
    """One chunk of one upload at one server: the clients' parsed keys, their digests and histogram shares.

    Built by :meth:`parse` (malformed bundles reject their client); then
    :meth:`evaluate` expands every key once, with the upload's verifier key,
    into per-key histogram shares and one digest per client.  :meth:`take`
    keeps a subset of the clients (subtracting the others' outputs).
    """

    def __init__(self, layout: Layout, party: int, batches: dict[str, list[VDPFKeyBatch]], count: int) -> None:
        self.layout, self.party, self.batches, self.count = layout, party, batches, count
        self.hists: dict[str, list[np.ndarray]] | None = None  # per key-owning series, per key: (2^bits,)
        self.digests: np.ndarray | None = None  # (count, DIGEST_BYTES) uint8

    def __len__(self) -> int:
        return self.count

    @classmethod
    def parse(
        cls, blobs: dict[str, Sequence[bytes]], *, layout: Layout, party: int
    ) -> tuple[ChunkCheck, list[int], dict[int, str]]:
        """(the well-formed clients' keys, their indices, {index: reason}) from one bundle per series and client."""
        lay = layout
        K = len(next(iter(blobs.values()))) if blobs else 0
        bad: dict[int, str] = {}
        pieces: dict[str, list[list[bytes]]] = {}
        for s, _ in lay.series:
            r = lay.reads[s]
            col = blobs[s]
            want = lay.blob_bytes(s)
            for i, b in enumerate(col):
                if len(b) != want:
                    what = "truncated" if len(b) < want else f"with {len(b) - want} trailing bytes"
                    bad.setdefault(
                        i,
                        f"series {s}: key bundle {what}: {len(b)} bytes, expected {want}"
                        + ("" if want else f" (series {s} is read from the keys of {r.source})"),
                    )
            if r.source == s:
                size = vdpf_key_bytes(r.bits, lay.l)
                pieces[s] = [
                    [b[j * size : (j + 1) * size] if len(b) == want else b"" for b in col] for j in range(r.count)
                ]
        parsed: dict[str, list[tuple]] = {}
        for s, cols in pieces.items():
            r = lay.reads[s]
            parsed[s] = []
            for j, col in enumerate(cols):
                batch, kept, errors = VDPFKeyBatch.parse_valid(col, n=r.bits, l=lay.l, party=party)
                for i, e in errors.items():
                    if i not in bad:
                        bad[i] = f"series {s}: key {j}: " + str(e).split(": ", 1)[-1]
                parsed[s].append((batch, kept))
        good = [i for i in range(K) if i not in bad]
        batches: dict[str, list[VDPFKeyBatch]] = {}
        for s, lst in parsed.items():
            batches[s] = []
            for batch, kept in lst:
                where = {c: k for k, c in enumerate(kept)}
                batches[s].append(batch[np.array([where[i] for i in good], dtype=np.intp)])
        return cls(lay, party, batches, len(good)), good, bad

    def _keys(self) -> list[tuple[str, int, VDPFKeyBatch]]:
        return [(s, j, b) for s in self.layout.owners for j, b in enumerate(self.batches[s])]

    def evaluate(self, verify_key: bytes, *, clients_per_block: int | None = None) -> None:
        """Full-domain evaluation of every key: per-key histogram shares and one digest per client.

        ``verify_key``: the upload's 64-byte secret shared by the two servers
        (:data:`VERIFY_KEY_BYTES`).  Work: ~11 AES blocks per leaf and key.
        """
        if len(verify_key) != VERIFY_KEY_BYTES:
            raise ShareParameterError(f"the verification key is {VERIFY_KEY_BYTES} bytes")
        lay, K = self.layout, self.count
        keys = self._keys()
        verifier = VDPFVerifier(bytes(verify_key[:32]))
        mac_key = bytes(verify_key[32:])
        self.hists = {s: [np.zeros(1 << b.n, dtype=np.uint64) for b in self.batches[s]] for s in self.layout.owners}
        self.digests = np.zeros((K, DIGEST_BYTES), dtype=np.uint8)
        if K == 0:
            return
        bits = max(b.n for _, _, b in keys)
        step = clients_per_block or max(1, (1 << 19) >> bits)  # a block's marginals: 4 MiB per key
        public = [b.public_bytes() for _, _, b in keys]
        n = lay.n
        several = len(keys) > 1  # one x for all of a client's keys: their marginals are compared
        for c0 in range(0, K, step):
            rows = slice(c0, min(K, c0 + step))
            kc = rows.stop - rows.start
            tags, sums, margs = [], [], []
            for s, j, b in keys:
                t = np.empty((kc, 2), dtype=np.uint64)
                sm = np.empty(kc, dtype=np.uint64)
                mg = np.empty((kc, 1 << n), dtype=np.uint64) if several else None
                for ev in b[rows].iter_verify(verifier, leaves_per_chunk=1 << 15):
                    out = ev.outputs  # this chunk's outputs, summed while they are in cache
                    self.hists[s][j] += out.sum(axis=0, dtype=np.uint64)
                    t[ev.rows], sm[ev.rows] = ev.tags, out.sum(axis=1, dtype=np.uint64)
                    if several:
                        mg[ev.rows] = out if b.n == n else out[:, : 1 << n] + out[:, 1 << n :]
                tags.append(t.astype("<u8").view(np.uint8).reshape(kc, 16))
                sums.append(sm)
                margs.append(mg)
            # linear checks Z: every key's outputs sum to 1 (party 0 subtracts the public 1), and every key's
            # marginal over x equals the first key's; party 1 negates, so valid <=> Z_0 = Z_1
            z_sum = np.stack(sums, axis=1) - np.uint64(1 - self.party)
            z_marg = [m - margs[0] for m in margs[1:]]
            Z = np.concatenate([z_sum] + z_marg, axis=1)
            if self.party:
                Z = np.negative(Z)
            msg = np.concatenate(tags + [p[rows] for p in public] + [_le_words(Z, lay.l)], axis=1)
            for i, row in enumerate(msg, start=rows.start):
                self.digests[i] = np.frombuffer(
                    hashlib.blake2b(row.tobytes(), digest_size=DIGEST_BYTES, key=mac_key, person=_PERSON).digest(),
                    dtype=np.uint8,
                )
        mask = _mask(lay.l)
        for s in self.hists:
            self.hists[s] = [h & mask for h in self.hists[s]]

    def take(self, rows: np.ndarray) -> ChunkCheck:
        """The chunk restricted to clients ``rows`` (histograms: minus the outputs of the others)."""
        rows = np.asarray(rows, dtype=np.intp)
        out = ChunkCheck(
            self.layout, self.party, {s: [b[rows] for b in bs] for s, bs in self.batches.items()}, int(rows.size)
        )
        if self.hists is not None:
            drop = np.setdiff1d(np.arange(self.count), rows)
            out.hists = {}
            for s, bs in self.batches.items():
                out.hists[s] = []
                for b, h in zip(bs, self.hists[s]):
                    if drop.size * 2 <= self.count:
                        gone = b[drop].full_domain_sum() if drop.size else 0
                        out.hists[s].append(reduce_mod(h - gone, self.layout.l))
                    else:
                        out.hists[s].append(b[rows].full_domain_sum() if rows.size else np.zeros_like(h))
            out.digests = None if self.digests is None else self.digests[rows]
        return out

    def series(self) -> dict[str, VDPFSeries]:
        """One :class:`VDPFSeries` per series of the layout (call after :meth:`evaluate` or :func:`load_series`)."""
        return {s: VDPFSeries.of(self, s) for s, _ in self.layout.series}


def accepted(mine: np.ndarray, theirs: np.ndarray, my_ok: np.ndarray, their_ok: np.ndarray) -> np.ndarray:
    """Clients both servers accept: parsed by both and with equal digests (constant-time per client)."""
    same = np.array([hmac.compare_digest(a.tobytes(), b.tobytes()) for a, b in zip(mine, theirs)], dtype=bool)
    return same & my_ok & their_ok


def check_chunk(
    blobs: dict[str, Sequence[bytes]], layout: Layout, party: int, link, index: int, *, shares: bool = True
) -> tuple[np.ndarray, dict[int, str], dict[str, VDPFSeries] | None]:
    """One server's check of one upload chunk with the other server: (accepted (k,), {index: reason}, shares).

    ``link`` has the upload's verifier ``key`` and ``exchange(index, parsed,
    digests) -> (their parsed, their digests)`` (a
    :class:`pairwise.protocols.ecdf.peers.VerifyLink`).  The shares hold the
    accepted clients only, in order (None with ``shares=False``: a server
    that stages the raw keys and expands them again at release).
    """
    K = len(next(iter(blobs.values())))
    chunk, good, bad = ChunkCheck.parse(blobs, layout=layout, party=party)
    chunk.evaluate(link.key)
    mine = np.zeros(K, dtype=bool)
    mine[good] = True
    digests = np.zeros((K, DIGEST_BYTES), dtype=np.uint8)
    digests[good] = chunk.digests
    theirs, their_digests = link.exchange(index, mine, digests)
    ok = accepted(digests, their_digests, mine, theirs)
    reasons = dict(bad)
    for i in np.flatnonzero(~ok):
        if int(i) not in reasons:
            reasons[int(i)] = (
                "its keys did not parse at the other server"
                if not theirs[i]
                else "its keys failed the servers' check (not one point x with a weight in each series' "
                "public range, or not the two halves of one key pair)"
            )
    if not shares:
        return ok, reasons, None
    where = {c: r for r, c in enumerate(good)}
    kept = chunk.take(np.array([where[int(i)] for i in np.flatnonzero(ok)], dtype=np.intp))
    return ok, reasons, kept.series()


class VDPFSeries:
    """One series of a verified dataset at one server: its histogram share (2^n words) and client count.

    ``cumulative_shares`` is a prefix sum (no per-client work at release
    time).  Parts of one dataset add (:meth:`concat`); :meth:`take` (dropping
    clients of a staged upload) needs the chunk the part came from.
    """

    scheme = SCHEME

    def __init__(self, hist: np.ndarray, count: int, l: int, chunk: ChunkCheck | None = None, series: str = "") -> None:
        self.hist = reduce_mod(hist, l)
        self.count = int(count)
        self.l = l
        self._chunk = chunk
        self._series = series

    @classmethod
    def of(cls, chunk: ChunkCheck, s: str) -> VDPFSeries:
        lay = chunk.layout
        r = lay.reads[s]
        size = 1 << lay.n
        h = np.zeros(size, dtype=np.uint64)
        for c, kh in zip(r.coefs, chunk.hists[r.source]):
            part = kh if r.half is None else kh[r.half * size : (r.half + 1) * size]
            h += np.uint64(c) * part
        return cls(h, chunk.count, lay.l, chunk, s)

    def __len__(self) -> int:
        return self.count

    @classmethod
    def concat(cls, parts: Sequence[VDPFSeries]) -> VDPFSeries:
        h = np.zeros_like(parts[0].hist)
        for p in parts:
            h += p.hist
        return cls(h, sum(p.count for p in parts), parts[0].l)

    def take(self, rows: np.ndarray) -> VDPFSeries:
        if self._chunk is None:
            raise ShareParameterError("a verified series keeps only its histogram; a row subset needs its staged keys")
        rows = np.asarray(rows, dtype=np.intp)
        if rows.size == self.count and np.array_equal(rows, np.arange(self.count)):
            return self
        key = rows.tobytes()
        cache = self._chunk.__dict__.setdefault("_taken", {})
        sub = cache.get(key)
        if sub is None:
            sub = cache[key] = self._chunk.take(rows)
        return VDPFSeries.of(sub, self._series)

    def cumulative_shares(self, points: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """This server's shares of sum_i beta_i [x_i <= t] at ``points`` (all clients; prefix sums of the histogram)."""
        if rows is not None and not (len(rows) == self.count and np.array_equal(rows, np.arange(self.count))):
            raise ShareParameterError("a verified series answers for all of its clients, not a row subset")
        cum = np.cumsum(self.hist, dtype=np.uint64)
        return reduce_mod(cum[np.asarray(points, dtype=np.intp)], self.l)


def load_series(keys: dict[str, Sequence[bytes]], *, layout: Layout, party: int) -> dict[str, VDPFSeries]:
    """Series shares of stored (already verified) key bundles: parse them and expand every key once.

    A bundle that does not parse raises :class:`KeyFormatError` (the store is corrupt).
    """
    chunk, good, bad = ChunkCheck.parse(keys, layout=layout, party=party)
    if bad:
        raise KeyFormatError(f"stored key bundle {min(bad)}: {bad[min(bad)]}", index=min(bad))
    chunk.hists = {s: [reduce_mod(b.full_domain_sum(), layout.l) for b in bs] for s, bs in chunk.batches.items()}
    return {s: VDPFSeries(v.hist, v.count, v.l) for s, v in chunk.series().items()}
