"""Dyadic noise for garbled circuits: exact parameters, exact privacy analysis, parameter searches.

What it does
    The noise gadgets of :mod:`pairwise.circuits.noise` draw every random
    choice as a coin with a dyadic probability m / 2^a (a comparison of
    uniform bits with m).  This package is their circuit-free analysis:

    * :mod:`~pairwise.dp.dyadic.params` -- the parameter classes
      (:class:`BernoulliParams`, :class:`DiscreteLaplaceParams` for the
      discrete Laplace and signed geometric, :class:`RandomizedResponseParams`,
      :class:`KaryRRParams`), their costs in AND gates and random bits, their
      exact moments, and the k-RR debiasing :class:`KRREstimator`;
    * :mod:`~pairwise.dp.dyadic.guarantee` -- exact pmfs, deltas, ratio
      certificates and the stated (epsilon, delta) guarantee (a
      :class:`~pairwise.dp.accounting.PrivacyGuarantee` that says how it
      was computed);
    * :mod:`~pairwise.dp.dyadic.search` -- the choosers
      (:func:`choose_discrete_laplace`, :func:`choose_randomized_response`,
      :func:`choose_krr`, :func:`simplest_dyadic`).

    Exact samplers of the same distributions, without a circuit, are in
    :mod:`pairwise.dp.samplers` (:func:`~pairwise.dp.samplers.sample_dyadic_laplace`,
    :func:`~pairwise.dp.samplers.sample_krr`); rational exp/ln bounds and
    directed rounding in :mod:`pairwise.dp.exact`.

    A package rather than one module: the three concerns are about 400 lines
    each, and the searches depend on the analysis, not the other way round.

Security model
    Pure math on public parameters.  Floating point only proposes candidate
    parameters; every accepted candidate's privacy and variance are checked
    in exact rational arithmetic.  Derivations: ``docs/noise.md``.

Follows
    [BBGK20, Theorem 5, Sec. 3 (Eq. 9) and App. C.1-C.2]; [DKMMN06];
    [CSU19]; [CKS20].
"""

from .guarantee import (
    EXACT_MAX_BITS,
    EXACT_MAX_WORK,
    RatioCertificate,
    delta_bound,
    delta_exact,
    discrete_laplace_guarantee,
    discrete_laplace_pmf,
    geometric_pmf,
    geometric_tail,
    krr_guarantee,
    randomized_response_guarantee,
    ratio_certificate,
)
from .params import (
    CONSTRUCTION_MECHANISM,
    CONSTRUCTIONS,
    KRR_K,
    MAX_ACC,
    MAX_BITS,
    BernoulliParams,
    DiscreteLaplaceParams,
    KaryRRParams,
    KRREstimator,
    RandomizedResponseParams,
    bernoulli_params,
    discrete_laplace_params,
    krr_estimator,
)
from .search import (
    DEFAULT_DELTA,
    DEFAULT_VARIANCE_TOLERANCE,
    DeltaTarget,
    NoiseChoice,
    check_variance_tolerance,
    choose_discrete_laplace,
    choose_krr,
    choose_randomized_response,
    ideal_discrete_laplace_variance,
    resolve_target_delta,
    simplest_dyadic,
)

__all__ = [
    "MAX_ACC",
    "MAX_BITS",
    "EXACT_MAX_BITS",
    "EXACT_MAX_WORK",
    "DEFAULT_DELTA",
    "DEFAULT_VARIANCE_TOLERANCE",
    "DeltaTarget",
    "NoiseChoice",
    "CONSTRUCTIONS",
    "CONSTRUCTION_MECHANISM",
    "KRR_K",
    "BernoulliParams",
    "DiscreteLaplaceParams",
    "RandomizedResponseParams",
    "KaryRRParams",
    "KRREstimator",
    "RatioCertificate",
    "bernoulli_params",
    "discrete_laplace_params",
    "krr_estimator",
    "geometric_tail",
    "ratio_certificate",
    "delta_bound",
    "geometric_pmf",
    "discrete_laplace_pmf",
    "delta_exact",
    "discrete_laplace_guarantee",
    "randomized_response_guarantee",
    "krr_guarantee",
    "resolve_target_delta",
    "check_variance_tolerance",
    "ideal_discrete_laplace_variance",
    "simplest_dyadic",
    "choose_discrete_laplace",
    "choose_randomized_response",
    "choose_krr",
]
