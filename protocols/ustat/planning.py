"""Choosing the pairs per user P from public quantities (``--pairs-per-user auto``).

What it does
    [BBGK20, Theorem 5, Sec. 5] gives the MSE of the subsampled,
    noised estimate with P permutations of n users:

        MSE(P) = 4 zeta_1 / n + (2 / (P n)) (1 + (P - 1)/(n - 1)) (zeta_2 - 2 zeta_1) + 2 V(eps / P) / (P n)

    (the paper's form, regrouped: its zeta_1 terms add up to 4 zeta_1 / n
    whatever P), where V(eps') is the per-pair variance of the released
    kernel value at budget eps' (the gadget's exact worst case over the
    kernel's values, :attr:`pairwise.circuits.noise.NoisyCircuit.max_estimate_variance`).
    Only the degenerate part zeta_2 - 2 zeta_1 >= 0 falls with P; the noise
    term grows with P (each user splits eps over P pairs, so V(eps / P) grows
    like P^2 for Laplace-type noise).  The data's zetas are private, so
    :func:`choose_pairs_per_user` takes the worst case for the trade-off: the
    largest degenerate variance a kernel of public range R can have,
    zeta_2 - 2 zeta_1 = R^2 / 4 (zeta_1 = 0).  That is the case where P > 1
    helps most; on any data P helps less.  (The worst case of the MSE itself,
    zeta_1 = zeta_2 / 2 = R^2 / 8, has no degenerate part at all: there P = 1
    is always best.)  The two-sample design (AUC) uses the analogue of
    :func:`pairwise.protocols.ustat.stats.two_sample_mse` with zeta_10 =
    zeta_01 = 0 and zeta_11 = R^2 / 4.

    The rule picks the P in 1..``max_p`` with the smallest bound and reports
    the bound for every P it tried, all functions of n, epsilon, R and the
    noise law.

Security model
    None of its own: every input is public (n, epsilon, the public range).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .config import UStatConfig

__all__ = ["PairsChoice", "choose_pairs_per_user", "theorem5_bound", "MAX_AUTO_P"]

#: Largest P the rule considers.
MAX_AUTO_P = 32


@dataclass(frozen=True)
class PairsChoice:
    """The chosen P, the bound (kernel units^2, natural) at every P tried, and the reason in words."""

    pairs_per_user: int
    bounds: dict
    reason: str


def theorem5_bound(n_rows: int, n_cols: int, two_sample: bool, P: int, R: float, noise_variance: float) -> float:
    """The P-dependent part of Theorem 5's MSE with the worst-case degenerate variance R^2 / 4 (see the module)."""
    deg = R * R / 4
    if two_sample:
        m = min(n_rows, n_cols)
        return deg / (P * m) + (P - 1) / P * deg / (n_rows * n_cols) + noise_variance / (P * m)
    n = n_rows
    return 2.0 / (P * n) * (1 + (P - 1) / (n - 1)) * deg + 2.0 * noise_variance / (P * n)


def choose_pairs_per_user(config: UStatConfig, pd, max_p: int = MAX_AUTO_P) -> PairsChoice:
    """The P in 1..max_p minimizing :func:`theorem5_bound` for this public design (subsample design only)."""
    from .driver import _noisy_circuit, natural_units

    two = pd.statistic == "auc"
    n_rows = pd.x.size
    n_cols = pd.y.size if two else pd.x.size
    most = min(n_rows, n_cols) if two else n_rows - 1
    bounds: dict[int, float] = {}
    rising = 0
    for P in range(1, min(max_p, most) + 1):
        cfg = replace(config, pairs_per_user=P)
        n = n_rows + (n_cols if two else 0)
        m = P * (min(n_rows, n_cols) if two else n_rows // 2)
        nc, *_ = _noisy_circuit(cfg, pd, n, m)
        f = natural_units(pd, nc)
        R = float(pd.range_) * f
        bounds[P] = theorem5_bound(n_rows, n_cols, two, P, R, float(nc.max_estimate_variance) * f * f)
        rising = rising + 1 if P > 1 and bounds[P] > bounds[P - 1] else 0
        if rising >= 3:  # the noise term has taken over for good
            break
    best = min(bounds, key=lambda p: (bounds[p], p))
    shown = ", ".join(f"P={p}: {bounds[p]:.3g}" for p in sorted(bounds)[:6])
    if best == 1:
        why = (
            "the noise term 2 Var(eps/P) / (P n) grows with P faster than the subsampling term it buys down, "
            "even with the largest degenerate variance R^2/4"
        )
    else:
        why = (
            f"with the largest degenerate variance R^2/4 the subsampling term falls faster than the noise term "
            f"grows up to P={best}"
        )
    reason = (
        f"Theorem 5 bound, worst-case variances (zeta_1 = 0, zeta_2 = R^2/4, R = {pd.range_} in circuit units), "
        f"n = {n_rows if not two else f'{n_rows}+{n_cols}'}, eps = {config.epsilon:g}: {shown}; {why}"
    )
    return PairsChoice(best, bounds, reason)
