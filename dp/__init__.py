"""Differential privacy for the pairwise framework: pure math, no cryptography, no sockets.

Modules (in dependency order)
    :mod:`pairwise.dp.errors`       PairwiseError (the base of every project exception),
                           PrivacyParameterError (and its NoiseParameterError),
                           EmptyDataError, InvalidDataError
    :mod:`pairwise.dp.validate`     check_int and is_int, the integer check every layer uses
    :mod:`pairwise.dp.accounting`   PrivacyGuarantee, validation, basic and advanced composition
                           with outward rounding
    :mod:`pairwise.dp.exact`        exact rationals: directed rounding, exp and ln bounds,
                           exact-fraction validators
    :mod:`pairwise.dp.bounds`       public domains: validation, owner-side clamping, the public
                           fixed-point grid, clamping estimates to their natural range
    :mod:`pairwise.dp.samplers`     exact samplers on the OS CSPRNG (CKS20 Bernoulli, Bernoulli(exp),
                           geometric, discrete Laplace and Gaussian), vectorized exact arrays
                           from os.urandom, seeded ``simulate_*`` versions, and Mironov's
                           snapping mechanism (the only continuous Laplace released), and the
                           exact samplers of the dyadic gadget noise
    :mod:`pairwise.dp.dyadic`       the in-circuit noise gadgets' parameters (coins m / 2^a), exact
                           pmfs, deltas, certificates, guarantees and parameter searches
                           (not imported by ``import pairwise.dp``; see docs/noise.md)
    :mod:`pairwise.dp.interfaces`   Mechanism, LocalRandomizer, ValueRandomizer, CentralMechanism, Simulable:
                           what randomize / release / simulate mean (typing.Protocol)
    :mod:`pairwise.dp.mechanisms`   randomized response (binary, k-ary with beta = k/(k+e^eps-1)),
                           one-bit flip with truncation, geometric and snapping Laplace
                           mechanisms, each with a ``guarantee`` attribute
    :mod:`pairwise.dp.tree`         Theorem 3.1 tree noise for ECDFs (paper layout), the hierarchical
                           (Hay et al.) layout and least-squares consistency
    :mod:`pairwise.dp.smoothing`    Eq. (3) smoothing, p = 1 and p = 2, leaf and tree space
    :mod:`pairwise.dp.ecdf`         inverse ECDF (Alg. 1), ROC and AUC (Sec. 5.1), Hosmer-Lemeshow
                           (Alg. 2), and re-exports of the tree and smoothing functions

Security model
    Noise for releases is drawn from the operating system's CSPRNG (``secrets``,
    ``os.urandom``) and sampled exactly with integer arithmetic; functions that
    accept a seeded ``numpy.random.Generator`` say SIMULATION in their name or
    docstring and are for experiments only.  Mechanisms carry their privacy
    guarantee as data (:class:`PrivacyGuarantee`), rounded conservatively.
"""

from .accounting import (
    PrivacyGuarantee,
    advanced_composition,
    basic_composition,
    validate_delta,
    validate_epsilon,
)
from .ecdf import (
    HosmerLemeshowRelease,
    RocRelease,
    TreeRelease,
    auc,
    consistent_prefix_sums,
    consistent_tree,
    dyadic_node_counts,
    dyadic_prefix_sums,
    hierarchical_mechanism,
    histogram,
    hosmer_lemeshow,
    hosmer_lemeshow_dp,
    hosmer_lemeshow_statistic,
    inverse_ecdf,
    inverse_ecdf_bisect,
    path_node_values,
    path_sums,
    private_roc,
    roc_curve,
    smooth_ecdf,
    theorem31_mse,
    tree_mechanism,
    tree_node_noise,
    tree_noise_scale,
)
from .errors import EmptyDataError, InvalidDataError, PairwiseError, PrivacyParameterError
from .interfaces import CentralMechanism, LocalRandomizer, Mechanism, Simulable, ValueRandomizer
from .mechanisms import (
    GeometricMechanism,
    KaryRandomizedResponse,
    OneBitFlip,
    OneBitFlipVector,
    RandomizedResponse,
    SnappingLaplaceMechanism,
)
from .samplers import (
    bernoulli_exp_array,
    bernoulli_rational_array,
    conservative_scale,
    discrete_laplace_array,
    geometric_array,
    sample_bernoulli_exp,
    sample_bernoulli_rational,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_geometric,
    simulate_discrete_laplace,
    simulate_laplace,
    snapping_epsilon,
    snapping_laplace,
)

__all__ = [
    "PairwiseError",
    "Mechanism",
    "LocalRandomizer",
    "ValueRandomizer",
    "CentralMechanism",
    "Simulable",
    "PrivacyParameterError",
    "EmptyDataError",
    "InvalidDataError",
    "PrivacyGuarantee",
    "validate_epsilon",
    "validate_delta",
    "basic_composition",
    "advanced_composition",
    "sample_bernoulli_rational",
    "sample_bernoulli_exp",
    "sample_geometric",
    "sample_discrete_laplace",
    "sample_discrete_gaussian",
    "bernoulli_rational_array",
    "bernoulli_exp_array",
    "geometric_array",
    "discrete_laplace_array",
    "simulate_discrete_laplace",
    "simulate_laplace",
    "snapping_laplace",
    "snapping_epsilon",
    "conservative_scale",
    "RandomizedResponse",
    "KaryRandomizedResponse",
    "OneBitFlip",
    "OneBitFlipVector",
    "GeometricMechanism",
    "SnappingLaplaceMechanism",
    "TreeRelease",
    "tree_mechanism",
    "hierarchical_mechanism",
    "tree_node_noise",
    "tree_noise_scale",
    "theorem31_mse",
    "path_sums",
    "path_node_values",
    "dyadic_node_counts",
    "dyadic_prefix_sums",
    "consistent_tree",
    "consistent_prefix_sums",
    "smooth_ecdf",
    "histogram",
    "inverse_ecdf",
    "inverse_ecdf_bisect",
    "roc_curve",
    "auc",
    "RocRelease",
    "private_roc",
    "hosmer_lemeshow",
    "hosmer_lemeshow_dp",
    "hosmer_lemeshow_statistic",
    "HosmerLemeshowRelease",
]
