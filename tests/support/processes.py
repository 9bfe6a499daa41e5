"""Child processes for the two-process channel and OT tests: a short script, JSON lines back, bounded waits."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import textwrap

CHILD_TIMEOUT = 20.0  # upper bound on any single wait; tests finish far sooner when the code is right


PREAMBLE = textwrap.dedent(
    """
    import json, os, socket, struct, sys, time
    import numpy as np
    from pairwise.mpc.channel import *
    def say(**kw):
        print(json.dumps(kw), flush=True)
    """
)


def spawn(script: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PREAMBLE + textwrap.dedent(script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_line(proc: subprocess.Popen, timeout: float = CHILD_TIMEOUT) -> dict:
    """Next JSON line from the child's stdout, or fail with its stderr."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            raise AssertionError(f"child printed nothing within {timeout} s")
    finally:
        sel.close()
    line = proc.stdout.readline()
    if not line:
        proc.wait(5)
        raise AssertionError(f"child exited ({proc.returncode}) without output: {proc.stderr.read()}")
    return json.loads(line)


def finish(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    for f in (proc.stdout, proc.stderr):
        if f:
            f.close()
