"""One party of the two-process Yao benchmark (benchmarks/twoparty.py starts two of these).

Usage (by twoparty.py, not by hand)::

    python benchmarks/_twoparty_worker.py ROLE PORT CIRCUIT BITS SEED FIRST_REPS EXECUTIONS SIMD COTS
        [--profile FILE] [--buffered] [--tls DIR] [--frame-target N] [--min-frame N] [--split K]
        [--ot-batch session|cli|N]

ROLE is ``garbler`` (listens) or ``evaluator`` (connects).  The party runs, in
order, over loopback TCP with the real runtime (mpc.twopc):

1. FIRST_REPS fresh sessions (new connection each), each: handshake, base OTs
   and one execution with the command line's COT source and batch size (base OTs
   per COT for at most 128 evaluator bits, else IKNP); then the same with IKNP and
   the session's default (``ot_batch=None``: a first IKNP batch of 1024 COTs that
   grows with use);
2. one session with one warm-up execution and then EXECUTIONS executions of
   batch 1 (the amortized case), timed as a whole and one by one; its COT
   batches are the session's own (``ot_batch=None``, growing from 1024 to
   65536 COTs, as a long-running party runs), or with ``--ot-batch cli`` the
   CLI's fixed batch sized to the evaluator's input (1024 for AES-128), or N;
3. in the same session, one execution of SIMD instances (batch = SIMD);
4. a COT-only session: COTSender.send_random / COTReceiver.recv_random of COTS
   correlated OTs in the default batches (the correlated-OT rate).

Before any timer the worker loads the compiled loops and builds the circuit's schedule (one local garbling).
Inputs are derived from SEED on both sides (benchmark data, not secrets; the
labels, Delta and OT secrets still come from os.urandom inside the runtime),
so the evaluator can check the last outputs against the plaintext circuit.
Prints one JSON object on stdout.  With ``--profile FILE`` the amortized loop
of step 2 runs under cProfile (CPU-time clock) and the stats are dumped to FILE.  With
``--buffered`` both channels are ``TCPChannel(buffered=True)`` (small frames
are coalesced into one write).  With ``--tls DIR`` every connection is mutual
TLS 1.3 with the certificates ``garbler`` and ``evaluator`` of DIR, each side
pinning the other's name; the evaluator's connect time (TCP + TLS handshake +
admission) is reported as ``first.connect_seconds`` (plaintext: TCP only).  ``--frame-target N`` /
``--min-frame N`` / ``--split K`` set mpc.twopc.wire.FRAME_TARGET / MIN_FRAME / SPLIT (experiments on the
garbler's frames).

Security model: none of its own; it only drives mpc.twopc (semi-honest Yao).
"""

from __future__ import annotations

import cProfile
import json
import statistics
import sys
import time

import numpy as np

from pairwise.circuits.catalog import resolve_circuit
from pairwise.circuits.ir import EVALUATOR, GARBLER, Circuit
from pairwise.commands.twopc import _cot_source, _ot_batch
from pairwise.mpc import jit, twopc
from pairwise.mpc.aes import random_blocks
from pairwise.mpc.channel import TCPChannel, TCPListener, handshake
from pairwise.mpc.garble import garble_and_evaluate
from pairwise.mpc.iknp import DEFAULT_BATCH, COTReceiver, COTSender
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest

TIMEOUT = 120.0


def inputs_for(circuit: Circuit, party, seed: int, batch: int, salt: int):
    """Deterministic inputs of ``party`` (one value per instance per group) from the shared seed."""
    rng = np.random.default_rng([seed, salt, 0 if party == GARBLER else 1])
    out = []
    for g in circuit.groups_of(party):
        lo, hi = (-(1 << (g.width - 1)), (1 << (g.width - 1)) - 1) if g.signed else (0, (1 << g.width) - 1)
        vals = [lo + int.from_bytes(rng.bytes(g.width // 8 + 1), "little") % (hi - lo + 1) for _ in range(batch)]
        out.append(vals)
    return out


def both_inputs(circuit: Circuit, seed: int, batch: int, salt: int):
    return inputs_for(circuit, GARBLER, seed, batch, salt), inputs_for(circuit, EVALUATOR, seed, batch, salt)


BUFFERED = False  # set by --buffered: TCPChannel(buffered=True) coalesces small frames until a flush or receive
TLS = None  # set by --tls DIR: this party's TLSConfig


def connect(role: str, listener: TCPListener | None, port: int) -> TCPChannel:
    if role == "garbler":
        return listener.accept(TIMEOUT, buffered=BUFFERED, peer_names="evaluator" if TLS else None)
    return TCPChannel.connect(
        "127.0.0.1",
        port,
        deadline=TIMEOUT,
        timeout=TIMEOUT,
        buffered=BUFFERED,
        tls=TLS,
        peer_names="garbler" if TLS else None,
    )


def main(argv: list[str]) -> int:
    role, port, spec, bits, seed, first_reps, executions, simd, cots = argv[:9]
    global BUFFERED, TLS
    profile = argv[argv.index("--profile") + 1] if "--profile" in argv else None
    BUFFERED = "--buffered" in argv
    if "--tls" in argv:
        from pairwise.mpc.tls import TLSConfig

        TLS = TLSConfig(argv[argv.index("--tls") + 1], role)
    for flag, name in (("--frame-target", "FRAME_TARGET"), ("--min-frame", "MIN_FRAME"), ("--split", "SPLIT")):
        if flag in argv:  # experiments on the garbler's frames (mpc.twopc.wire)
            setattr(twopc.wire, name, int(argv[argv.index(flag) + 1]))
    port, bits, seed = int(port), int(bits), int(seed)
    ob = argv[argv.index("--ot-batch") + 1] if "--ot-batch" in argv else "session"
    amortized_ot_batch = (
        None if ob == "session" else _ot_batch(resolve_circuit(spec, bits, False)) if ob == "cli" else int(ob)
    )
    first_reps, executions, simd, cots = int(first_reps), int(executions), int(simd), int(cots)
    circuit = resolve_circuit(spec, bits, False)
    # load the compiled one-instance loops at process start, as a long-running party would (0.4-0.9 s;
    # mpc.jit), so no timed execution pays it; recorded so the report can say which path ran
    t = time.perf_counter()
    jit_ready = jit.warm_up()
    jit_seconds = time.perf_counter() - t
    # the circuit's level schedule and engine program, built once per circuit and process (as EMP's driver
    # parses its circuit before its timers, and as a long-running party would): one local garbling
    garble_and_evaluate(circuit, [np.zeros((1, g.width), bool) for g in circuit.inputs])
    party = GARBLER if role == "garbler" else EVALUATOR
    Session = GarblerSession if role == "garbler" else EvaluatorSession
    listener = TCPListener("127.0.0.1", port, tls=TLS) if role == "garbler" else None
    digest = circuit_digest(circuit)
    result: dict = {
        "role": role,
        "circuit": circuit.name,
        "and_gates": circuit.n_and,
        "buffered": BUFFERED,
        "tls": TLS is not None,
        "jit": jit_ready,
        "jit_warm_up_seconds": jit_seconds,
    }

    def mine(batch: int, salt: int, scalar: bool = False) -> dict:
        """This party's inputs as {group: value} (scalar) or {group: [values]}."""
        vals = inputs_for(circuit, party, seed, batch, salt)
        return {g.name: (v[0] if scalar else v) for g, v in zip(circuit.groups_of(party), vals)}

    # 1. first execution of a fresh session: handshake + base OTs + one execution
    for label, ot_batch, cot in (
        ("first", _ot_batch(circuit), _cot_source(circuit)),
        ("first_default_ot_batch", None, "iknp"),
    ):
        rows = []
        for rep in range(first_reps):
            tc = time.perf_counter()
            ch = connect(role, listener, port)
            c0 = time.process_time()
            t0 = time.perf_counter()
            s = Session(ch, ot_batch=ot_batch, extra=digest, cot=cot)
            t1 = time.perf_counter()
            r = s.run(circuit, mine(1, rep, scalar=True))
            t2 = time.perf_counter()
            rows.append(
                (t2 - t0, t1 - t0, ch.bytes_sent, ch.bytes_received, r.bytes_sent, time.process_time() - c0, t0 - tc)
            )
            ch.close()
        result[label] = {
            "ot_batch": ot_batch,
            "cot": cot,
            "seconds": statistics.median(x[0] for x in rows),
            "setup_seconds": statistics.median(x[1] for x in rows),
            "cpu_seconds": statistics.median(x[5] for x in rows),
            "bytes_sent": rows[-1][2],
            "bytes_received": rows[-1][3],
            "setup_bytes_sent": rows[-1][2] - rows[-1][4],
            "connect_seconds": statistics.median(x[6] for x in rows),  # evaluator: TCP (+ TLS) connect
        }

    # 2. amortized: many executions of batch 1 in one session
    ch = connect(role, listener, port)
    s = Session(ch, ot_batch=amortized_ot_batch, extra=digest)
    s.run(circuit, mine(1, 10_000, scalar=True))  # warm-up: first IKNP batch, plan caches
    ins = [mine(1, 20_000 + i, scalar=True) for i in range(executions)]
    b0, r0, m0, n0 = ch.bytes_sent, ch.bytes_received, ch.messages_sent, ch.messages_received
    per = []
    prof = cProfile.Profile(time.process_time) if profile else None  # CPU time: waiting for the peer is not counted
    c0 = time.process_time()
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    for x in ins:
        per.append(s.run(circuit, x).seconds)
    if prof:
        prof.disable()
        prof.dump_stats(profile)
    total = time.perf_counter() - t0
    cpu = time.process_time() - c0
    last = s.run(circuit, mine(1, 30_000, scalar=True))
    result["amortized"] = {
        "executions": executions,
        "seconds_per_execution": total / executions,
        "cpu_seconds_per_execution": cpu / executions,
        "median_execution_seconds": statistics.median(per),
        "bytes_sent_per_execution": (ch.bytes_sent - b0 - last.bytes_sent) / executions,
        "bytes_received_per_execution": (ch.bytes_received - r0 - last.bytes_received) / executions,
        "frames_sent_per_execution": (ch.messages_sent - m0 - last.messages_sent) / executions,
        "frames_received_per_execution": (ch.messages_received - n0 - last.messages_received) / executions,
        "last_bytes_sent": last.bytes_sent,
        "last_bytes_received": last.bytes_received,
    }
    if role == "evaluator":
        g_in, e_in = both_inputs(circuit, seed, 1, 30_000)
        want = circuit.evaluate(*[v[0] for v in _merge(circuit, g_in, e_in)])
        result["amortized"]["check"] = [int(v) for v in last.outputs] == [int(v) for v in want]

    # 3. one SIMD execution of `simd` instances in the same session
    t0 = time.perf_counter()
    r = s.run(circuit, mine(simd, 40_000))
    result["simd"] = {
        "batch": simd,
        "seconds": time.perf_counter() - t0,
        "bytes_sent": r.bytes_sent,
        "bytes_received": r.bytes_received,
    }
    if role == "evaluator":
        g_in, e_in = both_inputs(circuit, seed, simd, 40_000)
        want = circuit.evaluate(*_merge(circuit, g_in, e_in))
        result["simd"]["check"] = all([int(v) for v in a] == [int(v) for v in b] for a, b in zip(r.outputs, want))
    ch.close()

    # 4. correlated-OT rate over TCP
    ch = connect(role, listener, port)
    hs = handshake(ch, role, "bench-twoparty-cot", peer_role="evaluator" if role == "garbler" else "garbler")
    if role == "garbler":
        delta = random_blocks(1)[0]
        delta[0] |= np.uint64(1)
        cot = COTSender(ch, delta, hs.run_id)
        cot.setup()
        ch.send(b"go")
        t0 = time.perf_counter()
        cot.send_random(cots)
        ch.recv()  # the receiver is done too
        dt = time.perf_counter() - t0
    else:
        cot = COTReceiver(ch, hs.run_id)
        cot.setup()
        ch.recv()
        t0 = time.perf_counter()
        cot.recv_random(cots)
        ch.send(b"done")
        dt = time.perf_counter() - t0
    result["cot"] = {
        "n": cots,
        "seconds": dt,
        "per_second": cots / dt,
        "batch": DEFAULT_BATCH,
        "bytes_received": ch.bytes_received,
        "bytes_sent": ch.bytes_sent,
    }
    ch.close()
    if listener:
        listener.close()
    print(json.dumps(result), flush=True)
    return 0


def _merge(circuit: Circuit, g_in, e_in):
    """Both parties' input lists in the circuit's group order."""
    gi, ei = iter(g_in), iter(e_in)
    return [next(gi) if g.party == GARBLER else next(ei) for g in circuit.inputs]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
