"""A worker process hosting users of the 2PC U-statistic protocol (network mode).

What it does
    Run as ``python -m pairwise.protocols.ustat.worker [--tls DIR --name NAME]``;
    reads one JSON job on stdin (the worker index, the ``noisy_kernel``
    parameters, and its sessions: id, role, port, peer name and the hosted
    users' inputs) and runs, for each session, one party of a real Yao
    session over TCP on loopback: the session's pairs are one SIMD execution
    of the kernel + noise circuit.  Each party's noise bits are drawn by its
    own side of the runtime (os.urandom for the garbler, random COT choice
    bits for the evaluator), so no other process knows them.  The evaluator
    side learns the noisy kernel values and the worker prints them as one
    JSON line, keyed by session and role.  The job and output formats:
    ``docs/ustat.md``, "Worker processes".

Transport
    With ``--tls DIR --name NAME`` every session runs in mutual TLS 1.3
    (:mod:`pairwise.mpc.tls`), and each side requires the other's certificate
    to carry the session's ``peer`` name, so a process that is not the
    expected worker can neither feed nor read a session.  A garbler rejects
    stray connections and keeps waiting for its evaluator
    (:meth:`pairwise.mpc.channel.TCPListener.accept_first`).  Without
    ``--tls`` sessions are plaintext on loopback.  The worker exits when its
    parent dies (:mod:`pairwise.protocols.processes`) and on SIGTERM/SIGINT.

Security model
    Semi-honest users; a worker plays the users it hosts and learns only
    their values, the noisy outputs of the pairs where they evaluate, and
    nothing about the other party's value or noise (Yao + IKNP).
"""

from __future__ import annotations

import json
import sys
import threading
from fractions import Fraction


def _build(params: dict):
    from pairwise.circuits.noise import noisy_kernel, noisy_spec_kernel

    if params.get("kernel"):  # a declared kernel, imported by its module:function path (public)
        from pairwise.circuits.kernel_spec import KernelRangeError, load_kernel

        nc = noisy_spec_kernel(
            load_kernel(params["kernel"]),
            params["bits"],
            params["span"],
            epsilon=Fraction(params["epsilon_num"], params["epsilon_den"]),
            mechanism=params["mechanism"],
            delta=Fraction(params["delta_num"], params["delta_den"]),
        )
        # the driver checked its declaration against one circuit: the worker must run that one
        if nc.circuit.content_hash != params.get("circuit_hash"):
            raise KernelRangeError(
                f"kernel {params['kernel']} builds a different circuit in this worker than the one the driver "
                "checked (another module on the path, or the module changed)"
            )
        return nc
    return noisy_kernel(
        params["statistic"],
        params["bits"],
        False,
        epsilon=Fraction(params["epsilon_num"], params["epsilon_den"]),
        sensitivity=params["sensitivity"],
        mechanism=params["mechanism"],
        delta=Fraction(params["delta_num"], params["delta_den"]),
    )


def run_session(
    nc, sess: dict, timeout: float, results: dict, errors: list, tls=None, connect_timeout: float | None = None
) -> None:
    from pairwise.mpc.channel import TCPChannel, TCPListener
    from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest

    sid = sess["id"]
    circuit = nc.circuit
    values = [int(v) for v in sess["inputs"]]
    peer = sess.get("peer") if tls is not None else None
    session_args = {"session_id": f"ustat-{sid}", "extra": circuit_digest(circuit)}
    try:
        if sess["role"] == "garbler":
            with TCPListener("127.0.0.1", sess["port"], tls=tls) as lst:
                ch, s = lst.accept_first(
                    timeout,
                    lambda c: GarblerSession(c, **session_args),
                    peer_names=peer,
                    on_reject=lambda msg: print(f"worker: {msg}", file=sys.stderr, flush=True),
                )
            try:
                s.run(circuit, {"x": values}, output="evaluator", random=("rx", "ry"))
                st = ch.stats()
            finally:
                ch.close()
            results[f"{sid}:garbler"] = {"bytes_sent": st["bytes_sent"], "bytes_received": st["bytes_received"]}
        else:
            ch = TCPChannel.connect(
                "127.0.0.1",
                sess["port"],
                timeout=timeout,
                tls=tls,
                peer_names=peer,
                deadline=timeout if connect_timeout is None else connect_timeout,
            )
            try:
                s = EvaluatorSession(ch, **session_args)
                res = s.run(circuit, {"y": values}, output="evaluator", random=("rx", "ry"))
                st = ch.stats()
            finally:
                ch.close()
            results[f"{sid}:evaluator"] = {
                "outputs": [int(v) for v in res.outputs[0]],
                "bytes_sent": st["bytes_sent"],
                "bytes_received": st["bytes_received"],
            }
    except BaseException as exc:  # reported to the aggregator
        errors.append(f"session {sid} ({sess['role']}): {type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    import argparse

    from pairwise.protocols.processes import bind_to_parent, exit_on_sigterm
    from pairwise.protocols.transport import add_transport_args, tls_from_args

    bind_to_parent()
    exit_on_sigterm()
    ap = argparse.ArgumentParser(
        prog="python -m pairwise.protocols.ustat.worker",
        description="one worker of `pairwise ustat --mode network` (job on stdin)",
    )
    add_transport_args(ap)
    args = ap.parse_args(argv)
    try:
        tls = tls_from_args(args)
        job = json.loads(sys.stdin.read())
        nc = _build(job["params"])
        timeout = float(job.get("timeout", 60))
        connect_timeout = float(job.get("connect_timeout", timeout))
        results: dict = {}
        errors: list = []
        threads = [
            threading.Thread(
                target=run_session, args=(nc, s, timeout, results, errors, tls, connect_timeout), daemon=True
            )
            for s in job["sessions"]
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout * 4)
    except KeyboardInterrupt:  # SIGINT, or SIGTERM (also sent when the parent dies)
        return 143
    except ValueError as exc:  # bad credentials or job: reported like a session error
        print(json.dumps({"worker": None, "sessions": {}, "errors": [f"{type(exc).__name__}: {exc}"]}))
        return 1
    if any(t.is_alive() for t in threads):
        errors.append("a session did not finish in time")
    print(json.dumps({"worker": job["worker"], "sessions": results, "errors": errors}))
    sys.stdout.flush()
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
