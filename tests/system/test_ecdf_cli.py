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
    with ServerProcesses(2, budget="1000000", timeout=30, extra_args=("--accept-unverified",)) as sp:
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
    code, out, err = run(
        "ecdf",
        "run",
        "--servers",
        servers.servers,
        "--data",
        str(path),
        "--columns",
        "score",
        "--epsilon",
        "500",
        "--domain-bits",
        "6",
        "--range",
        "0,30",
        "--label",
        "label",
        "--roc",
        "--quantiles",
        "0.5,0.9",
        "--compare",
        "--json",
    )
    assert code == 0, err
    assert "--range LO,HI is deprecated" in err
    d = json.loads(out)
    for key in ("thresholds", "exact", "dp", "smoothed", "epsilon", "bytes"):
        assert key in d
    x = quantize(v, 0.0, 30.0, 6)
    exact = np.array([(x <= t).sum() for t in range(64)]) / 150
    assert np.allclose(d["exact"], exact) and np.allclose(d["dp"], exact) and np.allclose(d["smoothed"], exact)
    assert np.allclose(d["thresholds"], 30.0 * np.arange(1, 65) / 64)
    assert d["epsilon"] == 500 and d["bytes"] == sum(d["bytes_detail"].values()) > 0
    assert d["quantiles"] == d["quantiles_exact"]
    assert d["auc"] == pytest.approx(d["auc_exact"], abs=1e-12)
    assert d["upload"]["accepted"] == [150, 150]


#: ``ecdf run``'s not-private evaluation aids (dotted: nested keys), published only with --compare.
AIDS = {"exact", "max_abs_error", "max_abs_error_smoothed", "quantiles_exact", "roc.fpr_exact", "roc.tpr_exact"}
AIDS |= {"auc_exact"}


def test_run_releases_alone_by_default_and_the_exact_aids_only_with_compare(servers, csv_file):
    """Issue 25 item 3: ``ecdf run``'s default output (text and --json) is the DP releases and public parameters
    alone, so it can be pasted; the exact ECDF, quantiles, ROC, AUC and errors (not private) come with --compare."""
    from pairwise.commands import ecdf

    path, _, _ = csv_file
    args = ["ecdf", "run", "--servers", servers.servers, "--data", str(path), "--columns", "score"]
    args += ["--label", "label", "--roc", "--quantiles", "0.5", "--epsilon", "1", "--domain-bits", "5"]
    args += ["--lower", "0", "--upper", "30"]

    def release(*extra: str) -> str:
        code, out, err = run(*args, *extra, "--dataset", "cmp-" + "-".join(x.strip("-") for x in extra))
        assert code == 0, err
        return out

    def keys(d: dict) -> set:
        return set(d) | {f"roc.{k}" for k in d.get("roc", {})}

    plain = json.loads(release("--json"))
    assert not keys(plain) & AIDS, sorted(keys(plain) & AIDS)
    assert {"dp", "smoothed", "interval", "quantiles", "auc", "auc_interval", "clamped"} <= set(plain)
    text = release().replace(plain["interval_method"], "")  # the interval's method may name an "exact" law
    assert "exact" not in text and "not private" not in text and "max |DP" not in text, text
    assert "quantile 0.5: DP" in text and "ROC: AUC DP" in text
    compared = json.loads(release("--compare", "--json"))
    assert keys(compared) - keys(plain) == AIDS == set(getattr(ecdf, "COMPARE_ONLY_KEYS", ()))  # the rest alike
    text = release("--compare")
    assert "exact*" in text and "(* not private)" in text and "max |DP - exact|" in text, text
    lines = text.splitlines()
    assert all(any(a in x and "exact" in x for x in lines) for a in ("quantile 0.5: DP", "ROC: AUC DP")), text


def test_run_pointwise_and_status(servers, csv_file):
    path, v, _ = csv_file
    code, out, err = run(
        "ecdf",
        "run",
        "--servers",
        servers.servers,
        "--data",
        str(path),
        "--columns",
        "score",
        "--epsilon",
        "500",
        "--domain-bits",
        "5",
        "--lower",
        "0",
        "--upper",
        "30",
        "--scheme",
        "pointwise",
        "--dataset",
        "pw-cli",
        "--compare",
        "--json",
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["scheme"] == "pointwise" and np.allclose(d["dp"], d["exact"])
    code, out, err = run("ecdf", "status", "--servers", servers.servers, "--dataset", "pw-cli", "--json")
    assert code == 0, err
    st = json.loads(out)
    assert [s["info"]["clients"] for s in st] == [150, 150] and st[0]["info"]["spent"] == "500"


def test_run_text_output_and_errors(servers, csv_file, tmp_path):
    path, _, _ = csv_file
    code, out, err = run(
        "ecdf",
        "run",
        "--servers",
        servers.servers,
        "--data",
        str(path),
        "--columns",
        "score",
        "--epsilon",
        "1",
        "--domain-bits",
        "6",
        "--dataset",
        "text-run",
        "--lower",
        "0",
        "--upper",
        "30",
    )
    assert code == 0, err
    assert "DP ECDF of score" in out and "Theorem 3.1 RMSE" in out and "(not private)" not in out  # no --compare
    code, out, err = run(
        "ecdf",
        "run",
        "--servers",
        servers.servers,
        "--data",
        str(path),
        "--columns",
        "score",
        "--epsilon",
        "1",
        "--dataset",
        "no-bounds",
    )
    assert code == 2 and "--lower" in err and "--upper" in err
    dead = f"{servers.servers.split(',')[0]},127.0.0.1:9"
    code, out, err = run(
        "ecdf",
        "run",
        "--servers",
        dead,
        "--data",
        str(path),
        "--columns",
        "score",
        "--epsilon",
        "1",
        "--connect-timeout",
        "1",
        "--dataset",
        "never",
        "--lower",
        "0",
        "--upper",
        "30",
    )
    assert code == 2 and "server 1 (127.0.0.1:9)" in err
    code, out, err = run(
        "ecdf",
        "run",
        "--servers",
        servers.servers,
        "--data",
        str(path),
        "--columns",
        "nope",
        "--epsilon",
        "1",
        "--lower",
        "0",
        "--upper",
        "1",
    )
    assert code == 2 and "nope" in err
    code, out, err = run("ecdf", "serve", "--server-id", "0", "--listen", "localhost")
    assert code == 2 and "HOST:PORT" in err


@pytest.mark.slow
def test_demo_json_noise_and_plot(tmp_path):
    """The demo's JSON: exact ECDF of the shipped column, Theorem 3.1 noise at eps = 1, smoothing, a real PNG.

    ``exact`` is checked against the quantized column; (dp - exact) n must be
    the path sums of i.i.d. DL(exp(-1/11)) node noise (L = 10; Mahalanobis
    quadratic form, alpha 1e-5, power >= 0.99 against scale x2 and x1/2); the
    smoothed curve is the projection onto monotone curves in [0, 1], so it is
    no further from the exact ECDF than the noisy one.
    """
    from pairwise.protocols.datasets import load_dataset
    from tests.support.noise_power import QuadraticFormTest, discrete_laplace, path_matrix, scale_alternatives

    L = 10  # the demo's domain bits
    law = lambda f=1.0: discrete_laplace((L + 1) * f)  # noqa: E731 - node scale (L + 1)/eps at eps = 1
    test = QuadraticFormTest(path_matrix(L), law())
    test.require_power(scale_alternatives(law))
    png = tmp_path / "ecdf.png"
    code, out, err = run("ecdf", "demo", "--json", "--compare", "--plot", str(png), "--progress")
    assert code == 0, err
    d = json.loads(out)  # the bars went to stderr: stdout is the one JSON object
    assert "upload to the servers" in err and "569/569" in err and "release: ECDF and ROC" in err and "8/8" in err
    for key in ("thresholds", "exact", "dp", "smoothed", "epsilon", "bytes"):
        assert key in d
    assert len(d["thresholds"]) == len(d["exact"]) == len(d["dp"]) == len(d["smoothed"]) == 1024
    assert d["epsilon"] == 1.0 and d["n"] == 569 and d["servers"] == 2 and d["domain_bits"] == L
    name, column = d["dataset"].split(":")  # the shipped column, on its public range, clamped by each client
    lo, hi = d["range"]
    x = quantize(np.clip(load_dataset(name)[column], lo, hi), lo, hi, L)
    ex = np.cumsum(np.bincount(x.astype(int), minlength=1 << L)) / x.size
    np.testing.assert_allclose(d["exact"], ex, rtol=0, atol=1e-12)
    dp, sm = np.asarray(d["dp"]), np.asarray(d["smoothed"])
    test.check((dp - ex) * d["n"], "demo ECDF noise")
    assert np.all(np.diff(sm) >= 0) and sm.min() >= 0 and sm.max() <= 1
    assert np.linalg.norm(sm - ex) <= np.linalg.norm(dp - ex) * (1 + 1e-9)
    assert 0.9 < d["auc_exact"] < 0.97  # mean radius separates malignant from benign well
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rerun_with_a_changed_csv_is_refused_and_query_releases_the_stored_data(servers, csv_file, tmp_path):
    path, v, _ = csv_file
    common = [
        "--servers",
        servers.servers,
        "--columns",
        "score",
        "--epsilon",
        "500",
        "--domain-bits",
        "6",
        "--dataset",
        "sealed",
        "--quantiles",
        "0.5",
        "--lower",
        "0",
        "--upper",
        "300",
        "--json",
    ]
    code, out, err = run("ecdf", "run", "--data", str(path), *common, "--compare")
    assert code == 0, err
    first = json.loads(out)
    assert all(0 <= f <= 1 for f in first["dp"] + first["smoothed"])
    other = tmp_path / "other.csv"
    other.write_text("score,label\n" + "".join(f"{a * 7 + 100},{1}\n" for a in v))  # another distribution
    code, out, err = run("ecdf", "run", "--data", str(other), *common)
    assert code == 2 and "already exists" in err and "ecdf query" in err
    assert set(json.loads(out)) == {"error", "type"}  # no value was released
    code, out, err = run("ecdf", "status", "--servers", servers.servers, "--dataset", "sealed", "--json")
    assert [s["info"]["spent"] for s in json.loads(out)] == ["500", "500"]  # the refusal charged nothing
    code, out, err = run(
        "ecdf",
        "query",
        "--servers",
        servers.servers,
        "--dataset",
        "sealed",
        "--epsilon",
        "500",
        "--quantiles",
        "0.5",
        "--json",
    )
    assert code == 0, err
    q = json.loads(out)
    assert np.allclose(q["dp"], first["exact"]) and q["n"] == 150 and "exact" not in q
    assert np.allclose(q["thresholds"], first["thresholds"])  # the public range was stored with the dataset
    assert q["quantiles"] == first["quantiles_exact"]
    code, out, err = run(
        "ecdf", "query", "--servers", servers.servers, "--dataset", "sealed", "--epsilon", "1", "--roc"
    )
    assert code == 2 and "needs a dataset uploaded with labels" in err


# --------------------------------------------------------------------------- progress


def test_upload_and_release_callbacks_count_chunks_and_stages(servers):
    """The library hooks on a real run: clients whose keys every server has been sent, chunk by chunk, then the m + 2
    stages of each release request (prepared, started, one per server's result), as (done, total) that start
    at 0, never decrease and end at the total."""
    from pairwise.protocols.ecdf.client import ECDFQuerier, make_keys, make_series, send_keys, upload

    rng = np.random.default_rng(14)
    K = 250
    x = rng.integers(0, 64, K).astype(np.uint64)
    y = (rng.uniform(size=K) < 0.5).astype(int)
    series = make_series(y, rng.uniform(size=K))  # pos, neg, e1, e0: enough for Hosmer-Lemeshow
    keys = make_keys(x, series, scheme="vdpf", m=2, domain_bits=6)
    calls = []
    rep = send_keys(
        servers.addresses,
        "progress-lib",
        scheme="vdpf",
        domain_bits=6,
        output_bits=32,
        series_meta={s: w for s, (_, w) in series.items()},
        ids=np.arange(K, dtype=np.uint64),
        keys=keys,
        chunk=100,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert rep.accepted == [K, K]
    # the minimum over the servers moves one chunk at a time, so every chunk boundary is reported, once
    assert calls == [(0, K), (100, K), (200, K), (K, K)]

    calls.clear()
    rep = upload(
        servers.addresses,
        "progress-upload",
        x[:40],
        labels=y[:40],
        domain_bits=6,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert rep.accepted == [40, 40]
    done = [d for d, _ in calls]
    assert calls[0] == (0, 40) and calls[-1] == (40, 40) and done == sorted(done) and {t for _, t in calls} == {40}

    q = ECDFQuerier(servers.addresses, timeout=60)
    stages = []
    rel = q.ecdf("progress-lib", 500, progress=lambda d, t: stages.append((d, t)))
    assert rel.n == K and stages == [(i, 4) for i in range(5)]  # m + 2 = 4 stages for two servers
    stages.clear()
    q.roc("progress-lib", 500, progress=lambda d, t: stages.append((d, t)))  # one request for both classes
    assert stages == [(i, 4) for i in range(5)]
    stages.clear()
    hl = q.hosmer_lemeshow("progress-lib", 400, Q=4, progress=lambda d, t: stages.append((d, t)))
    assert hl.epsilon == pytest.approx(400) and hl.cuts.size == 3
    done = [d for d, _ in stages]  # two requests as one run of 2 (m + 2) stages
    assert done == sorted(done) and set(done) == set(range(9)) and {t for _, t in stages} == {8}
    assert stages[0] == (0, 8) and stages[-1] == (8, 8)


def test_progress_goes_to_stderr_and_stdout_stays_one_json_document(servers, csv_file):
    path, _, _ = csv_file
    common = [
        "--servers",
        servers.servers,
        "--epsilon",
        "500",
        "--lower",
        "0",
        "--upper",
        "30",
        "--domain-bits",
        "6",
        "--json",
    ]
    code, out, err = run(
        "ecdf",
        "run",
        "--data",
        str(path),
        "--columns",
        "score",
        "--label",
        "label",
        "--roc",
        "--dataset",
        "progress-cli",
        "--progress",
        *common,
    )
    assert code == 0, err
    d = json.loads(out)  # nothing else on stdout
    assert d["upload"]["accepted"] == [150, 150] and "auc" in d
    assert "upload to the servers" in err and "150/150" in err  # clients whose keys every server has been sent
    assert "release: ECDF and ROC" in err and "8/8" in err  # two requests of m + 2 stages
    code, out, err = run(
        "ecdf",
        "query",
        "--servers",
        servers.servers,
        "--dataset",
        "progress-cli",
        "--epsilon",
        "1",
        "--progress",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["n"] == 150
    assert "release: ECDF" in err and "4/4" in err and "upload" not in err


def test_no_progress_prints_nothing_on_stderr(servers, csv_file):
    path, _, _ = csv_file
    code, out, err = run(
        "ecdf",
        "run",
        "--servers",
        servers.servers,
        "--data",
        str(path),
        "--columns",
        "score",
        "--epsilon",
        "500",
        "--lower",
        "0",
        "--upper",
        "30",
        "--domain-bits",
        "6",
        "--dataset",
        "progress-quiet",
        "--no-progress",
        "--json",
    )
    assert code == 0 and err == "", err
    assert json.loads(out)["n"] == 150
    code, out, err = run(
        "ecdf", "query", "--servers", servers.servers, "--dataset", "progress-quiet", "--epsilon", "1", "--no-progress"
    )
    assert code == 0 and err == "", err
    assert "DP ECDF of dataset 'progress-quiet'" in out


# --------------------------------------------------------------------------- several data owners (issue 22, item 8)


def test_two_data_owners_share_a_dataset_with_string_ids_and_an_upload_rejected_whole_fails(servers, tmp_path):
    """Issue 22: string ids (p01000) were refused, a new dataset refused --id-column, and an --append whose
    clients were all rejected ("duplicate client id 0") exited 0.  Now the first owner chooses string ids, the
    second appends with ids of its own (the one id both hold is rejected, alone), the release counts the union
    exactly, and an append of ids the dataset already holds exits 1, naming --id-column."""
    from pairwise.protocols.ecdf.client import ECDFQuerier, upload

    rng = np.random.default_rng(8)
    a, b = np.round(rng.uniform(0, 30, 40), 2), np.round(rng.uniform(0, 30, 31), 2)
    ids_b = [f"q{i:05d}" for i in range(30)] + ["p00003"]  # p00003 is also one of the first owner's
    (tmp_path / "a.csv").write_text("pid,score\n" + "".join(f"p{i:05d},{v}\n" for i, v in enumerate(a)))
    (tmp_path / "b.csv").write_text("pid,score\n" + "".join(f"{i},{v}\n" for i, v in zip(ids_b, b)))
    common = [
        "--servers",
        servers.servers,
        "--columns",
        "score",
        "--lower",
        "0",
        "--upper",
        "30",
        "--domain-bits",
        "6",
        "--dataset",
        "two-owners",
        "--id-column",
        "pid",
        "--json",
    ]
    code, out, err = run("ecdf", "upload", "--data", str(tmp_path / "a.csv"), *common)
    assert code == 0, err
    assert json.loads(out)["accepted"] == [40, 40]
    code, out, err = run("ecdf", "upload", "--data", str(tmp_path / "b.csv"), "--append", *common)
    assert code == 0, err
    up = json.loads(out)
    assert up["accepted"] == [30, 30] and up["rejected_count"] == [1, 1]
    rel = ECDFQuerier(servers.addresses, timeout=60).ecdf("two-owners", 1e4)
    x = quantize(np.concatenate([a, b[:30]]), 0, 30, 6)
    np.testing.assert_array_equal(rel.cumulative, [(x <= t).sum() for t in range(64)])
    # the first owner's rows again: all taken, exit 1, and the reason names the id of the CSV ('p00000'),
    # not the hash the servers store it as (main printed "duplicate client id 11534626409973623224")
    code, out, err = run("ecdf", "upload", "--data", str(tmp_path / "a.csv"), "--append", *common[:-1])
    assert code == 1, (code, out, err)
    assert "none of the 40 clients was accepted" in err and "duplicate client id 'p00000'" in err, err

    upload(
        servers.addresses,
        "numbered",
        quantize(a, 0, 30, 6),
        domain_bits=6,
        meta={"column": "score", "range": [0.0, 30.0]},
    )  # ids 0..39
    code, out, err = run(
        "ecdf", "upload", "--data", str(tmp_path / "a.csv"), *common[:-5], "--dataset", "numbered", "--append"
    )  # no --id-column: row numbers 0..39, all taken
    assert code == 1, (code, out, err)
    assert "none of the 40 clients was accepted" in err and "--id-column" in err and "release it" not in out


def test_servers_refuse_uploads_they_cannot_check_unless_started_to_accept_them(csv_file):
    """Issue 22, item 2: two servers started without --accept-unverified take only vdpf keys, which they check
    per client; a pointwise upload (unchecked shares) is refused whole, with the flag named, and nothing is kept."""
    path, _, _ = csv_file
    with ServerProcesses(2, budget="100", timeout=30) as sp:
        argv = ["--servers", sp.servers, "--data", str(path), "--columns", "score", "--domain-bits", "5"]
        argv += ["--lower", "0", "--upper", "30", "--dataset", "pw-strict", "--json"]
        code, out, err = run("ecdf", "run", *argv, "--epsilon", "1", "--scheme", "pointwise")
        assert code != 0 and "--accept-unverified" in out + err, (code, out, err)
        code, out, err = run("ecdf", "status", "--servers", sp.servers, "--json")
        assert code == 0, err
        assert "pw-strict" not in out
        code, out, err = run("ecdf", "upload", *argv)  # vdpf keys: checked, accepted
        assert code == 0, err
