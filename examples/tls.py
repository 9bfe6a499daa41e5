"""Two parties in mutual TLS 1.3, with certificates from ``pairwise certs create``.

Any connection that leaves loopback must be authenticated and encrypted: the
parties hold certificates from one CA, each checks the other's certificate and
name (``peer_names``), and the Yao session runs inside TLS.  Here: a fresh CA
in a temporary directory (as ``pairwise certs create --dir DIR --name NAME
--role client`` makes it), then the gini kernel |x - y| on 32-bit values
between two processes.

Run it:

    python examples/tls.py

With the command line instead (certificates made once, then two terminals):

    pairwise certs create --dir certs --name alice --role client
    pairwise certs create --dir certs --name bob --role client
    pairwise 2pc garbler   --listen 0.0.0.0:9000 --circuit gini --input x=1234 --tls certs --name alice --peer bob
    pairwise 2pc evaluator --connect HOST:9000  --circuit gini --input y=987  --tls certs --name bob --peer alice

(``certs/ca.key`` signs new certificates: keep it away from the parties; each
party needs ``ca.pem`` and its own ``NAME.pem`` / ``NAME.key``.)

Security model: TLS gives the semi-honest Yao session the authentic, private
channel it assumes; a party with a certificate of another name is refused
before any protocol message (``AccessDenied``).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile

import pairwise
from pairwise.mpc.tls import TLSConfig, create_certificate
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest


def garbler(port: int, certs: str) -> None:
    circuit = pairwise.load_circuit("gini", 32)
    tls = TLSConfig(certs, "alice")
    with pairwise.TCPChannel.listen("127.0.0.1", port, timeout=60, tls=tls, peer_names="bob") as ch:
        r = GarblerSession(ch, extra=circuit_digest(circuit)).run(circuit, {"x": 1234})
        print(
            f"garbler alice: |x - y| = {r.outputs[0]}, peer {ch.peer_identity.name!r} "
            f"(certificate role {ch.peer_identity.role!r}), TLS: {ch.secure}"
        )
        assert r.outputs[0] == abs(1234 - 987)


def evaluator(port: int, certs: str) -> None:
    circuit = pairwise.load_circuit("gini", 32)
    tls = TLSConfig(certs, "bob")
    with pairwise.TCPChannel.connect("127.0.0.1", port, deadline=60, timeout=60, tls=tls, peer_names="alice") as ch:
        r = EvaluatorSession(ch, extra=circuit_digest(circuit)).run(circuit, {"y": 987})
        print(f"evaluator bob: |x - y| = {r.outputs[0]}, peer {ch.peer_identity.name!r}, TLS: {ch.secure}")
        assert r.outputs[0] == abs(1234 - 987)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=["garbler", "evaluator"], help="run one role only (default: both)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--certs", help="directory with ca.pem, alice.pem/.key, bob.pem/.key (default: a fresh CA)")
    args = ap.parse_args(argv)
    if args.role:
        (garbler if args.role == "garbler" else evaluator)(args.port, args.certs)
        return 0
    with tempfile.TemporaryDirectory(prefix="pairwise-example-") as certs:
        for name in ("alice", "bob"):
            create_certificate(certs, name, "client", days=1)  # the CA is made with the first one
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        child = subprocess.Popen(
            [sys.executable, __file__, "--role", "evaluator", "--port", str(port), "--certs", certs]
        )
        try:
            garbler(port, certs)
            return child.wait(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()


if __name__ == "__main__":
    sys.exit(main())
