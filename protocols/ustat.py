"""Differentially private U-statistics with the 2PC subsampling protocol (ustats paper, Sec. 5).

What it does
    :func:`run_ustat` estimates the Gini mean difference (Eq. 4), Kendall's
    tau-a (Eq. 6) or the AUC (Eq. 7, ties 1/2) of n users' private values:

    1. the aggregator samples P independent permutations of the users, giving
       P n / 2 pairs (Sec. 5, step 1; :func:`protocols.ustat_math.sample_pairs`;
       for the AUC, P matchings of positives with negatives);
    2. every pair computes its kernel value plus discrete-Laplace noise in a
       garbled circuit (:func:`circuits.noise.noisy_kernel`): user i garbles,
       user j evaluates, and each feeds its own CSPRNG random bits, so neither
       learns the other's value or the noise (step 2); the evaluator forwards
       the noisy value to the aggregator;
    3. the aggregator averages (step 3): U_hat = 2/(P n) sum f~(x_i, x_j).

    Noise scale (Theorem 5): with the kernel mapped to [0, 1] by its public
    range R (gini: the public data range hi - lo; kendall: 2; AUC: 2 in the
    circuit's 2[x > y] + [x = y] units), each release uses epsilon / P with
    sensitivity R, i.e. Lap(P / eps) in [0, 1] units; each user is in at most
    P pairs, so the protocol is (eps, P delta_pair)-DP for each user, where
    delta_pair is the exact finite-precision delta the noise gadget reports.

Modes
    ``simulate``: the pairs are grouped into SIMD batches and every batch is a
    real execution of :class:`mpc.twopc.GarblerSession` /
    :class:`mpc.twopc.EvaluatorSession` (real garbling, real IKNP OT, bytes
    counted on the wire) over an in-memory channel between two threads of this
    process.  Same code as the network mode, no sockets.

Security model
    Semi-honest users and aggregator, computational DP (CDP) as in the paper;
    the aggregator sees only noisy kernel values.  In simulation mode one
    process plays every user, which is for measurement, not for deployment.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from circuits.ir import ints_to_bits
from circuits.kernels import pack_pair

from .ustat_math import (
    csprng_generator,
    sample_pairs,
    sample_two_sample_pairs,
    theorem5_mse,
    u_statistic,
    zetas,
)

__all__ = ["UStatResult", "run_ustat", "prepare_data", "STATISTICS"]

STATISTICS = ("gini", "kendall", "auc")


class UStatError(ValueError):
    """Invalid data or parameters for the U-statistic protocol."""


@dataclass
class UStatResult:
    statistic: str
    estimate: float
    exact: float
    epsilon: float
    delta: float
    n: int
    pairs: int
    pairs_per_user: int
    and_gates: int
    bytes: int
    seconds: float
    mode: str
    executions: int
    theorem5_mse: float | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = {
            "statistic": self.statistic,
            "estimate": self.estimate,
            "exact": self.exact,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "n": self.n,
            "pairs": self.pairs,
            "pairs_per_user": self.pairs_per_user,
            "and_gates": self.and_gates,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "mode": self.mode,
            "executions": self.executions,
            "theorem5_mse": self.theorem5_mse,
        }
        d.update(self.extra)
        return d


@dataclass(frozen=True)
class PreparedData:
    """Integer (fixed-point) data ready for the circuit, with the public range."""

    statistic: str
    x: np.ndarray  # int64, shifted so the public minimum is 0
    y: np.ndarray | None  # second column (kendall) or negatives (auc)
    bits: int
    scale: float  # natural units per integer step
    range_: int  # public range R of the kernel in circuit units


def _fixed_point(values: np.ndarray, name: str, max_decimals: int = 6) -> tuple[np.ndarray, int]:
    """Smallest power of ten making every value an integer (up to 10^max_decimals, then rounding)."""
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise UStatError(f"column {name}: non-finite values")
    for d in range(max_decimals + 1):
        s = v * 10**d
        if np.allclose(s, np.round(s), atol=1e-9, rtol=0):
            return np.round(s).astype(np.int64), d
    return np.round(v * 10**max_decimals).astype(np.int64), max_decimals


def _width(span: int) -> int:
    need = max(1, int(span).bit_length())
    for w in (8, 16, 32, 64):
        if need <= w:
            return w
    raise UStatError(f"data range {span} does not fit in 64 bits")


def prepare_data(statistic: str, x, y=None, labels=None) -> PreparedData:
    """Map real data to unsigned fixed-point integers with a public range.

    gini: x values; kendall: x and y columns; auc: scores x and 0/1 labels
    (positives garble, negatives evaluate).
    """
    if statistic not in STATISTICS:
        raise UStatError(f"unknown statistic {statistic!r}; choose from {STATISTICS}")
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise UStatError("need at least 2 data points")
    if statistic == "gini":
        xi, d = _fixed_point(x, "x")
        lo = int(xi.min())
        xi = xi - lo
        span = int(xi.max())
        return PreparedData("gini", xi, None, _width(span), 10.0**-d, max(span, 1))
    if statistic == "kendall":
        if y is None:
            raise UStatError("kendall needs two columns")
        y = np.asarray(y, dtype=np.float64)
        if y.shape != x.shape:
            raise UStatError("kendall columns must have the same length")
        xi, _ = _fixed_point(x, "x")
        yi, _ = _fixed_point(y, "y")
        xi, yi = xi - xi.min(), yi - yi.min()
        return PreparedData("kendall", xi, yi, _width(max(int(xi.max()), int(yi.max()))), 1.0, 2)
    if labels is None:
        raise UStatError("auc needs a 0/1 label column")
    lab = np.asarray(labels)
    if lab.shape != x.shape or not np.isin(lab, (0, 1)).all():
        raise UStatError("auc labels must be 0/1 and as long as the scores")
    si, _ = _fixed_point(x, "score")
    si = si - si.min()
    pos, neg = si[lab == 1], si[lab == 0]
    if pos.size == 0 or neg.size == 0:
        raise UStatError("auc needs at least one positive and one negative example")
    return PreparedData("auc", pos, neg, _width(int(si.max())), 1.0, 2)


def _pair_inputs(pd: PreparedData, pairs: np.ndarray) -> tuple[list[int] | np.ndarray, list[int] | np.ndarray]:
    if pd.statistic == "kendall":
        gx = [pack_pair(int(pd.x[i]), int(pd.y[i]), pd.bits) for i in pairs[:, 0]]
        ey = [pack_pair(int(pd.x[j]), int(pd.y[j]), pd.bits) for j in pairs[:, 1]]
        return gx, ey
    if pd.statistic == "auc":
        return pd.x[pairs[:, 0]], pd.y[pairs[:, 1]]
    return pd.x[pairs[:, 0]], pd.x[pairs[:, 1]]


def _exact(pd: PreparedData) -> float:
    if pd.statistic == "gini":
        return u_statistic("gini", pd.x.astype(np.float64)) * pd.scale
    if pd.statistic == "kendall":
        return u_statistic("kendall", pd.x, pd.y)
    return u_statistic("auc", pd.x, pd.y)


def run_ustat(
    statistic: str,
    x,
    y=None,
    labels=None,
    *,
    epsilon: float,
    pairs_per_user: int = 1,
    mode: str = "simulate",
    batch: int = 4096,
    lam: int = 40,
    progress=None,
    rng: np.random.Generator | None = None,
    compute_theorem5: bool = True,
) -> UStatResult:
    """Run the 2PC subsampling protocol and return the DP estimate with its costs.

    ``rng`` drives only the public pair sampling (default: seeded from the OS
    CSPRNG); noise bits always come from ``os.urandom``.
    """
    from circuits.noise import noisy_kernel, random_input_bits
    from mpc.channel import MemoryChannel
    from mpc.twopc import EvaluatorSession, GarblerSession

    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise UStatError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if int(pairs_per_user) != pairs_per_user or pairs_per_user < 1:
        raise UStatError(f"pairs per user must be a positive integer, got {pairs_per_user!r}")
    if mode != "simulate":
        raise UStatError(f"mode {mode!r} is not available yet (only 'simulate'); see the README")
    P = int(pairs_per_user)
    t_start = time.perf_counter()
    pd = prepare_data(statistic, x, y, labels)
    rng = rng or csprng_generator()
    if statistic == "auc":
        pairs = sample_two_sample_pairs(pd.x.size, pd.y.size, P, rng)
        n = int(pd.x.size + pd.y.size)
    else:
        pairs = sample_pairs(pd.x.size, P, rng)
        n = int(pd.x.size)
    m = pairs.shape[0]
    nc = noisy_kernel(statistic, pd.bits, False, epsilon=Fraction(epsilon).limit_denominator(10**9) / P,
                      sensitivity=pd.range_, lam=lam, n_samples=m)
    circuit = nc.circuit
    gx, ey = _pair_inputs(pd, pairs)
    rw = nc.random_width

    a, b = MemoryChannel.pair(timeout=600)
    outputs: list[np.ndarray] = []
    err: list[BaseException] = []
    starts = list(range(0, m, batch))

    def evaluator() -> None:
        try:
            s = EvaluatorSession(b, session_id=b"pairwise-ustat")
            for s0 in starts:
                s1 = min(m, s0 + batch)
                ry = random_input_bits(rw, s1 - s0)
                res = s.run(circuit, {"y": list(map(int, ey[s0:s1])), "ry": ry}, output="evaluator")
                outputs.append(np.asarray(res.outputs[0], dtype=np.int64))
        except BaseException as exc:  # surfaced in the caller
            err.append(exc)
            b.close()

    th = threading.Thread(target=evaluator, name="ustat-evaluator", daemon=True)
    th.start()
    try:
        g = GarblerSession(a, session_id=b"pairwise-ustat")
        for k, s0 in enumerate(starts):
            s1 = min(m, s0 + batch)
            rx = random_input_bits(rw, s1 - s0)
            g.run(circuit, {"x": list(map(int, gx[s0:s1])), "rx": rx}, output="evaluator")
            if progress:
                progress(s1, m)
    except BaseException:
        a.close()
        th.join(5)
        if err:
            raise err[0]
        raise
    th.join()
    if err:
        raise err[0]
    st = a.stats()
    total_bytes = st["bytes_sent"] + st["bytes_received"]
    a.close()
    out = np.concatenate(outputs)
    unit = float(nc.unit)
    exact = _exact(pd)
    guarantee = nc.guarantee
    delta_pair = float(guarantee.delta) if guarantee is not None else 0.0
    conv = {"gini": pd.scale, "kendall": 1.0, "auc": 0.5}[statistic]
    mse = None
    if compute_theorem5 and statistic != "auc" and n <= 20000:
        # Theorem 5 in circuit units (zeta of the integer kernel, Var of the
        # discrete Laplace 2 alpha / (1 - alpha)^2), then converted to natural units.
        z = zetas(statistic, pd.x.astype(np.float64), None if pd.y is None else pd.y.astype(np.float64))
        alpha = float(nc.params.alpha)
        noise_var = 2.0 * alpha / (1.0 - alpha) ** 2 * unit**2
        mse = conv**2 * theorem5_mse(n, P, z.zeta1, z.zeta2, noise_var)
    estimate = float(out.mean()) * unit * conv
    return UStatResult(
        statistic=statistic,
        estimate=float(estimate),
        exact=float(exact),
        epsilon=float(epsilon),
        delta=min(1.0, P * delta_pair),
        n=n,
        pairs=m,
        pairs_per_user=P,
        and_gates=circuit.n_and * m,
        bytes=int(total_bytes),
        seconds=time.perf_counter() - t_start,
        mode=mode,
        executions=len(starts),
        theorem5_mse=mse,
        extra={"and_gates_per_pair": circuit.n_and, "bits": pd.bits, "noise_delta_per_pair": delta_pair},
    )
