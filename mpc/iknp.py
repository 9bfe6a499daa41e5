"""IKNP oblivious-transfer extension producing Delta-correlated OTs, and the OTs built on them.

What it does
    After 128 base OTs (:mod:`pairwise.mpc.baseot`), the extension turns 16 bytes of
    communication and a few AES calls into one *correlated OT* (COT): the
    sender (the Yao garbler, :class:`COTSender`) holds a global offset Delta
    and gets blocks ``q``; the receiver (the evaluator, :class:`COTReceiver`)
    gets random bits ``r`` and blocks ``t = q xor r*Delta``.  On top of the
    COTs:

    * derandomised label transfer for Yao (one message of n bits):
      :meth:`COTReceiver.recv_labels` sends ``d = r xor x`` and returns
      ``t``; :meth:`COTSender.send_labels` returns the zero labels
      ``q xor d*Delta``.  Then ``t = zero xor x*Delta``: the evaluator holds the
      label of its input bit ``x`` and nothing else (emp-sh2pc's scheme);
    * chosen-message OT (:meth:`COTSender.send_chosen` /
      :meth:`COTReceiver.recv_chosen`) of block messages, padded with the
      tweakable circular correlation-robust hash ``tccr_hash`` (TMMO) of
      :mod:`pairwise.mpc.aes`.

Protocol
    [IKNP03, Sec. 3.1, Fig. 1] with the roles of the base OT reversed (the
    correlated-OT variant of Asharov, Lindell, Schneider, Zohner, CCS 2013,
    Sec. 5.4, as emp-ot's ``IKNP``): the COT receiver is base-OT sender of
    128 seed pairs, the COT sender is base-OT receiver with the bits of Delta
    as choices; a batch of m COTs is one message of m x 128 bits, seeds are
    expanded with AES-128-CTR (keyed by the seed; PRF assumption).  Chosen OT
    pads with ``tccr_hash`` under tweaks whose high word has its top bit set.
    Step by step, the tweak layout and measurements: docs/ot.md, "The IKNP extension".

Security model
    Semi-honest parties.  Delta (127 secret bits; the lowest is 1 for
    point-and-permute) is hidden from the receiver by the base OTs; the
    receiver's bits by the PRG, assuming AES is a PRF.  Raw COT outputs are
    correlated, which free-XOR labels need; chosen OT hashes them with TMMO,
    a TCCR hash when fixed-key AES is a random permutation [GKWY20, Sec. 7.4].
    The session id and OT index enter every key derivation and tweak; a
    call-order or ``batch_size`` mismatch raises
    :class:`pairwise.mpc.errors.ProtocolError`.  Randomness: ``os.urandom`` only.
"""

from __future__ import annotations

import hashlib
import os
import struct
import types
from collections import deque

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from .aes import FixedKeyAES, tccr_hash
from .baseot import BaseOTReceiver, BaseOTSender
from .channel import Channel, session_bytes
from .errors import ProtocolError

__all__ = [
    "KAPPA",
    "DEFAULT_BATCH",
    "MAX_BATCH",
    "COTSender",
    "COTReceiver",
    "transpose_bit_matrix",
    "RowPRG",
    "chosen_ot_tweaks",
    "check_delta",
]

#: Security parameter: number of base OTs and bits per COT block.
KAPPA = 128
#: COTs per extension batch by default (1 MiB of traffic per batch).
DEFAULT_BATCH = 1 << 16
#: Largest allowed batch (16 MiB frames).
MAX_BATCH = 1 << 20
_BATCH_HEADER = struct.Struct("!QQ")  # batch number, COTs in the batch

_M1 = np.uint64(0x00AA00AA00AA00AA)
_M2 = np.uint64(0x0000CCCC0000CCCC)
_M3 = np.uint64(0x00000000F0F0F0F0)
_S7, _S14, _S28 = np.uint64(7), np.uint64(14), np.uint64(28)
# columns (bytes) per transpose chunk: 128 x 2048 bytes = 16384 COTs, a cache-sized working set
_TRANSPOSE_CHUNK = 2048


def transpose_bit_matrix(rows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Transpose a bit matrix stored as bytes with little-endian bit order.

    ``rows`` is a (R, C) uint8 array, R a multiple of 8: bit ``i`` of row ``j``
    is ``(rows[j, i // 8] >> (i % 8)) & 1``.  Returns the (8C, R/8) uint8 array
    whose row ``i`` holds bit ``i`` of every input row, in the same bit order.
    For R = 128 the result viewed as uint64 is the (8C, 2) block array whose
    block ``i`` has bit ``j`` equal to bit ``i`` of row ``j``.  ``rows`` may be
    a strided view; it is not modified.  ``out``, if given, is a C-contiguous
    (8C, R/8) uint8 array that receives the result (e.g. a uint8 view of a
    slice of a block array).

    Compiled when it can be (R a multiple of 64, numba available): the
    64x64-tile loop of :mod:`pairwise.mpc._bitmatrix`, 6-7x faster.  Else
    vectorised: the matrix is cut into 8x8 bit tiles, each tile gathered into
    one uint64 and transposed with three masked delta swaps (Hacker's Delight,
    Sec. 7-3), all tiles at once.  The byte gather and scatter are written as
    8 and R/8 slice copies with one contiguous side each (several times
    faster in numpy than one strided ``transpose().copy()``), over column
    chunks of 2048 bytes so the working set stays in cache.
    """
    rows = np.asarray(rows)
    if rows.dtype != np.uint8 or rows.ndim != 2 or rows.shape[0] % 8:
        raise ValueError(f"expected a (R, C) uint8 matrix with R a multiple of 8, got {rows.dtype} {rows.shape}")
    r, c = rows.shape
    g = r // 8
    src = rows.reshape(g, 8, c)
    if out is None:
        out = np.empty((8 * c, g), dtype=np.uint8)
    elif out.dtype != np.uint8 or out.shape != (8 * c, g) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous ({8 * c}, {g}) uint8 array")
    if r % 64 == 0 and c and out.ctypes.data % 8 == 0 and _compiled_transpose():
        # the compiled 64x64-tile loop (mpc/_bitmatrix.py) on the rows as words, padded to whole words if need be
        if c % 8 or rows.strides[1] != 1 or rows.strides[0] % 8 or rows.strides[0] < c or rows.ctypes.data % 8:
            padded = np.zeros((r, -(-c // 8) * 8), dtype=np.uint8)
            padded[:, :c] = rows
            rows = padded
        cw, stride = rows.shape[1] // 8, rows.strides[0] // 8
        flat = np.lib.stride_tricks.as_strided(rows.view(np.uint64), ((r - 1) * stride + cw,), (8,), writeable=False)
        _BITMATRIX.transpose_words(flat, r, cw, stride, 8 * c, out.view(np.uint64))  # type: ignore[union-attr]
        return out
    return _transpose_numpy(src, out, c, g)


_BITMATRIX: types.ModuleType | bool | None = None  # the compiled transpose module; False: unavailable; None: not tried


def _compiled_transpose() -> bool:
    """True if the compiled transpose can run here (numba loads, PAIRWISE_JIT is not 0, not inside
    :func:`pairwise.mpc.garble.jit.disabled`); loads it on the first call, checked against the numpy one."""
    global _BITMATRIX
    from .garble import jit

    if not jit.ENABLED or jit._OFF.get():
        return False
    if _BITMATRIX is None:
        try:
            from . import _bitmatrix

            x = np.frombuffer(hashlib.shake_128(b"transpose").digest(128 * 24), dtype=np.uint8).reshape(128, 24)
            want = _transpose_numpy(x.reshape(16, 8, 24), np.empty((192, 16), np.uint8), 24, 16)
            got = _bitmatrix.transpose_words(
                x.view(np.uint64).reshape(-1), 128, 3, 3, 192, np.empty((192, 2), np.uint64)
            )
            if not np.array_equal(got.view(np.uint8), want):
                raise RuntimeError("the compiled transpose disagrees with the numpy one")
            _BITMATRIX = _bitmatrix
        except Exception as exc:  # noqa: BLE001 - any numba failure: the numpy transpose
            jit.log.warning("compiled bit-matrix transpose unavailable (%s: %s); using numpy", type(exc).__name__, exc)
            _BITMATRIX = False
    return _BITMATRIX is not False


def _transpose_numpy(src: np.ndarray, out: np.ndarray, c: int, g: int) -> np.ndarray:
    """The numpy 8x8-tile transpose of :func:`transpose_bit_matrix` (the fallback and the oracle)."""
    result = out
    out = out.reshape(c, 8, g)
    width = min(c, _TRANSPOSE_CHUNK)
    tiles = np.empty((g, width, 8), dtype=np.uint8)
    tmp = np.empty((g, width), dtype=np.uint64)
    for c0 in range(0, c, _TRANSPOSE_CHUNK):  # column chunks keep the working set in cache
        c1 = min(c, c0 + _TRANSPOSE_CHUNK)
        w = c1 - c0
        if w != width:
            tiles = np.empty((g, w, 8), dtype=np.uint8)
            tmp = np.empty((g, w), dtype=np.uint64)
        # tile (a, col) = the 8 bytes rows[8a + k, col], k = 0..7, as one little-endian word
        for k in range(8):
            tiles[:, :, k] = src[:, k, c0:c1]
        x = tiles.view(np.uint64).reshape(g, w)
        for shift, mask in ((_S7, _M1), (_S14, _M2), (_S28, _M3)):
            np.right_shift(x, shift, out=tmp)
            tmp ^= x
            tmp &= mask
            x ^= tmp
            tmp <<= shift
            x ^= tmp
        # transposed tile (a, col): byte l holds bits 8a..8a+7 of output row 8*col + l
        dst = out[c0:c1]
        for a in range(g):
            dst[:, :, a] = tiles[a]
    return result


class RowPRG:
    """Pseudorandom rows for the IKNP matrix: row j is the AES-128-CTR keystream under key seeds[j].

    One encryptor per seed keeps its counter, so successive :meth:`next`
    calls continue the streams (no counter bookkeeping, no reuse).  Keys
    are the 16 little-endian bytes of each block; the counter block starts
    at zero (each key is a fresh base-OT output used for this stream only).
    """

    def __init__(self, seeds: np.ndarray) -> None:
        seeds = np.ascontiguousarray(seeds, dtype="<u8")
        self._enc = [
            Cipher(algorithms.AES(seeds[j].tobytes()), modes.CTR(bytes(16))).encryptor() for j in range(seeds.shape[0])
        ]
        self._zeros = b""
        self._buf = np.empty((0, 0), dtype=np.uint8)

    def next(self, nbytes: int) -> np.ndarray:
        """The next ``nbytes`` of every stream, as a (rows, nbytes) uint8 array (a writable strided view).

        The array is a buffer this PRG reuses: it is valid until the next call.
        """
        if len(self._zeros) != nbytes:
            self._zeros = bytes(nbytes)
        # update_into needs 15 bytes of slack after the output
        if self._buf.shape != (len(self._enc), nbytes + 16):
            self._buf = np.empty((len(self._enc), nbytes + 16), dtype=np.uint8)
        buf = self._buf
        for j, enc in enumerate(self._enc):
            enc.update_into(self._zeros, buf[j])
        return buf[:, :nbytes]


def check_delta(delta) -> np.ndarray:
    """Validate a free-XOR offset: a (2,) uint64 block whose lowest bit is 1; returns a copy."""
    d = np.asarray(delta)
    if d.dtype != np.uint64 or d.shape != (2,):
        raise ValueError(f"delta must be a (2,) uint64 block, got {d.dtype} {d.shape}")
    if not int(d[0]) & 1:
        raise ValueError("delta's lowest bit must be 1 (point-and-permute); set delta[0] |= 1")
    return d.copy()


def _delta_bits(delta: np.ndarray) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(delta, dtype="<u8").view(np.uint8), bitorder="little").view(np.bool_)


def _session_tag(session_id: bytes) -> int:
    h = hashlib.sha256(b"pairwise/iknp/chosen-ot-tweak\x00" + session_id).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 47) - 1)


def chosen_ot_tweaks(session_id: bytes | str, start: int, n: int, blocks_per_message: int = 1) -> np.ndarray:
    """The (n, L, 2) tccr tweaks of chosen OTs on COTs start..start+n-1 (see the module docstring)."""
    sid = session_bytes(session_id)
    if not 1 <= blocks_per_message <= 1 << 16:
        raise ValueError(f"messages must have 1..65536 blocks, got {blocks_per_message}")
    hi = (1 << 63) | (_session_tag(sid) << 16)
    tw = np.empty((n, blocks_per_message, 2), dtype=np.uint64)
    tw[..., 0] = np.arange(start, start + n, dtype=np.uint64)[:, None]
    tw[..., 1] = np.uint64(hi) | np.arange(blocks_per_message, dtype=np.uint64)[None, :]
    return tw


def _check_count(n) -> int:
    try:
        n = int(n)
    except (TypeError, ValueError):
        raise ValueError(f"number of OTs must be an integer, got {n!r}") from None
    if n < 0:
        raise ValueError(f"number of OTs must be non-negative, got {n}")
    return n


def _bits(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D bit array, got shape {a.shape}")
    if a.dtype != np.bool_:
        if a.size and not np.isin(a, (0, 1)).all():
            raise ValueError(f"{name} must be booleans or integers 0/1")
        a = a.astype(np.bool_)
    return a


def _messages(m, name: str) -> np.ndarray:
    a = np.asarray(m)
    if a.dtype != np.uint64 or a.ndim not in (2, 3) or a.shape[-1] != 2:
        raise ValueError(f"{name} must be a uint64 block array of shape (n, 2) or (n, L, 2), got {a.dtype} {a.shape}")
    return a


class _IKNPParty:
    """State shared by both ends: channel, batch schedule, pool of unused COTs, global index."""

    _role = "party"
    _layout: tuple[tuple[np.dtype, tuple[int, ...]], ...]  # set by each role: what _alloc returns

    def __init__(self, channel: Channel, session_id: bytes | str, batch_size: int) -> None:
        self.channel = channel
        self.session_id = session_bytes(session_id)
        batch_size = int(batch_size)
        if not (KAPPA <= batch_size <= MAX_BATCH and batch_size % KAPPA == 0):
            raise ValueError(f"batch_size must be a multiple of {KAPPA} in {KAPPA}..{MAX_BATCH}, got {batch_size}")
        self.batch_size = batch_size
        self._ready = False
        self.batches = 0  # extension batches run so far
        self.index = 0  # global index of the next COT to hand out
        self._pool: deque[tuple[np.ndarray, ...]] = deque()
        self._offset = 0  # consumed part of self._pool[0]
        self._available = 0
        # One AES context per party: a cryptography encryptor must not be used by two
        # threads at once, and both parties may run as threads of one process.
        self._aes = FixedKeyAES()

    @property
    def available(self) -> int:
        """Precomputed COTs not yet consumed."""
        return self._available

    @property
    def generated(self) -> int:
        """COTs produced by the extension so far (consumed or not)."""
        return self.batches * self.batch_size

    def _base_session(self) -> bytes:
        return self.session_id + b"/iknp-base"

    def _require_setup(self) -> None:
        if not self._ready:
            raise RuntimeError(f"{type(self).__name__}.setup() must run (on both sides) before any OT")

    def precompute(self, n: int) -> None:
        """Make sure at least ``n`` COTs are ready, extending in whole batches.

        The peer must make the same call (or the same sequence of requests):
        both ends derive the number of batches from (available, n, batch_size).
        """
        n = _check_count(n)
        self._require_setup()
        while self._available < n:
            self._pool.append(self._new_batch())
            self._available += self.batch_size
        self.channel.flush()  # the receiver's batches must reach the sender even on a buffered channel

    def _new_batch(self, out: tuple[np.ndarray, ...] | None = None) -> tuple[np.ndarray, ...]:
        """Run one extension batch into ``out`` (fresh arrays if None) and return it."""
        if out is None:
            out = self._alloc(self.batch_size)
        self._extend(out)
        self.batches += 1
        return out

    def _take(self, n: int, out: tuple[np.ndarray, ...] | None = None) -> tuple[np.ndarray, ...]:
        """Hand out the next ``n`` COTs (pool first, then new batches; same batch schedule on both sides).

        ``out``: arrays shaped like :meth:`_alloc` (n) to write them into (e.g. a view of the
        garbler's label storage), else views of a pooled batch or fresh arrays.
        """
        self._require_setup()
        if out is not None:
            for dst, (dtype, tail) in zip(out, self._layout):
                if dst.shape != (n,) + tail or dst.dtype != dtype or not dst.flags.c_contiguous:
                    raise ValueError(f"out must hold {n} COTs like {dtype} {('n',) + tail}, C-contiguous")
        elif n <= self._available:
            parts: list[tuple[np.ndarray, ...]] = []
            need = n
            while need:
                head = self._pool[0]
                k = min(need, head[0].shape[0] - self._offset)
                parts.append(tuple(a[self._offset : self._offset + k] for a in head))
                self._offset += k
                need -= k
                if self._offset == head[0].shape[0]:
                    self._pool.popleft()
                    self._offset = 0
            self._available -= n
            self.index += n
            if not parts:
                return self._alloc(0)
            if len(parts) == 1:
                return parts[0]  # views of a batch whose other COTs are never handed out again
            return tuple(np.concatenate(cols) for cols in zip(*parts))
        # Into out, or a large request: pool first, then new batches straight into the result.
        result = self._alloc(n) if out is None else out
        pos = 0
        while pos < n and self._pool:
            head = self._pool[0]
            k = min(n - pos, head[0].shape[0] - self._offset)
            for dst, src in zip(result, head):
                dst[pos : pos + k] = src[self._offset : self._offset + k]
            pos += k
            self._offset += k
            self._available -= k
            if self._offset == head[0].shape[0]:
                self._pool.popleft()
                self._offset = 0
        m = self.batch_size
        while n - pos >= m:
            self._new_batch(tuple(a[pos : pos + m] for a in result))
            pos += m
        if pos < n:  # the pool is empty here: a new batch, partly handed out, the rest pooled
            batch = self._new_batch()
            k = n - pos
            for dst, src in zip(result, batch):
                dst[pos:] = src[:k]
            self._pool.append(batch)
            self._offset = k
            self._available = m - k
        self.index += n
        return result

    def _extend(self, out: tuple[np.ndarray, ...]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _alloc(self, n: int) -> tuple[np.ndarray, ...]:  # pragma: no cover - abstract
        raise NotImplementedError


class COTSender(_IKNPParty):
    """The correlated-OT sender: the Yao garbler, holding the free-XOR offset ``delta``.

    ``delta`` is a (2,) uint64 block with lowest bit 1; its 128 bits are the
    choice bits of the base OTs.  Usage (the peer runs :class:`COTReceiver`
    with the same session id and batch size)::

        cot = COTSender(channel, delta, session_id)
        cot.setup()                        # 128 base OTs, once per session
        zero = cot.send_labels(n)          # evaluator-input zero labels, (n, 2)
        cot.send_chosen(m0, m1)            # chosen-message OT of blocks
    """

    _role = "sender"
    _layout = ((np.dtype(np.uint64), (2,)),)  # what _alloc returns: dtype and shape after the COT axis

    def __init__(self, channel: Channel, delta, session_id: bytes | str, *, batch_size: int = DEFAULT_BATCH) -> None:
        super().__init__(channel, session_id, batch_size)
        self.delta = check_delta(delta)
        self._s_bits = _delta_bits(self.delta)
        self._row_mask = np.where(self._s_bits, np.uint8(0xFF), np.uint8(0))[:, None]
        self._prg: RowPRG | None = None

    def setup(self) -> None:
        """Run the 128 base OTs as base-OT receiver with choice bits Delta (idempotent)."""
        if self._ready:
            return
        base = BaseOTReceiver(self.channel, self._base_session())
        self._prg = RowPRG(base.recv_random(self._s_bits))
        self._ready = True

    def _extend(self, out: tuple[np.ndarray, ...]) -> None:
        (q_out,) = out
        m = q_out.shape[0]
        nbytes = m // 8
        # accept up to the largest legal batch so that a batch-size mismatch gets a clear message
        frame = self.channel.recv_frame(max_size=_BATCH_HEADER.size + KAPPA * (MAX_BATCH // 8))
        if len(frame) < _BATCH_HEADER.size:
            raise ProtocolError(f"COT batch message too short ({len(frame)} bytes)")
        got_batch, got_m = _BATCH_HEADER.unpack_from(frame)
        if (got_batch, got_m) != (self.batches, m) or len(frame) != _BATCH_HEADER.size + KAPPA * nbytes:
            raise ProtocolError(
                f"COT batch mismatch: the sender expects batch {self.batches} of {m} COTs, the receiver sent "
                f"batch {got_batch} of {got_m} COTs ({len(frame)} bytes); both sides must use the same "
                "batch_size and the same sequence of calls"
            )
        u = np.frombuffer(frame, dtype=np.uint8, offset=_BATCH_HEADER.size).reshape(KAPPA, nbytes)
        assert self._prg is not None  # setup() ran (_require_setup)
        q = self._prg.next(nbytes)
        u &= self._row_mask  # s_j * u_j
        q ^= u
        del u
        self.channel.recycle(frame)  # (a MemoryChannel reuses it for the receiver's next batch)
        transpose_bit_matrix(q, out=q_out.view(np.uint8))

    def _alloc(self, n: int) -> tuple[np.ndarray]:
        return (np.empty((n, 2), dtype=np.uint64),)

    def send_random(self, n: int, out: np.ndarray | None = None) -> np.ndarray:
        """The next ``n`` random COTs: blocks ``q`` (n, 2); the receiver holds ``t = q xor r*Delta``.

        ``out``: a C-contiguous (n, 2) uint64 array to write ``q`` into.
        """
        return self._take(_check_count(n), None if out is None else (out,))[0]

    def send_labels(self, n: int) -> np.ndarray:
        """Yao input-label transfer: receive ``d`` (n bits), return zero labels ``q xor d*Delta`` (n, 2).

        The receiver's :meth:`COTReceiver.recv_labels` then holds
        ``zero xor x*Delta`` for its input bits ``x``.  Costs one message of
        ceil(n/8) bytes when the COTs were precomputed.
        """
        self._require_setup()
        n = _check_count(n)
        (q,) = self._take(n)
        d = self.channel.recv_bits(n)
        q[d] ^= self.delta
        return q

    def send_chosen(self, m0, m1) -> None:
        """Chosen-message OT: the receiver with bit ``b`` learns ``m_b``, nothing about ``m_{1-b}``.

        ``m0``, ``m1``: uint64 block arrays of the same shape (n, 2) or (n, L, 2).
        Messages: d (n bits) from the receiver, then y0 || y1 (2 n L blocks).
        """
        self._require_setup()
        m0 = _messages(m0, "m0")
        m1 = _messages(m1, "m1")
        if m0.shape != m1.shape:
            raise ValueError(f"m0 and m1 must have the same shape, got {m0.shape} and {m1.shape}")
        n = m0.shape[0]
        msg = m0.reshape(n, m0.shape[1] if m0.ndim == 3 else 1, 2)
        start = self.index
        (q,) = self._take(n)
        d = self.channel.recv_bits(n)
        q[d] ^= self.delta  # pad input for message 0: q xor d*Delta
        tw = chosen_ot_tweaks(self.session_id, start, n, msg.shape[1])
        y = np.empty((2,) + msg.shape, dtype=np.uint64)
        np.bitwise_xor(m0.reshape(msg.shape), tccr_hash(q[:, None, :], tw, self._aes), out=y[0])
        q ^= self.delta
        np.bitwise_xor(m1.reshape(msg.shape), tccr_hash(q[:, None, :], tw, self._aes), out=y[1])
        self.channel.send_blocks(y)
        self.channel.flush()


class COTReceiver(_IKNPParty):
    """The correlated-OT receiver: the Yao evaluator.

    Usage (the peer runs :class:`COTSender`)::

        cot = COTReceiver(channel, session_id)
        cot.setup()                        # 128 base OTs, once per session
        labels = cot.recv_labels(x_bits)   # active labels of the evaluator's inputs
        msgs = cot.recv_chosen(bits)       # chosen-message OT
    """

    _role = "receiver"
    _layout = ((np.dtype(np.bool_), ()), (np.dtype(np.uint64), (2,)))

    def __init__(self, channel: Channel, session_id: bytes | str, *, batch_size: int = DEFAULT_BATCH) -> None:
        super().__init__(channel, session_id, batch_size)
        self._prg0: RowPRG | None = None
        self._prg1: RowPRG | None = None
        self._frame = np.empty(0, dtype=np.uint8)

    def setup(self) -> None:
        """Run the 128 base OTs as base-OT sender with random seed pairs (idempotent)."""
        if self._ready:
            return
        base = BaseOTSender(self.channel, self._base_session())
        k0, k1 = base.send_random(KAPPA)
        self._prg0, self._prg1 = RowPRG(k0), RowPRG(k1)
        self._ready = True

    def _extend(self, out: tuple[np.ndarray, ...]) -> None:
        r_out, t_out = out
        m = t_out.shape[0]
        nbytes = m // 8
        r = np.frombuffer(os.urandom(nbytes), dtype=np.uint8)
        assert self._prg0 is not None and self._prg1 is not None  # setup() ran (_require_setup)
        t = self._prg0.next(nbytes)
        if self._frame.shape[0] != _BATCH_HEADER.size + KAPPA * nbytes:  # reused: send copies or writes it out
            self._frame = np.empty(_BATCH_HEADER.size + KAPPA * nbytes, dtype=np.uint8)
        frame = self._frame
        frame[: _BATCH_HEADER.size] = np.frombuffer(_BATCH_HEADER.pack(self.batches, m), dtype=np.uint8)
        u = frame[_BATCH_HEADER.size :].reshape(KAPPA, nbytes)
        np.bitwise_xor(self._prg1.next(nbytes), t, out=u)
        u ^= r
        self.channel.send(frame)
        r_out[:] = np.unpackbits(r, bitorder="little").view(np.bool_)
        transpose_bit_matrix(t, out=t_out.view(np.uint8))

    def _alloc(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.empty(n, dtype=np.bool_), np.empty((n, 2), dtype=np.uint64)

    def recv_random(self, n: int, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The next ``n`` random COTs: bits ``r`` (n,) bool and blocks ``t`` (n, 2) = q xor r*Delta.

        ``out``: a C-contiguous (n, 2) uint64 array to write ``t`` into.
        """
        self._require_setup()
        n = _check_count(n)
        r, t = self._take(n, None if out is None else (np.empty(n, np.bool_), out))
        self.channel.flush()
        return r, t

    def recv_labels(self, x_bits) -> np.ndarray:
        """Yao input-label transfer: send ``d = r xor x``, return ``t`` = zero label xor x*Delta, (n, 2)."""
        self._require_setup()
        x = _bits(x_bits, "x_bits")
        r, t = self._take(x.shape[0])
        self.channel.send_bits(r ^ x)
        self.channel.flush()
        return t

    def recv_chosen(self, bits, blocks: int = 1) -> np.ndarray:
        """Chosen-message OT: return ``m_{b_i}`` for each bit ``b_i``.

        ``blocks`` is the number of blocks per message L (the sender's m0/m1
        have shape (n, L, 2), or (n, 2) for L = 1).  Returns (n, 2) for
        L = 1, else (n, L, 2).
        """
        self._require_setup()
        b = _bits(bits, "bits")
        blocks = int(blocks)
        if not 1 <= blocks <= 1 << 16:
            raise ValueError(f"blocks per message must be in 1..65536, got {blocks}")
        n = b.shape[0]
        start = self.index
        r, t = self._take(n)
        self.channel.send_bits(r ^ b)
        self.channel.flush()
        y = self.channel.recv_blocks((2, n, blocks))
        tw = chosen_ot_tweaks(self.session_id, start, n, blocks)
        out = np.where(b[:, None, None], y[1], y[0])
        out ^= tccr_hash(t[:, None, :], tw, self._aes)
        return out[:, 0, :] if blocks == 1 else out
