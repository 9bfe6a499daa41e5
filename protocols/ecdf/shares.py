"""Client keys and server-side share evaluation for the multi-server ECDF service.

What it does
    A client with a private value x in an n-bit domain (x in [0, 2^n)) and a
    public-range weight beta (1 for a plain ECDF, a 0/1 label for the ROC
    series, a fixed-point probability for Hosmer-Lemeshow) splits the function
    t -> beta [x <= t] among m servers, so that the servers' local results add
    up (mod 2^l) to shares of the weighted cumulative count
    C(t) = sum_i beta_i [x_i <= t] at any threshold t.  Three schemes here
    (the verifiable one for two servers, ``vdpf``, is in
    :mod:`pairwise.protocols.ecdf.validation`; servers read ``dcf`` keys only
    from datasets stored before it):

    * ``dcf`` (m = 2, [BMR25, Sec. 4.2]): one DCF key per client and series,
      f(t) = beta [t >= x], key b to server b;
    * ``mshare`` (m > 2, the "trivial" m-party FSS, small domains only):
      additive shares of beta e_x, m - 1 of them as 16-byte PRG seeds
      (:func:`pairwise.mpc.aes.mmo_prg`), one as the correction vector (our
      own versioned format);
    * ``pointwise`` ([BMR25, Sec. 4.1]): additive shares of beta [x <= t]
      for each threshold of a query round.

    :class:`DCFShares`, :class:`MShareShares` and :class:`PointwiseShares`
    answer ``cumulative_shares(points, rows)``: this server's shares of C(t)
    at the domain points.  A release's grid of 2^g thresholds is
    :func:`grid_points`.  Each scheme's costs, the ``mshare`` byte format and
    the grid: ``docs/ecdf-server.md``, "Client keys and their evaluation".

Security model
    Semi-honest servers and clients.  ``dcf``: a client's value and weight
    are hidden from each single server ([BCG+21]; fixed-key AES as an ideal
    permutation); two colluding servers learn everything.  ``mshare`` and
    ``pointwise``: hidden from any m - 1 colluding servers (PRG security of
    :func:`pairwise.mpc.aes.mmo_prg` for ``mshare``; information-theoretic for
    ``pointwise``).  Seeds and share masks come from ``os.urandom``.  Malicious
    clients are not detected by these schemes: only the byte format is
    validated, and a malformed key rejects exactly its client.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from pairwise.dp.errors import PairwiseError
from pairwise.dp.validate import check_int
from pairwise.fss import DCFKeyBatch, dcf_gen_batch, dcf_key_bytes
from pairwise.fss.dcf import DCF_FULL_DOMAIN_MAX_BITS
from pairwise.mpc.aes import mmo_prg, random_blocks

__all__ = [
    "SCHEMES",
    "ShareParameterError",
    "MSHARE_VERSION",
    "MSHARE_MAX_BITS",
    "MAX_GRID_BITS",
    "quantize",
    "bin_upper_edges",
    "grid_points",
    "key_bytes",
    "dcf_client_keys",
    "mshare_client_keys",
    "pointwise_client_shares",
    "parse_mshare_keys",
    "parse_keys",
    "DCFShares",
    "dcf_full_domain_sum",
    "DCF_FULL_DOMAIN_MAX_BITS",
    "MShareShares",
    "PointwiseShares",
    "reduce_mod",
    "to_signed",
    "uniform_words",
]

SCHEMES = ("dcf", "mshare", "pointwise")
MSHARE_VERSION = 1
KIND_SEED = 0x21
KIND_VECTOR = 0x22
_HEADER = 6
#: Largest domain for the O(2^n)-size ``mshare`` vector keys.
MSHARE_MAX_BITS = 16
#: Largest threshold grid of one release (2^20 thresholds).
MAX_GRID_BITS = 20
#: Keys (or clients x thresholds) per vectorized evaluation chunk.
_CHUNK = 1 << 15


class ShareParameterError(PairwiseError, ValueError):
    """A public parameter of the sharing (domain, output bits, servers, thresholds, weights) is invalid."""


def _int(v: object, name: str, lo: int, hi: int) -> int:
    return check_int(v, name, lo=lo, hi=hi, error=ShareParameterError)


def _mask(l: int) -> np.uint64:
    return np.uint64((1 << l) - 1) if l < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)


def reduce_mod(values: np.ndarray, l: int) -> np.ndarray:
    """uint64 values reduced mod 2^l (arithmetic in uint64 wraps mod 2^64, a multiple of 2^l)."""
    return np.asarray(values, dtype=np.uint64) & _mask(l)


def to_signed(values: np.ndarray, l: int) -> np.ndarray:
    """Residues mod 2^l lifted to (-2^(l-1), 2^(l-1)] as int64 (the centred representative)."""
    u = reduce_mod(values, l).astype(np.uint64)
    if l == 64:
        return u.view(np.int64)
    half = np.uint64(1 << (l - 1))
    s = u.astype(np.int64)
    return np.where(u >= half, s - (1 << l), s)


def uniform_words(shape, l: int) -> np.ndarray:
    """Uniform residues mod 2^l (uint64) from os.urandom."""
    count = int(np.prod(shape, dtype=np.int64))
    w = np.frombuffer(os.urandom(8 * count), dtype="<u8").astype(np.uint64).reshape(shape)
    return w & _mask(l)


# ----------------------------------------------------------------------------- domain
def quantize(values: object, lo: float, hi: float, bits: int) -> np.ndarray:
    """Bin index of each value on the public grid of 2^bits equal bins of [lo, hi].

    x = floor((v - lo) / (hi - lo) * 2^bits), clipped to [0, 2^bits - 1]; so
    [x <= i] is [v < lo + (i + 1) (hi - lo) / 2^bits] for values inside the
    range (the last bin is closed).  Values outside [lo, hi] are clipped.
    """
    bits = _int(bits, "domain bits", 1, 32)
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ShareParameterError("values must be a non-empty 1-D array")
    if not np.all(np.isfinite(v)):
        raise ShareParameterError("values must be finite numbers")
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ShareParameterError(f"the range needs finite lo < hi, got [{lo}, {hi}]")
    size = 1 << bits
    x = np.floor((v - lo) / (hi - lo) * size)
    return np.clip(x, 0, size - 1).astype(np.uint64)


def bin_upper_edges(lo: float, hi: float, bits: int, grid_bits: int | None = None) -> np.ndarray:
    """Real threshold of each grid point: lo + (i + 1)(hi - lo) / 2^g (the upper bin edges)."""
    g = bits if grid_bits is None else grid_bits
    return float(lo) + (np.arange(1, (1 << g) + 1) * (float(hi) - float(lo)) / (1 << g))


def grid_points(domain_bits: int, grid_bits: int) -> np.ndarray:
    """Domain points tau_i = (i + 1) 2^(n - g) - 1 of a 2^g threshold grid (uint64)."""
    n = _int(domain_bits, "domain bits", 1, 32)
    g = _int(grid_bits, "grid bits", 1, min(n, MAX_GRID_BITS))
    step = 1 << (n - g)
    return (np.arange(1, (1 << g) + 1, dtype=np.uint64) * np.uint64(step)) - np.uint64(1)


def _values(values: object, n: int) -> np.ndarray:
    x = np.asarray(values)
    if x.ndim != 1 or x.size == 0:
        raise ShareParameterError("values must be a non-empty 1-D array of domain points")
    if not np.issubdtype(x.dtype, np.integer):
        raise ShareParameterError(f"values must be integers (quantize them first), got dtype {x.dtype}")
    if (x < 0).any() or (x.astype(np.uint64) >= np.uint64(1 << n)).any():
        raise ShareParameterError(f"values must lie in the {n}-bit domain [0, {(1 << n) - 1}]")
    return x.astype(np.uint64)


def _weights(weights: object, count: int, l: int) -> np.ndarray:
    if weights is None:
        return np.ones(count, dtype=np.uint64)
    w = np.asarray(weights)
    if w.shape != (count,) or not np.issubdtype(w.dtype, np.integer):
        raise ShareParameterError(f"weights must be {count} integers, got shape {w.shape} dtype {w.dtype}")
    if (w < 0).any() or (w.astype(np.uint64) > _mask(l)).any():
        raise ShareParameterError(f"weights must lie in [0, 2^{l})")
    return w.astype(np.uint64)


def key_bytes(scheme: str, domain_bits: int, output_bits: int, *, vector: bool = False) -> int:
    """Size of one serialized key (``mshare``: seed key, or the vector key with ``vector=True``)."""
    if scheme == "dcf":
        return dcf_key_bytes(domain_bits, output_bits)
    if scheme == "mshare":
        return _HEADER + (((1 << domain_bits) * ((output_bits + 7) // 8)) if vector else 16)
    raise ShareParameterError(f"scheme {scheme!r} has no keys; choose dcf or mshare")


# ----------------------------------------------------------------------------- dcf
def dcf_client_keys(values: object, weights: object, *, domain_bits: int, output_bits: int) -> list[list[bytes]]:
    """DCF keys of f_i(t) = w_i [t >= x_i]: ``keys[b][i]`` is client i's key for server b (m = 2)."""
    n = _int(domain_bits, "domain bits", 1, 32)
    l = _int(output_bits, "output bits", 1, 64)
    x = _values(values, n)
    w = _weights(weights, x.size, l)
    k0, k1 = dcf_gen_batch(x, w, n, l, comparison="ge")
    return [k0.to_bytes_list(), k1.to_bytes_list()]


def dcf_full_domain_sum(batch: DCFKeyBatch) -> np.ndarray:
    """(2^n,) this server's share of every threshold's count: :meth:`pairwise.fss.DCFKeyBatch.full_domain_sum`."""
    if batch.n > DCF_FULL_DOMAIN_MAX_BITS:
        raise ShareParameterError(f"full-domain DCF evaluation is limited to n <= {DCF_FULL_DOMAIN_MAX_BITS}")
    return reduce_mod(batch.full_domain_sum(), batch.l)


class DCFShares:
    """One series of DCF keys held by one server (one row per accepted client)."""

    scheme = "dcf"

    def __init__(self, batch: DCFKeyBatch, l: int) -> None:
        self.batch = batch
        self.l = l

    def __len__(self) -> int:
        return len(self.batch)

    @classmethod
    def parse(cls, blobs: Sequence[bytes], *, party: int, m: int, n: int, l: int):
        """(shares of the good keys, kept indices, {index: reason}) -- a bad key rejects its client only."""
        if m != 2:
            raise ShareParameterError(f"the dcf scheme is two-party (m = 2), got m = {m}; use mshare for m > 2")
        batch, kept, rejected = DCFKeyBatch.parse_valid(list(blobs), n=n, l=l, party=party)
        return cls(batch, l), kept, {i: str(e) for i, e in rejected.items()}

    @classmethod
    def concat(cls, parts: Sequence[DCFShares]) -> DCFShares:
        return cls(DCFKeyBatch.concat([p.batch for p in parts]), parts[0].l)

    def take(self, rows: np.ndarray) -> DCFShares:
        return DCFShares(self.batch[np.asarray(rows, dtype=np.intp)], self.l)

    def cumulative_shares(self, points: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """This server's shares of sum_i w_i [x_i <= t] for every t in ``points`` (uint64 mod 2^l).

        Many keys: one vectorized walk of all keys per threshold.  Few keys:
        keys x thresholds are tiled into chunks of ~2^15 walks, so a small
        data set costs a few numpy calls rather than one per threshold.
        """
        batch = self.batch if rows is None else self.batch[np.asarray(rows, dtype=np.intp)]
        pts = np.asarray(points, dtype=np.uint64)
        K, T = len(batch), pts.size
        out = np.zeros(T, dtype=np.uint64)
        if K == 0 or T == 0:
            return out
        n = batch.n
        if n <= DCF_FULL_DOMAIN_MAX_BITS and 4 * T * n >= 11 * (1 << n):
            # many thresholds: one breadth-first expansion of every key beats T separate walks
            # (measured crossover at n = 10: about 275 thresholds, i.e. T n ~ 2.75 2^n)
            return dcf_full_domain_sum(batch)[pts.astype(np.intp)]
        if K >= _CHUNK // 4:
            for j, t in enumerate(pts):
                out[j] = batch.eval_sum(int(t))
            return out
        g = max(1, _CHUNK // K)
        for t0 in range(0, T, g):
            tt = pts[t0 : t0 + g]
            idx = np.tile(np.arange(K), tt.size)
            rep = batch[idx]
            shares = rep.eval(np.repeat(tt, K), chunk=None)
            out[t0 : t0 + tt.size] = shares.reshape(tt.size, K).sum(axis=1, dtype=np.uint64)
        return reduce_mod(out, self.l)


# ----------------------------------------------------------------------------- mshare
def _expand(seeds: np.ndarray, n: int, l: int) -> np.ndarray:
    """PRG expansion of (k, 2) seeds to (k, 2^n) words mod 2^l (fixed-key MMO PRG of mpc.aes)."""
    size = 1 << n
    blocks = mmo_prg(seeds, (size + 1) // 2)  # (k, nb, 2)
    words = blocks.reshape(seeds.shape[0], -1)[:, :size]
    return words & _mask(l)


def _header(kind: int, party: int, m: int, n: int, l: int) -> bytes:
    return bytes((MSHARE_VERSION, kind, party, m, n, l))


def mshare_client_keys(
    values: object, weights: object, *, m: int, domain_bits: int, output_bits: int, first: int = 0
) -> list[list[bytes]]:
    """m-party additive shares of w_i e_{x_i}: ``keys[j][i]`` is client i's key for server j.

    The client at upload position p = ``first`` + i gets its vector key from
    server p mod m (the public rotation the servers check), every other
    server a 16-byte seed (see the module docstring).  Vectorized over clients.
    """
    m = _int(m, "number of servers m", 2, 255)
    n = _int(domain_bits, "domain bits", 1, MSHARE_MAX_BITS)
    l = _int(output_bits, "output bits", 1, 64)
    x = _values(values, n)
    w = _weights(weights, x.size, l)
    K, size, wb = x.size, 1 << n, (l + 7) // 8
    holder = (int(first) + np.arange(K)) % m
    seeds = random_blocks(m, K)
    keys: list[list[bytes]] = [[b""] * K for _ in range(m)]
    for j in range(m):
        head = _header(KIND_SEED, j, m, n, l)
        for i in np.flatnonzero(holder != j):
            keys[j][i] = head + seeds[j, i].astype("<u8").tobytes()
    step = max(1, _CHUNK // max(1, size // 64))
    for c0 in range(0, K, step):
        rows = np.arange(c0, min(K, c0 + step))
        vec = np.zeros((rows.size, size), dtype=np.uint64)
        vec[np.arange(rows.size), x[rows].astype(np.intp)] = w[rows]
        for j in range(m):
            sel = np.flatnonzero(holder[rows] != j)
            if sel.size:
                vec[sel] -= _expand(seeds[j, rows[sel]], n, l)
        vec &= _mask(l)
        raw = vec.astype("<u8").view(np.uint8).reshape(rows.size, size, 8)[:, :, :wb]
        for r, i in enumerate(rows):
            j = int(holder[i])
            keys[j][i] = _header(KIND_VECTOR, j, m, n, l) + raw[r].tobytes()
    return keys


def parse_mshare_keys(blobs: Sequence[bytes], *, party: int, m: int, n: int, l: int):
    """Validate ``mshare`` keys: (kinds (K,) uint8, seeds (K, 2), vectors (Kv, 2^n), vec_index, kept, rejected)."""
    size, wb = 1 << n, (l + 7) // 8
    seed_len, vec_len = _HEADER + 16, _HEADER + size * wb
    kinds, seeds, vec_raw, vec_index, kept = [], [], [], [], []
    rejected: dict[int, str] = {}
    for i, b in enumerate(blobs):
        if not isinstance(b, (bytes, bytearray)):
            rejected[i] = f"mshare key {i}: must be bytes"
            continue
        if len(b) < _HEADER:
            rejected[i] = f"mshare key {i}: truncated: {len(b)} bytes, shorter than the {_HEADER}-byte header"
            continue
        ver, kind, p, mm, nn, ll = b[:_HEADER]
        if ver != MSHARE_VERSION:
            rejected[i] = f"mshare key {i}: unsupported version {ver} (expected {MSHARE_VERSION})"
        elif kind not in (KIND_SEED, KIND_VECTOR):
            rejected[i] = f"mshare key {i}: unknown kind 0x{kind:02x}"
        elif (p, mm, nn, ll) != (party, m, n, l):
            rejected[i] = (
                f"mshare key {i}: header (party {p}, m {mm}, n {nn}, l {ll}) does not match "
                f"this server's (party {party}, m {m}, n {n}, l {l})"
            )
        elif len(b) != (seed_len if kind == KIND_SEED else vec_len):
            want = seed_len if kind == KIND_SEED else vec_len
            what = "truncated" if len(b) < want else "too long"
            rejected[i] = f"mshare key {i}: {what}: {len(b)} bytes, expected {want}"
        if i in rejected:
            continue
        kept.append(i)
        kinds.append(kind)
        if kind == KIND_SEED:
            seeds.append(np.frombuffer(bytes(b[_HEADER:]), dtype="<u8").astype(np.uint64))
            vec_index.append(-1)
        else:
            seeds.append(np.zeros(2, dtype=np.uint64))
            vec_index.append(len(vec_raw))
            vec_raw.append(bytes(b[_HEADER:]))
    if vec_raw:
        raw = np.frombuffer(b"".join(vec_raw), dtype=np.uint8).reshape(len(vec_raw), size, wb)
        full = np.zeros((len(vec_raw), size, 8), dtype=np.uint8)
        full[:, :, :wb] = raw
        vectors = full.view("<u8").reshape(len(vec_raw), size).astype(np.uint64)
        bad = (vectors > _mask(l)).any(axis=1) if l < 64 else np.zeros(len(vec_raw), bool)
        if bad.any():
            # non-canonical words (bits at or above 2^l): reject those clients, keep the rest
            drop = {kept[k] for k in range(len(kept)) if vec_index[k] >= 0 and bad[vec_index[k]]}
            for i in drop:
                rejected[i] = f"mshare key {i}: vector word not below 2^{l} (non-canonical)"
            keep_pos = [k for k in range(len(kept)) if kept[k] not in drop]
            good_vec = np.flatnonzero(~bad)
            remap = -np.ones(len(vec_raw), dtype=np.int64)
            remap[good_vec] = np.arange(good_vec.size)
            kept = [kept[k] for k in keep_pos]
            kinds = [kinds[k] for k in keep_pos]
            seeds = [seeds[k] for k in keep_pos]
            vec_index = [int(remap[vec_index[k]]) if vec_index[k] >= 0 else -1 for k in keep_pos]
            vectors = vectors[good_vec]
    else:
        vectors = np.zeros((0, size), dtype=np.uint64)
    return (
        np.array(kinds, dtype=np.uint8),
        np.array(seeds, dtype=np.uint64).reshape(-1, 2),
        vectors,
        np.array(vec_index, dtype=np.int64),
        kept,
        rejected,
    )


class MShareShares:
    """One series of ``mshare`` keys held by one server (seed or vector per client)."""

    scheme = "mshare"

    def __init__(
        self, kinds: np.ndarray, seeds: np.ndarray, vectors: np.ndarray, vec_index: np.ndarray, n: int, l: int
    ) -> None:
        self.kinds, self.seeds, self.vectors, self.vec_index = kinds, seeds, vectors, vec_index
        self.n, self.l = n, l

    def __len__(self) -> int:
        return self.kinds.size

    @classmethod
    def parse(cls, blobs: Sequence[bytes], *, party: int, m: int, n: int, l: int):
        if n > MSHARE_MAX_BITS:
            raise ShareParameterError(f"mshare keys are O(2^n): domain bits must be <= {MSHARE_MAX_BITS}, got {n}")
        kinds, seeds, vectors, vi, kept, rejected = parse_mshare_keys(blobs, party=party, m=m, n=n, l=l)
        return cls(kinds, seeds, vectors, vi, n, l), kept, rejected

    @classmethod
    def concat(cls, parts: Sequence[MShareShares]) -> MShareShares:
        offs = np.cumsum([0] + [p.vectors.shape[0] for p in parts[:-1]])
        vi = np.concatenate([np.where(p.vec_index >= 0, p.vec_index + o, -1) for p, o in zip(parts, offs)])
        return cls(
            np.concatenate([p.kinds for p in parts]),
            np.concatenate([p.seeds for p in parts]),
            np.concatenate([p.vectors for p in parts]),
            vi,
            parts[0].n,
            parts[0].l,
        )

    def take(self, rows: np.ndarray) -> MShareShares:
        rows = np.asarray(rows, dtype=np.intp)
        vi = self.vec_index[rows]
        used = vi[vi >= 0]
        remap = np.where(vi >= 0, np.cumsum(vi >= 0) - 1, -1)
        return MShareShares(self.kinds[rows], self.seeds[rows], self.vectors[used], remap, self.n, self.l)

    def histogram_shares(self, rows: np.ndarray | None = None) -> np.ndarray:
        """This server's share of the weighted histogram sum_i w_i e_{x_i} (uint64 mod 2^l, length 2^n)."""
        src = self if rows is None else self.take(rows)
        size = 1 << self.n
        h = np.zeros(size, dtype=np.uint64)
        if src.vectors.shape[0]:
            h += src.vectors.sum(axis=0, dtype=np.uint64)
        seed_rows = np.flatnonzero(src.vec_index < 0)
        step = max(1, _CHUNK // max(1, size // 64))
        for c0 in range(0, seed_rows.size, step):
            sl = seed_rows[c0 : c0 + step]
            h += _expand(src.seeds[sl], self.n, self.l).sum(axis=0, dtype=np.uint64)
        return reduce_mod(h, self.l)

    def cumulative_shares(self, points: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        cum = np.cumsum(self.histogram_shares(rows), dtype=np.uint64)
        return reduce_mod(cum[np.asarray(points, dtype=np.intp)], self.l)


# ----------------------------------------------------------------------------- pointwise
def pointwise_client_shares(
    values: object, weights: object, points: object, *, m: int, domain_bits: int, output_bits: int
) -> list[np.ndarray]:
    """Additive shares of w_i [x_i <= t] for t in ``points``: one (K, |B|) uint64 array per server."""
    m = _int(m, "number of servers m", 2, 255)
    n = _int(domain_bits, "domain bits", 1, 32)
    l = _int(output_bits, "output bits", 1, 64)
    x = _values(values, n)
    w = _weights(weights, x.size, l)
    pts = np.asarray(points, dtype=np.uint64)
    if pts.ndim != 1 or pts.size == 0:
        raise ShareParameterError("points must be a non-empty 1-D array")
    truth = np.where(x[:, None] <= pts[None, :], w[:, None], np.uint64(0))
    shares = [uniform_words(truth.shape, l) for _ in range(m - 1)]
    last = truth.copy()
    for s in shares:
        last -= s
    shares.append(reduce_mod(last, l))
    return shares


class PointwiseShares:
    """One series of a pointwise round: per client, shares at the round's thresholds."""

    scheme = "pointwise"

    def __init__(self, points: np.ndarray, values: np.ndarray, l: int) -> None:
        self.points = np.asarray(points, dtype=np.uint64)
        self.values = values  # (K, |B|) uint64
        self.l = l

    def __len__(self) -> int:
        return self.values.shape[0]

    @classmethod
    def concat(cls, parts: Sequence[PointwiseShares]) -> PointwiseShares:
        return cls(parts[0].points, np.concatenate([p.values for p in parts]), parts[0].l)

    def take(self, rows: np.ndarray) -> PointwiseShares:
        return PointwiseShares(self.points, self.values[np.asarray(rows, dtype=np.intp)], self.l)

    def cumulative_shares(self, points: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        pts = np.asarray(points, dtype=np.uint64)
        col = np.searchsorted(self.points, pts)
        if (col >= self.points.size).any() or (self.points[np.minimum(col, self.points.size - 1)] != pts).any():
            raise ShareParameterError(
                "a requested threshold was not part of this pointwise round; "
                "the clients must send shares for every threshold that is queried"
            )
        vals = self.values if rows is None else self.values[np.asarray(rows, dtype=np.intp)]
        return reduce_mod(vals[:, col].sum(axis=0, dtype=np.uint64), self.l)


def parse_keys(scheme: str, blobs: Sequence[bytes], *, party: int, m: int, n: int, l: int):
    """Dispatch to :meth:`DCFShares.parse` or :meth:`MShareShares.parse`."""
    if scheme == "dcf":
        return DCFShares.parse(blobs, party=party, m=m, n=n, l=l)
    if scheme == "mshare":
        return MShareShares.parse(blobs, party=party, m=m, n=n, l=l)
    raise ShareParameterError(f"unknown key scheme {scheme!r}; choose dcf or mshare")
