"""``pairwise 2pc garbler`` against silent connections: the first valid evaluator is served at once.

Issue 22: the garbler handshook waiting connections one at a time, up to 10 s
each, so one silent connection delayed a run by 10 s and four stopped it (its
wait for an evaluator is 30 s).  Here eight silent connections from
127.0.0.2 ... 127.0.0.9 reach the garbler (mutual TLS, a throwaway CA) before
its evaluator does; the run must succeed with the right output.  Both
parties are real processes; every wait is bounded; nothing is timed.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from pairwise.mpc.tls import throwaway_credentials
from pairwise.protocols.transport import transport_argv

CLI = [sys.executable, "-m", "pairwise", "2pc"]
BOUND = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect_when_listening(port: int, source: str) -> socket.socket:
    end = time.monotonic() + BOUND
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def test_silent_connections_do_not_delay_or_stop_the_garbler():
    port = _free_port()
    common = ["--circuit", "gini", "--bits", "16", "--json"]
    with throwaway_credentials([("garbler", "client"), ("evaluator", "client")]) as certs:
        g = subprocess.Popen(
            CLI
            + [
                "garbler",
                "--listen",
                f"127.0.0.1:{port}",
                "--input",
                "1234",
                "--peer",
                "evaluator",
                *transport_argv(certs, "garbler"),
                *common,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        silent = []
        try:
            for k in range(8):  # each would hold the old garbler for 10 s; four of them beat its 30 s wait
                silent.append(_connect_when_listening(port, f"127.0.0.{2 + k}"))
            e = subprocess.run(
                CLI
                + [
                    "evaluator",
                    "--connect",
                    f"127.0.0.1:{port}",
                    "--input",
                    "987",
                    "--peer",
                    "garbler",
                    *transport_argv(certs, "evaluator"),
                    *common,
                ],
                capture_output=True,
                text=True,
                timeout=BOUND,
            )
            gout, gerr = g.communicate(timeout=BOUND)
        finally:
            for s in silent:
                s.close()
            if g.poll() is None:
                g.kill()
                g.wait(timeout=30)
    assert e.returncode == 0, e.stderr
    assert g.returncode == 0, gerr
    gd, ed = json.loads(gout.strip().splitlines()[-1]), json.loads(e.stdout.strip().splitlines()[-1])
    assert gd["outputs"] == ed["outputs"] == [1234 - 987]
    assert ed["peer_name"] == "garbler" and gd["peer_name"] == "evaluator"
