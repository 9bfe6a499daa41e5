"""AES-NI inside numba loops: 128-bit and 512-bit block values and the AES round instructions.

What it does
    Two numba types whose LLVM form is a vector register: :data:`block`
    (``<2 x i64>``, one 128-bit block: low word, high word, as in
    :mod:`pairwise.mpc.aes`) and :data:`quad` (``<8 x i64>``, four blocks),
    with intrinsics to load, store, build, split and XOR them, and
    :func:`q_aes`, the ten rounds of AES-128 on the four blocks of a quad
    under round keys held in an array.  :func:`q_aes` emits LLVM's
    ``llvm.x86.aesni.aesenc{,last}`` intrinsics at the widest width the CPU
    has, chosen once at import (:data:`WIDTH`): 512 bits (VAES with AVX-512:
    one instruction per round for four blocks), 256 (VAES with AVX2) or 128
    (AES-NI).  Kernels written on quads (:mod:`._fused_kernels`) therefore
    compile to the best code of the machine they run on, from one source.

    :func:`aes_width` says which widths numba's target allows (its CPU
    features, which ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` may change);
    without AES-NI it is 0 and this module must not be imported: the engine
    then uses OpenSSL (:mod:`pairwise.mpc.garble.jit`).  ``PAIRWISE_AES_WIDTH``
    (128, 256 or 512, at most what the CPU has) forces a narrower width, for
    tests; the kernels are then compiled without numba's on-disk cache, so a
    cached build of another width is never loaded.

Security model
    The AES instructions run in constant time, with no table lookups; the
    intrinsics take indices from their callers and add no branch.  Keys
    here are public (the fixed key of :mod:`pairwise.mpc.aes`).

Follows
    Intel, "Advanced Encryption Standard (AES) New Instructions Set" (2010);
    FIPS 197 (AES).
"""

from __future__ import annotations

import os

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

__all__ = [
    "WIDTH",
    "CACHE",
    "aes_width",
    "block",
    "quad",
    "ld",
    "st",
    "x_load",
    "x_store",
    "x_make",
    "x_lo",
    "x_hi",
    "x_xor",
    "x_and",
    "x_mask",
    "q_make",
    "q_dup",
    "q_p0",
    "q_p1",
    "q_p2",
    "q_p3",
    "q_xor",
    "q_aes",
]

_I64 = ir.IntType(64)
_V2 = ir.VectorType(_I64, 2)
_V4 = ir.VectorType(_I64, 4)
_V8 = ir.VectorType(_I64, 8)
_I32 = ir.IntType(32)


def aes_width() -> int:
    """Widest AES instructions numba's target CPU has: 512 (VAES, AVX-512F), 256 (VAES, AVX2), 128 (AES-NI) or 0."""
    from numba.core.registry import cpu_target

    feats = set(cpu_target.target_context.codegen()._tm_features.split(","))
    if "+aes" not in feats:
        return 0
    if "+vaes" in feats and "+avx512f" in feats:
        return 512
    if "+vaes" in feats and "+avx2" in feats:
        return 256
    return 128


def _width() -> int:
    best = aes_width()
    want = os.environ.get("PAIRWISE_AES_WIDTH")
    if want is None:
        return best
    if want not in ("128", "256", "512") or int(want) > best:
        raise RuntimeError(f"PAIRWISE_AES_WIDTH={want!r}: this CPU allows 128..{best} (AES-NI widths)")
    return int(want)


#: The AES width the kernels are compiled for (0: no AES-NI; then importing this module fails).
WIDTH = _width()
if WIDTH == 0:
    raise ImportError("this CPU (as numba targets it) has no AES-NI")
#: Whether the kernels may use numba's on-disk cache: only at the CPU's own width.
CACHE = WIDTH == aes_width()


class _Block(types.Type):
    def __init__(self) -> None:
        super().__init__(name="Block128")


class _Quad(types.Type):
    def __init__(self) -> None:
        super().__init__(name="Block128x4")


#: numba type of one 128-bit block (LLVM <2 x i64>).
block = _Block()
#: numba type of four 128-bit blocks (LLVM <8 x i64>).
quad = _Quad()


@register_model(_Block)
class _BlockModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _V2)


@register_model(_Quad)
class _QuadModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _V8)


def _word_ptr(context, builder, arrty, arr, word):
    """Pointer to word ``word`` of a C-contiguous uint64 array (no bounds check: the callers index by plan)."""
    ary = context.make_array(arrty)(context, builder, arr)
    return builder.gep(ary.data, [word])


@intrinsic
def x_load(typingctx, arr, word):
    """The block at words [word, word + 1] of a uint64 array."""
    sig = block(arr, types.intp)

    def codegen(context, builder, sig, args):
        ptr = _word_ptr(context, builder, sig.args[0], args[0], args[1])
        return builder.load(builder.bitcast(ptr, _V2.as_pointer()), align=8)

    return sig, codegen


@intrinsic
def x_store(typingctx, arr, word, v):
    """Store a block at words [word, word + 1] of a uint64 array."""
    sig = types.void(arr, types.intp, block)

    def codegen(context, builder, sig, args):
        ptr = _word_ptr(context, builder, sig.args[0], args[0], args[1])
        builder.store(args[2], builder.bitcast(ptr, _V2.as_pointer()), align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def ld(typingctx, arr, i):
    """``arr[i]`` with no wraparound and no bounds check (indices from the plan; the callers size arrays)."""
    sig = arr.dtype(arr, types.intp)

    def codegen(context, builder, sig, args):
        return builder.load(_word_ptr(context, builder, sig.args[0], args[0], args[1]))

    return sig, codegen


@intrinsic
def st(typingctx, arr, i, v):
    """``arr[i] = v`` with no wraparound and no bounds check."""
    sig = types.void(arr, types.intp, arr.dtype)

    def codegen(context, builder, sig, args):
        builder.store(args[2], _word_ptr(context, builder, sig.args[0], args[0], args[1]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def x_make(typingctx, lo, hi):
    """The block (lo, hi) of two uint64 words."""
    sig = block(types.uint64, types.uint64)

    def codegen(context, builder, sig, args):
        v = builder.insert_element(ir.Constant(_V2, ir.Undefined), args[0], ir.Constant(_I32, 0))
        return builder.insert_element(v, args[1], ir.Constant(_I32, 1))

    return sig, codegen


def _extract(i):
    @intrinsic
    def f(typingctx, v):
        sig = types.uint64(block)

        def codegen(context, builder, sig, args):
            return builder.extract_element(args[0], ir.Constant(_I32, i))

        return sig, codegen

    return f


x_lo = _extract(0)
x_hi = _extract(1)


def _bitop(ty, op):
    @intrinsic
    def f(typingctx, a, b):
        sig = ty(ty, ty)

        def codegen(context, builder, sig, args):
            return getattr(builder, op)(args[0], args[1])

        return sig, codegen

    return f


x_xor = _bitop(block, "xor")
x_and = _bitop(block, "and_")
q_xor = _bitop(quad, "xor")


@intrinsic
def x_mask(typingctx, bit_word):
    """All ones in both words if the lowest bit of ``bit_word`` is 1, else zero (no branch)."""
    sig = block(types.uint64)

    def codegen(context, builder, sig, args):
        m = builder.sub(ir.Constant(_I64, 0), builder.and_(args[0], ir.Constant(_I64, 1)))
        v = builder.insert_element(ir.Constant(_V2, ir.Undefined), m, ir.Constant(_I32, 0))
        return builder.insert_element(v, m, ir.Constant(_I32, 1))

    return sig, codegen


@intrinsic
def q_make(typingctx, a, b, c, d):
    """The quad of four blocks (a, b, c, d)."""
    sig = quad(block, block, block, block)

    def codegen(context, builder, sig, args):
        ab = builder.shuffle_vector(args[0], args[1], ir.Constant(ir.VectorType(_I32, 4), [0, 1, 2, 3]))
        cd = builder.shuffle_vector(args[2], args[3], ir.Constant(ir.VectorType(_I32, 4), [0, 1, 2, 3]))
        return builder.shuffle_vector(ab, cd, ir.Constant(ir.VectorType(_I32, 8), list(range(8))))

    return sig, codegen


@intrinsic
def q_dup(typingctx, a, b):
    """The quad (a, b, a, b)."""
    sig = quad(block, block)

    def codegen(context, builder, sig, args):
        ab = builder.shuffle_vector(args[0], args[1], ir.Constant(ir.VectorType(_I32, 4), [0, 1, 2, 3]))
        return builder.shuffle_vector(ab, ab, ir.Constant(ir.VectorType(_I32, 8), [0, 1, 2, 3, 0, 1, 2, 3]))

    return sig, codegen


def _part(i):
    @intrinsic
    def f(typingctx, q):
        sig = block(quad)

        def codegen(context, builder, sig, args):
            return builder.shuffle_vector(args[0], args[0], ir.Constant(ir.VectorType(_I32, 2), [2 * i, 2 * i + 1]))

        return sig, codegen

    return f


q_p0, q_p1, q_p2, q_p3 = (_part(i) for i in range(4))


def _aes_fn(builder, name, vt):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt, vt]), name)


@intrinsic
def q_aes(typingctx, q, rk):
    """AES-128 of the four blocks of ``q`` under round keys ``rk``: a uint64 array of 11 x 8 words (round key
    r repeated four times at words [8r, 8r + 8)), as :func:`pairwise.mpc.aes.round_keys_x4` makes them."""
    sig = quad(quad, rk)

    def codegen(context, builder, sig, args):
        x, rkarr = args
        ary = context.make_array(sig.args[1])(context, builder, rkarr)
        base = builder.bitcast(ary.data, _V8.as_pointer())
        keys = [builder.load(builder.gep(base, [ir.Constant(_I64, r)]), align=8) for r in range(11)]
        if WIDTH == 512:
            parts, vt, suffix = [x], _V8, ".512"
        elif WIDTH == 256:
            vt, suffix = _V4, ".256"
            parts = [
                builder.shuffle_vector(x, x, ir.Constant(ir.VectorType(_I32, 4), [4 * h + j for j in range(4)]))
                for h in range(2)
            ]
        else:
            vt, suffix = _V2, ""
            parts = [
                builder.shuffle_vector(x, x, ir.Constant(ir.VectorType(_I32, 2), [2 * h, 2 * h + 1])) for h in range(4)
            ]
        n = len(parts)
        step = 8 // n

        def key(r, h):
            if n == 1:
                return keys[r]
            return builder.shuffle_vector(
                keys[r], keys[r], ir.Constant(ir.VectorType(_I32, step), [step * h + j for j in range(step)])
            )

        enc = _aes_fn(builder, "llvm.x86.aesni.aesenc" + suffix, vt)
        last = _aes_fn(builder, "llvm.x86.aesni.aesenclast" + suffix, vt)
        parts = [builder.xor(p, key(0, h)) for h, p in enumerate(parts)]
        for r in range(1, 10):
            parts = [builder.call(enc, [p, key(r, h)]) for h, p in enumerate(parts)]
        parts = [builder.call(last, [p, key(10, h)]) for h, p in enumerate(parts)]
        if n == 1:
            return parts[0]
        while len(parts) > 1:
            w = parts[0].type.count
            mask = ir.Constant(ir.VectorType(_I32, 2 * w), list(range(2 * w)))
            parts = [builder.shuffle_vector(parts[i], parts[i + 1], mask) for i in range(0, len(parts), 2)]
        return parts[0]

    return sig, codegen
