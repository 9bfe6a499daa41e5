"""Which hash for half-gates on the AES-NI kernels: TMMO (the engine's) against MITCCRH, per AND gate.

Measures the cost of the hashing alone (no circuit, no tables: random labels in, hash
outputs XORed into a sink) per AND gate, for the garbler (four hashes per gate: A0, A1
under tweak 2g, B0, B1 under 2g + 1) and the evaluator (two), on this machine's widest
AES instructions (mpc.garble._aesni), one core, interleaved rounds, median CPU time:

- TMMO, H(x, i) = pi(pi(x) ^ i) ^ pi(x), pi = AES-128 under the fixed public key
  (Guo-Katz-Wang-Yu, S&P 2020, Sec. 7.4): two AES calls per hash, one key schedule for
  the whole run.  This is what mpc.garble computes.
- MITCCRH, H(x, j) = AES_{S ^ j}(sigma(x)) ^ sigma(x), sigma(x_hi || x_lo) =
  (x_hi ^ x_lo) || x_hi, S a random start key (Guo-Katz-Wang-Weng-Yu, "Better Concrete
  Security for Half-Gates Garbling (in the Multi-Instance Setting)", CRYPTO 2020): one
  AES call per hash but a fresh AES-128 key schedule per tweak, i.e. per half gate.  Here
  the four keys S ^ 2g .. S ^ (2g + 3) of two gates are expanded together in one 512-bit
  register (the aesenclast form of the key schedule), and the garbler's eight blocks of
  two gates are encrypted under them in two registers (lanes keyed k_2g, k_2g+1, k_2g+2,
  k_2g+3), so no round key is shuffled between lanes.

Both kernels are checked against cryptography's AES before timing.  Prints ns per AND
gate and the ratio; ``--json`` for one JSON object.

    .venv/bin/python benchmarks/garbling_hash.py [--gates 65536] [--rounds 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from pairwise.mpc import jit

if not jit.fused_ready():  # pragma: no cover - machine without AES-NI
    sys.exit("no AES-NI kernels on this machine (pairwise.mpc.garble.jit.fused_ready() is False)")

import numba as nb  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

from pairwise.mpc.aes import FIXED_ROUND_KEYS_X4  # noqa: E402
from pairwise.mpc.garble._aesni import WIDTH, q_aes, q_make, q_xor, quad, x_load, x_make  # noqa: E402
from pairwise.mpc.garble._fused_kernels import _tmmo  # noqa: E402

_I8, _I32, _I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_V8 = ir.VectorType(_I64, 8)
_B64 = ir.VectorType(_I8, 64)


@intrinsic
def q_round(typingctx, q, k):
    """One AES round (aesenc) of four blocks under four round keys."""
    sig = quad(quad, quad)

    def codegen(context, builder, sig, args):
        return _aes_op(builder, "aesenc", args[0], args[1])

    return sig, codegen


@intrinsic
def q_last(typingctx, q, k):
    """The last AES round (aesenclast) of four blocks under four round keys."""
    sig = quad(quad, quad)

    def codegen(context, builder, sig, args):
        return _aes_op(builder, "aesenclast", args[0], args[1])

    return sig, codegen


def _aes_op(builder, name, x, k):
    if WIDTH == 512:
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_V8, [_V8, _V8]), f"llvm.x86.aesni.{name}.512"
        )
        return builder.call(fn, [x, k])
    n = 4 if WIDTH == 128 else 2
    w = 8 // n
    vt = ir.VectorType(_I64, w)
    suffix = "" if WIDTH == 128 else ".256"
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt, vt]), f"llvm.x86.aesni.{name}{suffix}")
    parts = []
    for h in range(n):
        idx = ir.Constant(ir.VectorType(_I32, w), [w * h + j for j in range(w)])
        parts.append(builder.call(fn, [builder.shuffle_vector(x, x, idx), builder.shuffle_vector(k, k, idx)]))
    while len(parts) > 1:
        c = parts[0].type.count
        mask = ir.Constant(ir.VectorType(_I32, 2 * c), list(range(2 * c)))
        parts = [builder.shuffle_vector(parts[i], parts[i + 1], mask) for i in range(0, len(parts), 2)]
    return parts[0]


@intrinsic
def q_rotword3(typingctx, q):
    """Per 128-bit lane: RotWord of the last 32-bit word, broadcast to all four words (bytes 13,14,15,12)."""
    sig = quad(quad)

    def codegen(context, builder, sig, args):
        b = builder.bitcast(args[0], _B64)
        idx = [16 * lane + (12 + (j + 1) % 4) for lane in range(4) for _ in range(4) for j in range(4)]
        return builder.bitcast(builder.shuffle_vector(b, b, ir.Constant(ir.VectorType(_I32, 64), idx)), _V8)

    return sig, codegen


@intrinsic
def q_shl4(typingctx, q):
    """Per 128-bit lane: shift left by 4 bytes (pslldq 4), zeros in."""
    sig = quad(quad)

    def codegen(context, builder, sig, args):
        b = builder.bitcast(args[0], _B64)
        zero = ir.Constant(_B64, [0] * 64)
        idx = [64 if j < 4 else 16 * lane + j - 4 for lane in range(4) for j in range(16)]
        return builder.bitcast(builder.shuffle_vector(b, zero, ir.Constant(ir.VectorType(_I32, 64), idx)), _V8)

    return sig, codegen


@intrinsic
def q_rcon(typingctx, r):
    """The round constant of round r (1..10) in every 32-bit word of every lane."""
    sig = quad(types.intp)

    def codegen(context, builder, sig, args):
        table = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1B, 0x36]
        arr = cgutils.global_constant(
            builder, "pairwise_rcon", ir.Constant(ir.ArrayType(_I64, 10), [c | c << 32 for c in table])
        )
        v = builder.load(builder.gep(arr, [ir.Constant(_I64, 0), builder.sub(args[0], ir.Constant(_I64, 1))]))
        vec = ir.Constant(_V8, [ir.Undefined] * 8)
        for i in range(8):
            vec = builder.insert_element(vec, v, ir.Constant(_I32, i))
        return vec

    return sig, codegen


@nb.njit(inline="always", cache=False)
def _next_key(k, r):
    """AES-128 key schedule step r on four keys (FIPS 197 Sec. 5.2, in the aesenclast form: SubWord by the last
    round's S-boxes on a broadcast word; ShiftRows is void when all four columns are equal)."""
    t = q_last(q_rotword3(k), q_rcon(r))
    k = q_xor(k, q_shl4(k))
    k = q_xor(k, q_shl4(q_shl4(k)))
    return q_xor(k, t)


@nb.njit(cache=False, nogil=True)
def mitccrh_enc(keys0, x, out, pairs):
    """For i < pairs: the four keys at keys0 words [8i, 8i + 8) expanded, then two quads of x (words
    [16i, 16i + 16)) encrypted under them; out = AES_k(x) (the check against cryptography)."""
    for i in range(pairs):
        k = q_make(x_load(keys0, 8 * i), x_load(keys0, 8 * i + 2), x_load(keys0, 8 * i + 4), x_load(keys0, 8 * i + 6))
        u = q_make(x_load(x, 16 * i), x_load(x, 16 * i + 2), x_load(x, 16 * i + 4), x_load(x, 16 * i + 6))
        v = q_make(x_load(x, 16 * i + 8), x_load(x, 16 * i + 10), x_load(x, 16 * i + 12), x_load(x, 16 * i + 14))
        u = q_xor(u, k)
        v = q_xor(v, k)
        for r in range(1, 10):
            k = _next_key(k, r)
            u = q_round(u, k)
            v = q_round(v, k)
        k = _next_key(k, 10)
        u = q_last(u, k)
        v = q_last(v, k)
        _store_quad(out, 16 * i, u)
        _store_quad(out, 16 * i + 8, v)


@intrinsic
def _store_quad(typingctx, arr, word, q):
    sig = types.void(arr, types.intp, quad)

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        builder.store(args[2], builder.bitcast(ptr, _V8.as_pointer()), align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def q_sigma(typingctx, q):
    """sigma(x) = (x_hi ^ x_lo) || x_hi on each block: new lo = x_hi, new hi = x_hi ^ x_lo (GKWY)."""
    sig = quad(quad)

    def codegen(context, builder, sig, args):
        x = args[0]
        hi = builder.shuffle_vector(x, x, ir.Constant(ir.VectorType(_I32, 8), [1, 1, 3, 3, 5, 5, 7, 7]))
        lo_in_hi = builder.shuffle_vector(
            x, ir.Constant(_V8, [0] * 8), ir.Constant(ir.VectorType(_I32, 8), [8, 0, 8, 2, 8, 4, 8, 6])
        )
        return builder.xor(hi, lo_in_hi)

    return sig, codegen


@nb.njit(cache=False, nogil=True)
def mitccrh_garbler(lab, n_gates, start, sink):
    """The garbler's hashes of ``n_gates`` gates, two at a time: H(A0, 2g), H(A1, 2g), H(B0, 2g+1),
    H(B1, 2g+1) with H(x, j) = AES_{S ^ j}(sigma(x)) ^ sigma(x); labels A0, B0 of gate g at blocks 2g, 2g+1,
    Delta = block 0 of ``start`` words [2, 4)."""
    s_lo = start[0]
    s_hi = start[1]
    d = x_load(start, 2)
    acc = q_make(d, d, d, d)
    for g in range(0, n_gates, 2):
        t = np.uint64(2 * g)
        k = q_make(
            x_make(s_lo ^ t, s_hi),
            x_make(s_lo ^ (t + np.uint64(1)), s_hi),
            x_make(s_lo ^ (t + np.uint64(2)), s_hi),
            x_make(s_lo ^ (t + np.uint64(3)), s_hi),
        )
        a0 = x_load(lab, 4 * g)
        b0 = x_load(lab, 4 * g + 2)
        a2 = x_load(lab, 4 * g + 4)
        b2 = x_load(lab, 4 * g + 6)
        z = q_make(a0, b0, a2, b2)  # zero labels, lanes keyed 2g, 2g+1, 2g+2, 2g+3
        dz = q_make(d, d, d, d)
        u = q_sigma(z)
        v = q_sigma(q_xor(z, dz))  # one labels
        pu, pv = u, v
        u = q_xor(u, k)
        v = q_xor(v, k)
        for r in range(1, 10):
            k = _next_key(k, r)
            u = q_round(u, k)
            v = q_round(v, k)
        k = _next_key(k, 10)
        u = q_xor(q_last(u, k), pu)
        v = q_xor(q_last(v, k), pv)
        acc = q_xor(acc, q_xor(u, v))
    _store_quad(sink, 0, acc)


@nb.njit(cache=False, nogil=True)
def mitccrh_evaluator(lab, n_gates, start, sink):
    """The evaluator's hashes H(A, 2g), H(B, 2g + 1) of ``n_gates`` gates, two gates per register."""
    s_lo = start[0]
    s_hi = start[1]
    d = x_load(start, 2)
    acc = q_make(d, d, d, d)
    for g in range(0, n_gates, 2):
        t = np.uint64(2 * g)
        k = q_make(
            x_make(s_lo ^ t, s_hi),
            x_make(s_lo ^ (t + np.uint64(1)), s_hi),
            x_make(s_lo ^ (t + np.uint64(2)), s_hi),
            x_make(s_lo ^ (t + np.uint64(3)), s_hi),
        )
        u = q_sigma(q_make(x_load(lab, 4 * g), x_load(lab, 4 * g + 2), x_load(lab, 4 * g + 4), x_load(lab, 4 * g + 6)))
        pu = u
        u = q_xor(u, k)
        for r in range(1, 10):
            k = _next_key(k, r)
            u = q_round(u, k)
        k = _next_key(k, 10)
        acc = q_xor(acc, q_xor(q_last(u, k), pu))
    _store_quad(sink, 0, acc)


@nb.njit(cache=False, nogil=True)
def tmmo_garbler(lab, n_gates, start, sink):
    """The garbler's four TMMO hashes per gate (as mpc.garble: one quad (A0, B0, A1, B1) per gate), four gates
    in flight."""
    rk = start[4:]
    d = x_load(start, 2)
    acc = q_make(d, d, d, d)
    for g in range(0, n_gates, 4):
        ys = acc
        for h in range(4):  # (unrolled by LLVM: four independent quads)
            a = x_load(lab, 4 * (g + h))
            b = x_load(lab, 4 * (g + h) + 2)
            t = np.uint64(2 * (g + h))
            tw = q_make(
                x_make(t, np.uint64(0)),
                x_make(t + np.uint64(1), np.uint64(0)),
                x_make(t, np.uint64(0)),
                x_make(t + np.uint64(1), np.uint64(0)),
            )
            ys = q_xor(ys, _tmmo(q_make(a, b, _bx(a, d), _bx(b, d)), tw, rk))
        acc = ys
    _store_quad(sink, 0, acc)


@nb.njit(cache=False, nogil=True)
def tmmo_evaluator(lab, n_gates, start, sink):
    """The evaluator's two TMMO hashes per gate, two gates per quad, eight gates in flight."""
    rk = start[4:]
    d = x_load(start, 2)
    acc = q_make(d, d, d, d)
    for g in range(0, n_gates, 8):
        ys = acc
        for h in range(0, 8, 2):
            t = np.uint64(2 * (g + h))
            tw = q_make(
                x_make(t, np.uint64(0)),
                x_make(t + np.uint64(1), np.uint64(0)),
                x_make(t + np.uint64(2), np.uint64(0)),
                x_make(t + np.uint64(3), np.uint64(0)),
            )
            x = q_make(
                x_load(lab, 4 * (g + h)),
                x_load(lab, 4 * (g + h) + 2),
                x_load(lab, 4 * (g + h) + 4),
                x_load(lab, 4 * (g + h) + 6),
            )
            ys = q_xor(ys, _tmmo(x, tw, rk))
        acc = ys
    _store_quad(sink, 0, acc)


@intrinsic
def _bx(typingctx, a, b):
    from pairwise.mpc.garble._aesni import block

    sig = block(block, block)

    def codegen(context, builder, sig, args):
        return builder.xor(args[0], args[1])

    return sig, codegen


def _check() -> None:
    """MITCCRH's key schedule and encryption against cryptography's AES on random keys and blocks."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    keys = np.frombuffer(os.urandom(16 * 8), np.uint64).copy()
    x = np.frombuffer(os.urandom(16 * 16), np.uint64).copy()
    out = np.empty_like(x)
    mitccrh_enc(keys, x, out, 2)
    for i in range(2):
        for lane in range(4):
            key = keys[8 * i + 2 * lane : 8 * i + 2 * lane + 2].tobytes()
            enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
            for q in range(2):
                w = 16 * i + 8 * q + 2 * lane
                if out[w : w + 2].tobytes() != enc.update(x[w : w + 2].tobytes()):
                    raise AssertionError("MITCCRH kernel disagrees with cryptography's AES")
    assert q_aes is not None and x_make is not None  # (imported for the TMMO kernels)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gates", type=int, default=1 << 16, help="AND gates per timed call (default 65536)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    n = args.gates - args.gates % 8
    _check()
    lab = np.frombuffer(os.urandom(32 * n + 64), np.uint64).copy()
    start = np.concatenate([np.frombuffer(os.urandom(32), np.uint64), FIXED_ROUND_KEYS_X4])
    start[2] |= np.uint64(1)
    sink = np.zeros(8, np.uint64)
    kernels = {
        "tmmo garbler": tmmo_garbler,
        "mitccrh garbler": mitccrh_garbler,
        "tmmo evaluator": tmmo_evaluator,
        "mitccrh evaluator": mitccrh_evaluator,
    }
    for f in kernels.values():
        f(lab, 8, start, sink)  # compile
    times: dict[str, list[float]] = {k: [] for k in kernels}
    for _ in range(args.rounds):
        for name, f in kernels.items():
            t = time.process_time()
            for _ in range(10):
                f(lab, n, start, sink)
            times[name].append((time.process_time() - t) / (10 * n) * 1e9)
    med = {k: float(np.median(v)) for k, v in times.items()}
    res = {
        "aes_width": WIDTH,
        "gates": n,
        "rounds": args.rounds,
        "ns_per_and": med,
        "mitccrh_over_tmmo": {role: med[f"mitccrh {role}"] / med[f"tmmo {role}"] for role in ("garbler", "evaluator")},
        "load": os.getloadavg(),
    }
    if args.json:
        print(json.dumps(res))
    else:
        print(
            f"hash cost per AND gate, {WIDTH}-bit AES instructions, one core, median of {args.rounds} rounds "
            f"(CPU time), load {res['load'][0]:.2f}"
        )
        for role in ("garbler", "evaluator"):
            print(
                f"  {role:<9}  TMMO {med[f'tmmo {role}']:6.2f} ns   MITCCRH {med[f'mitccrh {role}']:6.2f} ns   "
                f"MITCCRH / TMMO {res['mitccrh_over_tmmo'][role]:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
