"""Declared kernels (pairwise.circuits.kernel_spec): the declaration is checked against the circuit, never trusted.

Python ints are the reference: every table entry is compared with the kernel's closed form, and a kernel
whose circuit can leave its declared range, values or symmetry is refused with an error naming the values.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from pairwise.circuits.kernel_spec import (
    COLLISION,
    EXHAUSTIVE_LIMIT,
    VARIANCE,
    KernelRangeError,
    check_kernel_path,
    kernel,
    kernel_table,
    load_kernel,
    verify_kernel,
)


def _gini(b, x, y):
    w = x.width + 1
    return abs(x.extend(w, True) - y.extend(w, True))[: x.width]


@pytest.mark.parametrize("span,bits", [(5, 8), (40, 8), (255, 8), (300, 16)])
def test_shipped_kernels_match_their_closed_forms_on_the_whole_grid(span, bits):
    g = np.arange(span + 1)
    assert np.array_equal(kernel_table(VARIANCE, bits, span), (g[:, None] - g[None, :]) ** 2)
    assert np.array_equal(kernel_table(COLLISION, bits, span), (g[:, None] == g[None, :]).astype(np.int64))
    for spec in (VARIANCE, COLLISION):
        (lo, hi), t, how = verify_kernel(spec, bits, span)
        assert how.startswith("exhaustive") and t.min() >= lo and t.max() <= hi
    assert VARIANCE.output_range(span) == (0, span * span) and VARIANCE.natural_factor(0.1) == pytest.approx(0.005)


def test_a_range_too_narrow_is_refused_with_the_values_it_misses():
    narrow = kernel(range=(0, 10), symmetric=True, name="gini10")(_gini)
    with pytest.raises(KernelRangeError, match=r"declares the range \[0, 10\].*\[0, 40\]"):
        verify_kernel(narrow, 8, 40)
    assert verify_kernel(narrow, 8, 10)[0] == (0, 10)  # on a grid 0..10 it holds
    wide = kernel(range=lambda span: (0, span), symmetric=True, name="gini")(_gini)
    assert verify_kernel(wide, 8, 40)[0] == (0, 40)


def test_values_and_symmetry_are_checked():
    sign = kernel(range=(-1, 1), symmetric=True, name="sign")(
        lambda b, x, y: (x.extend(9) - y.extend(9)).as_signed().sign()
    )
    with pytest.raises(KernelRangeError, match="declared symmetric but h"):
        verify_kernel(sign, 8, 20)
    asym = kernel(range=(-1, 1), symmetric=False, values=(0, 1, -1), name="sign")(sign.build)
    assert verify_kernel(asym, 8, 20)[0] == (-1, 1)
    twovals = kernel(range=(0, 1), symmetric=True, values=(0, 1), name="gt")(lambda b, x, y: _gini(b, x, y))
    with pytest.raises(KernelRangeError, match=r"(declares the values|declares the range)"):
        verify_kernel(twovals, 8, 3)


def test_large_grids_use_the_sound_word_bound():
    span = int(EXHAUSTIVE_LIMIT**0.5) + 10
    gini = kernel(range=lambda s: (0, s), symmetric=True, name="gini")(_gini)
    with pytest.raises(KernelRangeError, match="too large to check exhaustively.*16-bit unsigned output word"):
        verify_kernel(gini, 16, span)
    word = kernel(range=(0, 2**16 - 1), symmetric=True, name="gini")(_gini)
    assert verify_kernel(word, 16, span)[2].startswith("sound bound")
    assert verify_kernel(VARIANCE, 16, span)[2].startswith("by construction")  # shipped, proven by construction


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(range=(1, 1), symmetric=True), "lo < hi"),
        (dict(range=(0, 1.5), symmetric=True), "integers"),
        (dict(range=(0, 1), symmetric="yes"), "symmetric=True or False"),
        (dict(range=(0, 1), symmetric=True, power=3), "power"),
        (dict(range=(0, 1), symmetric=True, scale=-1), "positive"),
        (dict(range=(0, 1), symmetric=True, values=(0, 1, 2, 3)), "2 or 3"),
        (dict(range=(0, 2), symmetric=True, values=(0, 1)), "do not span"),
    ],
)
def test_bad_declarations_are_refused(bad, match):
    with pytest.raises(KernelRangeError, match=match):
        kernel(**bad)(_gini).output_range(10)


def test_load_kernel_errors_say_what_to_do():
    with pytest.raises(KernelRangeError, match="module:function"):
        load_kernel("nocolon")
    with pytest.raises(KernelRangeError, match="cannot import"):
        load_kernel("no_such_module_xyz:k")
    with pytest.raises(KernelRangeError, match="has no attribute"):
        load_kernel("pairwise.circuits.kernel_spec:nothing")
    with pytest.raises(KernelRangeError, match="is not a kernel"):
        load_kernel("pairwise.circuits.kernel_spec:kernel")
    assert load_kernel("pairwise.circuits.kernel_spec:VARIANCE") is VARIANCE


@kernel(range=(0, 1), symmetric=True, values=(0, 1))
def module_level_kernel(b, x, y):
    return x.eq(y)


def test_a_module_level_kernel_knows_its_import_path_and_others_do_not():
    """Network workers import a kernel by its path: set for module-level functions, never for __main__ or locals."""
    assert module_level_kernel.path == f"{__name__}:module_level_kernel"

    def local(b, x, y):
        return x.eq(y)

    assert kernel(range=(0, 1), symmetric=True)(local).path is None  # '<locals>' in the qualified name
    local.__module__, local.__qualname__ = "__main__", "local"
    assert kernel(range=(0, 1), symmetric=True)(local).path is None


def test_a_spec_built_directly_has_dimensionless_defaults():
    from fractions import Fraction

    from pairwise.circuits.kernel_spec import KernelSpec

    spec = KernelSpec("eq", lambda b, x, y: x.eq(y), (0, 1), True)
    assert (spec.scale, spec.power, spec.values, spec.proven) == (Fraction(1), 0, None, False)
    assert spec.natural_factor(0.01) == 1.0
    assert COLLISION.power == 0 and COLLISION.natural_factor(0.001) == 1.0  # an indicator has no unit
    assert VARIANCE.power == 2 and VARIANCE.scale == Fraction(1, 2)


def test_undeclarable_values_on_a_large_grid_name_the_grid():
    span = int(EXHAUSTIVE_LIMIT**0.5) + 10
    eq = kernel(range=(0, 1), symmetric=True, values=(0, 1), name="eq")(lambda b, x, y: x.eq(y))
    with pytest.raises(KernelRangeError, match=f"cannot be checked on a grid of {span + 1} points"):
        verify_kernel(eq, 16, span)


# ----------------------------------------------------------------------------- boundaries (issue 25 item 6 survivors)


@pytest.mark.parametrize("path", ["pairwise.circuits.kernel_spec:", ":VARIANCE", ":"])
def test_load_kernel_refuses_a_path_missing_its_module_or_attribute_by_name(path):
    """An empty module or attribute is a malformed --kernel, not an import error (nor a ValueError escaping)."""
    with pytest.raises(KernelRangeError, match=r"--kernel wants module:function .*got " + re.escape(repr(path))):
        load_kernel(path)


def test_check_kernel_path_accepts_a_path_that_imports_back_and_refuses_one_naming_another_kernel():
    from dataclasses import replace

    assert check_kernel_path(VARIANCE) is None and check_kernel_path(COLLISION) is None  # they import back
    renamed = load_kernel("pairwise.circuits.kernel_spec:VARIANCE")
    assert check_kernel_path(replace(renamed, name="my-variance")) is None  # the name is not what workers import
    wrong = replace(VARIANCE, path="pairwise.circuits.kernel_spec:COLLISION")
    with pytest.raises(KernelRangeError, match=r"kernel_spec:COLLISION does not name kernel 'variance': it imports"):
        check_kernel_path(wrong)
    with pytest.raises(KernelRangeError, match="it imports another kernel"):
        check_kernel_path(replace(VARIANCE, range=lambda span: (0, span * span)))  # same path, other declaration
    with pytest.raises(KernelRangeError, match="has no module:function path"):
        check_kernel_path(replace(VARIANCE, path=None))
    with pytest.raises(KernelRangeError, match=r"does not name kernel 'variance' \(module .* has no attribute"):
        check_kernel_path(replace(VARIANCE, path="pairwise.circuits.kernel_spec:NOPE"))


def test_a_63_bit_output_tabulates_exactly_and_a_64_bit_one_is_refused():
    """int64 holds every unsigned 63-bit word (up to 2^63 - 1), not a 64-bit one: 63 is the widest tabulated."""
    span = 5
    top = kernel(range=(0, 2**63 - 1), symmetric=False, name="not63")(lambda b, x, y: ~x.extend(63))
    t = kernel_table(top, 4, span)
    assert t.dtype == np.int64
    assert [[int(v) for v in row] for row in t] == [[2**63 - 1 - x] * (span + 1) for x in range(span + 1)]
    assert verify_kernel(top, 4, span)[2] == f"exhaustive over the {(span + 1) ** 2} grid pairs"
    wide = kernel(range=(0, 2**64 - 1), symmetric=False, name="not64")(lambda b, x, y: ~x.extend(64))
    with pytest.raises(KernelRangeError, match=r"'not64': a 64-bit output is too wide to tabulate \(at most 63 bits\)"):
        kernel_table(wide, 4, span)


def test_the_exhaustive_check_stops_exactly_at_the_limit_of_grid_pairs():
    """(S + 1)^2 <= EXHAUSTIVE_LIMIT is checked pair by pair; one grid point more takes the word bound."""
    edge = math.isqrt(EXHAUSTIVE_LIMIT) - 1  # (edge + 1)^2 == EXHAUSTIVE_LIMIT
    assert (edge + 1) ** 2 == EXHAUSTIVE_LIMIT
    eq = kernel(range=(0, 1), symmetric=True, name="eq")(lambda b, x, y: x.eq(y))
    (_, _), t, how = verify_kernel(eq, 12, edge)
    assert how == f"exhaustive over the {EXHAUSTIVE_LIMIT} grid pairs" and t.shape == (edge + 1, edge + 1)
    assert int(t.sum()) == edge + 1 and np.array_equal(np.diag(t), np.ones(edge + 1))
    assert verify_kernel(eq, 12, edge + 1)[1:] == (None, "sound bound: the 1-bit output word")
    assert verify_kernel(VARIANCE, 12, edge + 1)[2].startswith("by construction")


def test_a_values_error_lists_the_five_smallest_values_outside_the_declared_ones():
    """|x - y| on 0..10 outputs 0..10; declared (0, 5, 10), the eight others are wrong and the first five named."""
    dist = kernel(range=(0, 10), symmetric=True, values=(0, 5, 10), name="dist")(_gini)
    with pytest.raises(KernelRangeError) as err:
        verify_kernel(dist, 8, 10)
    assert str(err.value) == "kernel 'dist' declares the values (0, 5, 10) but outputs [1, 2, 3, 4, 6]"


def test_the_word_bound_of_a_signed_output_is_its_twos_complement_range():
    """A 13-bit signed difference can hold [-4096, 4095]: declared exactly, the word bound accepts it."""
    span = math.isqrt(EXHAUSTIVE_LIMIT) + 50  # too large to check exhaustively; 12-bit grid indices

    def diff(b, x, y):
        return x.extend(13) - y.extend(13)

    exact = kernel(range=(-4096, 4095), symmetric=False, name="diff")(lambda b, x, y: diff(b, x, y).as_signed())
    assert verify_kernel(exact, 12, span) == ((-4096, 4095), None, "sound bound: the 13-bit output word")
    tight = kernel(range=lambda s: (-s, s), symmetric=False, name="diff")(exact.build)
    with pytest.raises(KernelRangeError, match=r"13-bit signed output word can hold \[-4096, 4095\], beyond"):
        verify_kernel(tight, 12, span)
    over = kernel(range=(-4096, 4094), symmetric=False, name="diff")(exact.build)
    with pytest.raises(KernelRangeError, match=r"can hold \[-4096, 4095\], beyond the declared \[-4096, 4094\]"):
        verify_kernel(over, 12, span)
