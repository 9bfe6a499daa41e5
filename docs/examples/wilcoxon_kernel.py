"""A user-written kernel for ``pairwise ustat --kernel``: the Wilcoxon signed-rank (Walsh-average) kernel.

For paired differences d in the public domain [-10, 10] at 0 decimals, each user's grid index is
k = d + 10 (0..20), and h(d1, d2) = [d1 + d2 > 0] = [k1 + k2 > 20].  Its U-statistic is the probability
that a Walsh average (d1 + d2) / 2 is positive, the statistic behind the Wilcoxon signed-rank test
(Hoeffding 1948): 1/2 when the differences are symmetric about 0.

Run it on a CSV of differences (docs/ustat.md):

    PYTHONPATH=docs/examples pairwise ustat --kernel wilcoxon_kernel:walsh_positive --epsilon 2 \\
        --data diffs.csv --columns d --lower -10 --upper 10 --decimals 0
"""

from pairwise.circuits.kernel_spec import kernel

#: -2 lower / step for the domain [-10, 10] at 0 decimals: d1 + d2 > 0 is k1 + k2 > CENTRE.
CENTRE = 20


@kernel(range=(0, 1), symmetric=True, values=(0, 1))
def walsh_positive(b, x, y):
    """[x + y > CENTRE] on the grid indices: one adder and one comparison with a constant."""
    s = x.extend(x.width + 1) + y.extend(y.width + 1)  # k1 + k2 without overflow
    return s > CENTRE
