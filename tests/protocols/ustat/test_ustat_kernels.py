"""Any degree-2 kernel through the 2PC protocol: the shipped variance and collision kernels against their closed
forms, a user-written kernel (docs/examples/wilcoxon_kernel.py) through the API, the command line and network
mode, and the refusals (a range the circuit exceeds, an unimportable kernel in network mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pairwise
from pairwise.circuits.kernel_spec import VARIANCE, kernel, load_kernel
from pairwise.protocols.ustat import UStatError, run_ustat

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


@pytest.fixture
def wilcoxon(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return load_kernel("wilcoxon_kernel:walsh_positive")


def test_variance_and_collision_against_their_closed_forms():
    rng = np.random.default_rng(3)
    x = np.round(rng.uniform(0, 30, 60))
    r = pairwise.ustat("variance", x, epsilon=8, lower=0, upper=30, decimals=0, rng=np.random.default_rng(1))
    d = r.as_dict()
    assert d["exact_quantized"] == pytest.approx(
        np.var(x, ddof=1), rel=1e-12
    )  # (x - y)^2 / 2 gives the sample variance
    assert d["natural_range"] == [0, 450] and d["noise"] in ("signed_geometric", "discrete_laplace")
    lab = np.round(rng.uniform(1, 5, 80))
    r = pairwise.ustat("collision", lab, epsilon=8, lower=1, upper=5, decimals=0, rng=np.random.default_rng(1))
    d = r.as_dict()
    c = np.bincount(lab.astype(int))
    assert d["exact_quantized"] == pytest.approx(((c * c).sum() - lab.size) / (lab.size * (lab.size - 1)), rel=1e-12)
    assert d["noise"] == "krr" and d["natural_range"] == [0, 1]
    # an indicator has no unit: at 1 decimal (step 0.1) it is still a probability
    r = pairwise.ustat("collision", lab / 2, epsilon=8, lower=0.5, upper=2.5, decimals=1, rng=np.random.default_rng(1))
    d = r.as_dict()
    assert d["natural_range"] == [0, 1] and 0 <= d["interval_width"] <= 2
    assert d["exact_quantized"] == pytest.approx(((c * c).sum() - lab.size) / (lab.size * (lab.size - 1)), rel=1e-12)


@pytest.mark.parametrize("stat", ["variance", "collision"])
def test_the_release_is_unbiased_for_the_closed_form(stat):
    """All pairs at a high budget, averaged over runs: the 2PC estimate centres on the closed form (a 99.9%
    interval of the mean of 8 runs, each run's own published interval as its scale)."""
    rng = np.random.default_rng(7)
    x = np.round(rng.uniform(0, 6, 24))
    truth = np.var(x, ddof=1) if stat == "variance" else None
    runs = [
        run_ustat(
            stat,
            x,
            epsilon=40.0,
            design="all",
            lower=0,
            upper=6,
            decimals=0,
            alpha=0.001,
            rng=np.random.default_rng(s),
            compute_theorem5=False,
        )
        for s in range(8)
    ]
    if truth is None:
        c = np.bincount(x.astype(int))
        truth = ((c * c).sum() - x.size) / (x.size * (x.size - 1))
    est = np.mean([r.estimate for r in runs])
    half = runs[0].as_dict()["interval_width"] / 2
    assert abs(est - truth) <= half / np.sqrt(8) * 2  # well inside: the noise is independent across runs


def test_per_pair_outputs_are_the_kernel_plus_the_stated_noise():
    """The aggregator's per-pair values minus the kernel of the sampled pairs (known from the seeded design)."""
    from pairwise.protocols.ustat.stats import sample_pairs

    x = np.round(np.random.default_rng(2).uniform(0, 20, 4000))
    r = run_ustat(
        "variance", x, epsilon=64.0, lower=0, upper=20, decimals=0, rng=np.random.default_rng(9), compute_theorem5=False
    )
    pairs = sample_pairs(x.size, 1, np.random.default_rng(9))
    h = (x[pairs[:, 0]] - x[pairs[:, 1]]) ** 2  # circuit units: (x - y)^2 on the grid
    z = r.outputs - h  # additive noise at sensitivity 400, eps 64, variance from the gadget
    d = r.as_dict()
    var = d["noise_variance_per_pair"] / 0.5**2  # natural units are (x - y)^2 / 2
    mean = {"signed_geometric": -0.5, "discrete_laplace": 0.0}[d["noise"]]
    assert abs(z.mean() - mean) < 5 * np.sqrt(var / z.size)
    assert abs(z.var() / var - 1) < 0.25  # 5 standard errors of a Laplace sample variance at 2000 pairs


def test_a_user_kernel_through_the_api(wilcoxon):
    rng = np.random.default_rng(1)
    d = np.clip(np.round(rng.normal(1.0, 3, 500)), -10, 10)
    n = d.size
    s = d[:, None] + d[None, :]
    closed = ((s > 0).sum() - (2 * d > 0).sum()) / (n * (n - 1))  # P(Walsh average > 0) over i != j
    for call in (
        lambda: pairwise.ustat(wilcoxon, d, epsilon=2, lower=-10, upper=10, decimals=0),
        lambda: pairwise.ustat(None, d, kernel=wilcoxon, epsilon=2, lower=-10, upper=10, decimals=0),
    ):
        res = call().as_dict()
        assert res["statistic"] == "walsh_positive" and res["noise"] == "krr"
        assert res["exact_quantized"] == pytest.approx(closed, rel=1e-12)
        assert res["kernel_check"] == "exhaustive over the 441 grid pairs"
        lo, hi = res["interval"]
        assert hi - lo == pytest.approx(res["interval_width"])


def test_a_kernel_whose_circuit_exceeds_its_declared_range_is_refused_before_any_noise(monkeypatch):
    @kernel(range=(0, 5), symmetric=True, name="too_narrow")
    def gini(b, x, y):
        w = x.width + 1
        return abs(x.extend(w, True) - y.extend(w, True))[: x.width]

    def tripwire(*_a, **_k):
        raise AssertionError("noise was drawn before the kernel was checked")

    monkeypatch.setattr(os, "urandom", tripwire)
    with pytest.raises(UStatError, match=r"declares the range \[0, 5\] but its circuit outputs values in \[0, 30\]"):
        run_ustat(gini, np.arange(31.0), epsilon=1, lower=0, upper=30, decimals=0, rng=np.random.default_rng(0))


def test_refusals_of_the_configuration():
    asym = kernel(range=(0, 1), symmetric=False, name="gt")(lambda b, x, y: x > y)
    with pytest.raises(UStatError, match="not symmetric"):
        run_ustat(asym, np.arange(10.0), epsilon=1, design="all", lower=0, upper=9, decimals=0)
    with pytest.raises(UStatError, match="importable module"):
        run_ustat(asym, np.arange(10.0), epsilon=1, mode="network", lower=0, upper=9, decimals=0)
    with pytest.raises(UStatError, match="declares its 2 or 3 values"):
        run_ustat(VARIANCE, np.arange(10.0), epsilon=1, noise="krr", lower=0, upper=9, decimals=0)
    with pytest.raises(UStatError, match="disagree"):
        run_ustat("gini", np.arange(10.0), kernel=VARIANCE, epsilon=1, lower=0, upper=9, decimals=0)


def _cli(*args, env_path=str(EXAMPLES), timeout=300):
    e = dict(os.environ, PYTHONPATH=env_path + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "pairwise", *args], capture_output=True, text=True, timeout=timeout, env=e
    )


@pytest.mark.slow
def test_the_documented_user_kernel_on_the_command_line_and_in_network_mode(tmp_path):
    d = np.clip(np.round(np.random.default_rng(4).normal(0.5, 3, 120)), -10, 10)
    f = tmp_path / "diffs.csv"
    f.write_text("d\n" + "".join(f"{v:g}\n" for v in d))
    base = [
        "ustat",
        "--kernel",
        "wilcoxon_kernel:walsh_positive",
        "--epsilon",
        "2",
        "--data",
        str(f),
        "--columns",
        "d",
        "--lower",
        "-10",
        "--upper",
        "10",
        "--decimals",
        "0",
        "--json",
    ]
    for extra in ([], ["--mode", "network", "--workers", "2"]):
        r = _cli(*base, *extra)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["statistic"] == "walsh_positive" and out["mode"] == (extra[1] if extra else "simulate")
        assert out["interval_width"] > 0 and "exact" not in out
    # --compare with a user kernel: the exact value (against Python's pair count), no Algorithm 1 baseline
    r = _cli(*base, "--compare")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    pairs = [(a, b) for i, a in enumerate(d) for b in d[i + 1 :]]
    assert out["exact"] == pytest.approx(sum(a + b > 0 for a, b in pairs) / len(pairs))
    assert not any(k.startswith("rr_") for k in out)
    r = _cli(*base[:-1], "--compare")
    assert r.returncode == 0, r.stderr
    assert "RR baseline      none" in r.stdout and "exact" in r.stdout and "baseline printed too" not in r.stdout
    r = _cli(
        "ustat",
        "--kernel",
        "wilcoxon_kernel:nope",
        "--epsilon",
        "1",
        "--data",
        str(f),
        "--columns",
        "d",
        "--lower",
        "-10",
        "--upper",
        "10",
    )
    assert r.returncode == 2 and "has no attribute" in r.stderr
    r = _cli("ustat", "--statistic", "gini", "--kernel", "wilcoxon_kernel:walsh_positive", "--epsilon", "1")
    assert r.returncode == 2 and "one of them" in r.stderr


@pytest.mark.slow
def test_a_call_form_kernel_runs_in_network_mode_from_the_command_line(tmp_path):
    """``--kernel mod:spec`` for ``spec = kernel(...)(fn)``: every worker failed before the path fix."""
    (tmp_path / "a25_callform.py").write_text(CALL_FORM)
    x = np.round(np.random.default_rng(5).uniform(0, 20, 60))
    f = tmp_path / "v.csv"
    f.write_text("v\n" + "".join(f"{v:g}\n" for v in x))
    args = ["ustat", "--kernel", "a25_callform:capped", "--epsilon", "2", "--data", str(f), "--columns", "v"]
    args += ["--lower", "0", "--upper", "20", "--decimals", "0", "--mode", "network", "--workers", "1", "--json"]
    r = _cli(*args, env_path=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["statistic"] == "_capped" and out["natural_range"] == [0, 4] and out["mode"] == "network"


CALL_FORM = """
from pairwise.circuits.kernel_spec import kernel


def _capped(b, x, y):  # min(|x - y|, 4)
    w = x.width + 1
    d = abs(x.extend(w, True) - y.extend(w, True))[: x.width]
    c = b.const(4, x.width)
    return (d > c).mux(c, d)


capped = kernel(range=(0, 4), symmetric=True, power=1)(_capped)  # the call form, not @kernel
"""


@pytest.fixture
def call_form(tmp_path, monkeypatch):
    (tmp_path / "a25_callform.py").write_text(CALL_FORM)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "a25_callform"


def test_a_kernel_loaded_by_its_path_keeps_that_path_for_the_workers(call_form):
    """``kernel(...)(fn)`` guesses the path module:fn, which names the plain function, not the spec: a network
    run from ``--kernel a25_callform:capped`` failed in every worker ("a25_callform:_capped is not a kernel")."""
    spec = load_kernel(f"{call_form}:capped")
    assert spec.path == f"{call_form}:capped"
    assert load_kernel(spec.path).build is spec.build


def test_network_mode_refuses_a_path_that_does_not_name_the_kernel_before_starting_workers(call_form):
    import importlib

    spec = importlib.import_module(call_form).capped  # imported directly: its guessed path names _capped
    with pytest.raises(UStatError, match=r"a25_callform:_capped.*does not name kernel '_capped'.*load_kernel"):
        run_ustat(spec, np.arange(10.0), epsilon=1, mode="network", lower=0, upper=9, decimals=0)


def test_a_worker_refuses_a_kernel_path_that_builds_another_circuit(call_form):
    """The worker rebuilds the circuit from the path; it must be the circuit the driver checked."""
    from pairwise.circuits.kernel_spec import KernelRangeError, verify_kernel
    from pairwise.circuits.noise import noisy_spec_kernel
    from pairwise.protocols.ustat.worker import _build

    spec = load_kernel(f"{call_form}:capped")
    verify_kernel(spec, 8, 9)
    nc = noisy_spec_kernel(spec, 8, 9, epsilon=1, mechanism="discrete_laplace", delta=2**-40)
    params = dict(kernel=spec.path, span=9, bits=8, epsilon_num=1, epsilon_den=1, mechanism="discrete_laplace")
    params.update(delta_num=1, delta_den=2**40, circuit_hash=nc.circuit.content_hash)
    assert _build(params).circuit.content_hash == nc.circuit.content_hash
    with pytest.raises(KernelRangeError, match="builds a different circuit"):
        _build({**params, "kernel": "pairwise.circuits.kernel_spec:COLLISION", "mechanism": "krr"})


def test_the_documented_kernel_block_runs_and_is_the_example_file(wilcoxon):
    """docs/ustat.md's Wilcoxon block is a runnable script (tests/system/test_readme.py runs it), and its kernel
    is the one the page's command line loads from docs/examples/wilcoxon_kernel.py: the same table on the grid."""
    from pairwise.circuits.kernel_spec import kernel_table
    from tests.system.test_readme import ROOT, python_blocks

    page = (ROOT / "docs" / "ustat.md").read_text()
    blocks = [(body, run) for _, body, run in python_blocks(page, "docs/ustat.md") if "def walsh_positive" in body]
    assert len(blocks) == 1 and blocks[0][1], "the Wilcoxon kernel block must be a runnable ```python block"
    head = blocks[0][0].split("\ndiffs = ")[0]  # the definitions, without the run on 600 users
    ns: dict = {}
    exec(compile(head, "docs/ustat.md", "exec"), ns)
    assert np.array_equal(kernel_table(ns["walsh_positive"], 8, 20), kernel_table(wilcoxon, 8, 20))
    assert (ns["walsh_positive"].range, ns["walsh_positive"].values) == (wilcoxon.range, wilcoxon.values)


def test_the_sensitivity_is_the_declared_range_not_the_circuits():
    """The same circuit declared [0, 4] and [0, 10] on the grid 0..4: the noise is shaped by the declaration
    (sensitivity hi - lo), even where the circuit never reaches it."""
    from pairwise.circuits.noise import noisy_spec_kernel

    def gini(b, x, y):
        w = x.width + 1
        return abs(x.extend(w, True) - y.extend(w, True))[: x.width]

    tight = kernel(range=(0, 4), symmetric=True, name="g4")(gini)
    wide = kernel(range=(0, 10), symmetric=True, name="g10")(gini)
    a, b = (noisy_spec_kernel(k, 8, 4, epsilon=1, mechanism="discrete_laplace", delta=2**-40) for k in (tight, wide))
    assert (a.sensitivity, b.sensitivity) == (4, 10) and (a.value_range, b.value_range) == ((0, 4), (0, 10))
    # Var DL(S/eps) ~ 2 S^2 / eps^2 at eps = 1: (10/4)^2 = 6.25x, up to the gadget's dyadic rounding
    assert 5 < b.params.noise_variance / a.params.noise_variance < 7.5
