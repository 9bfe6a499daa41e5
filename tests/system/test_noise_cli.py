"""``pairwise noise sample`` / ``pairwise noise params``: JSON keys, counts and the stated guarantee."""

from __future__ import annotations

import json

import pytest

from pairwise.circuits.noise import discrete_laplace_gadget
from pairwise.cli import main
from pairwise.dp.dyadic import choose_discrete_laplace, discrete_laplace_guarantee


def _run_json(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr().out
    return rc, json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("garbled", [False, True])
def test_sample_json(capsys, garbled):
    argv = ["noise", "sample", "--epsilon", "1", "--sensitivity", "2", "--count", "3000", "--json"]
    rc, d = _run_json(capsys, argv + (["--garbled"] if garbled else []))
    assert rc == 0
    for key in ("values", "counts", "epsilon", "delta", "and_gates_per_sample"):
        assert key in d
    assert sum(d["counts"]) == 3000 and d["values"] == sorted(d["values"])
    p = choose_discrete_laplace(1, 2)
    g = discrete_laplace_guarantee(p)
    assert d["epsilon"] == 1.0 and d["delta"] == g.delta and d["delta"] <= 2.0**-40
    assert d["and_gates_per_sample"] == discrete_laplace_gadget(p).circuit.n_and
    support = discrete_laplace_gadget(p).noise_pmf()
    assert all(v in support for v in d["values"])
    assert d["garbled"] is garbled


def test_sample_text_and_params(capsys):
    assert main(["noise", "sample", "--epsilon", "0.5", "--sensitivity", "1", "--count", "500"]) == 0
    out = capsys.readouterr().out
    assert "delta" in out and "AND gates" in out and "#" in out
    rc, d = _run_json(capsys, ["noise", "params", "--epsilon", "10", "--sensitivity", "65535", "--json"])
    assert rc == 0 and d["method"] == "certified" and d["delta"] <= 2.0**-40


@pytest.mark.parametrize(
    "argv",
    [
        ["noise", "sample", "--epsilon", "0", "--sensitivity", "1", "--count", "10"],
        ["noise", "sample", "--epsilon", "1", "--sensitivity", "0", "--count", "10"],
        ["noise", "sample", "--epsilon", "1", "--sensitivity", "1", "--count", "0"],
        ["noise", "params", "--epsilon", "1", "--lam", "0"],
    ],
)
def test_bad_arguments_are_user_errors(capsys, argv):
    assert main(argv + ["--json"]) == 2
    out = capsys.readouterr()
    assert "error" in json.loads(out.out.strip().splitlines()[-1])
