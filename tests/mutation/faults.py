"""The fault table of the noise mutation check (``tests/mutation/run.py``).

Each :class:`Fault` names one deliberate noise bug, the public function or
method it monkeypatches (``"module:attr"`` or ``"module:Class.attr"``), how
(``wrap(original) -> replacement``), the test selections that must catch it
and, in ``expect``, name fragments of the tests that must each fail (every
fragment must match at least one failing test id).  The fault is installed at
interpreter start-up by ``tests/mutation/inject/sitecustomize.py`` in the
pytest process *and* in every Python subprocess the tests start (ECDF server
processes, ustat workers, the ``pairwise`` command), so faults reach code that
runs outside the test process.

Adding a mechanism: add its noise-power test (closed form from public
parameters, power >= 0.99 against noise scale x2 and x1/2), then add rows here
for at least ``scale x2`` (epsilon / 2 or scale * 2), ``scale x1/2``, ``zero
noise`` and, for noise produced by several parties, ``one party only``.  Use a
helper below (:func:`epsilon_times`, :func:`after_init`, :func:`result`,
:func:`constant`; :func:`_override` with :func:`after_init` or :func:`result`
replaces every sampling path of a mechanism's instances at once, as the
zero-noise rows of the local randomizers do) or write a ``wrap``; a wrapper
that cannot apply itself (an argument it needs is missing) must call
:func:`broken`, which makes the check fail with "patch target incompatible"
instead of counting as caught.

The in-circuit mechanisms of ustat's default noise (issue 13) follow that
pattern: k-ary randomized response (kendall, auc) -- its chooser's epsilon
(``choose_krr``, scale faults, also reaching its exact sampler), its gadget
reporting the true value (zero noise), its estimator without debiasing; the
signed geometric (gini) -- the additive chooser's epsilon
(``choose_discrete_laplace``, shared with the ECDF garbled noise and the
difference construction), the geometric part removed (zero noise), its mean
-1/2 left in the estimate; and for both, ``gc-*-bits-only`` (one party only)
against their exact enumerations and production gadgets in
``tests/statistical/test_noise_ownership.py``.  Their closed forms are in
``tests/statistical/test_noise_power_ustat.py::NOISE_LAWS`` and
``tests/statistical/test_noise_power_samplers.py``.  The in-circuit binary randomized
response (``noisy_binary_kernel``) has ``gc-rr-*`` rows: its chooser's
epsilon (``choose_randomized_response``, scale faults) and its coin wired to
constant 0 (zero noise), against the goodness-of-fit test of
``test_randomized_response_gadget_needs_both_parties``.

A target names the module that *defines* the name and looks it up at call
time: the gadgets in ``pairwise.circuits.noise``, the parameter classes,
estimator and choosers in ``pairwise.dp.dyadic.params`` / ``.search``, the
exact samplers in ``pairwise.dp.samplers``.  The defining module is patched
the moment it executes, before any importer binds the name.  A re-export
(``pairwise.circuits.noise`` still re-exports the analysis names for one
release) is the wrong target: code that imports only ``pairwise.dp`` (the
sampler tests, for one) never loads it, so the fault would never be installed.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

# --------------------------------------------------------------------------- plumbing


class FaultBroken(RuntimeError):
    """The fault could not be applied as written (signature or attribute changed)."""


def log(line: str) -> None:
    path = os.environ.get("PAIRWISE_FAULT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{line} pid={os.getpid()}\n")


def broken(reason: str):
    log(f"BROKEN {reason}")
    raise FaultBroken(reason)


_called = False


def called() -> None:
    global _called
    if not _called:
        _called = True
        log("CALLED")


def _mul(value, factor):
    if isinstance(value, Fraction):
        return value * Fraction(factor).limit_denominator(1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return type(value)(value * factor) if isinstance(value, float) else value * factor
    broken(f"cannot scale {type(value).__name__} {value!r}")


def epsilon_times(factor: float, pos: int, name: str = "epsilon") -> Callable:
    """Multiply the argument ``name`` (or positional ``pos``, counting self) by ``factor``.

    Works on functions, methods and classes (patched in one module's namespace,
    a class is replaced by a constructor with the scaled argument).
    """

    def wrap(orig):
        @functools.wraps(orig)
        def fault(*args, **kwargs):
            called()
            if name in kwargs:
                kwargs[name] = _mul(kwargs[name], factor)
            elif len(args) > pos:
                args = args[:pos] + (_mul(args[pos], factor),) + args[pos + 1 :]
            else:
                broken(f"{orig.__qualname__}: no argument {name!r} (position {pos})")
            return orig(*args, **kwargs)

        return fault

    return wrap


def after_init(fn: Callable) -> Callable:
    """Wrap ``__init__``: run it, then ``fn(self)``."""

    def wrap(orig):
        @functools.wraps(orig)
        def fault(self, *args, **kwargs):
            orig(self, *args, **kwargs)
            called()
            fn(self)

        return fault

    return wrap


def scale_attr(attr: str, factor: float) -> Callable:
    def fn(self):
        if not hasattr(self, attr):
            broken(f"{type(self).__name__} has no attribute {attr!r}")
        setattr(self, attr, _mul(getattr(self, attr), factor))

    return after_init(fn)


def result(fn: Callable) -> Callable:
    """Replace the result r of the call by ``fn(r, *args, **kwargs)``."""

    def wrap(orig):
        @functools.wraps(orig)
        def fault(*args, **kwargs):
            called()
            return fn(orig(*args, **kwargs), *args, **kwargs)

        return fault

    return wrap


def constant(fn: Callable) -> Callable:
    """Replace the call by ``fn(*args, **kwargs)`` (the original is not run)."""

    def wrap(orig):
        @functools.wraps(orig)
        def fault(*args, **kwargs):
            called()
            return fn(*args, **kwargs)

        return fault

    return wrap


# --------------------------------------------------------------------------- specific faults
def _input_constant_zero(*groups: str) -> Callable:
    """Builder.input that registers the groups but wires constant 0 in their place (those bits ignored).

    One of rx / ry: the noise comes from one party's bits only.  Both: rx XOR
    ry is constant, every coin of the gadget is 1 and the noise is 0 (the
    issue's "garbler bits all ones, evaluator bits zero"), however the engine
    delivers the random bits.
    """

    def wrap(orig):
        @functools.wraps(orig)
        def fault(self, name, width, party, signed=False, *args, **kwargs):
            value = orig(self, name, width, party, signed, *args, **kwargs)
            if name not in groups:
                return value
            called()
            from pairwise.circuits.builder import FALSE, Int

            return Int(self, [FALSE] * int(width), signed)

        return fault

    return wrap


def _ints(values, *a, **k):
    import numpy as np

    return np.asarray(values).astype(np.int64)


def _clamped(self, values):
    import numpy as np

    return np.clip(np.asarray(values, dtype=float), self.lower, self.upper)


def _zeros_like(r, *a, **k):
    import numpy as np

    if isinstance(r, list):
        return [np.zeros_like(x) for x in r]
    return np.zeros_like(r)


def _polya_one_server(table, size):
    """This server's share: the whole noise in server 0 (and in a test process), nothing elsewhere."""
    import numpy as np

    from pairwise.protocols.ecdf.noise import polya_table, sample_polya

    argv = " ".join(sys.argv)
    if "--server-id" in argv and "--server-id 0" not in argv:
        return np.zeros(int(size), dtype=np.int64)
    full = polya_table(Fraction(1), table.epsilon, table.sensitivity)
    return sample_polya(full, size) - sample_polya(full, size)


def _scale_times(factor):
    return result(lambda r, *a, **k: _mul(r, factor))


def _scale_arg(factor, pos, name):
    return epsilon_times(factor, pos, name)


def _uniform_words_zero(shape, l, *a, **k):
    import numpy as np

    return np.zeros(shape, dtype=np.uint64)


def _krr_epsilon_times(factor):
    """choose_kernel_noise's k-RR parameters rebuilt for epsilon x factor (additive noise left alone)."""

    def fn(params, *a, **k):
        from pairwise.dp.dyadic import KaryRRParams, choose_krr

        if not isinstance(params, KaryRRParams):
            return params
        return choose_krr(params.epsilon * Fraction(factor), params.k)

    return fn


def _true_code(reported, b, stream, code, params):
    """k-RR without noise: the gadget's coin and choice bits are still drawn (and wired), the true code is output."""
    return list(code)


def _no_debias(est, *a, **k):
    """The k-RR estimator with slope 1 and intercept 0: the raw reports averaged."""
    from fractions import Fraction as F

    from pairwise.dp.dyadic import KRREstimator

    return KRREstimator(est.values, F(1), F(0), est.variance_coefficients)


def _zero_geometric(x, b, stream, params):
    """The geometric digits drawn (their random bits used) but X = 0 returned."""
    from pairwise.circuits.builder import FALSE, Int

    return Int(b, [FALSE] * len(x.bits), False)


def _mean_zero(orig):
    """DiscreteLaplaceParams.noise_mean reporting 0 for every construction (the estimator keeps E Z = -1/2)."""
    if not isinstance(orig, property):
        broken(f"noise_mean is no longer a property: {type(orig).__name__}")

    def fault(self):
        called()
        return Fraction(0)

    return property(fault)


def _override(**methods: Callable) -> Callable:
    """fn(obj): bind ``methods`` on the instance ``obj`` (shadowing the class's methods); returns obj.

    Used with :func:`after_init` (every instance of a class) or :func:`result`
    (the instances one module constructs) to replace all public sampling paths
    of a mechanism at once (CSPRNG scalar, CSPRNG array, seeded simulate).
    """

    def fn(obj, *a, **k):
        import types

        for name, f in methods.items():
            if not callable(getattr(obj, name, None)):
                broken(f"{type(obj).__name__} has no method {name!r}")
            setattr(obj, name, types.MethodType(f, obj))
        return obj

    return fn


def _truthful_array(self, values, *a, **k):
    """Zero noise for RR / k-RR: the report is the true value."""
    import numpy as np

    return np.asarray(values).astype(np.int64).ravel()


def _truthful_scalar(self, value, *a, **k):
    return int(value)


#: RandomizedResponse and KaryRandomizedResponse without noise, in all three paths
_NO_RR = _override(randomize=_truthful_scalar, randomize_array=_truthful_array, simulate=_truthful_array)


def _obf_w(self, y):
    import numpy as np

    return np.clip((np.asarray(y, dtype=float).ravel() - self.lower) / (self.upper - self.lower), 0.0, 1.0)


def _obf_unflipped_array(self, y, rng=None):
    """OneBitFlip without its flip (eps = infinity in Eq. 7): z ~ Bernoulli(w), w = (y~ - a)/(b - a)."""
    import numpy as np

    w = _obf_w(self, y)
    return ((rng if rng is not None else np.random.default_rng()).random(w.size) < w).astype(np.int64)


#: OneBitFlip without the randomized-response flip, in all three paths
_NO_FLIP = _override(
    randomize=lambda self, y: int(_obf_unflipped_array(self, [y])[0]),
    randomize_array=_obf_unflipped_array,
    simulate=_obf_unflipped_array,
)

#: HadamardFrequencyOracle sending the unperturbed Hadamard bit (CSPRNG and seeded paths)
_NO_HADAMARD_RR = _override(
    randomize=lambda self, v, j: self.hadamard_bits(v, j),
    simulate_randomize=lambda self, v, j, rng: self.hadamard_bits(v, j),
)


def _false_bit(r, *a, **k):
    """A gadget coin replaced by the constant 0 wire (its random bits still drawn and wired)."""
    from pairwise.circuits.builder import FALSE

    return FALSE


# --------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    target: str
    wrap: Callable
    tests: tuple[str, ...]
    expect: tuple[str, ...] = ()
    scope: str = "everywhere"  # or "module": only the binding in the target module is replaced


T_USTAT = "tests/statistical/test_noise_power_ustat.py"
T_ECDF = "tests/statistical/test_noise_power_ecdf.py"
T_DP = "tests/statistical/test_noise_power_dp.py"
T_LDP = "tests/statistical/test_noise_power_ldp.py"
T_CLI = "tests/statistical/test_noise_power_cli.py"
T_OWN = "tests/statistical/test_noise_ownership.py"
T_SAMP = "tests/statistical/test_noise_power_samplers.py"
ECDF_GC = (
    "paper_ecdf_noise_is_theorem31[gc",
    "hierarchical_ecdf_noise_is_hay_et_al[gc",
    "group_counts_noise[gc",
    "roc_noise_is_two_half_budget_trees[gc",
    "hosmer_lemeshow_noise_is_algorithm2[gc",
    "kary_ecdf_noise_is_eps_over_2h[gc",
)
ECDF_PO = tuple(s.replace("[gc", "[polya") for s in ECDF_GC) + ("tolerant_polya",)
ECDF_KARY = ("kary_ecdf_noise_is_eps_over_2h[gc", "kary_ecdf_noise_is_eps_over_2h[polya")
RR_GADGET = (
    "randomized_response_gadget_needs_both_parties[garbler]",
    "randomized_response_gadget_needs_both_parties[evaluator]",
)


def _k(path: str, expr: str) -> str:
    return f"{path}::-k::{expr}"


def _dl(*cases: str) -> tuple[str, ...]:
    """Expected failures of the ustat discrete Laplace test (run with noise="discrete_laplace")."""
    return tuple(f"theorem5_discrete_laplace[{c}]" for c in cases)


def _default(*cases: str) -> tuple[str, ...]:
    """Expected failures of the ustat default-noise test (k-RR for kendall / auc, signed geometric for gini)."""
    return tuple(f"default_pair_noise_is_the_closed_form[{c}]" for c in cases)


USTAT_KRR_SIM = _default("kendall-subsample-simulate", "auc-subsample-simulate", "kendall-all-simulate")
USTAT_SG_SIM = _default("gini-subsample-simulate", "gini-all-simulate")
USTAT_DEFAULT_SIM = USTAT_SG_SIM + USTAT_KRR_SIM
USTAT_DL_SIM = _dl(
    "gini-subsample-simulate",
    "kendall-subsample-simulate",
    "auc-subsample-simulate",
    "gini-all-simulate",
    "kendall-all-simulate",
)


FAULTS: list[Fault] = [
    # ---- 2PC U-statistics: in-circuit discrete Laplace (issue 17 table rows 1-3)
    Fault(
        "ustat-zero-noise-simulate",
        "ustat simulate with zero noise: rx XOR ry constant in the circuit",
        "pairwise.circuits.builder:Builder.input",
        _input_constant_zero("rx", "ry"),
        (_k(T_USTAT, "simulate"),),
        USTAT_DL_SIM + USTAT_DEFAULT_SIM,
    ),
    Fault(
        "ustat-zero-noise-network",
        "ustat network mode with zero noise (rx XOR ry constant in the workers' circuits)",
        "pairwise.circuits.builder:Builder.input",
        _input_constant_zero("rx", "ry"),
        (_k(T_USTAT, "network and subsample"),),
        _dl("gini-subsample-network", "kendall-subsample-network", "auc-subsample-network")
        + _default("gini-subsample-network", "kendall-subsample-network", "auc-subsample-network"),
    ),
    Fault(
        "ustat-scale-x1/2",
        "ustat noise at half scale (per-pair epsilon x2)",
        "pairwise.circuits.noise:noisy_kernel",
        epsilon_times(2, 99),
        (_k(T_USTAT, "simulate"),),
        USTAT_DL_SIM + USTAT_DEFAULT_SIM,
    ),
    Fault(
        "ustat-scale-x2",
        "ustat noise at twice the scale (per-pair epsilon / 2)",
        "pairwise.circuits.noise:noisy_kernel",
        epsilon_times(0.5, 99),
        (_k(T_USTAT, "simulate"),),
        USTAT_DL_SIM + USTAT_DEFAULT_SIM,
    ),
    Fault(
        "ustat-scale-x1/2-network",
        "ustat network mode, per-pair epsilon x2 in the workers",
        "pairwise.circuits.noise:noisy_kernel",
        epsilon_times(2, 99),
        (_k(T_USTAT, "all-network"),),
        _dl("gini-all-network", "kendall-all-network") + _default("gini-all-network", "kendall-all-network"),
    ),
    # ---- 2PC U-statistics, default noise: k-ary randomized response (kendall, auc; issue 13)
    Fault(
        "ustat-krr-eps-x2",
        "ustat k-RR built for per-pair epsilon x2 (noise scale x1/2); the choice of k-RR unchanged",
        "pairwise.circuits.noise:choose_kernel_noise",
        result(_krr_epsilon_times(2)),
        (_k(T_USTAT, "default and simulate and not gini"),),
        USTAT_KRR_SIM,
    ),
    Fault(
        "ustat-krr-eps-x1/2",
        "ustat k-RR built for per-pair epsilon / 2 (noise scale x2); the choice of k-RR unchanged",
        "pairwise.circuits.noise:choose_kernel_noise",
        result(_krr_epsilon_times(0.5)),
        (_k(T_USTAT, "default and simulate and not gini"),),
        USTAT_KRR_SIM,
    ),
    Fault(
        "ustat-krr-eps-x1/2-network",
        "ustat network mode, k-RR for per-pair epsilon / 2 in the workers",
        "pairwise.circuits.noise:choose_kernel_noise",
        result(_krr_epsilon_times(0.5)),
        (_k(T_USTAT, "default and network and not gini"),),
        _default("kendall-subsample-network", "auc-subsample-network", "kendall-all-network"),
    ),
    Fault(
        "krr-chooser-eps-x2",
        "choose_krr at epsilon x2 (noise scale x1/2), seen through the exact k-RR sampler",
        "pairwise.dp.dyadic.search:choose_krr",
        epsilon_times(2, 0),
        (_k(T_SAMP, "krr"),),
        ("krr_sampler_law[sample]", "krr_sampler_law[simulate]"),
    ),
    Fault(
        "krr-chooser-eps-x1/2",
        "choose_krr at epsilon / 2 (noise scale x2), seen through the exact k-RR sampler",
        "pairwise.dp.dyadic.search:choose_krr",
        epsilon_times(0.5, 0),
        (_k(T_SAMP, "krr"),),
        ("krr_sampler_law[sample]", "krr_sampler_law[simulate]"),
    ),
    Fault(
        "ustat-krr-zero-noise",
        "ustat k-RR gadget reports the true value (its random bits drawn but unused)",
        "pairwise.circuits.noise:krr_value",
        result(_true_code),
        (_k(T_USTAT, "default and simulate and not gini"),),
        USTAT_KRR_SIM,
    ),
    Fault(
        "ustat-krr-no-debias",
        "ustat k-RR reports averaged without debiasing (slope 1, intercept 0)",
        "pairwise.dp.dyadic.params:krr_estimator",
        result(_no_debias),
        (_k(T_USTAT, "default and simulate and not gini"),),
        USTAT_KRR_SIM,
    ),
    # ---- 2PC U-statistics, default noise: signed geometric (gini; issue 13)
    Fault(
        "ustat-signed-scale-x2",
        "ustat signed geometric chosen for per-pair epsilon / 2 (noise scale x2)",
        "pairwise.dp.dyadic.search:choose_discrete_laplace",
        epsilon_times(0.5, 0),
        (_k(T_USTAT, "default and simulate and gini"), _k(T_SAMP, "discrete_laplace")),
        USTAT_SG_SIM + ("discrete_laplace_sampler_law[signed", "discrete_laplace_sampler_law[difference"),
    ),
    Fault(
        "ustat-signed-scale-x1/2",
        "ustat signed geometric chosen for per-pair epsilon x2 (noise scale x1/2)",
        "pairwise.dp.dyadic.search:choose_discrete_laplace",
        epsilon_times(2, 0),
        (_k(T_USTAT, "default and simulate and gini"), _k(T_SAMP, "discrete_laplace")),
        USTAT_SG_SIM + ("discrete_laplace_sampler_law[signed", "discrete_laplace_sampler_law[difference"),
    ),
    Fault(
        "ustat-signed-scale-x2-network",
        "ustat network mode, signed geometric for per-pair epsilon / 2 in the workers",
        "pairwise.dp.dyadic.search:choose_discrete_laplace",
        epsilon_times(0.5, 0),
        (_k(T_USTAT, "default and network and gini"),),
        _default("gini-subsample-network", "gini-all-network"),
    ),
    Fault(
        "ustat-signed-geometric-zero",
        "ustat signed geometric without its geometric part (Z = -sign: 0 or -1)",
        "pairwise.circuits.noise:geometric_value",
        result(_zero_geometric),
        (_k(T_USTAT, "default and simulate and gini"),),
        USTAT_SG_SIM,
    ),
    Fault(
        "ustat-signed-mean-kept",
        "ustat signed geometric: its mean -1/2 not removed from the estimate",
        "pairwise.dp.dyadic.params:DiscreteLaplaceParams.noise_mean",
        _mean_zero,
        (_k(T_USTAT, "default and simulate and gini"),),
        USTAT_SG_SIM,
    ),
    Fault(
        "sampler-coins-zero",
        "exact gadget samplers: every biased coin 0 (no geometric digits, no k-RR flips)",
        "pairwise.dp.samplers:_coins",
        result(_zeros_like),
        (T_SAMP,),
        (
            "discrete_laplace_sampler_law[signed-sample]",
            "discrete_laplace_sampler_law[difference-simulate]",
            "krr_sampler_law[sample]",
            "krr_sampler_law[simulate]",
        ),
    ),
    # ---- who owns the in-circuit noise (every gadget)
    Fault(
        "gc-garbler-bits-only",
        "in-circuit noise from the garbler's bits alone (evaluator's ry ignored)",
        "pairwise.circuits.builder:Builder.input",
        _input_constant_zero("ry"),
        (T_OWN,),
        (
            "enumeration_each_party_alone_leaves_the_full_noise_law[garbler]",
            "signed_geometric_enumeration_each_party_alone_leaves_the_full_law[garbler]",
            "krr_enumeration_each_party_alone_leaves_the_full_law[garbler]",
            "every_random_bit_of_each_party_moves_the_noise[discrete_laplace]",
            "every_random_bit_of_each_party_moves_the_noise[signed_geometric]",
            "every_random_bit_of_each_party_moves_the_noise[krr]",
            "ustat_kernel_noise_needs_both_parties[gini-8-None-garbler]",
            "ustat_kernel_noise_needs_both_parties[kendall-8-2-garbler]",
            "ustat_kernel_noise_needs_both_parties[auc-16-2-garbler]",
            "default_kernel_noise_needs_both_parties[gini-8-None-signed_geometric-garbler]",
            "default_kernel_noise_needs_both_parties[kendall-8-2-krr-garbler]",
            "default_kernel_noise_needs_both_parties[auc-16-2-krr-garbler]",
            "randomized_response_gadget_needs_both_parties[garbler]",
            "ecdf_noisy_sum_circuit_needs_both_servers[garbler]",
        ),
    ),
    Fault(
        "gc-evaluator-bits-only",
        "in-circuit noise from the evaluator's bits alone (garbler's rx ignored)",
        "pairwise.circuits.builder:Builder.input",
        _input_constant_zero("rx"),
        (T_OWN,),
        (
            "enumeration_each_party_alone_leaves_the_full_noise_law[evaluator]",
            "signed_geometric_enumeration_each_party_alone_leaves_the_full_law[evaluator]",
            "krr_enumeration_each_party_alone_leaves_the_full_law[evaluator]",
            "every_random_bit_of_each_party_moves_the_noise[discrete_laplace]",
            "every_random_bit_of_each_party_moves_the_noise[signed_geometric]",
            "every_random_bit_of_each_party_moves_the_noise[krr]",
            "ustat_kernel_noise_needs_both_parties[gini-8-None-evaluator]",
            "default_kernel_noise_needs_both_parties[gini-8-None-signed_geometric-evaluator]",
            "default_kernel_noise_needs_both_parties[kendall-8-2-krr-evaluator]",
            "default_kernel_noise_needs_both_parties[auc-16-2-krr-evaluator]",
            "randomized_response_gadget_needs_both_parties[evaluator]",
            "ecdf_noisy_sum_circuit_needs_both_servers[evaluator]",
        ),
    ),
    # ---- in-circuit binary randomized response (noisy_binary_kernel; power test in statistical/test_noise_ownership.py)
    Fault(
        "gc-rr-scale-x2",
        "in-circuit randomized response chosen for eps / 2 (flip probability too high)",
        "pairwise.dp.dyadic.search:choose_randomized_response",
        epsilon_times(0.5, 0),
        (_k(T_OWN, "randomized_response_gadget"),),
        RR_GADGET,
    ),
    Fault(
        "gc-rr-scale-x1/2",
        "in-circuit randomized response chosen for eps x2 (flip probability too low)",
        "pairwise.dp.dyadic.search:choose_randomized_response",
        epsilon_times(2, 0),
        (_k(T_OWN, "randomized_response_gadget"),),
        RR_GADGET,
    ),
    Fault(
        "gc-rr-zero-noise",
        "in-circuit randomized response never flips (its coin the constant 0; bits still drawn)",
        "pairwise.circuits.noise:bernoulli_bit",
        result(_false_bit),
        (_k(T_OWN, "randomized_response_gadget"),),
        RR_GADGET,
    ),
    # ---- ECDF service, garbled noise (m = 2)
    Fault(
        "ecdf-gc-eps-x4",
        "ECDF garbled noise at eps x4, reported variance unchanged",
        "pairwise.protocols.ecdf.noise:noisy_sum_circuit",
        epsilon_times(4, 1),
        (_k(T_ECDF, "gc"),),
        ECDF_GC,
    ),
    Fault(
        "ecdf-gc-eps-x7",
        "ECDF garbled noise at eps x7, reported variance unchanged",
        "pairwise.protocols.ecdf.noise:noisy_sum_circuit",
        epsilon_times(7, 1),
        (_k(T_ECDF, "gc"),),
        ECDF_GC,
    ),
    Fault(
        "ecdf-gc-scale-x2",
        "ECDF garbled noise at eps / 2",
        "pairwise.protocols.ecdf.noise:noisy_sum_circuit",
        epsilon_times(0.5, 1),
        (_k(T_ECDF, "gc"),),
        ECDF_GC,
    ),
    Fault(
        "ecdf-gc-zero-noise",
        "ECDF garbled noise from constant random bits (zero noise)",
        "pairwise.circuits.builder:Builder.input",
        _input_constant_zero("rx", "ry"),
        (_k(T_ECDF, "gc"),),
        ECDF_GC,
    ),
    Fault(
        "ecdf-gc-chooser-scale-x2",
        "ECDF garbled noise: the gadget chooser (designed precision) at eps / 2",
        "pairwise.dp.dyadic.search:choose_discrete_laplace",
        epsilon_times(0.5, 0),
        (_k(T_ECDF, "gc"),),
        ECDF_GC,
    ),
    Fault(
        "ecdf-gc-chooser-scale-x1/2",
        "ECDF garbled noise: the gadget chooser (designed precision) at eps x2",
        "pairwise.dp.dyadic.search:choose_discrete_laplace",
        epsilon_times(2, 0),
        (_k(T_ECDF, "gc"),),
        ECDF_GC,
    ),
    Fault(
        "ecdf-masked-shares-unmasked",
        "ECDF masked noise shares without masks (each server sees the noise)",
        "pairwise.protocols.ecdf.noise:uniform_words",
        constant(_uniform_words_zero),
        (_k(T_OWN, "masked"),),
        ("masked_noise_shares",),
        scope="module",
    ),
    # ---- ECDF service, k-ary mechanism (issue 25): the per-node epsilon eps / 2h of the servers' node noise
    Fault(
        "ecdf-kary-scale-x2",
        "ECDF k-ary release: node noise at eps / 4h (the servers' per-value epsilon halved)",
        "pairwise.protocols.ecdf.noise:value_epsilon",
        epsilon_times(0.5, 0),
        (_k(T_ECDF, "kary"),),
        ECDF_KARY,
    ),
    Fault(
        "ecdf-kary-scale-x1/2",
        "ECDF k-ary release: node noise at eps / h (2 eps-DP)",
        "pairwise.protocols.ecdf.noise:value_epsilon",
        epsilon_times(2, 0),
        (_k(T_ECDF, "kary"),),
        ECDF_KARY,
    ),
    # ---- ECDF service, Polya noise (m = 3)
    Fault(
        "ecdf-polya-eps-x4",
        "ECDF Polya noise at eps x4",
        "pairwise.protocols.ecdf.noise:polya_table",
        epsilon_times(4, 1),
        (_k(T_ECDF, "polya"),),
        ECDF_PO,
    ),
    Fault(
        "ecdf-polya-scale-x2",
        "ECDF Polya noise at eps / 2",
        "pairwise.protocols.ecdf.noise:polya_table",
        epsilon_times(0.5, 1),
        (_k(T_ECDF, "polya"),),
        ECDF_PO,
    ),
    Fault(
        "ecdf-polya-zero-noise",
        "ECDF Polya noise shares all zero",
        "pairwise.protocols.ecdf.noise:noise_share",
        result(_zeros_like),
        (_k(T_ECDF, "polya"),),
        ECDF_PO,
    ),
    Fault(
        "ecdf-polya-one-server",
        "ECDF Polya noise drawn by one server only (the others add nothing)",
        "pairwise.protocols.ecdf.noise:noise_share",
        constant(_polya_one_server),
        (_k(T_OWN, "polya"),),
        ("one_polya_share",),
    ),
    # ---- dp mechanisms (issue 17 rows 9-10 and every other class)
    Fault(
        "geometric-scale-x2",
        "GeometricMechanism noise scale x2",
        "pairwise.dp.mechanisms:GeometricMechanism.__init__",
        scale_attr("scale", 2),
        (_k(T_DP, "geometric"),),
        ("release_array", "geometric_mechanism_noise_is_discrete_laplace[release]", "simulate"),
    ),
    Fault(
        "geometric-scale-x1/2",
        "GeometricMechanism noise scale x1/2",
        "pairwise.dp.mechanisms:GeometricMechanism.__init__",
        scale_attr("scale", 0.5),
        (_k(T_DP, "geometric"),),
        ("release_array", "geometric_mechanism_noise_is_discrete_laplace[release]", "simulate"),
    ),
    Fault(
        "geometric-simulate-no-noise",
        "GeometricMechanism.simulate adds no noise",
        "pairwise.dp.mechanisms:GeometricMechanism.simulate",
        constant(lambda self, v, rng: _ints(v)),
        (_k(T_DP, "geometric"),),
        ("simulate",),
    ),
    Fault(
        "geometric-release-no-noise",
        "GeometricMechanism.release_array adds no noise",
        "pairwise.dp.mechanisms:GeometricMechanism.release_array",
        constant(lambda self, v: _ints(v)),
        (_k(T_DP, "geometric"),),
        ("release_array",),
    ),
    Fault(
        "rr-eps-x2",
        "RandomizedResponse at eps x2",
        "pairwise.dp.mechanisms:RandomizedResponse.__init__",
        epsilon_times(2, 1),
        (_k(T_DP, "randomized_response_flip"),),
        ("randomize_array", "[randomize]", "simulate"),
    ),
    Fault(
        "rr-eps-x1/2",
        "RandomizedResponse at eps / 2",
        "pairwise.dp.mechanisms:RandomizedResponse.__init__",
        epsilon_times(0.5, 1),
        (_k(T_DP, "randomized_response_flip"),),
        ("randomize_array", "[randomize]", "simulate"),
    ),
    Fault(
        "rr-zero-noise",
        "RandomizedResponse reports the true bit (randomize, randomize_array and simulate)",
        "pairwise.dp.mechanisms:RandomizedResponse.__init__",
        after_init(_NO_RR),
        (_k(T_DP, "randomized_response_flip"),),
        (
            "randomized_response_flip_rate[randomize_array]",
            "randomized_response_flip_rate[randomize]",
            "randomized_response_flip_rate[simulate]",
        ),
    ),
    Fault(
        "krr-eps-x2",
        "k-ary randomized response at eps x2",
        "pairwise.dp.mechanisms:KaryRandomizedResponse.__init__",
        epsilon_times(2, 2),
        (_k(T_DP, "kary"), _k(T_LDP, "krr or reports")),
        (
            "kary_randomized_response_report_law[randomize_array]",
            "kary_randomized_response_report_law[simulate]",
            "krr_histogram_counts_are_multinomial[False]",
            "algorithm1_reports",
        ),
    ),
    Fault(
        "krr-eps-x1/2",
        "k-ary randomized response at eps / 2",
        "pairwise.dp.mechanisms:KaryRandomizedResponse.__init__",
        epsilon_times(0.5, 2),
        (_k(T_DP, "kary"), _k(T_LDP, "krr or reports")),
        (
            "kary_randomized_response_report_law[randomize]",
            "krr_histogram_counts_are_multinomial[True]",
            "algorithm1_reports",
        ),
    ),
    Fault(
        "krr-zero-noise",
        "k-ary randomized response reports the true value (every path)",
        "pairwise.dp.mechanisms:KaryRandomizedResponse.__init__",
        after_init(_NO_RR),
        (_k(T_DP, "kary"), _k(T_LDP, "krr or reports")),
        (
            "kary_randomized_response_report_law[randomize_array]",
            "kary_randomized_response_report_law[randomize]",
            "kary_randomized_response_report_law[simulate]",
            "krr_histogram_counts_are_multinomial[False]",
            "krr_histogram_counts_are_multinomial[True]",
            "algorithm1_reports",
        ),
    ),
    Fault(
        "one-bit-flip-eps-x2",
        "OneBitFlip at eps x2",
        "pairwise.dp.mechanisms:OneBitFlip.__init__",
        epsilon_times(2, 1),
        (_k(T_DP, "one_bit"),),
        ("one_bit_flip_rate_is_eq7", "one_bit_flip_vector"),
    ),
    Fault(
        "one-bit-flip-eps-x1/2",
        "OneBitFlip at eps / 2",
        "pairwise.dp.mechanisms:OneBitFlip.__init__",
        epsilon_times(0.5, 1),
        (_k(T_DP, "one_bit"),),
        ("one_bit_flip_rate_is_eq7", "one_bit_flip_vector"),
    ),
    Fault(
        "one-bit-flip-zero-noise",
        "OneBitFlip without its flip: z ~ Bernoulli(w), eps = infinity (every path)",
        "pairwise.dp.mechanisms:OneBitFlip.__init__",
        after_init(_NO_FLIP),
        (_k(T_DP, "one_bit"),),
        (
            "one_bit_flip_rate_is_eq7[randomize_array]",
            "one_bit_flip_rate_is_eq7[randomize]",
            "one_bit_flip_rate_is_eq7[simulate]",
            "one_bit_flip_vector",
        ),
    ),
    Fault(
        "snapping-scale-x2",
        "SnappingLaplaceMechanism scale x2",
        "pairwise.dp.mechanisms:SnappingLaplaceMechanism.__init__",
        scale_attr("scale", 2),
        (_k(T_DP, "snapping"),),
        ("snapping_laplace_mechanism",),
    ),
    Fault(
        "snapping-scale-x1/2",
        "SnappingLaplaceMechanism scale x1/2",
        "pairwise.dp.mechanisms:SnappingLaplaceMechanism.__init__",
        scale_attr("scale", 0.5),
        (_k(T_DP, "snapping"),),
        ("snapping_laplace_mechanism",),
    ),
    Fault(
        "snapping-no-noise",
        "SnappingLaplaceMechanism releases the clamped value",
        "pairwise.dp.mechanisms:SnappingLaplaceMechanism.release_array",
        constant(_clamped),
        (_k(T_DP, "snapping"),),
        ("snapping_laplace_mechanism",),
    ),
    Fault(
        "tree-scale-x2",
        "Theorem 3.1 tree node scale x2",
        "pairwise.dp.tree:tree_noise_scale",
        _scale_times(2),
        (_k(T_DP, "theorem31 or private_roc_noise"),),
        ("paper_noise_is_theorem31", "private_roc_noise"),
    ),
    Fault(
        "tree-scale-x1/2",
        "Theorem 3.1 tree node scale x1/2",
        "pairwise.dp.tree:tree_noise_scale",
        _scale_times(0.5),
        (_k(T_DP, "theorem31 or private_roc_noise"),),
        ("paper_noise_is_theorem31", "private_roc_noise"),
    ),
    Fault(
        "tree-zero-noise",
        "tree node noise all zero",
        "pairwise.dp.tree:tree_node_noise",
        result(_zeros_like),
        (_k(T_DP, "theorem31 or hierarchical_mechanism"),),
        ("paper_noise_is_theorem31", "hierarchical_mechanism"),
    ),
    Fault(
        "tree-snapped-scale-x2",
        "snapped tree: node Laplace lambda x2",
        "pairwise.dp.tree:snapping_laplace_array",
        _scale_arg(2, 1, "scale"),
        (_k(T_DP, "snapped"),),
        ("snapped_laplace_nodes",),
        scope="module",
    ),
    Fault(
        "tree-snapped-scale-x1/2",
        "snapped tree: node Laplace lambda x1/2",
        "pairwise.dp.tree:snapping_laplace_array",
        _scale_arg(0.5, 1, "scale"),
        (_k(T_DP, "snapped"),),
        ("snapped_laplace_nodes",),
        scope="module",
    ),
    Fault(
        "hierarchical-eps-x2",
        "hierarchical tree at eps x2",
        "pairwise.dp.tree:hierarchical_mechanism",
        epsilon_times(2, 1),
        (_k(T_DP, "hierarchical"),),
        ("hierarchical_mechanism_node", "private_roc_hier"),
    ),
    Fault(
        "hierarchical-eps-x1/2",
        "hierarchical tree at eps / 2",
        "pairwise.dp.tree:hierarchical_mechanism",
        epsilon_times(0.5, 1),
        (_k(T_DP, "hierarchical"),),
        ("hierarchical_mechanism_node", "private_roc_hier"),
    ),
    Fault(
        "kary-eps-x2",
        "k-ary tree at eps x2",
        "pairwise.dp.kary:kary_mechanism",
        epsilon_times(2, 1),
        (_k(T_DP, "kary"),),
        ("kary_mechanism_node_noise[False]", "kary_mechanism_node_noise[True]"),
    ),
    Fault(
        "kary-eps-x1/2",
        "k-ary tree at eps / 2",
        "pairwise.dp.kary:kary_mechanism",
        epsilon_times(0.5, 1),
        (_k(T_DP, "kary"),),
        ("kary_mechanism_node_noise[False]", "kary_mechanism_node_noise[True]"),
    ),
    Fault(
        "kary-zero-noise",
        "k-ary tree: exact node counts (CSPRNG path)",
        "pairwise.dp.kary:discrete_laplace_array",
        result(_zeros_like),
        (_k(T_DP, "kary"),),
        ("kary_mechanism_node_noise[False]",),
        scope="module",
    ),
    Fault(
        "roc-budget-not-halved",
        "private_roc spends eps (not eps/2) per class",
        "pairwise.dp.ecdf:private_roc",
        epsilon_times(2, 2),
        (_k(T_DP, "private_roc"),),
        ("private_roc_noise_is_two", "private_roc_hierarchical"),
    ),
    Fault(
        "hl-group-noise-x1/4",
        "Hosmer-Lemeshow group noise at 1/4 scale",
        "pairwise.dp.ecdf:discrete_laplace_array",
        _scale_arg(0.25, 0, "scale"),
        (_k(T_DP, "hosmer"),),
        ("hosmer_lemeshow_dp_noise_is_algorithm2[False]",),
        scope="module",
    ),
    Fault(
        "hl-group-noise-x2",
        "Hosmer-Lemeshow group noise at 2x scale",
        "pairwise.dp.ecdf:discrete_laplace_array",
        _scale_arg(2, 0, "scale"),
        (_k(T_DP, "hosmer"),),
        ("hosmer_lemeshow_dp_noise_is_algorithm2[False]",),
        scope="module",
    ),
    Fault(
        "hl-tree-scale-x2",
        "Hosmer-Lemeshow ECDF node noise at 2x scale",
        "pairwise.dp.ecdf:tree_node_noise",
        _scale_arg(2, 1, "scale"),
        (_k(T_DP, "hosmer"),),
        ("hosmer_lemeshow_dp_noise_is_algorithm2[False]", "hosmer_lemeshow_dp_noise_is_algorithm2[True]"),
        scope="module",
    ),
    # ---- local and shuffle protocols
    Fault(
        "alg1-eps-x2",
        "Algorithm 1 at eps x2",
        "pairwise.protocols.ldp.ustat:QuantizedUStatistic.__init__",
        epsilon_times(2, 3),
        (_k(T_LDP, "algorithm1"),),
        (
            "estimate_variance[gini-False]",
            "estimate_variance[kendall-False]",
            "estimate_variance[auc-False]",
            "estimate_variance[gini-True]",
            "algorithm1_reports",
        ),
    ),
    Fault(
        "alg1-eps-x1/2",
        "Algorithm 1 at eps / 2",
        "pairwise.protocols.ldp.ustat:QuantizedUStatistic.__init__",
        epsilon_times(0.5, 3),
        (_k(T_LDP, "algorithm1"),),
        ("estimate_variance[gini-False]", "estimate_variance[auc-True]", "algorithm1_reports"),
    ),
    Fault(
        "alg1-no-noise",
        "Algorithm 1 reports the true cell",
        "pairwise.protocols.ldp.ustat:QuantizedUStatistic.randomize",
        constant(lambda self, c: _ints(c)),
        (_k(T_LDP, "algorithm1"),),
        ("estimate_variance[gini-False]", "algorithm1_reports"),
    ),
    Fault(
        "hier-auc-oracle-eps-x2",
        "hierarchical-AUC oracles at 2x level epsilon",
        "pairwise.protocols.ldp.auc:HadamardFrequencyOracle.__init__",
        epsilon_times(2, 2),
        (_k(T_LDP, "hierarchical"),),
        ("users-basic", "budget-basic", "budget-advanced"),
    ),
    Fault(
        "hier-auc-oracle-eps-x1/2",
        "hierarchical-AUC oracles at level epsilon / 2",
        "pairwise.protocols.ldp.auc:HadamardFrequencyOracle.__init__",
        epsilon_times(0.5, 2),
        (_k(T_LDP, "hierarchical"),),
        ("users-basic", "budget-basic", "budget-advanced"),
    ),
    Fault(
        "hier-auc-oracle-zero-noise",
        "hierarchical-AUC oracles send the unperturbed Hadamard bit",
        "pairwise.protocols.ldp.auc:HadamardFrequencyOracle.__init__",
        after_init(_NO_HADAMARD_RR),
        (_k(T_LDP, "hierarchical"),),
        ("users-basic", "budget-basic", "budget-advanced"),
    ),
    Fault(
        "qmle-eps-x2",
        "QMLE one-bit submissions at eps x2",
        "pairwise.protocols.ldp.qmle:OneBitFlip",
        epsilon_times(2, 0),
        (_k(T_LDP, "qmle"),),
        ("public_x_bits_follow_eq7", "private_x_bits"),
        scope="module",
    ),
    Fault(
        "qmle-eps-x1/2",
        "QMLE one-bit submissions at eps / 2",
        "pairwise.protocols.ldp.qmle:OneBitFlip",
        epsilon_times(0.5, 0),
        (_k(T_LDP, "qmle"),),
        ("public_x_bits_follow_eq7", "private_x_bits"),
        scope="module",
    ),
    Fault(
        "qmle-zero-noise",
        "QMLE one-bit submissions without the flip (z ~ Bernoulli(w))",
        "pairwise.protocols.ldp.qmle:OneBitFlip",
        result(_NO_FLIP),
        (_k(T_LDP, "qmle"),),
        (
            "public_x_bits_follow_eq7[False]",
            "public_x_bits_follow_eq7[True]",
            "private_x_bits_split_the_budget[False]",
            "private_x_bits_split_the_budget[True]",
        ),
        scope="module",
    ),
    Fault(
        "shuffle-eps-x2",
        "shuffled histogram P^flip at eps x2 (noise scale x1/2)",
        "pairwise.protocols.ldp.shuffle:BinarySumProtocol",
        epsilon_times(2, 0),
        (_k(T_LDP, "shuffled"),),
        ("[shuffled_histogram]", "[simulate_shuffled_histogram]", "[simulate_label_counts]"),
        scope="module",
    ),
    Fault(
        "shuffle-eps-x1/2",
        "shuffled histogram P^flip at eps / 2 (noise scale x2)",
        "pairwise.protocols.ldp.shuffle:BinarySumProtocol",
        epsilon_times(0.5, 0),
        (_k(T_LDP, "shuffled"),),
        ("[shuffled_histogram]", "[simulate_shuffled_histogram]", "[simulate_label_counts]"),
        scope="module",
    ),
    Fault(
        "shuffle-no-noise",
        "shuffled histogram: every user sends the noise message (no randomness)",
        "pairwise.protocols.ldp.shuffle:BinarySumProtocol.noise_bits",
        constant(lambda self, size: __import__("numpy").ones(int(size), dtype="int64")),
        (_k(T_LDP, "shuffled"),),
        ("[shuffled_histogram]",),
    ),
    # ---- pairwise noise sample
    Fault(
        "cli-scale-x2",
        "noise sample: gadget chosen for eps / 2",
        "pairwise.dp.dyadic.search:choose_discrete_laplace",
        epsilon_times(0.5, 0),
        (T_CLI,),
        ("garbled", "exact"),
    ),
    Fault(
        "cli-scale-x1/2",
        "noise sample: gadget chosen for eps x2",
        "pairwise.dp.dyadic.search:choose_discrete_laplace",
        epsilon_times(2, 0),
        (T_CLI,),
        ("garbled", "exact"),
    ),
    Fault(
        "cli-garbled-zero-noise",
        "noise sample --garbled with constant random bits (zero noise)",
        "pairwise.circuits.builder:Builder.input",
        _input_constant_zero("rx", "ry"),
        (T_CLI,),
        ("garbled",),
    ),
    Fault(
        "cli-exact-zero-noise",
        "noise sample (exact sampler, no --garbled) draws all zeros",
        "pairwise.dp.samplers:sample_dyadic_laplace",
        result(_zeros_like),
        (_k(T_CLI, "exact"),),
        ("exact",),
    ),
]

BY_NAME = {f.name: f for f in FAULTS}
assert len(BY_NAME) == len(FAULTS), "fault names must be unique"
