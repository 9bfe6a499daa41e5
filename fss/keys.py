"""Parameters, errors and the versioned byte format of DPF, DCF and verifiable DPF keys.

What it does
    Validates the public parameters of a function-secret-sharing key (domain
    bits ``n``, output bits ``l``, the point ``alpha``, the payload ``beta``,
    evaluation points) and converts keys between their struct-of-arrays form
    (numpy arrays, one row per key) and bytes, for one key or for a whole
    batch at once with no Python loop per key.  Malformed bytes raise
    :class:`KeyFormatError`, which names the bad key's index in a batch.

Byte format
    Version 1 (DPF, DCF) and 2 (VDPF), little-endian, no padding: version,
    kind, party, n, l, the root seed, per level a seed correction (and for a
    DCF a value correction), the packed control-bit corrections, the output
    correction and, for a VDPF, a 64-byte check correction.  A DCF key is
    673 bytes for n = l = 32.  The encoding is canonical (unused bits and the
    lowest bit of every seed correction zero, a VDPF check correction never
    all zero), so ``to_bytes(from_bytes(b)) == b`` for every accepted ``b``.
    The field table and the size arithmetic ([BCG+21, Sec. 3]):
    ``docs/fss.md``, "Key byte format".

Security model
    Nothing in this module is secret by itself; it moves key material around.
    It never logs or prints key bytes, and error messages name only the
    field, the offset class and the key index, never key contents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from pairwise.dp.errors import PairwiseError
from pairwise.dp.validate import check_int

__all__ = [
    "FORMAT_VERSION",
    "KIND_DPF",
    "KIND_DCF",
    "KIND_VDPF",
    "VDPF_FORMAT_VERSION",
    "CHECK_BYTES",
    "HEADER_BYTES",
    "FSSParameterError",
    "KeyFormatError",
    "KeyLayout",
    "key_layout",
    "dpf_key_bytes",
    "dcf_key_bytes",
    "vdpf_key_bytes",
    "format_version",
    "validate_params",
    "validate_point",
    "points_array",
    "alphas_array",
    "betas_array",
    "encode_keys",
    "decode_keys",
    "IntLike",
    "IntArrayLike",
]

#: One integer (a point, a payload or a share): a Python int or a numpy integer.
IntLike: TypeAlias = int | np.integer
#: A 1-D batch of integers (points, payloads or shares): a sequence of ints or an integer numpy array.
IntArrayLike: TypeAlias = Sequence[int] | np.ndarray

FORMAT_VERSION = 1
#: Version byte of VDPF keys (kind 3): the format of version 1 plus the 64-byte check correction.
VDPF_FORMAT_VERSION = 2
KIND_DPF = 1
KIND_DCF = 2
KIND_VDPF = 3
KIND_NAMES = {KIND_DPF: "DPF", KIND_DCF: "DCF", KIND_VDPF: "VDPF"}
_VERSIONS = {KIND_DPF: FORMAT_VERSION, KIND_DCF: FORMAT_VERSION, KIND_VDPF: VDPF_FORMAT_VERSION}
#: Bytes of a VDPF check correction: four 128-bit blocks (4 lambda bits, de Castro-Polychroniadou 2022).
CHECK_BYTES = 64
HEADER_BYTES = 5
SEED_BYTES = 16
MAX_BITS = 64


class FSSParameterError(PairwiseError, ValueError):
    """A public FSS parameter (n, l, alpha, beta, an evaluation point, a comparison) is invalid."""


class KeyFormatError(PairwiseError, ValueError):
    """Key bytes are truncated, too long, of another version/kind/party, or not canonical.

    ``index`` is the position of the first bad key in a batch (``None`` for a
    single key); ``indices`` lists every bad key found and ``reasons`` maps
    each of them to its message, so a server can reject exactly those clients.
    """

    def __init__(self, message: str, index: int | None = None, reasons: dict[int, str] | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.reasons = dict(reasons or {})
        self.indices = sorted(self.reasons) if self.reasons else ([] if index is None else [index])


# --------------------------------------------------------------------------- parameters


def _as_int(value: object, what: str) -> int:
    return check_int(value, what, error=FSSParameterError)


def validate_params(n: object, l: object) -> tuple[int, int]:
    """Check 1 <= n <= 64 (domain bits) and 1 <= l <= 64 (output bits); return them as ints."""
    n = _as_int(n, "domain bits n")
    l = _as_int(l, "output bits l")
    if not 1 <= n <= MAX_BITS:
        raise FSSParameterError(f"domain bits n must be in 1..64, got {n}")
    if not 1 <= l <= MAX_BITS:
        raise FSSParameterError(f"output bits l must be in 1..64, got {l}")
    return n, l


def validate_point(x: object, n: int, what: str = "evaluation point x") -> int:
    """Check 0 <= x < 2^n and return x as an int."""
    x = _as_int(x, what)
    if not 0 <= x < (1 << n):
        raise FSSParameterError(f"{what} must be in [0, 2^{n}) (a domain of n = {n} bits), got {x}")
    return x


def _int_array(values: object, what: str) -> np.ndarray:
    """Convert a sequence/array of integers to uint64, rejecting floats, bools and out-of-range."""
    arr = np.asarray(values)
    if arr.dtype == object:
        py = [_as_int(v, what) for v in arr.reshape(-1)]
        if any(v < 0 or v >= 1 << 64 for v in py):
            raise FSSParameterError(f"{what} must be in [0, 2^64), got an entry outside")
        return np.array(py, dtype=np.uint64).reshape(arr.shape)
    if arr.dtype.kind == "u":
        return arr.astype(np.uint64, copy=False)
    if arr.dtype.kind == "i":
        if arr.size and int(arr.min()) < 0:
            raise FSSParameterError(f"{what} must be non-negative, got {int(arr.min())}")
        return arr.astype(np.uint64)
    raise FSSParameterError(f"{what} must be an integer array, got dtype {arr.dtype}")


def points_array(xs: object, n: int, what: str = "evaluation points") -> np.ndarray:
    """Validate a 1-D batch of points in [0, 2^n) and return it as uint64."""
    arr = _int_array(xs, what)
    if arr.ndim != 1:
        raise FSSParameterError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if n < 64 and arr.size and int(arr.max()) >> n:
        bad = int(np.flatnonzero(arr >> np.uint64(n))[0])
        raise FSSParameterError(f"{what}[{bad}] = {int(arr[bad])} is outside [0, 2^{n}) (a domain of n = {n} bits)")
    return arr


def alphas_array(alphas: object, n: int) -> np.ndarray:
    """Validate the special points alpha (one per key)."""
    return points_array(alphas, n, "alpha")


def betas_array(betas: Any, l: int, count: int) -> np.ndarray:
    """Validate payloads: integers in (-2^l, 2^l), reduced mod 2^l; a scalar is broadcast to ``count``."""
    if np.ndim(betas) == 0:
        b = _as_int(betas, "beta")
        _check_beta(b, l, None)
        return np.full(count, b % (1 << l), dtype=np.uint64)
    arr = np.asarray(betas)
    if arr.shape != (count,):
        raise FSSParameterError(f"beta must be a scalar or have one entry per alpha ({count}), got shape {arr.shape}")
    if arr.dtype.kind == "u":
        a = arr.astype(np.uint64)
        if l < 64 and count and int(a.max()) >> l:
            k = int(np.flatnonzero(a >> np.uint64(l))[0])
            _check_beta(int(a[k]), l, k)
        return a
    if arr.dtype.kind == "i":
        a = arr.astype(np.int64)
        if l <= 62:
            bad = np.flatnonzero((a <= -(1 << l)) | (a >= (1 << l)))
        elif l == 63:
            bad = np.flatnonzero(a == np.iinfo(np.int64).min)
        else:
            bad = np.zeros(0, dtype=np.int64)
        if bad.size:
            _check_beta(int(a[bad[0]]), l, int(bad[0]))
        return a.view(np.uint64) & _mask(l)
    if arr.dtype != object:
        raise FSSParameterError(f"beta must be integers, got dtype {arr.dtype}")
    out = np.empty(count, dtype=np.uint64)
    for k, v in enumerate(arr):
        b = _as_int(v, f"beta[{k}]")
        _check_beta(b, l, k)
        out[k] = b % (1 << l)
    return out


def _check_beta(b: int, l: int, k: int | None) -> None:
    if not -(1 << l) < b < (1 << l):
        where = "beta" if k is None else f"beta[{k}]"
        raise FSSParameterError(
            f"{where} = {b} is outside (-2^{l}, 2^{l}); outputs live in Z_2^{l}, reduce it mod 2^{l} first"
        )


def _mask(l: int) -> np.uint64:
    return np.uint64((1 << l) - 1)


def format_version(kind: int) -> int:
    """The version byte of keys of ``kind`` (1 for DPF and DCF, 2 for VDPF)."""
    return _VERSIONS[kind]


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class KeyLayout:
    """Byte offsets of one key's fields (see the module docstring)."""

    kind: int
    n: int
    l: int

    @property
    def value_bytes(self) -> int:
        return (self.l + 7) // 8

    @property
    def level_bytes(self) -> int:
        return SEED_BYTES + (self.value_bytes if self.kind == KIND_DCF else 0)

    @property
    def seed_offset(self) -> int:
        return HEADER_BYTES

    @property
    def levels_offset(self) -> int:
        return HEADER_BYTES + SEED_BYTES

    @property
    def bits_offset(self) -> int:
        return self.levels_offset + self.n * self.level_bytes

    @property
    def bits_bytes(self) -> int:
        return (2 * self.n + 7) // 8

    @property
    def final_offset(self) -> int:
        return self.bits_offset + self.bits_bytes

    @property
    def check_offset(self) -> int:
        return self.final_offset + self.value_bytes

    @property
    def check_bytes(self) -> int:
        return CHECK_BYTES if self.kind == KIND_VDPF else 0

    @property
    def size(self) -> int:
        return self.check_offset + self.check_bytes


def key_layout(kind: int, n: int, l: int) -> KeyLayout:
    n, l = validate_params(n, l)
    if kind not in KIND_NAMES:
        raise FSSParameterError(f"unknown key kind {kind}")
    return KeyLayout(kind, n, l)


def dpf_key_bytes(n: int, l: int) -> int:
    """Serialized size in bytes of one DPF key."""
    return key_layout(KIND_DPF, n, l).size


def dcf_key_bytes(n: int, l: int) -> int:
    """Serialized size in bytes of one DCF key (673 for n = l = 32)."""
    return key_layout(KIND_DCF, n, l).size


def vdpf_key_bytes(n: int, l: int) -> int:
    """Serialized size in bytes of one VDPF key (a DPF key and 64 bytes of check correction)."""
    return key_layout(KIND_VDPF, n, l).size


# --------------------------------------------------------------------------- encode


def encode_keys(
    kind: int,
    party: int,
    n: int,
    l: int,
    seeds: np.ndarray,
    scw: np.ndarray,
    tcw: np.ndarray,
    fcw: np.ndarray,
    vcw: np.ndarray | None = None,
    ccw: np.ndarray | None = None,
) -> np.ndarray:
    """Serialize K keys given as arrays into a (K, size) uint8 array, one key per row.

    seeds (K, 2) uint64; scw (n, 2, K) uint64 (low/high word planes); tcw (n, 2, K)
    uint8 in {0, 1} (left/right planes); fcw (K,) uint64; vcw (n, K) uint64 for
    a DCF; ccw (K, 4, 2) uint64 (four blocks) for a VDPF.  Values must already be reduced mod 2^l.  Vectorized over keys:
    the Python loop runs over the n levels, each step copies one field of
    every key (fixed-width ``void`` elements, so no per-byte loops).
    """
    lay = key_layout(kind, n, l)
    K = seeds.shape[0]
    w = lay.value_bytes
    out = np.empty((K, lay.size), dtype=np.uint8)
    header = np.frombuffer(bytes([format_version(kind), kind, party, n, l]), dtype=f"V{HEADER_BYTES}")
    _col(out, 0, HEADER_BYTES)[:] = header[0]
    _col(out, lay.seed_offset, 16)[:] = _as_le(seeds).view("V16")[:, 0]
    pair = np.empty((K, 2), dtype="<u8")
    for i in range(n):
        off = lay.levels_offset + i * lay.level_bytes
        pair[:, 0] = scw[i, 0]
        pair[:, 1] = scw[i, 1]
        _col(out, off, 16)[:] = pair.view("V16")[:, 0]
        if kind == KIND_DCF:
            assert vcw is not None
            _col(out, off + 16, w)[:] = _low_bytes(vcw[i], w)
    for j in range(lay.bits_bytes):
        acc = np.zeros(K, dtype=np.uint8)
        for q in range(4):
            lvl = 4 * j + q
            if lvl < n:
                acc |= tcw[lvl, 0] << np.uint8(2 * q)
                acc |= tcw[lvl, 1] << np.uint8(2 * q + 1)
        out[:, lay.bits_offset + j] = acc
    _col(out, lay.final_offset, w)[:] = _low_bytes(fcw, w)
    if kind == KIND_VDPF:
        assert ccw is not None
        _col(out, lay.check_offset, CHECK_BYTES)[:] = _as_le(ccw.reshape(K, 8)).view(f"V{CHECK_BYTES}")[:, 0]
    return out


def _col(raw: np.ndarray, off: int, width: int) -> np.ndarray:
    """Column view (K,) of fixed-width ``void`` elements at byte offset ``off`` of each row."""
    return raw[:, off : off + width].view(f"V{width}")[:, 0]


def _as_le(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr, dtype="<u8")


def _low_bytes(words: np.ndarray, w: int) -> np.ndarray:
    """(K,) void-w view of the w low-order (little-endian) bytes of each uint64."""
    le = _as_le(words)
    return np.ndarray(le.shape, dtype=f"V{w}", buffer=le, strides=le.strides)


# --------------------------------------------------------------------------- decode


@dataclass
class DecodedKeys:
    """Struct-of-arrays content of K keys of one kind, party, n and l."""

    kind: int
    party: int
    n: int
    l: int
    seeds: np.ndarray  # (K, 2) uint64
    scw: np.ndarray  # (n, 2, K) uint64 (low, high word planes)
    tcw: np.ndarray  # (n, 2, K) uint8 (left, right planes)
    fcw: np.ndarray  # (K,) uint64
    vcw: np.ndarray | None  # (n, K) uint64, DCF only
    ccw: np.ndarray | None = None  # (K, 4, 2) uint64, VDPF only


def _header_problem(blob: bytes, kind: int, n: int | None, l: int | None, party: int | None) -> str | None:
    """Why a key's header or length is unacceptable (None if fine)."""
    name = KIND_NAMES[kind]
    if len(blob) < HEADER_BYTES:
        return f"truncated: {len(blob)} bytes, shorter than the {HEADER_BYTES}-byte header of a {name} key"
    ver, k, b, kn, kl = blob[:HEADER_BYTES]
    if k in _VERSIONS and k != kind and ver == _VERSIONS[k]:
        return f"this is a {KIND_NAMES[k]} key, expected a {name} key"
    if ver != _VERSIONS[kind]:
        return f"unsupported key format version {ver} (this library reads version {_VERSIONS[kind]})"
    if k != kind:
        other = KIND_NAMES.get(k)
        return (
            f"this is a {other} key, expected a {name} key"
            if other
            else f"unknown key kind byte {k}, expected {kind} ({name})"
        )
    if b not in (0, 1):
        return f"party byte is {b}, must be 0 or 1"
    if not 1 <= kn <= MAX_BITS:
        return f"domain bits n = {kn} in the header, must be in 1..64"
    if not 1 <= kl <= MAX_BITS:
        return f"output bits l = {kl} in the header, must be in 1..64"
    if n is not None and kn != n:
        return f"domain bits n = {kn}, expected {n}"
    if l is not None and kl != l:
        return f"output bits l = {kl}, expected {l}"
    if party is not None and b != party:
        return f"key for party {b}, expected party {party}"
    size = KeyLayout(kind, kn, kl).size
    if len(blob) < size:
        return f"truncated: {len(blob)} bytes, expected {size} for a {name} key with n={kn}, l={kl}"
    if len(blob) > size:
        return f"{len(blob) - size} trailing bytes: {len(blob)} bytes, expected {size} for a {name} key with n={kn}, l={kl}"
    return None


def _canonical_problems(raw: np.ndarray, lay: KeyLayout) -> dict[int, str]:
    """Vectorized canonical-form checks on a (K, size) byte array; {row: reason}."""
    problems: dict[int, str] = {}
    K = raw.shape[0]
    if K == 0:
        return problems
    levels = raw[:, lay.levels_offset : lay.bits_offset].reshape(K, lay.n, lay.level_bytes)
    bad = np.flatnonzero((levels[:, :, 0] & 1).any(axis=1))
    for r in bad:
        problems.setdefault(int(r), "a seed correction has its lowest bit set (not canonical)")
    if lay.l % 8:
        top = np.uint8((0xFF << (lay.l % 8)) & 0xFF)
        if lay.kind == KIND_DCF:
            bad = np.flatnonzero((levels[:, :, -1] & top).any(axis=1))
            for r in bad:
                problems.setdefault(
                    int(r), f"a value correction has bits set above bit {lay.l - 1} (not reduced mod 2^{lay.l})"
                )
        bad = np.flatnonzero(raw[:, -1] & top)
        for r in bad:
            problems.setdefault(
                int(r), f"the output correction has bits set above bit {lay.l - 1} (not reduced mod 2^{lay.l})"
            )
    if (2 * lay.n) % 8:
        top = np.uint8((0xFF << ((2 * lay.n) % 8)) & 0xFF)
        bad = np.flatnonzero(raw[:, lay.final_offset - 1] & top)
        for r in bad:
            problems.setdefault(int(r), "padding bits after the control-bit corrections are not zero")
    if lay.kind == KIND_VDPF:
        bad = np.flatnonzero(~raw[:, lay.check_offset : lay.check_offset + CHECK_BYTES].any(axis=1))
        for r in bad:
            problems.setdefault(int(r), "the check correction is all zero (never so in an honest VDPF key)")
    return problems


def decode_keys(
    blobs: Sequence[bytes | bytearray | memoryview],
    kind: int,
    *,
    n: int | None = None,
    l: int | None = None,
    party: int | None = None,
    collect: bool = False,
) -> tuple[DecodedKeys, list[int], dict[int, KeyFormatError]]:
    """Parse serialized keys into arrays (vectorized over keys).

    All keys must share kind, party, n and l; any of n, l, party left ``None``
    is taken from the first key.  With ``collect=False`` the first problem
    raises :class:`KeyFormatError` naming the bad index (and listing all bad
    ones); with ``collect=True`` bad keys are dropped and returned as
    ``{index: KeyFormatError}`` with the indices of the kept keys.
    """
    if isinstance(blobs, (bytes, bytearray, memoryview)):
        raise KeyFormatError("expected a sequence of keys (one bytes object per key), got one bytes object")
    name = KIND_NAMES[kind]
    problems: dict[int, str] = {}
    not_bytes: dict[int, str] = {}
    clean: list[bytes] = []
    for i, b in enumerate(blobs):
        if isinstance(b, bytes):
            clean.append(b)
        elif isinstance(b, (bytearray, memoryview)):
            clean.append(bytes(b))
        else:
            not_bytes[i] = f"must be bytes, got {type(b).__name__}"
            clean.append(b"")
    blobs = clean
    if blobs and (n is None or l is None or party is None):
        # Parameters come from the first key whose header is readable.
        for blob in blobs:
            if _header_problem(blob, kind, None, None, None) is None:
                n = blob[3] if n is None else n
                l = blob[4] if l is None else l
                party = blob[2] if party is None else party
                break
    if not blobs:
        if n is None or l is None:
            raise FSSParameterError("cannot infer n and l from an empty list of keys; pass n= and l=")
        party = 0 if party is None else party
    if n is not None and l is not None:
        n, l = validate_params(n, l)
    if party is not None and party not in (0, 1):
        raise FSSParameterError(f"party must be 0 or 1, got {party}")

    if n is None or l is None or party is None:  # no readable key at all
        for i, blob in enumerate(blobs):
            problems[i] = _header_problem(blob, kind, None, None, None) or "unreadable"
        lay = None
    else:
        lay = KeyLayout(kind, n, l)
        lengths = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
        good_len = lengths == lay.size
        if good_len.all():
            joined = b"".join(blobs)
        else:
            joined = None
        if joined is not None:
            raw = np.frombuffer(joined, dtype=np.uint8).reshape(len(blobs), lay.size)
        else:
            raw = np.zeros((len(blobs), lay.size), dtype=np.uint8)
            for i in map(int, np.flatnonzero(good_len)):
                raw[i] = np.frombuffer(blobs[i], dtype=np.uint8)
        expected = np.array([format_version(kind), kind, party, n, l], dtype=np.uint8)
        head_bad = ~good_len | (raw[:, :HEADER_BYTES] != expected).any(axis=1)
        for i in map(int, np.flatnonzero(head_bad)):
            problems[i] = _header_problem(blobs[i], kind, n, l, party) or "header mismatch"
        for i, why in _canonical_problems(raw, lay).items():
            problems.setdefault(i, why)
    problems.update(not_bytes)

    errors = {i: KeyFormatError(f"{name} key {i}: {why}", index=i) for i, why in sorted(problems.items())}
    if errors and not collect:
        first = min(errors)
        more = len(errors) - 1
        msg = str(errors[first])
        if more:
            rest = sorted(errors)[1:11]
            msg += f" (and {more} more bad key{'s' if more > 1 else ''}: {rest}{' ...' if more > 10 else ''})"
        raise KeyFormatError(msg, index=first, reasons={i: str(e) for i, e in errors.items()})
    kept = [i for i in range(len(blobs)) if i not in errors]
    if lay is None:
        lay = KeyLayout(kind, n or 1, l or 1)
        raw = np.zeros((0, lay.size), dtype=np.uint8)
    elif errors:
        raw = raw[kept]
    return _split(raw, lay, party if party is not None else 0), kept, errors


def _split(raw: np.ndarray, lay: KeyLayout, party: int) -> DecodedKeys:
    K = raw.shape[0]
    n, w = lay.n, lay.value_bytes
    seeds = np.ascontiguousarray(_col(raw, lay.seed_offset, 16)).view("<u8").reshape(K, 2).astype(np.uint64)
    scw = np.empty((n, 2, K), dtype=np.uint64)
    vcw = np.empty((n, K), dtype=np.uint64) if lay.kind == KIND_DCF else None
    for i in range(n):
        off = lay.levels_offset + i * lay.level_bytes
        pair = np.ascontiguousarray(_col(raw, off, 16)).view("<u8").reshape(K, 2)
        scw[i, 0] = pair[:, 0]
        scw[i, 1] = pair[:, 1]
        if vcw is not None:
            vcw[i] = _read_low_bytes(raw, off + 16, w)
    tcw = np.empty((n, 2, K), dtype=np.uint8)
    for j in range(lay.bits_bytes):
        byte = raw[:, lay.bits_offset + j]
        for q in range(4):
            lvl = 4 * j + q
            if lvl < n:
                tcw[lvl, 0] = (byte >> np.uint8(2 * q)) & np.uint8(1)
                tcw[lvl, 1] = (byte >> np.uint8(2 * q + 1)) & np.uint8(1)
    fcw = _read_low_bytes(raw, lay.final_offset, w)
    ccw = None
    if lay.kind == KIND_VDPF:
        ccw = np.ascontiguousarray(_col(raw, lay.check_offset, CHECK_BYTES)).view("<u8").reshape(K, 4, 2)
        ccw = ccw.astype(np.uint64)
    return DecodedKeys(lay.kind, party, n, lay.l, seeds, scw, tcw, fcw, vcw, ccw)


def _read_low_bytes(raw: np.ndarray, off: int, w: int) -> np.ndarray:
    """uint64 (K,) from w little-endian bytes at offset ``off`` of each row (zero-extended)."""
    buf = np.zeros((raw.shape[0], 8), dtype=np.uint8)
    buf[:, :w].view(f"V{w}")[:, 0] = _col(raw, off, w)
    return buf.view("<u8")[:, 0].astype(np.uint64)
