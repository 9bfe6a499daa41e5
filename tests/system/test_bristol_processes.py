"""circuits.bristol in a child process capped at 1 GiB of address space: hostile headers, a clear error, bounded memory."""

from __future__ import annotations

import os

import pytest

from pairwise.circuits.bristol import parse_bristol_fashion, parse_bristol_old

HOSTILE = [
    # (text, parser): headers whose wire count the file cannot fill (issue 12: 14.7 GB, then MemoryError)
    ("1 300000000\n2 1 1\n1 1\n\n2 1 0 1 299999999 AND\n", parse_bristol_fashion),
    ("1 4000000000\n2 1 1\n1 1\n\n2 1 0 1 3999999999 AND\n", parse_bristol_fashion),
    ("4000000000 4000000002\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n", parse_bristol_fashion),
    ("1 300000000\n1 1 1\n\n2 1 0 1 299999999 AND\n", parse_bristol_old),
]


@pytest.mark.parametrize("text, parser", HOSTILE, ids=["3e8-wires", "4e9-wires", "4e9-gates", "old-3e8-wires"])
def test_hostile_header_is_refused_in_bounded_memory(text, parser):
    """A child process capped at 1 GiB of address space parses the file: a clear error, no MemoryError."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        f"""
        import resource, sys
        from pairwise.circuits.bristol import BristolFormatError, {parser.__name__} as parse
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        try:
            parse(sys.stdin.read())
        except BristolFormatError as exc:
            print(exc)
        """
    )
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert ("announces" in r.stdout and "wires" in r.stdout) or "truncated" in r.stdout, r.stdout
