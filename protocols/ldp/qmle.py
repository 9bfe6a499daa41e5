"""One-bit locally private quasi-MLE for quantile regression ([OMH22]).

What it does
    Regression with a private response y and public ([OMH22, Sec. 3.1]) or
    private ([OMH22, Sec. 3.2]) covariates x; each user sends one bit per
    private variable: truncation into public bounds (Eq. 6), then a bit flip
    on [lower, upper] (Sec. 2.1, Eq. 7-8; the budget split equally over y and
    the p covariates).  The curator fits the asymmetric Laplace model of
    Sec. 4 by maximizing the Bernoulli log-likelihood of the bits (scipy
    trust-region Newton, analytic gradient and Hessian), with the sandwich
    covariance A^-1 B A^-1 / n (Theorems 4 and 6).  :func:`quantile_regression`
    computes the non-private coefficients exactly (scipy HiGHS), and
    :func:`run_experiment_qmle_covariance` reproduces the Sec. 5 experiment.
    The model's closed forms, the private-covariate likelihood and what the
    QMLE converges to: docs/ldp.md, "One-bit locally private quasi-MLE".

Security model
    Local differential privacy. A user's whole submission (one bit, or p+1
    bits with private covariates) is eps-LDP for any input, including
    values outside the truncation bounds, which are clamped first. The
    bounds, tau, sigma and the model are public. In :func:`submit_public_x`
    and :func:`submit_private_x` the bits come from the OS CSPRNG via
    :class:`pairwise.dp.mechanisms.OneBitFlip`. The ``simulate_*`` and
    ``run_experiment_*`` functions use seeded generators and are for
    experiments only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from pairwise.dp.errors import PrivacyParameterError
from pairwise.dp.mechanisms import OneBitFlip

from .errors import LDPDataError, LDPParameterError, ReportError

__all__ = [
    "truncate",
    "flip_probability",
    "ald_cdf",
    "ald_pdf",
    "truncated_mean_fraction",
    "BitModel",
    "public_loglik",
    "submit_public_x",
    "simulate_submit_public_x",
    "submit_private_x",
    "simulate_submit_private_x",
    "QMLEResult",
    "fit_qmle_public",
    "fit_qmle_private",
    "quantile_regression",
    "check_loss",
    "run_experiment_qmle_covariance",
]


# --------------------------------------------------------------------------- validation


def _check_epsilon(eps: float) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not math.isfinite(eps) or eps <= 0:
        raise PrivacyParameterError(f"epsilon must be finite and > 0, got {eps!r}")
    return float(eps)


def _check_bounds(lower: float, upper: float, what: str) -> tuple[float, float]:
    lower, upper = float(lower), float(upper)
    if not (math.isfinite(lower) and math.isfinite(upper)) or not lower < upper:
        raise LDPParameterError(
            f"truncation bounds of {what} must be finite with lower < upper, got [{lower}, {upper}]"
        )
    return lower, upper


def _check_tau_sigma(tau: float, sigma: float) -> tuple[float, float]:
    if not (isinstance(tau, (int, float, np.floating)) and 0.0 < tau < 1.0):
        raise LDPParameterError(f"quantile level tau must lie in (0, 1), got {tau!r}")
    if not (isinstance(sigma, (int, float, np.floating)) and math.isfinite(sigma) and sigma > 0):
        raise LDPParameterError(f"ALD scale sigma must be finite and > 0, got {sigma!r}")
    return float(tau), float(sigma)


def _as_vector(y: np.ndarray, name: str) -> np.ndarray:
    v = np.asarray(y, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise LDPDataError(f"{name} must be a non-empty 1-d array")
    if not np.isfinite(v).all():
        i = int(np.flatnonzero(~np.isfinite(v))[0])
        raise LDPDataError(f"{name} has a non-finite value at row {i + 1}")
    return v


def _as_matrix(x: np.ndarray, n: int, name: str) -> np.ndarray:
    m = np.asarray(x, dtype=np.float64)
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2 or m.shape[0] != n:
        raise LDPDataError(f"{name} must have {n} rows (one per response), got shape {np.shape(x)}")
    if not np.isfinite(m).all():
        i = int(np.flatnonzero(~np.isfinite(m).all(axis=1))[0])
        raise LDPDataError(f"{name} has a non-finite value at row {i + 1}")
    return m


# --------------------------------------------------------------------------- mechanism (Eq. 6-8)


def truncate(y: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """Eq. (6): clamp to [lower, upper]."""
    return np.clip(np.asarray(y, dtype=np.float64), lower, upper)


def flip_probability(y: np.ndarray, lower: float, upper: float, epsilon: float) -> np.ndarray:
    """P(Z = 1 | y) of the bit flip on [lower, upper] after truncation (Sec. 2.1, Eq. 7)."""
    e = math.exp(epsilon)
    t = (truncate(y, lower, upper) - lower) / (upper - lower)
    return 1.0 / (e + 1.0) + t * (e - 1.0) / (e + 1.0)


def _flip(
    values: np.ndarray, lower: float, upper: float, epsilon: float, rng: np.random.Generator | None
) -> np.ndarray:
    mech = OneBitFlip(epsilon, lower, upper)
    t = truncate(values, lower, upper)
    out = mech.randomize_array(t) if rng is None else mech.simulate(t, rng)
    return np.asarray(out, dtype=np.int64)


def submit_public_x(y: np.ndarray, lower: float, upper: float, epsilon: float) -> np.ndarray:
    """Sec. 3.1: each user truncates y (Eq. 6) and sends one flipped bit (Eq. 7). OS CSPRNG."""
    eps = _check_epsilon(epsilon)
    lower, upper = _check_bounds(lower, upper, "y")
    return _flip(_as_vector(y, "y"), lower, upper, eps, None)


def simulate_submit_public_x(
    y: np.ndarray, lower: float, upper: float, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """Simulation only: :func:`submit_public_x` with a seeded generator."""
    eps = _check_epsilon(epsilon)
    lower, upper = _check_bounds(lower, upper, "y")
    return _flip(_as_vector(y, "y"), lower, upper, eps, rng)


def _private_x(y, x, y_bounds, x_bounds, epsilon, rng):
    eps = _check_epsilon(epsilon)
    yv = _as_vector(y, "y")
    xm = _as_matrix(x, yv.size, "x")
    p = xm.shape[1]
    xb = np.asarray(x_bounds, dtype=np.float64).reshape(-1, 2)
    if xb.shape[0] != p:
        raise LDPParameterError(f"need one (lower, upper) pair per covariate ({p}), got {xb.shape[0]}")
    share = math.nextafter(eps / (p + 1), 0.0)  # round down: the p+1 shares sum to <= eps
    ylo, yhi = _check_bounds(*y_bounds, "y")
    z = _flip(yv, ylo, yhi, share, rng)
    w = np.empty(xm.shape, dtype=np.int64)
    for j in range(p):
        lo, hi = _check_bounds(*xb[j], f"covariate {j}")
        w[:, j] = _flip(xm[:, j], lo, hi, share, rng)
    return z, w


def submit_private_x(y, x, y_bounds, x_bounds, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Sec. 3.2, Eq. (8): bits for y and every covariate, eps/(p+1) each (OS CSPRNG)."""
    return _private_x(y, x, y_bounds, x_bounds, epsilon, None)


def simulate_submit_private_x(y, x, y_bounds, x_bounds, epsilon: float, rng: np.random.Generator):
    """Simulation only: :func:`submit_private_x` with a seeded generator."""
    return _private_x(y, x, y_bounds, x_bounds, epsilon, rng)


# --------------------------------------------------------------------------- ALD model (Sec. 2.3, 4)


def ald_cdf(u: np.ndarray, tau: float) -> np.ndarray:
    """CDF of the standard ALD (location 0, scale 1) at u."""
    u = np.asarray(u, dtype=np.float64)
    neg = u < 0
    out = np.empty_like(u)
    out[neg] = tau * np.exp((1 - tau) * u[neg])
    out[~neg] = 1.0 - (1 - tau) * np.exp(-tau * u[~neg])
    return out


def ald_pdf(u: np.ndarray, tau: float) -> np.ndarray:
    """Density of the standard ALD: tau (1-tau) exp(-rho_tau(u)) (Eq. 2 with sigma = 1)."""
    u = np.asarray(u, dtype=np.float64)
    return tau * (1 - tau) * np.exp(-u * (tau - (u < 0)))


def _ald_cdf_integral(u: np.ndarray, tau: float) -> np.ndarray:
    """Phi(u) = integral_{-inf}^u F(s) ds for the standard ALD."""
    u = np.asarray(u, dtype=np.float64)
    neg = u < 0
    out = np.empty_like(u)
    out[neg] = tau / (1 - tau) * np.exp((1 - tau) * u[neg])
    up = u[~neg]
    out[~neg] = tau / (1 - tau) + up + (1 - tau) / tau * np.expm1(-tau * up)
    return out


def truncated_mean_fraction(mu: np.ndarray, lower: float, upper: float, tau: float, sigma: float) -> np.ndarray:
    """m(mu) = E[(T(Y) - lower)/(upper - lower)] for Y ~ ALD(mu, sigma, tau), in closed form."""
    mu = np.asarray(mu, dtype=np.float64)
    a = (lower - mu) / sigma
    b = (upper - mu) / sigma
    return 1.0 - sigma * (_ald_cdf_integral(b, tau) - _ald_cdf_integral(a, tau)) / (upper - lower)


class BitModel:
    """g(mu) = P_theta(Z = 1 | mu) and its first two derivatives, for one flipped variable."""

    def __init__(self, lower: float, upper: float, epsilon: float, tau: float, sigma: float):
        self.lower, self.upper = _check_bounds(lower, upper, "y")
        self.epsilon = _check_epsilon(epsilon)
        self.tau, self.sigma = _check_tau_sigma(tau, sigma)
        e = math.exp(self.epsilon)
        self.base = 1.0 / (e + 1.0)
        self.kappa = (e - 1.0) / (e + 1.0)

    def g(self, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(g, g', g'') at mu."""
        s, w = self.sigma, self.upper - self.lower
        a = (self.lower - mu) / s
        b = (self.upper - mu) / s
        m = truncated_mean_fraction(mu, self.lower, self.upper, self.tau, s)
        m1 = (ald_cdf(b, self.tau) - ald_cdf(a, self.tau)) / w
        m2 = (ald_pdf(a, self.tau) - ald_pdf(b, self.tau)) / (s * w)
        g = self.base + self.kappa * m
        return g, self.kappa * m1, self.kappa * m2


def public_loglik(
    theta: np.ndarray,
    z: np.ndarray,
    x: np.ndarray,
    lower: float,
    upper: float,
    epsilon: float,
    tau: float,
    sigma: float,
) -> float:
    """The Sec. 3.1 log-likelihood in data units: sum z log g(mu) + (1-z) log(1-g(mu)), mu = theta^T (1, x)."""
    zv = _as_vector(z, "z")
    xm = _as_matrix(x, zv.size, "x")
    model = BitModel(lower, upper, epsilon, tau, sigma)
    g, _, _ = model.g(np.column_stack([np.ones(zv.size), xm]) @ np.asarray(theta, dtype=np.float64))
    return float(np.sum(zv * np.log(g) + (1 - zv) * np.log1p(-g)))


# --------------------------------------------------------------------------- fitting


@dataclass
class QMLEResult:
    """A fitted one-bit QMLE: coefficients (intercept first) and sandwich covariance."""

    theta: np.ndarray
    covariance: np.ndarray
    loglik: float
    n: int
    epsilon: float
    tau: float
    sigma: float
    converged: bool
    message: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def std_errors(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))


def _standardize_public(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    center = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return (x - center) / scale, center, scale


def _back_transform(theta_s: np.ndarray, cov_s: np.ndarray, center, scale, lower, upper):
    """Map theta' (standardized x, y in units of [lower, upper]) back to data units."""
    w = upper - lower
    p = center.size
    M = np.zeros((p + 1, p + 1))
    M[0, 0] = w
    M[0, 1:] = -w * center / scale
    M[1:, 1:] = np.diag(w / scale)
    theta = M @ theta_s
    theta[0] += lower
    return theta, M @ cov_s @ M.T


def _minimize(fun, x0s: list[np.ndarray]):
    import scipy.optimize  # imported on use: about 0.7 s of CPU at start otherwise

    best = None
    for x0 in x0s:
        res = scipy.optimize.minimize(
            lambda t: fun(t)[0],
            x0,
            jac=lambda t: fun(t)[1],
            hess=lambda t: fun(t)[2],
            method="trust-exact",
            options={"gtol": 1e-9, "maxiter": 500},
        )
        if best is None or res.fun < best.fun:
            best = res
    return best


def fit_qmle_public(
    z: np.ndarray,
    x: np.ndarray,
    lower: float,
    upper: float,
    epsilon: float,
    tau: float = 0.5,
    sigma: float | None = None,
) -> QMLEResult:
    """QMLE of tau-quantile regression from one-bit responses with public x (Sec. 4.1).

    ``x``: the covariates without the intercept column (an intercept is
    always included). ``sigma`` defaults to (upper - lower)/10.
    """
    zv = _as_vector(z, "z")
    if not np.isin(zv, (0, 1)).all():
        raise ReportError("submitted bits z must be 0 or 1")
    xm = _as_matrix(x, zv.size, "x")
    lower, upper = _check_bounds(lower, upper, "y")
    if sigma is None:
        sigma = (upper - lower) / 10.0
    w = upper - lower
    model = BitModel(0.0, 1.0, epsilon, tau, sigma / w)  # y in units of [lower, upper]
    xs, center, scale = _standardize_public(xm)
    X = np.column_stack([np.ones(zv.size), xs])
    n = zv.size

    def pieces(theta):
        g, g1, g2 = model.g(X @ theta)
        v = g * (1 - g)
        d = (zv - g) * g1 / v
        h = -g1 * g1 / v + (zv - g) * (g2 / v - g1 * g1 * (1 - 2 * g) / (v * v))
        return g, d, h

    def fun(theta):
        g, d, h = pieces(theta)
        ll = float(np.sum(zv * np.log(g) + (1 - zv) * np.log1p(-g)))
        return -ll, -(X.T @ d), -(X.T * h) @ X

    starts = [np.r_[q, np.zeros(xs.shape[1])] for q in (0.5, 0.25, 0.75)]
    res = _minimize(fun, starts)
    g, d, h = pieces(res.x)
    A = -(X.T * h) @ X / n
    B = (X.T * (d * d)) @ X / n
    cov_s = _sandwich(A, B, n)
    theta, cov = _back_transform(res.x, cov_s, center, scale, lower, upper)
    return QMLEResult(
        theta, cov, -float(res.fun), n, model.epsilon, model.tau, float(sigma), bool(res.success), str(res.message)
    )


def _sandwich(A: np.ndarray, B: np.ndarray, n: int) -> np.ndarray:
    try:
        Ainv = np.linalg.inv(A)
    except np.linalg.LinAlgError:
        return np.full(A.shape, np.nan)
    return Ainv @ B @ Ainv / n


def fit_qmle_private(
    z: np.ndarray,
    w: np.ndarray,
    y_bounds: tuple[float, float],
    x_bounds,
    epsilon: float,
    tau: float = 0.5,
    sigma: float | None = None,
) -> QMLEResult:
    """QMLE with private covariates (Sec. 3.2, 4.2) from bits z (response) and w (covariates).

    ``epsilon`` is the user's total budget, split equally as in
    :func:`submit_private_x`. The provisional distribution of x is uniform
    on the corners of the box ``x_bounds``.
    """
    zv = _as_vector(z, "z")
    wm = _as_matrix(w, zv.size, "w")
    if not (np.isin(zv, (0, 1)).all() and np.isin(wm, (0, 1)).all()):
        raise ReportError("submitted bits must be 0 or 1")
    p = wm.shape[1]
    if p > 12:
        raise LDPParameterError("private-covariate QMLE enumerates 2^p corners; use p <= 12")
    eps = _check_epsilon(epsilon)
    share = math.nextafter(eps / (p + 1), 0.0)  # round down: the p+1 shares sum to <= eps
    ylo, yhi = _check_bounds(*y_bounds, "y")
    xb = np.asarray(x_bounds, dtype=np.float64).reshape(-1, 2)
    if xb.shape[0] != p:
        raise LDPParameterError(f"need one (lower, upper) pair per covariate ({p}), got {xb.shape[0]}")
    for j in range(p):
        _check_bounds(*xb[j], f"covariate {j}")
    if sigma is None:
        sigma = (yhi - ylo) / 10.0
    model = BitModel(0.0, 1.0, share, tau, sigma / (yhi - ylo))
    # Patterns (z, w) and their counts.
    pats, counts = np.unique(np.column_stack([zv.astype(np.int64), wm.astype(np.int64)]), axis=0, return_counts=True)
    counts = counts.astype(np.float64)
    n = zv.size
    # Corners in standardized coordinates (-1 for c_j, +1 for d_j).
    corners = np.array(list(itertools.product((-1.0, 1.0), repeat=p))).reshape(-1, p)
    Xc = np.column_stack([np.ones(corners.shape[0]), corners])
    e = math.exp(share)
    hi_prob = e / (1 + e)
    # P(w | corner) for each pattern and corner: prod_j P(w_j | x_j).
    wbits = pats[:, 1:]
    up = corners[None, :, :] > 0
    pw = np.where(wbits[:, None, :] == 1, np.where(up, hi_prob, 1 - hi_prob), np.where(up, 1 - hi_prob, hi_prob))
    weight = pw.prod(axis=2) / corners.shape[0]  # (patterns, corners)
    sgn = (2.0 * pats[:, 0] - 1.0)[:, None]  # d P(z|x)/d g

    def pieces(theta):
        g, g1, g2 = model.g(Xc @ theta)
        pz = np.where(pats[:, :1] == 1, g[None, :], 1 - g[None, :])  # (patterns, corners)
        P = (weight * pz).sum(axis=1)
        wg1 = weight * sgn * g1[None, :]
        wg2 = weight * sgn * g2[None, :]
        dP = wg1 @ Xc  # (patterns, k)
        d2P = np.einsum("qc,ci,cj->qij", wg2, Xc, Xc)
        score = dP / P[:, None]
        hess = d2P / P[:, None, None] - score[:, :, None] * score[:, None, :]
        return P, score, hess

    def fun(theta):
        P, score, hess = pieces(theta)
        return (-float(counts @ np.log(P)), -(counts @ score), -np.einsum("q,qij->ij", counts, hess))

    starts = [np.r_[q, np.zeros(p)] for q in (0.5, 0.25, 0.75)]
    res = _minimize(fun, starts)
    P, score, hess = pieces(res.x)
    A = -np.einsum("q,qij->ij", counts, hess) / n
    B = np.einsum("q,qi,qj->ij", counts, score, score) / n
    cov_s = _sandwich(A, B, n)
    center = xb.mean(axis=1)
    scale = (xb[:, 1] - xb[:, 0]) / 2.0
    theta, cov = _back_transform(res.x, cov_s, center, scale, ylo, yhi)
    return QMLEResult(
        theta,
        cov,
        -float(res.fun),
        n,
        eps,
        model.tau,
        float(sigma),
        bool(res.success),
        str(res.message),
        {"epsilon_per_bit": share, "patterns": int(pats.shape[0])},
    )


# --------------------------------------------------------------------------- non-private reference


def check_loss(residuals: np.ndarray, tau: float) -> float:
    """Eq. (1): sum of rho_tau(r) = r (tau - [r < 0])."""
    r = np.asarray(residuals, dtype=np.float64)
    return float(np.sum(r * (tau - (r < 0))))


def quantile_regression(y: np.ndarray, x: np.ndarray, tau: float = 0.5) -> np.ndarray:
    """Exact non-private tau-quantile regression (intercept first), as a linear program.

    minimize tau 1'u + (1-tau) 1'v  s.t.  X beta + u - v = y,  u, v >= 0 (scipy HiGHS).
    """
    yv = _as_vector(y, "y")
    xm = _as_matrix(x, yv.size, "x") if np.size(x) else np.zeros((yv.size, 0))
    if not 0.0 < tau < 1.0:
        raise LDPParameterError(f"quantile level tau must lie in (0, 1), got {tau!r}")
    n = yv.size
    X = np.column_stack([np.ones(n), xm])
    k = X.shape[1]
    c = np.r_[np.zeros(k), np.full(n, tau), np.full(n, 1 - tau)]
    import scipy.optimize
    from scipy.sparse import csr_matrix, eye, hstack

    A = hstack([csr_matrix(X), eye(n), -eye(n)], format="csr")
    bounds = [(None, None)] * k + [(0, None)] * (2 * n)
    res = scipy.optimize.linprog(c, A_eq=A, b_eq=yv, bounds=bounds, method="highs")
    if not res.success:  # pragma: no cover - the LP is always feasible and bounded
        raise RuntimeError(f"quantile regression LP failed: {res.message}")
    return res.x[:k]


# --------------------------------------------------------------------------- Sec. 5 experiment


def run_experiment_qmle_covariance(
    y: np.ndarray,
    x: np.ndarray,
    ns: list[int],
    reps: int,
    epsilon: float,
    rng: np.random.Generator,
    tau: float = 0.5,
    sigma: float | None = None,
    bounds: tuple[float, float] | None = None,
) -> dict:
    """Sec. 5: Frobenius norm of the empirical covariance of the QMLE against n.

    For each n: ``reps`` subsamples of n rows without replacement, one-bit
    perturbation (public x) on the public domain ``bounds`` of y (required),
    and a QMLE fit. Returns the per-n norms and
    the least-squares slope of log(norm) on log(n), which should be close
    to -1.
    """
    yv = _as_vector(y, "y")
    xm = _as_matrix(x, yv.size, "x")
    if bounds is None:  # the users' one-bit submissions are scaled by it: a public domain, never the data's range
        raise LDPParameterError("bounds=(lower, upper) is required: the public domain of y (not its observed range)")
    lo, hi = bounds
    rows = []
    for n in ns:
        if n > yv.size:
            raise LDPDataError(f"cannot subsample {n} rows without replacement from {yv.size}")
        thetas = []
        for _ in range(reps):
            idx = rng.choice(yv.size, size=n, replace=False)
            z = simulate_submit_public_x(yv[idx], lo, hi, epsilon, rng)
            thetas.append(fit_qmle_public(z, xm[idx], lo, hi, epsilon, tau, sigma).theta)
        t = np.array(thetas)
        cov = np.cov(t, rowvar=False)
        rows.append({"n": n, "frobenius": float(np.linalg.norm(cov, "fro")), "mean_theta": t.mean(axis=0).tolist()})
    ln_n = np.log([r["n"] for r in rows])
    ln_f = np.log([r["frobenius"] for r in rows])
    slope = float(np.polyfit(ln_n, ln_f, 1)[0]) if len(rows) > 1 else float("nan")
    return {"rows": rows, "slope": slope, "bounds": (lo, hi), "epsilon": epsilon, "tau": tau}
