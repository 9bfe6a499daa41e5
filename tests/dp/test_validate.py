"""pairwise.dp.validate: the one integer check of the package."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from pairwise.dp.errors import PrivacyParameterError
from pairwise.dp.validate import check_int, is_int


@pytest.mark.parametrize("v", [0, -3, 2**70, np.int8(5), np.uint64(2**64 - 1), np.int64(-1)])
def test_integers_pass_and_come_back_as_python_ints(v):
    assert is_int(v)
    out = check_int(v, "x")
    assert type(out) is int and out == int(v)


@pytest.mark.parametrize("v", [True, False, np.bool_(True), 1.0, np.float64(2.0), Fraction(3), "4", None, [1]])
def test_non_integers_and_bools_are_refused(v):
    assert not is_int(v)
    with pytest.raises(PrivacyParameterError, match=r"^x must be an integer, got "):
        check_int(v, "x", error=PrivacyParameterError)


def test_bool_is_named_as_such():
    with pytest.raises(ValueError, match=r"^flag must be an integer >= 1, got a bool \(True\)$"):
        check_int(True, "flag", lo=1)


@pytest.mark.parametrize(
    ("v", "lo", "hi", "ok", "text"),
    [
        (1, 1, None, True, ""),
        (0, 1, None, False, "an integer >= 1"),
        (24, 1, 24, True, ""),
        (25, 1, 24, False, r"an integer in \[1, 24\]"),
        (0, 1, 24, False, r"an integer in \[1, 24\]"),
        (-5, None, -5, True, ""),
        (-4, None, -5, False, "an integer <= -5"),
    ],
)
def test_bounds_are_inclusive_and_named(v, lo, hi, ok, text):
    if ok:
        assert check_int(v, "n", lo=lo, hi=hi) == v
    else:
        with pytest.raises(ValueError, match=rf"^n must be {text}, got {v}$"):
            check_int(v, "n", lo=lo, hi=hi)
