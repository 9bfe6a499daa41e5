"""One party of a fresh two-process 2PC session of a noisy kernel, with per-phase CPU (a benchmark helper).

The code path of ``pairwise 2pc`` (``pairwise/commands/twopc.py``): a TCP
connection in mutual TLS 1.3 (TCPListener / TCPChannel.connect, the
admission step), a Yao session (hello + base OTs), one execution, close;
the numpy program (``jit.disabled()``), as the CLI runs one execution.  The
noisy kernel is ``pairwise.circuits.noise.noisy_kernel`` with the given
epsilon, which ``pairwise 2pc`` cannot build (it takes plain kernels and one
input group per party), hence this helper.  Prints one JSON line: the CPU
(``time.thread_time``) and wall seconds per phase, the process CPU before
``main`` (interpreter and imports) and in total.

    python benchmarks/_fresh_pair.py --role garbler --port P --tls DIR --name A --peer B [--statistic kendall]
"""

from __future__ import annotations

import argparse
import json
import resource
import time


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    startup_cpu = _cpu()
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["garbler", "evaluator"], required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tls", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--peer", required=True)
    p.add_argument("--statistic", default="kendall")
    p.add_argument("--bits", type=int, default=16)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--value", type=int, default=12345)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--spec", help="a ustat-2pc task spec (JSON file): build exactly that task's circuit")
    a = p.parse_args()

    from pairwise.circuits.noise import noisy_kernel
    from pairwise.mpc.channel import TCPChannel, TCPListener
    from pairwise.mpc.garble import jit
    from pairwise.mpc.tls import TLSConfig
    from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest, fresh_cot

    if a.spec:
        import json as _json

        from pairwise.protocols.collect.tasks import protocol_of

        with open(a.spec) as fh:
            nc = protocol_of("ustat-2pc").circuit(_json.load(fh))
    else:
        nc = noisy_kernel(a.statistic, a.bits, False, epsilon=a.epsilon)
    circuit = nc.circuit
    circuit.levels  # noqa: B018 - the cached schedule, off the peer's clock (as pairwise 2pc)
    garbler = a.role == "garbler"
    costs: dict[str, float] = {}

    def phase(name, fn):
        c0, w0 = time.thread_time(), time.perf_counter()
        out = fn()
        costs[f"{name}_cpu"] = time.thread_time() - c0
        costs[f"{name}_wall"] = time.perf_counter() - w0
        return out

    before = _cpu()
    tls = phase("credentials", lambda: TLSConfig(a.tls, a.name))  # a collect user loads its own too
    with jit.disabled():
        if garbler:
            with TCPListener("127.0.0.1", a.port, tls=tls) as lst:
                ch = phase("tls", lambda: lst.accept(a.timeout, peer_names=a.peer))
        else:
            ch = phase(
                "tls",
                lambda: TCPChannel.connect(
                    "127.0.0.1", a.port, deadline=a.timeout, timeout=a.timeout, tls=tls, peer_names=a.peer
                ),
            )
        sid = b"pairwise-collect/bench/fresh"
        s = phase(
            "setup",
            lambda: (GarblerSession if garbler else EvaluatorSession)(
                ch, sid, extra=circuit_digest(circuit), cot=fresh_cot(circuit)
            ),
        )
        res = phase(
            "run", lambda: s.run(circuit, {"x" if garbler else "y": a.value}, output="evaluator", random=("rx", "ry"))
        )
        phase("finish", ch.close)
    st = ch.stats()
    out = {
        "role": a.role,
        **costs,
        "session_cpu": sum(v for k, v in costs.items() if k.endswith("_cpu")),
        "session_process_cpu": _cpu() - before,
        "startup_cpu": startup_cpu,
        "process_cpu": _cpu(),
        "bytes_sent": st["bytes_sent"],
        "bytes_received": st["bytes_received"],
        "output": None if garbler else int(res.outputs[0]),
        "and_gates": circuit.n_and,
        "circuit_hash": circuit.content_hash,
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
