"""``pairwise ecdf`` on the command line: run / status against real server processes, and the demo.

The commands run as subprocesses (``python -m pairwise``) with bounded
waits; their JSON output is checked against numpy counts of the same
quantized column.  No test measures time.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pairwise.protocols.ecdf.client import ServerProcesses
from pairwise.protocols.ecdf.shares import quantize

CLI = [sys.executable, "-m", "pairwise"]
BOUND = 120.0


def run(*args: str) -> tuple[int, str, str]:
    p = subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=BOUND)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def servers():
    with ServerProcesses(2, budget="1000000", timeout=30) as sp:
        yield sp


@pytest.fixture
def csv_file(tmp_path):
    rng = np.random.default_rng(21)
    v = np.round(rng.gamma(3.0, 2.0, 150), 3)
    y = (rng.uniform(size=150) < 0.4).astype(int)
    path = tmp_path / "scores.csv"
    path.write_text("score,label\n" + "".join(f"{a},{b}\n" for a, b in zip(v, y)))
    return path, v, y


def test_run_json_matches_exact_at_huge_epsilon(servers, csv_file):
    path, v, y = csv_file
    code, out, err = run("ecdf", "run", "--servers", servers.servers, "--data", str(path), "--column", "score",
                         "--epsilon", "10000", "--domain-bits", "6", "--range", "0,30", "--label", "label",
                         "--roc", "--quantiles", "0.5,0.9", "--json")
    assert code == 0, err
    assert "--range LO,HI is deprecated" in err
    d = json.loads(out)
    for key in ("thresholds", "exact", "dp", "smoothed", "epsilon", "bytes"):
        assert key in d
    x = quantize(v, 0.0, 30.0, 6)
    exact = np.array([(x <= t).sum() for t in range(64)]) / 150
    assert np.allclose(d["exact"], exact) and np.allclose(d["dp"], exact) and np.allclose(d["smoothed"], exact)
    assert np.allclose(d["thresholds"], 30.0 * np.arange(1, 65) / 64)
    assert d["epsilon"] == 10000 and d["bytes"] == sum(d["bytes_detail"].values()) > 0
    assert d["quantiles"] == d["quantiles_exact"]
    assert d["auc"] == pytest.approx(d["auc_exact"], abs=1e-12)
    assert d["upload"]["accepted"] == [150, 150]


def test_run_pointwise_and_status(servers, csv_file):
    path, v, _ = csv_file
    code, out, err = run("ecdf", "run", "--servers", servers.servers, "--data", str(path), "--column", "score",
                         "--epsilon", "10000", "--domain-bits", "5", "--lower", "0", "--upper", "30",
                         "--scheme", "pointwise",
                         "--dataset", "pw-cli", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["scheme"] == "pointwise" and np.allclose(d["dp"], d["exact"])
    code, out, err = run("ecdf", "status", "--servers", servers.servers, "--dataset", "pw-cli", "--json")
    assert code == 0, err
    st = json.loads(out)
    assert [s["info"]["clients"] for s in st] == [150, 150] and st[0]["info"]["spent"] == "10000"


def test_run_text_output_and_errors(servers, csv_file, tmp_path):
    path, _, _ = csv_file
    code, out, err = run("ecdf", "run", "--servers", servers.servers, "--data", str(path), "--column", "score",
                         "--epsilon", "1", "--domain-bits", "6", "--dataset", "text-run", "--lower", "0",
                         "--upper", "30")
    assert code == 0, err
    assert "DP ECDF of score" in out and "Theorem 3.1 RMSE" in out and "(not private)" in out
    code, out, err = run("ecdf", "run", "--servers", servers.servers, "--data", str(path), "--column", "score",
                         "--epsilon", "1", "--dataset", "no-bounds")
    assert code == 2 and "--lower" in err and "--upper" in err
    dead = f"{servers.servers.split(',')[0]},127.0.0.1:9"
    code, out, err = run("ecdf", "run", "--servers", dead, "--data", str(path), "--column", "score",
                         "--epsilon", "1", "--connect-timeout", "1", "--dataset", "never", "--lower", "0",
                         "--upper", "30")
    assert code == 2 and "server 1 (127.0.0.1:9)" in err
    code, out, err = run("ecdf", "run", "--servers", servers.servers, "--data", str(path), "--column", "nope",
                         "--epsilon", "1", "--lower", "0", "--upper", "1")
    assert code == 2 and "nope" in err
    code, out, err = run("ecdf", "serve", "--server-id", "0", "--listen", "localhost")
    assert code == 2 and "HOST:PORT" in err


@pytest.mark.slow
def test_demo_json_and_plot(tmp_path):
    png = tmp_path / "ecdf.png"
    code, out, err = run("ecdf", "demo", "--json", "--plot", str(png))
    assert code == 0, err
    d = json.loads(out)
    for key in ("thresholds", "exact", "dp", "smoothed", "epsilon", "bytes"):
        assert key in d
    assert len(d["thresholds"]) == len(d["exact"]) == len(d["dp"]) == len(d["smoothed"]) == 1024
    assert d["epsilon"] == 1.0 and d["n"] == 569 and d["servers"] == 2
    ex = np.asarray(d["exact"])
    assert np.all(np.diff(ex) >= 0) and ex[-1] == 1.0
    assert np.all(np.diff(d["smoothed"]) >= 0)
    assert 0.9 < d["auc_exact"] < 0.97  # mean radius separates malignant from benign well
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
