"""The querier's noise maps (:mod:`pairwise.protocols.ecdf.estimates`) against closed forms and dense matrices.

Written after a source-level mutation run (cosmic-ray) left these behaviours
untested: the node count and the root of a class series, the covariance of
the paper's path sums, the budget for the noise's distance to its ideal law,
the band over one threshold, the largest grid of the AUC interval and the
methods' text.
"""

from __future__ import annotations

import numpy as np
import pytest

from pairwise.dp.ecdf_intervals import NoiseLaw
from pairwise.dp.tree import path_adjoint
from pairwise.protocols.ecdf.estimates import MAX_AUC_BITS, NoiseMap, auc_method, prefix_covariance

LAW = NoiseLaw(0.5)


def test_a_class_series_noises_its_root_and_the_total_is_public_otherwise():
    """radices (4,), unit node variance: the consistent total combines the root (var 1) with the sum of four
    leaves (var 4), variance 4 / 5; with the public n it has no error."""
    cls = NoiseMap("kary", 2, LAW, (4,), root_public=False)
    pub = NoiseMap("kary", 2, LAW, (4,), root_public=True)
    sq_c, _ = cls.prefix_map.threshold_norms([3])
    sq_p, _ = pub.prefix_map.threshold_norms([3])
    assert sq_c[0] == pytest.approx(0.8) and sq_p[0] == pytest.approx(0.0, abs=1e-24)
    assert (cls.nodes, pub.nodes) == (5, 4)
    assert NoiseMap("kary", 4, LAW, (4, 4), root_public=True).nodes == 20
    assert NoiseMap("paper", 4, LAW).nodes == 31 and NoiseMap("paper", 4, LAW).threshold_values == 5


def test_paper_prefix_covariance_is_the_dense_path_map():
    nm = NoiseMap("paper", 4, LAW)
    A = path_adjoint(np.eye(16))
    assert np.array_equal(prefix_covariance(nm), A @ A.T)
    tree = NoiseMap("kary", 4, LAW, (4, 4), root_public=False)
    D = tree.dense()
    assert np.allclose(prefix_covariance(tree), D @ D.T)


def test_the_distance_budget_leaves_strictly_more_than_half_of_alpha():
    half = NoiseMap("paper", 3, NoiseLaw(0.5, tv=2.0**-5))  # 4 values x 2^-5 = 0.125 = alpha / 2 exactly
    assert half.ideal_alpha(0.25, 4) is None and half.radii([0, 1], 0.25) is None
    assert half.method(0.25).startswith("not computed") and "total variation" in half.method(0.25)
    ok = NoiseMap("paper", 3, NoiseLaw(0.5, tv=2.0**-7))
    assert ok.ideal_alpha(0.25, 4) == pytest.approx(0.25 - 2.0**-5)
    assert ok.method(0.25).startswith("75% per threshold, exact")


def test_a_band_over_one_threshold_is_that_threshold_with_every_node_coupled():
    nm = NoiseMap("paper", 3, LAW)
    assert np.array_equal(nm.band_radii([2], 0.1), nm.radii([2], 0.1, values=nm.nodes))
    assert nm.band_radii([1, 2], 0.1)[0] > nm.band_radii([2], 0.1)[0]  # Bonferroni over two


def test_the_auc_interval_is_computed_up_to_its_largest_grid():
    at, beyond = NoiseMap("paper", MAX_AUC_BITS, LAW), NoiseMap("paper", MAX_AUC_BITS + 1, LAW)
    assert auc_method(at, at, 0.05) is None
    assert auc_method(beyond, beyond, 0.05).startswith("not computed")
