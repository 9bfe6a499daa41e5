"""``pairwise 2pc garbler`` with silent connections waiting before its evaluator (issue 22, item 4).

Issue 22 measured 0.8 s for a run with no stranger, 9.2 s with one silent
connection waiting first (the garbler handshook connections one at a time,
up to 10 s each) and no run at all with four (its wait for an evaluator is
30 s).  This starts a real garbler (mutual TLS, a throwaway CA, the gini
circuit on 16 bits), opens K silent TCP connections to it (from 127.0.0.2,
127.0.0.3, ... or all from 127.0.0.1), then runs the evaluator and times
it from its start to the garbler's exit (the evaluator's process start
included).  The cases are interleaved round by round, so each round compares
them under the same machine load.  Prints one JSON line per run.

    .venv/bin/python benchmarks/twopc_strangers.py --rounds 3 --silent 0 1 4
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

from pairwise.mpc.tls import throwaway_credentials
from pairwise.protocols.transport import transport_argv

CLI = [sys.executable, "-m", "pairwise", "2pc"]
COMMON = ["--circuit", "gini", "--bits", "16", "--json"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect(port: int, source: str) -> socket.socket:
    end = time.monotonic() + 60
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.02)


def run(silent: int, certs, same_address: bool) -> dict:
    port = _free_port()
    garbler = subprocess.Popen(
        CLI
        + ["garbler", "--listen", f"127.0.0.1:{port}", "--input", "1234", "--peer", "evaluator"]
        + [*transport_argv(certs, "garbler"), *COMMON],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    socks = []
    try:
        if silent == 0:  # wait until it listens, without leaving a connection behind
            _connect(port, "127.0.0.1").close()
            time.sleep(0.3)
        for k in range(silent):
            socks.append(_connect(port, "127.0.0.1" if same_address else f"127.0.0.{2 + k}"))
        t0 = time.monotonic()
        ev = subprocess.run(
            CLI
            + ["evaluator", "--connect", f"127.0.0.1:{port}", "--input", "987", "--peer", "garbler"]
            + [*transport_argv(certs, "evaluator"), *COMMON],
            capture_output=True,
            text=True,
            timeout=120,
        )
        garbler.communicate(timeout=120)
        seconds = time.monotonic() - t0
    finally:
        for s in socks:
            s.close()
        if garbler.poll() is None:
            garbler.kill()
            garbler.wait()
    ok = ev.returncode == 0 and garbler.returncode == 0
    ok = ok and json.loads(ev.stdout.strip().splitlines()[-1])["outputs"] == [1234 - 987]
    return {"silent": silent, "same_address": same_address, "seconds": round(seconds, 2), "ok": ok}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--silent", type=int, nargs="+", default=[0, 1, 4])
    ap.add_argument("--same-address", action="store_true", help="also K silent connections from 127.0.0.1")
    args = ap.parse_args()
    with throwaway_credentials([("garbler", "client"), ("evaluator", "client")]) as certs:
        for r in range(args.rounds):
            cases = [(k, False) for k in args.silent] + ([(max(args.silent), True)] if args.same_address else [])
            for k, same in cases:
                out = run(k, certs, same)
                print(json.dumps({"round": r, **out, "load": os.getloadavg()}), flush=True)


if __name__ == "__main__":
    main()
