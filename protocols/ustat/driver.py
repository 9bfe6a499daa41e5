"""Differentially private U-statistics with the 2PC subsampling protocol ([BBGK20, Sec. 5]).

What it does
    :func:`run_ustat` estimates the Gini mean difference (Eq. 4), Kendall's
    tau-a (Eq. 6), the AUC (Eq. 7, ties 1/2), the variance, the collision
    probability or any declared degree-2 kernel
    (:mod:`pairwise.circuits.kernel_spec`) of n users' private values, with a
    (1 - alpha) interval whose width is public
    (:mod:`pairwise.protocols.ustat.interval`):

    1. the aggregator samples P independent permutations of the users, giving
       P n / 2 pairs (step 1; :func:`pairwise.protocols.ustat.stats.sample_pairs`);
    2. every pair computes its kernel value and randomizes it in a garbled
       circuit (:func:`pairwise.circuits.noise.noisy_kernel`): user i garbles,
       user j evaluates, each feeding its own CSPRNG random bits (step 2);
    3. the aggregator averages (step 3): U_hat = 2/(P n) sum f~(x_i, x_j).

    ``noise`` (default ``auto``): k-ary randomized response for kendall and
    auc, the signed geometric for gini, or the discrete Laplace.  The caller
    states the public domain [lower, upper] and decimals D of each private
    column (:func:`prepare_data`); the kernel's range, the circuit width and
    the scale are functions of them only.  Each release uses epsilon / P with
    the kernel's public range as sensitivity (Theorem 5), and each user is
    in at most P pairs.  Modes: ``simulate`` (real executions over in-memory
    channels, optionally on Dask, :mod:`pairwise.protocols.ustat.cluster`) and
    ``network`` (worker processes, :mod:`pairwise.protocols.ustat.worker`,
    Yao sessions over TCP in mutual TLS 1.3); design ``all`` is the paper's
    Figure 4 baseline.  The steps, the noise scale, the predicted errors and
    the modes in full: ``docs/ustat.md``, "How the protocol runs".

Security model
    Semi-honest users and aggregator, computational DP (CDP) as in the paper;
    the aggregator sees only noisy kernel values.  The protocol is
    (eps, P delta_pair)-DP for each user, delta_pair being the exact
    finite-precision delta the noise gadget reports (0 for k-RR).  In
    simulation mode one process plays every user, which is for measurement,
    not for deployment.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from .config import DEFAULT_PAIR_DELTA, NOISE_MECHANISMS, STATISTICS, UStatConfig, UStatError
from .data import (
    PreparedData,
    _exact,
    _exact_raw,
    _pair_inputs,
    kernel_factor,
    kernel_sums_from_table,
    natural_range,
    prepare_data,
)
from .interval import ustat_interval
from .public import MAX_PAIR_EPSILON, per_pair_epsilon
from .result import Costs, NotPrivate, PublicParameters, Release, UStatResult
from .runners import PairJob, _aggregate, _run_network, _run_simulate, runner_for
from .stats import (
    all_pairs,
    csprng_generator,
    expected_noise_variance,
    fixed_sample_mse,
    kernel_sums,
    sample_pairs,
    sample_two_sample_pairs,
    theorem5_mse,
    two_sample_mse,
    two_sample_zetas,
    zetas_from_sums,
)

__all__ = [
    "UStatResult",
    "UStatError",
    "UStatConfig",
    "run_ustat",
    "prepare_data",
    "STATISTICS",
    "NOISE_MECHANISMS",
    "DEFAULT_PAIR_DELTA",
]
# Moved to .config, .data, .result and .runners; re-exported here (``from ...driver import prepare_data`` works).
_MOVED = (PreparedData, natural_range, _exact, _exact_raw, _pair_inputs, _aggregate, _run_simulate, _run_network)
# Moved to .public (shared with the deployment among real users, pairwise.protocols.collect).
_PUBLIC = (MAX_PAIR_EPSILON, per_pair_epsilon)

#: Largest number of kernel evaluations (n^2, or n_pos n_neg) for which the error predictions are computed.
PREDICTION_MAX_WORK = 4 * 10**8


def _predicted_mse(statistic: str, pd: PreparedData, nc, design: str, P: int) -> tuple[float | None, float]:
    """(MSE against the population value, MSE against this sample's exact value), in output units.

    Both are functions of the private data: evaluation diagnostics, not private.  The population
    MSE is Theorem 5 with the noise term E Var(f^ | f) of the mechanism actually used (for k-RR a
    quadratic in f, :func:`pairwise.dp.dyadic.krr_estimator`), or its two-sample analogue for
    the AUC (:func:`pairwise.protocols.ustat.stats.two_sample_mse`); None for the ``all`` design.
    The sample MSE is :func:`pairwise.protocols.ustat.stats.fixed_sample_mse`.
    """
    if pd.kernel is not None:
        sums = kernel_sums_from_table(pd)
        if sums is None:  # no grid table (large grid) or an asymmetric kernel: no prediction
            return None, None
        return _predicted_from_sums(pd, nc, sums, design, P)
    scale = 2.0 if statistic == "auc" else 1.0  # kernel_sums' AUC is [x > y] + [x = y]/2; the circuit's is twice that
    sums = kernel_sums(statistic, pd.x, pd.y)
    sums = type(sums)(
        sums.n_rows,
        sums.n_cols,
        sums.total * scale,
        sums.total_sq * scale**2,
        sums.rows * scale,
        sums.cols * scale,
        sums.diag,
    )
    return _predicted_from_sums(pd, nc, sums, design, P)


def _predicted_from_sums(pd: PreparedData, nc, sums, design: str, P: int) -> tuple[float | None, float]:
    """Theorem 5 (or its two-sample analogue) and the fixed-sample MSE from the kernel sums (circuit units)."""
    statistic = pd.statistic
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
    config: UStatConfig | None = None,
    progress=None,
    rng: np.random.Generator | None = None,
    **options,
) -> UStatResult:
    """Run the 2PC U-statistic protocol and return the DP estimate with its costs.

    The settings are one :class:`UStatConfig` (``config=``) or its fields as
    keywords (``epsilon=`` required; ``lower``/``upper``/``decimals``,
    ``pairs_per_user``, ``mode``, ``design``, ``delta_slack``, ``bits``,
    ``batch``, ``workers``, ``cluster``, ``noise``, ``pair_delta``, ``lam``,
    ``compute_theorem5``, and the transport as ``transport=`` or loose
    ``tls``, ``tls_dir``, ``timeout``, ``connect_timeout``):

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

    Result (:class:`UStatResult`): ``release.estimate`` is the raw (unbiased)
    estimate, ``release.estimate_clamped`` the same clamped to the natural
    range (:func:`natural_range`). Not private (evaluation only, the
    ``not_private`` group): ``exact`` (raw data), ``exact_quantized``
    (clamped fixed-point data, what the estimate is unbiased for),
    ``theorem5_mse`` (uses the data's zetas), ``sample_mse`` (the predicted
    MSE around ``exact_quantized``), ``clamped``, ``seconds``.
    """
    from pairwise.circuits.kernel_spec import KernelSpec

    if isinstance(statistic, KernelSpec):
        if options.get("kernel") not in (None, statistic):
            raise UStatError("give the kernel once: as the statistic or as kernel=, not two different ones")
        statistic, options = statistic.name, {**options, "kernel": statistic}
    elif statistic is None and isinstance(options.get("kernel"), KernelSpec):
        statistic = options["kernel"].name
    if config is None:
        config = UStatConfig.from_options(statistic, options)
    elif options:
        raise UStatError(f"give either config= or keyword settings, not both ({', '.join(sorted(options))})")
    elif config.statistic != statistic:
        raise UStatError(f"config is for {config.statistic!r}, not {statistic!r}")
    if config.lam is not None:
        warnings.warn(
            "run_ustat(lam=...) is deprecated: pass pair_delta (the delta of one pair's release)",
            DeprecationWarning,
            stacklevel=2,
        )
    t_start = time.perf_counter()
    pd = prepare_data(
        statistic,
        x,
        y,
        labels,
        config.bits,
        lower=config.lower,
        upper=config.upper,
        decimals=config.decimals,
        kernel=config.kernel,
    )
    rule = None
    if config.pairs_per_user == "auto":  # from n, epsilon and the public range only (Theorem 5, worst case)
        from .planning import choose_pairs_per_user

        choice = choose_pairs_per_user(config, pd)
        config, rule = replace(config, pairs_per_user=choice.pairs_per_user), choice.reason
    pairs, n = _sample_design(config, pd, rng)
    if progress:
        progress(0, pairs.shape[0])
    nc, eps_pair, releases, d_pair = _noisy_circuit(config, pd, n, pairs.shape[0])
    job = _pair_job(config, pd, nc, pairs, eps_pair, d_pair)
    ran = runner_for(config).run(job, progress)
    budget = _Budget(n, eps_pair, releases, d_pair)
    return _result(config, pd, nc, ran, (x, y, labels), budget, t_start=t_start, rule=rule)


def _sample_design(config: UStatConfig, pd: PreparedData, rng: np.random.Generator | None) -> tuple[np.ndarray, int]:
    """The public pair design (Sec. 5 step 1) and the number of users, after checking P against the data
    (``rng``: the aggregator's public randomness, drawn from the OS CSPRNG after the checks if None)."""
    P = int(config.pairs_per_user)
    if pd.statistic == "auc":
        most = min(pd.x.size, pd.y.size)
        if config.design == "subsample" and P > most:
            raise UStatError(
                f"pairs per user P = {P} exceeds the {most} distinct partners the smaller class "
                f"offers ({pd.x.size} positives, {pd.y.size} negatives)"
            )
        return sample_two_sample_pairs(pd.x.size, pd.y.size, P, rng or csprng_generator()), int(pd.x.size + pd.y.size)
    if config.design == "subsample" and P > pd.x.size - 1:
        raise UStatError(f"pairs per user P = {P} exceeds n - 1 = {pd.x.size - 1}, the number of other users")
    rng = rng or csprng_generator()
    if config.design == "all":
        return all_pairs(pd.x.size), int(pd.x.size)
    return sample_pairs(pd.x.size, P, rng), int(pd.x.size)


def _noisy_circuit(config: UStatConfig, pd: PreparedData, n: int, m: int):
    """The public kernel + noise circuit of one pair's release: (nc, eps_pair, releases per user, delta_pair)."""
    from pairwise.circuits.kernel_spec import KernelRangeError
    from pairwise.circuits.noise import noisy_kernel, noisy_spec_kernel
    from pairwise.dp.errors import NoiseParameterError

    eps_pair, releases = per_pair_epsilon(
        config.epsilon, config.design, int(config.pairs_per_user), n, config.delta_slack
    )
    d_pair = Fraction(1, (1 << config.lam) * m) if config.lam is not None else config.per_pair_delta
    try:
        if pd.kernel is not None:
            nc = noisy_spec_kernel(
                pd.kernel, pd.bits, pd.domains[0].span, epsilon=eps_pair, mechanism=config.noise, delta=d_pair
            )
        else:
            nc = noisy_kernel(
                pd.statistic,
                pd.bits,
                False,
                epsilon=eps_pair,
                sensitivity=pd.range_,
                mechanism=config.noise,
                delta=d_pair,
            )
    except KernelRangeError as exc:
        raise UStatError(str(exc)) from None
    except NoiseParameterError as exc:
        raise UStatError(f"no {config.noise} noise for this statistic and budget: {exc}") from None
    return nc, eps_pair, releases, d_pair


def _pair_job(
    config: UStatConfig, pd: PreparedData, nc, pairs: np.ndarray, eps_pair: Fraction, d_pair: Fraction
) -> PairJob:
    """Each pair's circuit inputs, the users hosting its two sides and the circuit's public parameters."""
    gx, ey = _pair_inputs(pd, pairs)
    params = {
        "statistic": pd.statistic,
        "bits": pd.bits,
        "epsilon_num": eps_pair.numerator,
        "epsilon_den": eps_pair.denominator,
        "sensitivity": pd.range_,
        "mechanism": nc.mechanism,
        "delta_num": d_pair.numerator,
        "delta_den": d_pair.denominator,
    }
    if pd.kernel is not None:  # the worker imports the same declared kernel and rebuilds the same circuit
        params.update(kernel=pd.kernel.path, span=pd.domains[0].span, circuit_hash=nc.circuit.content_hash)
    # AUC: positives and negatives are distinct users, so the evaluators' indices follow the positives'
    offset = pd.x.size if pd.statistic == "auc" else 0
    return PairJob(nc, gx, ey, pairs[:, 0], pairs[:, 1] + offset, params)


def _float(v) -> float | None:
    return None if v is None else float(v)


def natural_units(pd: PreparedData, nc) -> float:
    """Natural units per circuit output unit: the grid step (gini), 1 (kendall), 1/2 (the circuit's AUC is 2x),
    a declared kernel's scale * step^power."""
    return float(nc.unit) * kernel_factor(pd)


def release_interval(config: UStatConfig, pd: PreparedData, nc, pairs: int):
    """The (1 - alpha) interval width of a run (:func:`pairwise.protocols.ustat.interval.ustat_interval`), natural
    units: a function of the public design, domain and circuit only."""
    two = pd.statistic == "auc"
    return ustat_interval(
        nc,
        R=pd.range_,
        design=config.design,
        two_sample=two,
        n_rows=pd.x.size,
        n_cols=pd.y.size if two else pd.x.size,
        P=int(config.pairs_per_user),
        pairs=pairs,
        alpha=config.alpha,
        to_natural=natural_units(pd, nc),
    )


@dataclass(frozen=True)
class _Budget:
    """How a run spent its budget: users, the per-pair epsilon, releases per user and the per-pair delta."""

    n: int
    eps_pair: Fraction
    releases: int
    d_pair: Fraction


def _result(
    config: UStatConfig,
    pd: PreparedData,
    nc,
    ran,
    raw: tuple,
    budget: _Budget,
    *,
    t_start: float,
    rule: str | None = None,
) -> UStatResult:
    """Assemble the typed result groups of one run (``raw``: the caller's x, y, labels, for the exact value)."""
    x, y, labels = raw
    n, eps_pair, releases, d_pair = budget.n, budget.eps_pair, budget.releases, budget.d_pair
    statistic, design, P = pd.statistic, config.design, int(config.pairs_per_user)
    m = ran.count
    guarantee = nc.guarantee
    delta_pair = float(guarantee.delta) if guarantee is not None else 0.0
    to_natural = natural_units(pd, nc) ** 2
    # Public: the largest per-pair estimate variance over the kernel's values (no data involved).
    noise_var = float(nc.max_estimate_variance) * to_natural
    pop_mse = sample_mse = None
    work = pd.x.size * (pd.y.size if statistic == "auc" else pd.x.size)
    if config.compute_theorem5 and work <= PREDICTION_MAX_WORK:
        pop_mse, sample_mse = _predicted_mse(statistic, pd, nc, design, P)
        pop_mse = None if pop_mse is None else pop_mse * to_natural
        sample_mse = None if sample_mse is None else sample_mse * to_natural
    slope, intercept = nc.debias  # the mean of the per-pair estimates, from the exact sum of reported values
    estimate = (float(slope) * (ran.total / ran.count) + float(intercept)) * natural_units(pd, nc)
    lo_nat, hi_nat = natural_range(pd)
    iw = release_interval(config, pd, nc, m)
    interval = iw.around(estimate)
    delta = releases * delta_pair + (config.delta_slack if design == "all" else 0.0)
    ci = ran.cluster
    public = PublicParameters(
        statistic=statistic,
        epsilon=float(config.epsilon),
        delta=min(1.0, delta),
        n=n,
        pairs=m,
        pairs_per_user=P if design == "subsample" else n - 1,
        mode=config.mode,
        design=design,
        bits=pd.bits,
        domain=[d.as_dict() for d in pd.domains],
        natural_range=[lo_nat, hi_nat],
        epsilon_per_pair=float(eps_pair),
        noise=nc.mechanism,
        noise_epsilon_per_pair=guarantee.epsilon,
        noise_delta_per_pair=delta_pair,
        noise_delta_method=guarantee.method,
        noise_variance_per_pair=noise_var,
        pair_delta=float(d_pair),
        alpha=float(config.alpha),
        interval_method=iw.method,
        interval_width=iw.width,
        kernel_check=pd.kernel_check,
        pairs_per_user_rule=rule,
    )
    costs = Costs(
        and_gates=nc.circuit.n_and * m,
        and_gates_per_pair=nc.circuit.n_and,
        noise_and_gates_per_pair=nc.noise_and_gates,
        random_bits_per_pair=nc.random_width,
        bytes=int(ran.bytes),
        bytes_per_pair=ran.bytes / m,
        executions=ran.executions,
        cluster=None if ci is None else ci.cluster,
        cluster_workers=None if ci is None else ci.workers,
        cluster_tasks=None if ci is None else ci.tasks,
    )
    release = Release(
        estimate=float(estimate),
        estimate_clamped=min(max(float(estimate), lo_nat), hi_nat),
        interval=interval,
        interval_clamped=[min(max(v, lo_nat), hi_nat) for v in interval],
    )
    not_private = NotPrivate(
        exact=_float(_exact_raw(statistic, x, y, labels, pd)),
        exact_quantized=_float(_exact(pd)),
        sample_mse=sample_mse,
        theorem5_mse=pop_mse,
        clamped=int(pd.clamped),
        seconds=time.perf_counter() - t_start,
        cluster_task_seconds=None if ci is None else ci.task_seconds,
    )
    return UStatResult(public, costs, release, not_private, outputs=ran.outputs)
