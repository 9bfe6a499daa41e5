"""``pairwise bench fss``: JSON keys of the public interface, table output, clear errors.

(No timing is asserted; only that the command runs, checks itself and reports.)
"""

from __future__ import annotations

import json

from pairwise.cli import main
from pairwise.fss import dcf_key_bytes


def test_bench_fss_json(capsys):
    rc = main(["bench", "fss", "--domain-bits", "16", "--keys", "300", "--repeats", "1", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert {"dcf_key_bytes", "keygen_per_s", "eval_per_s"} <= set(res)
    assert res["dcf_key_bytes"] == dcf_key_bytes(16, 32)
    assert res["keys"] == 300 and res["domain_bits"] == 16
    assert res["keygen_per_s"] > 0 and res["eval_per_s"] > 0


def test_bench_fss_table(capsys):
    assert main(["bench", "fss", "--domain-bits", "8", "--output-bits", "8", "--keys", "50", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "key size" in out and f"{dcf_key_bytes(8, 8)} bytes" in out and "evaluation" in out


def test_bench_fss_errors(capsys):
    assert main(["bench", "fss", "--domain-bits", "65", "--json"]) == 2
    captured = capsys.readouterr()
    assert "domain bits n must be in 1..64" in json.loads(captured.out)["error"]
    assert main(["bench", "fss", "--keys", "0"]) == 2
    assert "--keys must be at least 1" in capsys.readouterr().err


def test_bench_fss_progress_counts_the_timed_calls(capsys):
    from pairwise.commands.fss import run_dcf_benchmark

    calls = []
    run_dcf_benchmark(8, 200, 8, repeats=2, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(i, 8) for i in range(9)]  # 4 stages x 2 repeats, reported between the timed calls
    assert main(["bench", "fss", "--domain-bits", "8", "--keys", "200", "--repeats", "1", "--progress", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["keys"] == 200  # stdout: the one JSON object
    assert "bench fss" in out.err and "4/4" in out.err
    assert (
        main(["bench", "fss", "--domain-bits", "8", "--keys", "200", "--repeats", "1", "--no-progress", "--json"]) == 0
    )
    assert capsys.readouterr().err == ""
