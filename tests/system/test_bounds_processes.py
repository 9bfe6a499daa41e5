"""Public bounds (issue 11) through processes: the ``--signed`` alias of ``python -m pairwise ustat``, and
rejected ECDF requests against real servers charge nothing (the in-process half is tests/protocols/test_bounds.py).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from pairwise.dp.errors import PrivacyParameterError
from tests.support.cli import cli_error


def test_signed_is_a_deprecated_no_op(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("a\n" + "\n".join(str(v) for v in range(-5, 6)) + "\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pairwise",
            "ustat",
            "--statistic",
            "gini",
            "--epsilon",
            "1",
            "--data",
            str(p),
            "--columns",
            "a",
            "--lower",
            "-5",
            "--upper",
            "5",
            "--signed",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "--signed is deprecated" in r.stderr
    d = json.loads(r.stdout)
    assert d["domain"] == [{"lower": -5.0, "upper": 5.0, "decimals": 3}] and d["clamped"] == 0


@pytest.fixture(scope="module")
def servers():
    from pairwise.protocols.ecdf.client import ServerProcesses

    with ServerProcesses(2, budget="20", timeout=60, extra_args=("--accept-unverified",)) as sp:
        yield sp


def _spent(q, ds):
    return [(Fraction(s["info"]["spent"]), Fraction(s["info"]["reserved"])) for s in q.status(ds)]


def test_ecdf_rejected_requests_charge_nothing(servers, tmp_path, capsys):
    from pairwise.protocols.ecdf.client import ECDFQuerier, upload
    from pairwise.protocols.ecdf.wire import ECDFError

    rng = np.random.default_rng(2)
    v = rng.integers(0, 32, 50)
    y = np.array([0, 1] * 25)
    upload(servers.addresses, "vbc", v, labels=y, domain_bits=5)
    q = ECDFQuerier(servers.addresses, timeout=60)
    q.ecdf("vbc", 1.0, grid_bits=3)
    before = _spent(q, "vbc")
    assert before == [(Fraction(1), Fraction(0))] * 2
    rel = q.ecdf("vbc", 0.5, grid_bits=3)  # this one is charged
    for bad in (
        dict(epsilon=0),
        dict(epsilon=math.inf),
        dict(epsilon=10**7),
        dict(epsilon="1e-999999"),
        dict(epsilon=1, mechanism="laplace"),
        dict(epsilon=1, thresholds=[-1]),
        dict(epsilon=1, thresholds=[8], grid_bits=3),
        dict(epsilon=1, thresholds=[40]),
        dict(epsilon=1, tolerate=1),
        dict(epsilon=1, smoothing=3),
        dict(epsilon=1, series="e1"),
        dict(epsilon=1, grid_bits=21),
        dict(epsilon=100),  # over the budget of 20
    ):
        eps = bad.pop("epsilon")
        with pytest.raises(ECDFError):
            q.ecdf("vbc", eps, **bad)
    with pytest.raises(ECDFError):
        q.roc("vbc", 19.0)  # only 18.5 left
    with pytest.raises(ECDFError):
        q.hosmer_lemeshow("vbc", 1.0)  # no probabilities were uploaded
    with pytest.raises(ECDFError):
        q.counts("vbc", [3, 1], 0.1, ["pos"])  # cuts must not decrease
    with pytest.raises(PrivacyParameterError):
        rel.quantiles([1.5])  # post-processing: checked, nothing to charge
    assert _spent(q, "vbc") == [(Fraction(3, 2), Fraction(0))] * 2

    # the command line checks everything before it uploads anything
    p = tmp_path / "s.csv"
    p.write_text("s,y\n" + "".join(f"{i % 30},{i % 2}\n" for i in range(40)))
    common = [
        "ecdf",
        "run",
        "--servers",
        servers.servers,
        "--data",
        str(p),
        "--column",
        "s",
        "--lower",
        "0",
        "--upper",
        "30",
        "--epsilon",
        "1",
    ]
    for extra, message in (
        (["--quantiles", "0.5,1.5"], "quantile"),
        (["--roc", "--label", "y", "--scheme", "pointwise"], "pointwise"),
        (["--grid-bits", "9", "--domain-bits", "5"], "--grid-bits"),
        (["--epsilon", "0"], "epsilon"),
        (["--tolerate", "1"], "tolerate"),
        (["--scheme", "dcf", "--servers", f"{servers.servers},127.0.0.1:9"], "two-party"),
    ):
        assert message in cli_error(capsys, common + extra + ["--dataset", "never-uploaded"])
    assert all(d["dataset"] != "never-uploaded" for s in q.status() for d in s.get("datasets", []))
