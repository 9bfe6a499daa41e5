"""Differentially private U-statistics with the 2PC subsampling protocol (ustats paper, Sec. 5).

What it does
    :func:`run_ustat` estimates the Gini mean difference (Eq. 4), Kendall's
    tau-a (Eq. 6) or the AUC (Eq. 7, ties 1/2) of n users' private values:

    1. the aggregator samples P independent permutations of the users, giving
       P n / 2 pairs (Sec. 5, step 1; :func:`pairwise.protocols.ustat.stats.sample_pairs`;
       for the AUC, P matchings of positives with negatives);
    2. every pair computes its kernel value and randomizes it in a garbled
       circuit (:func:`pairwise.circuits.noise.noisy_kernel`): user i garbles,
       user j evaluates, and each feeds its own CSPRNG random bits, so neither
       learns the other's value or the noise (step 2); the evaluator forwards
       the noisy value to the aggregator;
    3. the aggregator averages (step 3): U_hat = 2/(P n) sum f~(x_i, x_j),
       f~ the unbiased reading of each release (:meth:`NoisyCircuit.estimates`).

    Noise (``noise``, default ``auto``, reported as the result's ``noise``):
    k-ary randomized response for kendall and auc, whose kernels take three
    values (pure DP, lower variance than the discrete Laplace at every
    epsilon; its analogue of Theorem 5 is derived in
    :mod:`pairwise.circuits.noise`), the signed geometric (a discrete Laplace
    centred at -1/2) for gini, or the discrete Laplace on request.

    Predicted error (not private: computed from the data, for evaluation):
    ``sample_mse`` is the MSE around the U-statistic of the data the circuit
    saw (``exact_quantized``: the clamped fixed-point data; the pair sampling
    and the noise are the randomness;
    :func:`pairwise.protocols.ustat.stats.fixed_sample_mse`);
    ``theorem5_mse`` is Theorem 5's MSE around the *population* value for
    data drawn from the empirical distribution (its two-sample analogue for
    the AUC, :func:`pairwise.protocols.ustat.stats.two_sample_mse`).

    Public parameters: the caller states the public domain [lower, upper]
    of each private column and its fixed-point decimals D (:func:`prepare_data`);
    every owner clamps its value into the domain and rounds it to the grid
    lower + k 10^-D before anything else. The kernel's range, the circuit
    width and the scale are functions of (lower, upper, D) only, never of
    the data, so they are the same on neighbouring datasets.

    Noise scale (Theorem 5): with the kernel mapped to [0, 1] by its public
    range R (gini: the public span (upper - lower) 10^D in grid units;
    kendall: 2; AUC: 2 in the circuit's 2[x > y] + [x = y] units), each release uses epsilon / P with
    sensitivity R, i.e. Lap(P / eps) in [0, 1] units (k-RR: eps / P against
    any change of the kernel value); each user is in at most P pairs, so the
    protocol is (eps, P delta_pair)-DP for each user, where delta_pair is the
    exact finite-precision delta the noise gadget reports (0 for k-RR; the
    gadget is built for ``pair_delta``, default 2^-40).

Modes (both run the same GarblerSession / EvaluatorSession code)
    ``simulate``: the pairs are grouped into SIMD batches and every batch is a
    real execution of :class:`pairwise.mpc.twopc.GarblerSession` /
    :class:`pairwise.mpc.twopc.EvaluatorSession` (real garbling, real IKNP OT, bytes
    counted on the wire) over an in-memory channel between two threads of this
    process.
    With ``cluster=`` (:mod:`pairwise.protocols.ustat.cluster`), every batch is
    one Dask task that runs this same in-memory execution on a worker
    (``local[:N]`` worker processes on this machine, or a scheduler address);
    tasks return only the batch's noisy sum and count.
    ``network``: the users are hosted by worker processes
    (:mod:`pairwise.protocols.ustat.worker`, user u on worker u mod W); the pairs whose
    garbler is on worker a and evaluator on worker b form one Yao session over
    loopback TCP between a and b (two threads of a when a = b), each party
    drawing its own noise bits; the evaluator side forwards the noisy values
    to the aggregator.  Sessions run in mutual TLS 1.3 (certificates
    ``worker-K`` from ``tls_dir``, or a throwaway CA made for the run), each
    worker pinning its peer's certificate name; the workers die with the
    driver and are stopped on SIGTERM/SIGINT.

Baseline design ``all``
    All n(n-1)/2 pairs, each release at the per-pair epsilon that advanced
    composition over n - 1 releases per user turns into eps (with slack
    delta'), as in the paper's Figure 4 baseline.

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

from pairwise.circuits.kernels import pack_pair

from .stats import (
    csprng_generator,
    expected_noise_variance,
    fixed_sample_mse,
    kernel_sums,
    sample_pairs,
    sample_two_sample_pairs,
    theorem5_mse,
    two_sample_mse,
    two_sample_zetas,
    u_statistic,
    all_pairs,
    zetas_from_sums,
)

__all__ = ["UStatResult", "UStatError", "run_ustat", "prepare_data", "STATISTICS", "NOISE_MECHANISMS", "DEFAULT_PAIR_DELTA"]

STATISTICS = ("gini", "kendall", "auc")
#: ``noise`` choices of :func:`run_ustat` (see :func:`pairwise.circuits.noise.choose_kernel_noise`).
NOISE_MECHANISMS = ("auto", "krr", "discrete_laplace", "signed_geometric")
#: Default delta of one pair's release (each user's delta is P times this, or n - 1 times for ``all``).
DEFAULT_PAIR_DELTA = 2.0**-40
#: Largest number of kernel evaluations (n^2, or n_pos n_neg) for which the error predictions are computed.
PREDICTION_MAX_WORK = 4 * 10**8


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
    #: the noisy per-pair values the aggregator received (int64, circuit units, pair order):
    #: exactly what the protocol reveals to the aggregator; not part of ``as_dict``
    outputs: np.ndarray | None = field(default=None, repr=False)

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
    """Integer (fixed-point) data ready for the circuit, with its public domain.

    Everything but ``x``, ``y`` and ``clamped`` is a function of public
    inputs (the bounds, the decimals, ``bits``).
    """

    statistic: str
    x: np.ndarray  # int64 grid indices k = round((clamp(v) - lower) 10^D), so the public lower bound is 0
    y: np.ndarray | None  # second column (kendall) or negatives (auc)
    bits: int
    scale: float  # natural units per integer step (gini)
    range_: int  # public range R of the kernel in circuit units
    domains: tuple = ()  # PublicDomain per private column (kendall: 2)
    clamped: int = 0  # values moved into the public domain: private, a diagnostic only


def _domains(statistic: str, lower, upper, decimals) -> tuple:
    """One :class:`pairwise.dp.bounds.PublicDomain` per private column, from public inputs."""
    from pairwise.dp.bounds import PublicDomain
    from pairwise.dp.errors import PrivacyParameterError

    k = 2 if statistic == "kendall" else 1
    if lower is None or upper is None:
        raise UStatError(
            f"{statistic} needs the public domain of its private column(s): lower= and upper= "
            f"({'one value per column' if k == 2 else 'one value'}), fixed in advance, never the data's min/max")

    def per_column(v, name):
        vals = list(v) if isinstance(v, (list, tuple, np.ndarray)) else [v]
        if len(vals) != k:
            raise UStatError(f"{statistic} needs {k} {name} value(s) (one per private column), got {len(vals)}")
        return vals

    lo, hi = per_column(lower, "lower"), per_column(upper, "upper")
    dec = [None] * k if decimals is None else per_column(decimals, "decimals")
    names = ("x", "y") if k == 2 else ("scores" if statistic == "auc" else "x",)
    try:
        doms = tuple(PublicDomain(a, b, d, f"column {nm}") for a, b, d, nm in zip(lo, hi, dec, names))
        for d in doms:
            d.span  # noqa: B018 - validates the grid (at least 1 step, fewer than 2^62)
    except PrivacyParameterError as exc:
        raise UStatError(str(exc)) from None
    return doms


def _fixed_point(values, domain, name: str) -> tuple[np.ndarray, int]:
    """Each owner clamps its value into the public domain and rounds it to the public grid."""
    from pairwise.dp.bounds import to_fixed_point

    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise UStatError(f"column {name}: non-finite values")
    return to_fixed_point(v, domain)


def _width(span: int) -> int:
    """Circuit word (8/16/32/64 bits) holding the public grid span."""
    need = max(1, int(span).bit_length())
    for w in (8, 16, 32, 64):
        if need <= w:
            return w
    raise UStatError(f"the public grid span {span} does not fit in 64 bits")


def prepare_data(statistic: str, x, y=None, labels=None, bits: int | None = None, *,
                 lower=None, upper=None, decimals=None) -> PreparedData:
    """Map real data to unsigned fixed-point integers on the public grid.

    gini: x values; kendall: x and y columns (``lower``/``upper``/``decimals``
    one value per column); auc: scores x and 0/1 labels (public; positives
    garble, negatives evaluate). Every value is clamped into
    [lower, upper] and rounded to lower + k 10^-decimals by its owner
    (``decimals`` default: :func:`pairwise.dp.bounds.default_decimals`). The
    circuit width is the smallest of 8/16/32/64 bits holding the public span,
    or ``bits`` if given (it must hold the span). Sensitivity, width and
    scale are functions of the public bounds only.
    """
    if statistic not in STATISTICS:
        raise UStatError(f"unknown statistic {statistic!r}; choose from {STATISTICS}")
    doms = _domains(statistic, lower, upper, decimals)
    width = _width(max(d.span for d in doms))
    if bits is not None:
        if isinstance(bits, bool) or int(bits) != bits or not 8 <= int(bits) <= 64:
            raise UStatError(f"bits must be an integer in 8..64, got {bits!r}")
        need = max(d.span for d in doms).bit_length()
        if need > int(bits):
            raise UStatError(f"the public domain needs {need} bits ({max(d.span for d in doms)} grid steps); "
                             f"--bits {bits} is too narrow: widen it or lower the decimals")
        width = int(bits)
    return _prepare(statistic, x, y, labels, doms, width)


def _prepare(statistic: str, x, y, labels, doms, width: int) -> PreparedData:
    if statistic not in STATISTICS:
        raise UStatError(f"unknown statistic {statistic!r}; choose from {STATISTICS}")
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise UStatError("need at least 2 data points")
    if statistic == "gini":
        xi, moved = _fixed_point(x, doms[0], "x")
        d = doms[0]
        return PreparedData("gini", xi, None, width, d.step, d.span, doms, moved)
    if statistic == "kendall":
        if y is None:
            raise UStatError("kendall needs two columns")
        y = np.asarray(y, dtype=np.float64)
        if y.shape != x.shape:
            raise UStatError("kendall columns must have the same length")
        xi, mx = _fixed_point(x, doms[0], "x")
        yi, my = _fixed_point(y, doms[1], "y")
        return PreparedData("kendall", xi, yi, width, 1.0, 2, doms, mx + my)
    if labels is None:
        raise UStatError("auc needs a 0/1 label column")
    lab = np.asarray(labels)
    if lab.shape != x.shape or not np.isin(lab, (0, 1)).all():
        raise UStatError("auc labels must be 0/1 and as long as the scores")
    si, moved = _fixed_point(x, doms[0], "score")
    pos, neg = si[lab == 1], si[lab == 0]
    if pos.size == 0 or neg.size == 0:
        raise UStatError("auc needs at least one positive and one negative example")
    return PreparedData("auc", pos, neg, width, 1.0, 2, doms, moved)


def _pair_inputs(pd: PreparedData, pairs: np.ndarray) -> tuple[list[int] | np.ndarray, list[int] | np.ndarray]:
    if pd.statistic == "kendall":
        if pd.bits > 31:  # packed words above 62 bits: Python ints
            gx = [pack_pair(int(pd.x[i]), int(pd.y[i]), pd.bits) for i in pairs[:, 0]]
            ey = [pack_pair(int(pd.x[j]), int(pd.y[j]), pd.bits) for j in pairs[:, 1]]
            return gx, ey
        # pack_pair over whole arrays (x low, y high), after pack_pair's own range check on the extremes.
        xs, ys = np.asarray(pd.x, dtype=np.int64), np.asarray(pd.y, dtype=np.int64)
        if xs.size:
            lo, hi = int(min(xs.min(), ys.min())), int(max(xs.max(), ys.max()))
            pack_pair(lo, lo, pd.bits), pack_pair(hi, hi, pd.bits)
        packed = xs | (ys << pd.bits)
        return packed[pairs[:, 0]], packed[pairs[:, 1]]
    if pd.statistic == "auc":
        return pd.x[pairs[:, 0]], pd.y[pairs[:, 1]]
    return pd.x[pairs[:, 0]], pd.x[pairs[:, 1]]


def _exact_raw(statistic: str, x, y, labels) -> float:
    """The U-statistic of the raw (unclamped, unrounded) data: not private, for evaluation only."""
    x = np.asarray(x, dtype=np.float64)
    if statistic == "gini":
        return u_statistic("gini", x)
    if statistic == "kendall":
        return u_statistic("kendall", x, np.asarray(y, dtype=np.float64))
    lab = np.asarray(labels)
    return u_statistic("auc", x[lab == 1], x[lab == 0])


def natural_range(pd: PreparedData) -> tuple[float, float]:
    """The statistic's natural range: gini [0, upper - lower], kendall's tau-a [-1, 1], AUC [0, 1]."""
    if pd.statistic == "gini":
        return 0.0, pd.domains[0].upper - pd.domains[0].lower
    return (-1.0, 1.0) if pd.statistic == "kendall" else (0.0, 1.0)


def _exact(pd: PreparedData) -> float:
    """The U-statistic of the clamped fixed-point data (what the estimate is unbiased for): not private."""
    if pd.statistic == "gini":
        return u_statistic("gini", pd.x.astype(np.float64)) * pd.scale
    if pd.statistic == "kendall":
        return u_statistic("kendall", pd.x, pd.y)
    return u_statistic("auc", pd.x, pd.y)


#: Largest per-pair epsilon: the discrete Laplace gadget's limit (circuits.noise); at 64 the
#: noise is nonzero with probability below 1e-27 per unit of sensitivity anyway.
MAX_PAIR_EPSILON = Fraction(64)


def per_pair_epsilon(epsilon: float, design: str, P: int, n: int, delta_slack: float) -> tuple[Fraction, int]:
    """Budget of one pair's release and the number of releases per user.

    ``subsample``: each user is in at most P pairs, basic composition, eps/P
    (Theorem 5).  ``all``: each user is in n - 1 pairs; the largest eps0 whose
    advanced composition (Dwork-Rothblum-Vadhan, via
    :func:`pairwise.dp.accounting.advanced_composition`, rounded up) over k = n - 1
    releases stays within eps, found by bisection.  Either is capped at
    :data:`MAX_PAIR_EPSILON`, the noise gadget's largest epsilon (a smaller
    per-pair budget only adds noise, so the guarantee still holds).
    """
    from pairwise.dp.accounting import advanced_composition

    if design == "subsample":
        eps = Fraction(repr(float(epsilon))) / P  # the decimal the user typed, exactly
        return min(eps, MAX_PAIR_EPSILON), P
    k = n - 1
    lo, hi = 0.0, float(epsilon)
    for _ in range(80):
        mid = (lo + hi) / 2
        if mid > 0 and advanced_composition(mid, 0.0, k, delta_slack).epsilon <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo <= 0:
        raise UStatError(f"no per-pair budget satisfies eps={epsilon} over {k} pairs")
    return min(Fraction(lo).limit_denominator(10**12), MAX_PAIR_EPSILON), k


def _aggregate(nc, out: np.ndarray) -> tuple[int, int]:
    """What a batch of noisy outputs reports to the aggregator: the exact integer sum of the reported
    values (``nc.reported_values``: the noisy value, or a k-RR code's value) and their count.  The
    estimate is affine in that sum (``nc.debias``), so batches combine exactly."""
    return int(nc.reported_values(out).astype(object).sum()), int(np.size(out))


def _run_simulate(nc, gx, ey, batch: int, progress) -> tuple[np.ndarray, int, int]:
    """All pairs as SIMD executions of one Yao session over an in-memory channel (two threads)."""
    from pairwise.mpc.channel import MemoryChannel
    from pairwise.mpc.twopc import EvaluatorSession, GarblerSession

    circuit, m = nc.circuit, len(gx)
    a, b = MemoryChannel.pair(timeout=600)
    outputs: list[np.ndarray] = []
    err: list[BaseException] = []
    starts = list(range(0, m, batch))

    def evaluator() -> None:
        try:
            s = EvaluatorSession(b, session_id=b"pairwise-ustat")
            for s0 in starts:
                s1 = min(m, s0 + batch)
                res = s.run(circuit, {"y": list(map(int, ey[s0:s1]))}, output="evaluator", random=("rx", "ry"))
                outputs.append(np.asarray(res.outputs[0], dtype=np.int64))
        except BaseException as exc:  # surfaced in the caller
            err.append(exc)
            b.close()

    th = threading.Thread(target=evaluator, name="ustat-evaluator", daemon=True)
    th.start()
    try:
        g = GarblerSession(a, session_id=b"pairwise-ustat")
        for s0 in starts:
            s1 = min(m, s0 + batch)
            g.run(circuit, {"x": list(map(int, gx[s0:s1]))}, output="evaluator", random=("rx", "ry"))
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
    a.close()
    return np.concatenate(outputs), st["bytes_sent"] + st["bytes_received"], len(starts)


def _free_ports(k: int) -> list[int]:
    import socket

    socks, ports = [], []
    try:
        for _ in range(k):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _worker_name(w: int) -> str:
    return f"worker-{w}"


def _run_network(nc, params: dict, pairs: np.ndarray, owner_g: np.ndarray, owner_e: np.ndarray,
                 gx, ey, workers: int, timeout: float, progress, tls_dir: str | None = None,
                 tls: bool = True, connect_timeout: float | None = None) -> tuple[np.ndarray, int, int]:
    """Users hosted by ``workers`` processes; each (garbler worker, evaluator worker) group of pairs
    is one real Yao session over loopback TCP between those processes (or two threads of one worker).

    Sessions run in mutual TLS with the certificates ``worker-K`` of ``tls_dir``, or of a throwaway
    CA when ``tls_dir`` is None; each side pins the other worker's name.  ``tls=False``: plaintext
    (loopback only).  Every worker is stopped when this function leaves, normally or not (SIGTERM
    and Ctrl-C included), and dies with this process.
    """
    import contextlib
    import json
    import subprocess
    import sys

    from pairwise.mpc.tls import throwaway_credentials

    from ..processes import spawn, terminate
    from ..transport import transport_argv

    m = pairs.shape[0]
    groups: dict[tuple[int, int], np.ndarray] = {}
    for key in set(zip(owner_g.tolist(), owner_e.tolist())):
        groups[key] = np.flatnonzero((owner_g == key[0]) & (owner_e == key[1]))
    ports = _free_ports(len(groups))
    jobs = {w: {"worker": w, "params": params, "sessions": [], "timeout": timeout,
                "connect_timeout": timeout if connect_timeout is None else connect_timeout} for w in range(workers)}
    order = {}
    for sid, ((wg, we), idx) in enumerate(sorted(groups.items())):
        order[sid] = idx
        jobs[wg]["sessions"].append({"id": sid, "role": "garbler", "port": ports[sid], "peer": _worker_name(we),
                                     "inputs": [int(gx[i]) for i in idx]})
        jobs[we]["sessions"].append({"id": sid, "role": "evaluator", "port": ports[sid], "peer": _worker_name(wg),
                                     "inputs": [int(ey[i]) for i in idx]})
    active = [w for w, job in jobs.items() if job["sessions"]]
    if not tls:
        creds = contextlib.nullcontext(None)
    elif tls_dir is None:
        creds = throwaway_credentials([(_worker_name(w), "client") for w in active])
    else:
        from pairwise.mpc.tls import TLSConfig

        for w in active:  # a missing or unusable certificate fails here, before any process starts
            TLSConfig(tls_dir, _worker_name(w))
        creds = contextlib.nullcontext(tls_dir)
    # One thread per worker feeds its job on stdin and collects its report, all with a deadline
    # (a worker reads its whole job before it connects to any peer, so every job must go out at once).
    limit = timeout * 4 + 30
    procs: dict[int, subprocess.Popen] = {}
    reports: dict[int, tuple[str, str] | None] = {}

    def drive(w: int, p: subprocess.Popen, job_text: str) -> None:
        try:
            reports[w] = p.communicate(input=job_text, timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            reports[w] = None
        except (OSError, ValueError):  # the pipes were closed under us: we are shutting down
            reports[w] = None

    threads = []
    with creds as cert_dir:
        try:
            for w in active:
                tls_args = transport_argv(cert_dir, _worker_name(w)) if cert_dir is not None else []
                p = spawn([sys.executable, "-m", "pairwise.protocols.ustat.worker", *tls_args],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                procs[w] = p
                t = threading.Thread(target=drive, args=(w, p, json.dumps(jobs[w])), daemon=True)
                t.start()
                threads.append(t)
            for t in threads:
                t.join(limit + 10)
        finally:
            terminate(procs.values())  # no-op for workers that finished; SIGTERM/SIGKILL for the rest
            for t in threads:
                t.join(10)
    out = np.zeros(m, dtype=np.int64)
    filled = np.zeros(m, dtype=bool)
    total_bytes = 0
    errors = []
    for w, p in procs.items():
        rep_io = reports.get(w)
        if rep_io is None:
            errors.append(f"worker {w}: did not finish within {limit:.0f} s")
            continue
        stdout, stderr = rep_io
        lines = [ln for ln in stdout.strip().splitlines() if ln.startswith("{")]
        if not lines:
            errors.append(f"worker {w} exited with {p.returncode}: {stderr.strip()[-500:]}")
            continue
        rep = json.loads(lines[-1])
        errors.extend(f"worker {w}: {e}" for e in rep["errors"])
        for key, r in rep["sessions"].items():
            sid = int(key.split(":")[0])
            if key.endswith(":evaluator"):
                out[order[sid]] = r["outputs"]
                filled[order[sid]] = True
            else:
                total_bytes += r["bytes_sent"] + r["bytes_received"]
        if progress:
            progress(int(filled.sum()), m)
    if errors:
        raise UStatError("network run failed: " + "; ".join(errors))
    if not filled.all():
        raise UStatError(f"network run lost {int((~filled).sum())} pair outputs")
    return out, total_bytes, len(groups)


def _predicted_mse(statistic: str, pd: PreparedData, nc, design: str, P: int) -> tuple[float | None, float]:
    """(MSE against the population value, MSE against this sample's exact value), in output units.

    Both are functions of the private data: evaluation diagnostics, not private.  The population
    MSE is Theorem 5 with the noise term E Var(f^ | f) of the mechanism actually used (for k-RR a
    quadratic in f, :func:`pairwise.dp.dyadic.krr_estimator`), or its two-sample analogue for
    the AUC (:func:`pairwise.protocols.ustat.stats.two_sample_mse`); None for the ``all`` design.
    The sample MSE is :func:`pairwise.protocols.ustat.stats.fixed_sample_mse`.
    """
    scale = 2.0 if statistic == "auc" else 1.0  # kernel_sums' AUC is [x > y] + [x = y]/2; the circuit's is twice that
    sums = kernel_sums(statistic, pd.x, pd.y)
    sums = type(sums)(sums.n_rows, sums.n_cols, sums.total * scale, sums.total_sq * scale**2,
                      sums.rows * scale, sums.cols * scale, sums.diag)
    coeffs = nc.variance_coefficients
    sample = fixed_sample_mse(sums, design, P, coeffs)
    if design != "subsample":
        return None, sample
    if statistic == "auc":
        z = two_sample_zetas(sums)
        noise = expected_noise_variance(coeffs, z.mean, z.zeta11 + z.mean**2)
        return two_sample_mse(pd.x.size, pd.y.size, P, z.zeta10, z.zeta01, z.zeta11, noise), sample
    z = zetas_from_sums(sums)
    noise = expected_noise_variance(coeffs, z.mean, z.zeta2 + z.mean**2)
    return theorem5_mse(pd.x.size, P, z.zeta1, z.zeta2, noise), sample


def run_ustat(
    statistic: str,
    x,
    y=None,
    labels=None,
    *,
    epsilon: float,
    lower=None,
    upper=None,
    decimals=None,
    pairs_per_user: int = 1,
    mode: str = "simulate",
    design: str = "subsample",
    delta_slack: float = 1e-8,
    bits: int | None = None,
    batch: int = 4096,
    workers: int = 4,
    timeout: float = 120.0,
    connect_timeout: float | None = None,
    cluster=None,
    tls_dir: str | None = None,
    tls: bool = True,
    noise: str = "auto",
    pair_delta: float = DEFAULT_PAIR_DELTA,
    lam: int | None = None,
    progress=None,
    rng: np.random.Generator | None = None,
    compute_theorem5: bool = True,
) -> UStatResult:
    """Run the 2PC U-statistic protocol and return the DP estimate with its costs.

    ``lower``/``upper`` (required) and ``decimals``: the public domain of the
    private column(s), one value per column for kendall; every owner clamps
    its value into it and rounds it to the grid lower + k 10^-decimals
    (:func:`prepare_data`), and the sensitivity, fixed-point scale and
    circuit width follow from it alone.
    ``design``: ``subsample`` (the paper's protocol, P permutations) or
    ``all`` (every pair, the paper's baseline, per-pair budget from advanced
    composition with ``delta_slack``; one-sample statistics only).
    ``mode``: ``simulate`` (one process, in-memory channel) or ``network``
    (``workers`` processes hosting the users, real TCP between them, in
    mutual TLS with the certificates ``worker-K`` of ``tls_dir`` or of a
    throwaway CA; ``tls=False`` for plaintext on loopback).
    ``timeout`` bounds every wait of a network-mode worker on its peer, ``connect_timeout``
    (default: ``timeout``) how long a worker keeps trying to reach its peer.
    ``progress(done, total)``, if given, is called as pairs complete (a progress bar's hook).
    ``cluster``: run simulate mode's batches as Dask tasks
    (:mod:`pairwise.protocols.ustat.cluster`): a spec ``"local"`` (one worker
    process per core), ``"local:N"``, ``"tcp://HOST:PORT"``, or a connected
    ``distributed.Client``; ``timeout`` bounds every wait on the cluster.
    ``rng`` drives only the public pair sampling (default: seeded from the OS
    CSPRNG); noise bits always come from ``os.urandom``. Every parameter is
    validated before any noise is drawn.
    ``noise``: the in-circuit mechanism (:data:`NOISE_MECHANISMS`; ``auto``
    takes k-ary randomized response for kendall and auc, whose kernels take
    3 values, and the cheaper additive construction for gini); the result's
    ``noise`` key says which one ran.  ``pair_delta``: the delta of one
    pair's release (default 2^-40), which fixes the gadget's precision.
    ``lam`` (deprecated): the earlier rule pair_delta = 2^-lam / #pairs.

    Result: ``estimate`` is the raw (unbiased) estimate, ``extra["estimate_clamped"]``
    the same clamped to the natural range (:func:`natural_range`). Not
    private (evaluation only): ``exact`` (raw data), ``extra["exact_quantized"]``
    (clamped fixed-point data, what the estimate is unbiased for),
    ``theorem5_mse`` (uses the data's zetas), ``extra["sample_mse"]`` (the
    predicted MSE around ``exact_quantized``), ``extra["clamped"]``, ``seconds``.
    """
    from pairwise.circuits.noise import noisy_kernel
    from pairwise.dp.errors import NoiseParameterError

    if not (isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and math.isfinite(epsilon)
            and epsilon > 0):
        raise UStatError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if isinstance(pairs_per_user, bool) or int(pairs_per_user) != pairs_per_user or pairs_per_user < 1:
        raise UStatError(f"pairs per user must be a positive integer, got {pairs_per_user!r}")
    if mode not in ("simulate", "network"):
        raise UStatError(f"mode must be 'simulate' or 'network', got {mode!r}")
    if design not in ("subsample", "all"):
        raise UStatError(f"design must be 'subsample' or 'all', got {design!r}")
    if design == "all" and statistic == "auc":
        raise UStatError("the all-pairs design is implemented for one-sample statistics (gini, kendall)")
    if cluster is not None and mode != "simulate":
        raise UStatError("cluster= runs simulate mode's batches; network mode hosts users on its own worker processes")
    if cluster is not None and isinstance(cluster, str):
        from ..cluster import ClusterError, parse_cluster

        try:
            parse_cluster(cluster)
        except ClusterError as exc:
            raise UStatError(str(exc)) from exc
    if mode == "network" and not 1 <= int(workers) <= 64:
        raise UStatError(f"workers must be in 1..64, got {workers!r}")
    if isinstance(batch, bool) or int(batch) != batch or batch < 1:
        raise UStatError(f"batch must be a positive integer, got {batch!r}")
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise UStatError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if design == "all" and not (isinstance(delta_slack, (int, float)) and 0 < delta_slack < 1):
        raise UStatError(f"delta_slack must lie in (0, 1), got {delta_slack!r}")
    if noise not in NOISE_MECHANISMS:
        raise UStatError(f"noise must be one of {NOISE_MECHANISMS}, got {noise!r}")
    if noise == "krr" and statistic == "gini":
        raise UStatError("k-ary randomized response needs a kernel with few values (kendall, auc); gini takes a continuum")
    if lam is not None:
        import warnings

        warnings.warn("run_ustat(lam=...) is deprecated: pass pair_delta (the delta of one pair's release)", DeprecationWarning, stacklevel=2)
        if isinstance(lam, bool) or not isinstance(lam, int) or not 1 <= lam <= 256:
            raise UStatError(f"lam must be an integer in 1..256, got {lam!r}")
    elif not (isinstance(pair_delta, (int, float, Fraction)) and 0 < pair_delta < 1):
        raise UStatError(f"pair_delta must lie in (0, 1), got {pair_delta!r}")
    P = int(pairs_per_user)
    t_start = time.perf_counter()
    pd = prepare_data(statistic, x, y, labels, bits, lower=lower, upper=upper, decimals=decimals)
    if statistic == "auc":
        most = min(pd.x.size, pd.y.size)
        if design == "subsample" and P > most:
            raise UStatError(f"pairs per user P = {P} exceeds the {most} distinct partners the smaller class "
                             f"offers ({pd.x.size} positives, {pd.y.size} negatives)")
    elif design == "subsample" and P > pd.x.size - 1:
        raise UStatError(f"pairs per user P = {P} exceeds n - 1 = {pd.x.size - 1}, the number of other users")
    rng = rng or csprng_generator()
    if statistic == "auc":
        pairs = sample_two_sample_pairs(pd.x.size, pd.y.size, P, rng)
        n = int(pd.x.size + pd.y.size)
    elif design == "all":
        pairs = all_pairs(pd.x.size)
        n = int(pd.x.size)
    else:
        pairs = sample_pairs(pd.x.size, P, rng)
        n = int(pd.x.size)
    m = pairs.shape[0]
    if progress:
        progress(0, m)
    eps_pair, releases = per_pair_epsilon(epsilon, design, P, n, delta_slack)
    d_pair = Fraction(1, (1 << lam) * m) if lam is not None else Fraction(pair_delta)
    try:
        nc = noisy_kernel(statistic, pd.bits, False, epsilon=eps_pair, sensitivity=pd.range_, mechanism=noise, delta=d_pair)
    except NoiseParameterError as exc:
        raise UStatError(f"no {noise} noise for this statistic and budget: {exc}") from None
    gx, ey = _pair_inputs(pd, pairs)
    cluster_info = {}
    if mode == "simulate" and cluster is not None:
        from .cluster import run_simulate_cluster

        cr = run_simulate_cluster(cluster, nc, gx, ey, batch, progress, timeout)
        total, count, total_bytes, executions = cr["sum"], cr["count"], cr["bytes"], cr["executions"]
        cluster_info = {"cluster": cr["cluster"], "cluster_workers": cr["workers"], "cluster_tasks": cr["tasks"],
                        "cluster_task_seconds": cr["seconds"]}
    elif mode == "simulate":
        out, total_bytes, executions = _run_simulate(nc, gx, ey, batch, progress)
    else:
        params = {"statistic": statistic, "bits": pd.bits, "epsilon_num": eps_pair.numerator,
                  "epsilon_den": eps_pair.denominator, "sensitivity": pd.range_, "mechanism": nc.mechanism,
                  "delta_num": d_pair.numerator, "delta_den": d_pair.denominator}
        w = int(workers)
        if statistic == "auc":  # positives and negatives are distinct users: host both kinds on every worker
            owner_g, owner_e = pairs[:, 0] % w, (pairs[:, 1] + pd.x.size) % w
        else:
            owner_g, owner_e = pairs[:, 0] % w, pairs[:, 1] % w
        out, total_bytes, executions = _run_network(nc, params, pairs, owner_g, owner_e, gx, ey, w, timeout, progress,
                                                    tls_dir=tls_dir, tls=tls, connect_timeout=connect_timeout)
    if cluster is None:
        total, count = _aggregate(nc, out)
    unit = float(nc.unit)
    exact = _exact_raw(statistic, x, y, labels)
    exact_q = _exact(pd)
    guarantee = nc.guarantee
    delta_pair = float(guarantee.delta) if guarantee is not None else 0.0
    conv = {"gini": pd.scale, "kendall": 1.0, "auc": 0.5}[statistic]
    to_natural = (unit * conv) ** 2
    # Public: the largest per-pair estimate variance over the kernel's values (no data involved).
    noise_var = float(nc.max_estimate_variance) * to_natural
    pop_mse = sample_mse = None
    work = pd.x.size * (pd.y.size if statistic == "auc" else pd.x.size)
    if compute_theorem5 and work <= PREDICTION_MAX_WORK:
        pop_mse, sample_mse = _predicted_mse(statistic, pd, nc, design, P)
        pop_mse = None if pop_mse is None else pop_mse * to_natural
        sample_mse *= to_natural
    slope, intercept = nc.debias  # the mean of the per-pair estimates, from the exact sum of reported values
    estimate = (float(slope) * (total / count) + float(intercept)) * unit * conv
    lo_nat, hi_nat = natural_range(pd)
    delta = releases * delta_pair + (delta_slack if design == "all" else 0.0)
    return UStatResult(
        statistic=statistic,
        estimate=float(estimate),
        exact=float(exact),
        epsilon=float(epsilon),
        delta=min(1.0, delta),
        n=n,
        pairs=m,
        pairs_per_user=P if design == "subsample" else n - 1,
        and_gates=nc.circuit.n_and * m,
        bytes=int(total_bytes),
        seconds=time.perf_counter() - t_start,
        mode=mode,
        executions=executions,
        theorem5_mse=pop_mse,
        extra={"estimate_clamped": min(max(float(estimate), lo_nat), hi_nat), "natural_range": [lo_nat, hi_nat],
               "exact_quantized": float(exact_q), "clamped": int(pd.clamped),
               "domain": [d.as_dict() for d in pd.domains],
               "and_gates_per_pair": nc.circuit.n_and, "bits": pd.bits, "noise_delta_per_pair": delta_pair,
               "epsilon_per_pair": float(eps_pair), "design": design,
               "noise_variance_per_pair": noise_var,
               "noise": nc.mechanism, "bytes_per_pair": total_bytes / m,
               "noise_and_gates_per_pair": nc.noise_and_gates, "random_bits_per_pair": nc.random_width,
               "noise_epsilon_per_pair": guarantee.epsilon, "noise_delta_method": guarantee.method,
               "pair_delta": float(d_pair), "sample_mse": sample_mse, "cluster": None, **cluster_info},
        outputs=out if cluster is None else None,
    )
