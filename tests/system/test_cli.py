"""The ``pairwise`` command line as a whole: version, help text, usage errors, progress, aliases,
and a clear error before any work for every bad input of issue 14's table.

Each error case runs the real CLI as a subprocess (``python -m pairwise``) and
checks the exit status (2), the message on stderr, and that stdout holds
nothing but the ``--json`` error object.  Waits are bounded generously (a
bound turns a hang into a failure; nothing is timed).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

import pytest

from pairwise.circuits.kernels import kernel_reference
from pairwise.cli import build_parser, main, package_version
from pairwise.commands.options import _Deprecated

CLI = [sys.executable, "-m", "pairwise"]
BOUND = 300.0  # seconds; a correct run of any command here takes a few seconds on an idle machine


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=BOUND)


def _walk(parser, path):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _walk(sub, path + [name])
        elif not isinstance(a, (argparse._HelpAction, _Deprecated)):
            yield " ".join(path), a


# --------------------------------------------------------------------------- version, help


def test_version_comes_from_package_metadata():
    from importlib.metadata import version

    r = run("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"pairwise {version('pairwise-mpc')}" == f"pairwise {package_version()}"


def test_every_option_of_every_command_has_help_text():
    missing = [
        (cmd, a.option_strings or a.dest)
        for cmd, a in _walk(build_parser(), ["pairwise"])
        if not a.help or a.help == argparse.SUPPRESS
    ]
    assert not missing, missing
    commands = {cmd for cmd, _ in _walk(build_parser(), ["pairwise"])}
    assert {
        "pairwise 2pc garbler",
        "pairwise 2pc evaluator",
        "pairwise ecdf status",
        "pairwise demo 2pc",
        "pairwise ustat",
        "pairwise noise sample",
        "pairwise circuit table",
    } <= commands


def test_every_command_offers_json():
    # leaves of the command tree (parsers with a func and no subcommands) other than the servers
    # (``ecdf serve``, ``collect serve``, ``collect shuffler``), whose stdout is always JSON lines
    leaves = {}
    for cmd, a in _walk(build_parser(), ["pairwise"]):
        leaves.setdefault(cmd, set()).update(a.option_strings)
    without = [
        c
        for c, opts in leaves.items()
        if "--json" not in opts
        and c not in ("pairwise", "pairwise ecdf serve", "pairwise collect serve", "pairwise collect shuffler")
    ]
    assert not without, without


def test_usage_error_under_json_is_a_json_object_on_stdout(capsys):
    assert main(["noise", "params", "--epsilon", "0", "--json"]) == 2
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert d["type"] == "UsageError" and "epsilon must lie in" in d["error"]
    assert "usage:" in out.err


# --------------------------------------------------------------------------- one epsilon validator


@pytest.mark.parametrize(
    "value, message",
    [
        ("1e-300", "epsilon must lie in [2^-32, 500]"),
        ("501", "epsilon must lie in [2^-32, 500]"),
        ("inf", "epsilon must be a finite number"),
        ("nan", "epsilon must be a finite number"),
        ("abc", "epsilon must be a number"),
    ],
)
def test_epsilon_has_the_same_limits_in_every_command(capsys, value, message):
    commands = [
        ["ustat", "--statistic", "gini"],
        ["noise", "params"],
        ["noise", "sample", "--count", "1"],
        ["ecdf", "demo"],
        ["demo", "ecdf"],
        ["ecdf", "run", "--servers", "127.0.0.1:1,127.0.0.1:2", "--data", "x.csv", "--columns", "a"],
        ["ldp", "auc"],
        ["ldp", "qmle"],
        ["ldp", "shuffle-histogram"],
        ["ldp", "ustat"],
    ]
    for argv in commands:
        assert main(argv + ["--epsilon", value]) == 2, argv
        err = capsys.readouterr().err
        assert f"argument --epsilon: {message}" in err, (argv, err)


def test_epsilon_limits_are_inclusive_and_gadgets_cap_at_their_own_limit(capsys):
    for value, used in (("500", 64.0), (repr(2.0**-32), 2.0**-32)):
        assert main(["noise", "params", "--epsilon", value, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["epsilon_requested"] == float(value) and used <= d["epsilon"] <= float(value)
    assert main(["noise", "params", "--epsilon", "100"]) == 0
    assert "requested 100; the gadget's largest epsilon is 64" in capsys.readouterr().out


# --------------------------------------------------------------------------- issue 14's error table


def assert_clean_failure(r: subprocess.CompletedProcess, *messages: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    for m in messages:
        assert m in r.stderr, (m, r.stderr)
    assert "Traceback" not in r.stderr


def test_csv_value_of_1e26(tmp_path):
    """A huge value is clamped by its owner into the public domain (and counted, not private); a domain too
    wide for a 64-bit circuit word is refused before anything runs, as is a CSV without a domain."""
    f = tmp_path / "big.csv"
    f.write_text("a,b\n1,2\n1e26,3\n4,5\n")
    for stat, cols, lower, upper in (("gini", "a", "0", "10"), ("kendall", "a,b", "0,0", "10,10")):
        r = run(
            "ustat",
            "--statistic",
            stat,
            "--epsilon",
            "1",
            "--data",
            str(f),
            "--columns",
            cols,
            "--lower",
            lower,
            "--upper",
            upper,
            "--json",
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["clamped"] == 1
    r = run(
        "ustat",
        "--statistic",
        "gini",
        "--epsilon",
        "1",
        "--data",
        str(f),
        "--columns",
        "a",
        "--lower",
        "0",
        "--upper",
        "1e26",
        "--json",
    )
    assert_clean_failure(
        r, "the domain [0, 1e+26] at 0 decimals has 1e+26 grid steps, more than 2^62", "narrow the domain"
    )
    assert json.loads(r.stdout)["type"] == "PrivacyParameterError"
    r = run("ustat", "--statistic", "gini", "--epsilon", "1", "--data", str(f), "--columns", "a")
    assert_clean_failure(r, "--data needs the public domain of its private column(s) a: give --lower L --upper U")


@pytest.mark.slow  # a 2PC run over a domain of 10^18 grid steps
def test_widest_domain_runs_to_the_end(tmp_path):
    """At 10^18 grid steps alpha = exp(-eps/S) rounds to 1 in floating point: the noise variance must not
    divide by zero after the run (it did)."""
    f = tmp_path / "big.csv"
    f.write_text("a\n1\n1e26\n4\n")
    r = run(
        "ustat",
        "--statistic",
        "gini",
        "--epsilon",
        "1",
        "--data",
        str(f),
        "--columns",
        "a",
        "--lower",
        "0",
        "--upper",
        "1e18",
        "--decimals",
        "0",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["clamped"] == 1 and d["bits"] == 64 and math.isfinite(d["noise_variance_per_pair"])


def test_batch_must_be_positive():
    for value in ("0", "-5"):
        r = run("ustat", "--statistic", "gini", "--epsilon", "1", "--batch", value)
        assert_clean_failure(r, f"argument --batch: must be a positive integer (1 or more), got {value}")
        assert r.stdout == ""


def test_pairs_per_user_beyond_n_minus_1_is_refused_up_front():
    r = run("ustat", "--statistic", "gini", "--epsilon", "1", "--pairs-per-user", "100000", "--json")
    assert_clean_failure(r, "pairs per user P = 100000 exceeds n - 1 = 441, the number of other users")
    assert json.loads(r.stdout)["type"] == "UStatError"
    r = run("ustat", "--statistic", "auc", "--epsilon", "1", "--pairs-per-user", "213")
    assert_clean_failure(r, "P = 213 exceeds the 212 distinct partners the smaller class offers")


def test_tiny_epsilon_is_refused_with_the_limits_not_a_fraction():
    r = run("ustat", "--statistic", "gini", "--epsilon", "1e-300")
    assert_clean_failure(r, "argument --epsilon: epsilon must lie in [2^-32, 500] (about [2.3e-10, 500]), got 1e-300")
    assert "Fraction" not in r.stderr


def test_ecdf_demo_infinite_epsilon_is_a_usage_error_not_a_server_failure():
    r = run("ecdf", "demo", "--epsilon", "inf", "--json")
    assert_clean_failure(r, "argument --epsilon: epsilon must be a finite number, got inf")
    assert "startup" not in r.stderr and "ServerUnavailable" not in r.stderr
    assert json.loads(r.stdout)["type"] == "UsageError"


@pytest.mark.slow  # three processes
def test_demo_2pc_small_width_runs_on_its_own_default_inputs():
    """``demo 2pc --bits 8`` failed on its own default input 1234 (the README also runs kendall 8-bit)."""
    r = run("demo", "2pc", "--bits", "8", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    gi, ei = int(d["inputs"]["garbler"]), int(d["inputs"]["evaluator"])
    assert max(gi, ei) < 256
    assert d["garbler"]["outputs"] == d["evaluator"]["outputs"] == [int(kernel_reference("gini", [gi], [ei])[0])]
    assert d["computed"] == "|x - y| on 8-bit unsigned values: x = garbler's input, y = evaluator's input"


OLD_BRISTOL_AND = "1 3\n1 1 1\n\n2 1 0 1 2 AND\n"  # old format: n1 = n2 = 1 input bit, 1 output bit


def test_old_bristol_file_is_refused_with_a_hint_and_converts(tmp_path):
    old = tmp_path / "and_old.txt"
    old.write_text(OLD_BRISTOL_AND)
    r = run("circuit", "stats", str(old))
    assert_clean_failure(r, "this is the old Bristol format (line 2 'n1 n2 nout' = '1 1 1')", "--old-bristol")
    new = tmp_path / "and.txt"
    r = run("circuit", "export", str(old), "--old-bristol", "--format", "bristol", "-o", str(new), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"output": str(new), "format": "bristol", "circuit": "and_old"}
    for a, b in ((1, 1), (1, 0)):  # the converted AND gate, through the command line
        r = run("circuit", "eval", str(new), "--input", str(a), "--input", str(b), "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["outputs"] == [str(a & b)]


def test_old_bristol_files_of_emp_toolkit_are_recognised(bristol_dir):
    from pairwise.circuits.bristol import BristolFormatError
    from pairwise.circuits.catalog import read_circuit_file

    for f in sorted((bristol_dir / "bristol_format").glob("*.txt")):
        with pytest.raises(BristolFormatError, match="old Bristol format"):
            read_circuit_file(f)


# --------------------------------------------------------------------------- progress and deprecated aliases


def test_progress_goes_to_stderr_and_stdout_stays_json():
    r = run("noise", "sample", "--epsilon", "1", "--count", "3000", "--garbled", "--progress", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)  # nothing but the object
    assert sum(d["counts"]) == 3000
    assert "3000/3000" in r.stderr and "garbled samples" in r.stderr
    r = run("noise", "sample", "--epsilon", "1", "--count", "3000", "--garbled", "--json")
    assert r.returncode == 0 and r.stderr == ""  # stderr is not a terminal: no bar by default


def test_ustat_progress_callback_counts_every_pair():
    import numpy as np

    from pairwise.protocols.ustat.driver import run_ustat

    calls = []
    res = run_ustat(
        "gini", np.arange(40.0), epsilon=1, batch=7, lower=0, upper=40, progress=lambda d, t: calls.append((d, t))
    )
    assert calls[0] == (0, res.pairs) and calls[-1] == (res.pairs, res.pairs)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and len(calls) == 1 + -(-res.pairs // 7)


def test_on_a_terminal_the_bar_is_on_by_default_and_its_clock_keeps_moving(monkeypatch):
    """stderr a terminal (a pty): no flag means a bar, redrawn between reports (elapsed time moves on
    through a long step with no report); ``--no-progress`` means none.  The wait for the redraw is
    bounded (a missing redraw fails the test); nothing is timed."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    import time

    from pairwise.commands import options

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    tty = os.fdopen(slave, "w", buffering=1)
    try:
        monkeypatch.setattr(sys, "stderr", tty)
        monkeypatch.setattr(options, "REFRESH_SECONDS", 0.05)
        with options.progress_bar(argparse.Namespace(progress=False), "off") as cb:
            assert cb is None
        seen = b""
        with options.progress_bar(argparse.Namespace(progress=None), "waiting for the servers", unit="stage") as cb:
            assert cb is not None
            cb(0, 4)
            cb(2, 4)  # then nothing more is reported: only the redraw can show 00:01 elapsed
            deadline = time.monotonic() + BOUND
            while b"00:01" not in seen and time.monotonic() < deadline:
                if select.select([master], [], [], 1.0)[0]:
                    seen += os.read(master, 65536)
        assert b"waiting for the servers" in seen and b"2/4" in seen and b"00:01" in seen
    finally:
        monkeypatch.undo()
        tty.close()
        os.close(master)


def test_bench_garble_progress_counts_garble_and_evaluate_steps(capsys):
    from pairwise.circuits.catalog import resolve_circuit
    from pairwise.commands.garble import bench_garble

    calls = []
    r = bench_garble(resolve_circuit("gini", 8, False), 64, repeat=2, progress=lambda d, t: calls.append((d, t)))
    assert r["correct"] and calls == [(i, 4) for i in range(5)]
    assert (
        main(
            [
                "bench",
                "garble",
                "--circuit",
                "gini",
                "--bits",
                "8",
                "--batch",
                "64",
                "--repeat",
                "2",
                "--progress",
                "--json",
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    assert json.loads(out.out)["correct"] is True  # stdout: the one JSON object
    assert "bench garble" in out.err and "4/4" in out.err
    assert (
        main(
            [
                "bench",
                "garble",
                "--circuit",
                "gini",
                "--bits",
                "8",
                "--batch",
                "64",
                "--repeat",
                "1",
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    assert capsys.readouterr().err == ""


def test_deprecated_connect_deadline_still_works_with_a_warning(capsys):
    parser = build_parser()
    args = parser.parse_args(
        ["2pc", "evaluator", "--connect", "h:1", "--circuit", "gini", "--input", "1", "--connect-deadline", "3"]
    )
    assert args.connect_timeout == 3.0
    assert "--connect-deadline is deprecated" in capsys.readouterr().err


def test_old_spellings_keep_working_with_a_warning(capsys):
    """Each deprecated spelling parses to the new option's value and warns on stderr (one release)."""
    parser = build_parser()
    cases = [
        (["ldp", "auc", "--csv", "f.csv", "--score", "s"], {"data": "f.csv", "columns": ["s"]}, ("--csv", "--score")),
        (["ldp", "auc", "--dataset", "fair"], {"builtin": "fair"}, ("--dataset",)),
        (["ldp", "shuffle-histogram", "--column", "c"], {"columns": ["c"]}, ("--column",)),
        (["ldp", "ustat", "--columns", "a", "b"], {"columns": ["a", "b"]}, ("--columns a b",)),
        (["ldp", "qmle", "--covariates", "a", "b"], {"covariates": ["a", "b"]}, ("--covariates a b",)),
        (
            ["ecdf", "run", "--servers", "h:1,h:2", "--epsilon", "1", "--data", "f.csv", "--column", "c"],
            {"columns": ["c"]},
            ("--column",),
        ),
    ]
    for argv, want, old in cases:
        args = parser.parse_args(argv)
        for k, v in want.items():
            assert getattr(args, k) == v, (argv, k)
        err = capsys.readouterr().err
        for o in old:
            assert f"{o} is deprecated" in err, (argv, err)
    args = parser.parse_args(["ldp", "ustat", "--columns", "a,b"])  # the new spelling: no warning
    assert args.columns == ["a", "b"] and capsys.readouterr().err == ""


def test_ldp_without_epsilon_uses_the_old_default_with_a_warning(capsys):
    assert main(["ldp", "ustat", "--kernel", "kendall", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["epsilon"] == 2.0
    assert "ldp ustat without --epsilon is deprecated" in out.err


def test_ecdf_status_has_one_shape_with_and_without_dataset():
    from pairwise.commands.ecdf import status_rows

    info = {"dataset": "d", "clients": 3}
    one = status_rows([{"ok": True, "server_id": 0, "info": info}])
    every = status_rows([{"ok": True, "server_id": 0, "datasets": [info, dict(info, dataset="e")]}])
    assert one[0]["datasets"] == [info] and one[0]["info"] == info
    assert [d["dataset"] for d in every[0]["datasets"]] == ["d", "e"]
    assert set(one[0]) - {"info"} == set(every[0])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--statistic", "gini", "--label", "malignant"], "gini takes no label"),
        (["--statistic", "kendall", "--label", "x"], "kendall takes no label"),
        (["--statistic", "auc", "--label", "mean_radius"], "needs --columns"),  # was ignored: ran on malignant
    ],
)
def test_ustat_refuses_a_label_it_would_ignore(capsys, argv, message):
    assert main(["ustat", *argv, "--epsilon", "1", "--json"]) == 2
    assert message in json.loads(capsys.readouterr().out)["error"]


def test_negative_bounds_in_the_documented_spelling(tmp_path, capsys):
    """`--lower -1,-2` and `--lower -1e1` are values, not option names (argparse alone refused them)."""
    p = tmp_path / "neg.csv"
    p.write_text("a,b\n-3,1\n-1.5,2\n0,4\n2,3\n-2,5\n1,1\n")
    assert (
        main(
            [
                "ustat",
                "--statistic",
                "kendall",
                "--data",
                str(p),
                "--columns",
                "a,b",
                "--lower",
                "-5,-1e1",
                "--upper",
                "5,10",
                "--epsilon",
                "1",
                "--json",
            ]
        )
        == 0
    )
    r = json.loads(capsys.readouterr().out)
    assert [(d["lower"], d["upper"]) for d in r["domain"]] == [(-5.0, 5.0), (-10.0, 10.0)] and r["n"] == 6
    assert (
        main(
            [
                "ustat",
                "--statistic",
                "gini",
                "--data",
                str(p),
                "--columns",
                "a",
                "--lower",
                "-1.5e1",
                "--upper",
                "5",
                "--decimals",
                "1",
                "--epsilon",
                "1",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["n"] == 6


def test_demo_2pc_input_errors_name_the_flag_typed(capsys):
    assert main(["demo", "2pc", "--bits", "8", "--garbler-input", "300"]) == 2
    assert "--garbler-input 300 is out of range" in capsys.readouterr().err


def test_ustat_names_an_unknown_builtin_dataset_first(capsys):
    assert main(["ustat", "--statistic", "gini", "--builtin", "nosuch", "--epsilon", "1", "--json"]) == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert "unknown dataset 'nosuch'" in err and "diabetes" in err


# --------------------------------------------------------------------------- the old module paths (issue 24)

_OLD_PATHS = r"""
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import pairwise.protocols.cli as old_cli
    import pairwise.protocols.commands.ecdf as old_ecdf
    from pairwise.protocols.commands import options as old_options
    from pairwise.protocols.commands.transport import tls_from_args
    from pairwise.protocols.cluster import add_cluster_argument
import pairwise.cli, pairwise.commands.ecdf, pairwise.commands.options, pairwise.protocols.transport
same = [old_cli.main is pairwise.cli.main, old_cli.build_parser is pairwise.cli.build_parser,
        old_cli._join_negative_values is pairwise.cli._join_negative_values,
        old_ecdf is pairwise.commands.ecdf, old_options is pairwise.commands.options,
        tls_from_args is pairwise.protocols.transport.tls_from_args,
        add_cluster_argument is pairwise.commands.options.add_cluster_argument]
print(json.dumps({"same": same, "warnings": [[w.category.__name__, w.filename, str(w.message)] for w in caught]}))
"""


def test_old_cli_module_paths_still_import_with_a_deprecation_warning(tmp_path):
    """``pairwise.protocols.cli``/``.commands`` (before the move to ``pairwise.cli``/``pairwise.commands``)
    are the same objects for one release, and each old path warns once, naming the importing file."""
    script = tmp_path / "old_paths.py"
    script.write_text(_OLD_PATHS)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=BOUND)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["same"] == [True] * 7
    assert [(cat, f) for cat, f, _ in out["warnings"]] == [("DeprecationWarning", str(script))] * 3
    moved = [m.split(";")[0] for _, _, m in out["warnings"]]
    assert moved == [
        "pairwise.protocols.cli moved to pairwise.cli",
        "pairwise.protocols.commands moved to pairwise.commands",
        "pairwise.protocols.cluster.add_cluster_argument moved to pairwise.commands.options.add_cluster_argument",
    ]


def test_python_dash_m_of_the_old_cli_path_still_runs_the_cli():
    r = subprocess.run(
        [sys.executable, "-m", "pairwise.protocols.cli", "circuit", "stats", "gini", "--bits", "8", "--json"],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["and"] == 15  # |x - y| on 8 bits: 2w - 1 AND gates
