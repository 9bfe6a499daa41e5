"""protocols/ldp raises its own exception types (all still ValueError), with messages that say what to change."""

from __future__ import annotations

import numpy as np
import pytest

from pairwise import PairwiseError
from pairwise.dp.errors import InvalidDataError
from pairwise.protocols.ldp import LDPDataError, LDPError, LDPParameterError, ReportError, UnknownKernel
from pairwise.protocols.ldp.qmle import submit_public_x
from pairwise.protocols.ldp.shuffle import BinarySumProtocol, HistogramProtocol, secure_permutation
from pairwise.protocols.ldp.ustat import exact_ustatistic


def test_the_hierarchy_keeps_value_error_and_the_project_base():
    for cls in (LDPParameterError, UnknownKernel, LDPDataError, ReportError):
        assert issubclass(cls, LDPError) and issubclass(cls, ValueError) and issubclass(cls, PairwiseError)
    assert issubclass(ReportError, LDPDataError) and issubclass(LDPDataError, InvalidDataError)


@pytest.mark.parametrize(
    ("call", "cls", "text"),
    [
        (lambda: secure_permutation(-1), LDPParameterError, "permutation size"),
        (lambda: submit_public_x(np.ones(3), 1.0, 0.0, 1.0), LDPParameterError, "lower < upper"),
        (lambda: exact_ustatistic(np.ones(5), "nope"), UnknownKernel, "unknown kernel 'nope'"),
        (lambda: exact_ustatistic(np.ones(1), "gini"), LDPDataError, r"at least two points .* got 1"),
        (lambda: BinarySumProtocol(1.0, 1e-6, 2000).analyze(np.array([1, 0, 1])), ReportError, "must all be 1"),
        (lambda: HistogramProtocol(1.0, 1e-6, 10**5, 4).randomize(7), LDPDataError, r"in \[0, 4\)"),
    ],
)
def test_bad_input_raises_the_specific_class(call, cls, text):
    with pytest.raises(cls, match=text):
        call()
