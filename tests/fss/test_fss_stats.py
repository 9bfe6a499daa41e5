"""Statistical tests: one key alone looks uniform, whatever alpha is.

Keys come from the OS CSPRNG (no seed is possible), so each test uses a
significance level ALPHA = 1e-7; with the about 190 hypothesis tests below
the chance of any false failure is below 2e-5, while a share or correction word
that depended on alpha (or was biased) would be rejected with overwhelming
probability at these sample sizes.  Each test also checks that the same
statistic rejects a non-uniform sample (the reconstructed function value), so
the test can fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pairwise.fss import dcf_gen_batch, dpf_gen_batch

ALPHA = 1e-7  # significance level of every goodness-of-fit test here
K = 256 * 40  # keys per sample: 40 expected counts per bin for 256 bins


def chi2_uniform_p(values: np.ndarray, bins: int) -> float:
    counts = np.bincount(values.astype(np.int64), minlength=bins)
    assert counts.shape == (bins,)
    return float(stats.chisquare(counts).pvalue)


@pytest.mark.parametrize("alpha", [0, 128, 255])
@pytest.mark.parametrize("kind", ["dcf", "dpf"])
def test_share_is_uniform_whatever_alpha(alpha, kind):
    n = l = 8
    gen = dcf_gen_batch if kind == "dcf" else dpf_gen_batch
    k0, k1 = gen(np.full(K, alpha, dtype=np.uint64), 1, n, l)
    for x in (0, alpha, 100, 255):
        y0, y1 = k0.eval(x), k1.eval(x)
        for y in (y0, y1):
            assert chi2_uniform_p(y, 256) > ALPHA, (kind, alpha, x)
        # power check: the sum of the shares is the (constant) function value
        assert chi2_uniform_p((y0 + y1) & np.uint64(255), 256) < ALPHA


@pytest.mark.parametrize("alpha", [0, 2**31 + 12345, 2**32 - 1])
def test_dcf_share_bytes_uniform_32_bit(alpha):
    n = l = 32
    k0, k1 = dcf_gen_batch(np.full(K, alpha, dtype=np.uint64), 1, n, l, comparison="ge")
    for x in (alpha, 0, 2**32 - 1):
        for y in (k0.eval(x), k1.eval(x)):
            assert chi2_uniform_p(y & np.uint64(255), 256) > ALPHA  # low byte
            assert chi2_uniform_p(y >> np.uint64(24), 256) > ALPHA  # high byte


@pytest.mark.parametrize("alpha", [0, 255])
def test_correction_words_uniform(alpha):
    """The public part of a key (corrections) must not depend on alpha either."""
    n = l = 8
    k0, _ = dcf_gen_batch(np.full(K, alpha, dtype=np.uint64), 1, n, l)
    assert chi2_uniform_p(k0.vcw.reshape(-1), 256) > ALPHA
    assert chi2_uniform_p(k0.fcw, 256) > ALPHA
    for lvl in range(n):
        for side in (0, 1):
            ones = int(k0.tcw[lvl, side].sum())
            assert stats.binomtest(ones, K, 0.5).pvalue > ALPHA
        for word, b in ((0, 1), (0, 63), (1, 0), (1, 63)):  # bit 0 is the control bit (always 0)
            ones = int(((k0.scw[lvl, word] >> np.uint64(b)) & np.uint64(1)).sum())
            assert stats.binomtest(ones, K, 0.5).pvalue > ALPHA
    # power check: alpha's bits are not uniform, and the test sees it
    assert stats.binomtest(K if alpha else 0, K, 0.5).pvalue < ALPHA
