"""The dyadic noise analysis in ``pairwise.dp``: layering, the re-exports of ``pairwise.circuits.noise``, its errors.

The gadgets' parameters, exact analysis and searches moved from
``circuits/noise.py`` to ``dp/dyadic/``, ``dp/exact.py`` and
``dp/samplers.py`` (issue 24).  These tests pin what the move promised:
``dp`` imports nothing above it, every moved name is still importable from
``pairwise.circuits.noise`` as the *same* object, and ``NoiseParameterError``
is still caught by the ``except`` clauses callers use.  The behaviour itself
is tested in ``test_noise*.py``.

Tests that start processes are in tests/system/test_dp_dyadic_processes.py.
"""

from __future__ import annotations

import sys
import warnings

import pytest

import pairwise.circuits.noise as noise
import pairwise.dp.dyadic as dyadic
import pairwise.dp.exact as exact
import pairwise.dp.samplers as samplers
from pairwise.dp.accounting import PrivacyGuarantee
from pairwise.dp.errors import NoiseParameterError, PrivacyParameterError

#: pairwise.circuits.noise name -> (new module, name there)
MOVED = {
    **{n: (dyadic, n) for n in dyadic.__all__},
    "exp_bounds": (exact, "exp_bounds"),
    "sample_discrete_laplace": (samplers, "sample_dyadic_laplace"),
    "simulate_discrete_laplace": (samplers, "simulate_dyadic_laplace"),
    "sample_krr": (samplers, "sample_krr"),
    "simulate_krr": (samplers, "simulate_krr"),
    "SAMPLER_MAX_BITS": (samplers, "SAMPLER_MAX_BITS"),
    "NoiseParameterError": (sys.modules["pairwise.dp.errors"], "NoiseParameterError"),
}
#: helpers that dp.dyadic exports but circuits.noise never did (new names of private helpers)
NEW_IN_DP = {
    "resolve_target_delta",
    "check_variance_tolerance",
    "DeltaTarget",
    "NoiseChoice",
}  # + option groups (issue 24)


@pytest.mark.parametrize("name", sorted(set(MOVED) - NEW_IN_DP))
def test_moved_names_are_re_exported_as_the_same_object(name):
    module, new_name = MOVED[name]
    assert getattr(noise, name) is getattr(module, new_name)


def test_circuits_noise_all_is_unchanged_and_resolves():
    assert len(noise.__all__) == len(set(noise.__all__)) == 57  # as before the move
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NoiseGuarantee
        for name in noise.__all__:
            assert hasattr(noise, name), name
    assert set(MOVED) - NEW_IN_DP <= set(noise.__all__) | {
        "MAX_ACC",
        "MAX_BITS",
        "SAMPLER_MAX_BITS",
        "CONSTRUCTION_MECHANISM",
    }


@pytest.mark.parametrize(
    "call",
    [
        lambda: dyadic.choose_discrete_laplace(0, 1),
        lambda: dyadic.choose_krr(1, 4),
        lambda: noise.noisy_kernel("median", epsilon=1),
        lambda: noise.random_input_bits(3, -1),
        lambda: exact.exp_bounds(3000),
        lambda: samplers.simulate_krr(dyadic.choose_krr(1, 3), [0, 1, 3], __import__("numpy").random.default_rng(1)),
    ],
    ids=["epsilon", "krr-k", "kernel", "batch", "exp-range", "krr-code"],
)
def test_noise_parameter_errors_keep_their_class_and_bases(call):
    """Raised by dp and by circuits alike; caught as NoiseParameterError, PrivacyParameterError and ValueError."""
    with pytest.raises(NoiseParameterError) as info:
        call()
    assert type(info.value) is NoiseParameterError and type(info.value).__name__ == "NoiseParameterError"
    assert isinstance(info.value, PrivacyParameterError) and isinstance(info.value, ValueError)
    assert noise.NoiseParameterError is NoiseParameterError


def test_noise_guarantee_is_a_deprecated_alias_of_privacy_guarantee():
    with pytest.warns(DeprecationWarning, match="NoiseGuarantee is deprecated"):
        alias = noise.NoiseGuarantee
    assert alias is PrivacyGuarantee
    with pytest.warns(DeprecationWarning):
        from pairwise.circuits.noise import NoiseGuarantee  # noqa: F401
    with pytest.raises(AttributeError):
        noise.NoSuchName  # noqa: B018
    for nc in (
        noise.discrete_laplace_gadget(dyadic.choose_discrete_laplace(1, 2)),
        noise.krr_gadget(dyadic.choose_krr(1)),
        noise.noisy_binary_kernel("collision", 8, epsilon=1),
    ):
        assert type(nc.guarantee) is PrivacyGuarantee and nc.guarantee.method in ("exact", "certified", "pure")


def test_the_one_krr_estimator_serves_the_gadgets_and_the_mechanism():
    from pairwise.dp.mechanisms import KaryRandomizedResponse, KRREstimator

    assert noise.KRREstimator is dyadic.KRREstimator is KRREstimator
    p = dyadic.choose_krr(1, 3)
    assert dyadic.krr_estimator(p, (0, 1, -1)) == KRREstimator.for_krr(3, p.flip_probability, (0, 1, -1))
    assert type(KaryRandomizedResponse(3, 1.0).estimator()) is KRREstimator
