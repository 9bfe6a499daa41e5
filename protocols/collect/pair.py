"""One user's side of one 2PC pair through the aggregator: TLS to the partner inside the relay, then Yao.

What it does
    :func:`run_pair` is what a user runs for each pair the aggregator
    assigned it ([BBGK20, Sec. 5]: each pair releases one noisy kernel
    value computed in a garbled circuit with in-circuit noise); the user
    client (:mod:`pairwise.protocols.collect.user`) calls it per session:

    1. the pair channel: :func:`tls_pair_channel` is the ``tls`` kind of
       :mod:`pairwise.protocols.collect.pairchannel`, a
       :class:`pairwise.mpc.channel.TLSTunnel` over the byte stream the
       aggregator relays to the partner: mutual TLS 1.3 (the evaluator as TLS
       server), each side pinning the partner certificate name the
       aggregator announced and requiring the ``user`` role;
    2. :class:`pairwise.mpc.twopc.GarblerSession` or
       :class:`~pairwise.mpc.twopc.EvaluatorSession` on it, bound to the pair
       (session id ``pairwise-collect/TASK/PAIR``) and to the circuit (its
       digest in the hello), then one execution of the noisy kernel with
       each party's own random noise bits (``random=("rx", "ry")``, drawn
       inside the runtime from the OS CSPRNG); only the evaluator learns the
       output;
    3. :meth:`TLSTunnel.finish`: both confirm a clean end, so a tampering
       relay makes both fail, and the evaluator reports the value only then.

    :class:`PairCosts` is the CPU time (``time.thread_time`` of the calling
    thread) and the wall time of each phase: the pair channel (the TLS
    handshake), session setup (the hello and the 128 base OTs of IKNP), the
    execution (OT extension, garbling or evaluation), the close; ``wait`` =
    wall - CPU is time spent waiting on the partner through the relay.
    ``wire`` counts the bytes the relay forwarded for this pair (ciphertext).

Security model
    Semi-honest users (as the paper); the relay is untrusted and sees only
    TLS records (:mod:`pairwise.mpc.channel.tunnel`).  Every wait has
    ``timeout``; a failure of any phase raises a
    :class:`pairwise.mpc.errors.ChannelError` and no output is returned.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from pairwise.circuits.ir import Circuit
from pairwise.mpc.channel import Channel, TLSTunnel
from pairwise.mpc.tls import TLSConfig
from pairwise.mpc.twopc import EvaluatorSession, GarblerSession, circuit_digest, fresh_cot

__all__ = ["PairCosts", "run_pair", "tls_pair_channel", "ROLES", "session_id"]

ROLES = ("garbler", "evaluator")


@dataclass
class PairCosts:
    """CPU and wall seconds per phase of one pair on one user's side, and the bytes on the wire."""

    tls_cpu: float = 0.0
    tls_wall: float = 0.0
    setup_cpu: float = 0.0  # hello + 128 base OTs (IKNP setup)
    setup_wall: float = 0.0
    run_cpu: float = 0.0  # OT extension + garbling / evaluation
    run_wall: float = 0.0
    finish_cpu: float = 0.0
    finish_wall: float = 0.0
    wire_sent: int = 0
    wire_received: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def cpu(self) -> float:
        return self.tls_cpu + self.setup_cpu + self.run_cpu + self.finish_cpu

    @property
    def wall(self) -> float:
        return self.tls_wall + self.setup_wall + self.run_wall + self.finish_wall

    @property
    def wait(self) -> float:
        """Seconds this user waited for the partner (through the relay): wall - CPU."""
        return max(0.0, self.wall - self.cpu)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(cpu=self.cpu, wall=self.wall, wait=self.wait)
        return d


class _Phase:
    def __init__(self, costs: PairCosts, name: str) -> None:
        self.costs, self.name = costs, name

    def __enter__(self) -> None:
        self.c0, self.w0 = time.thread_time(), time.perf_counter()

    def __exit__(self, *exc) -> None:
        setattr(self.costs, f"{self.name}_cpu", getattr(self.costs, f"{self.name}_cpu") + time.thread_time() - self.c0)
        setattr(
            self.costs, f"{self.name}_wall", getattr(self.costs, f"{self.name}_wall") + time.perf_counter() - self.w0
        )


def session_id(task_id: str, pair_id: str | int) -> bytes:
    """The Yao session id of a pair: both users bind their session to the task and the pair."""
    return f"pairwise-collect/{task_id}/{pair_id}".encode()


def tls_pair_channel(
    conn: Channel, *, role: str, partner: str, tls: TLSConfig | None = None, timeout: float = 120.0
) -> TLSTunnel:
    """The ``tls`` pair channel (:mod:`pairwise.protocols.collect.pairchannel`): TLS 1.3 to the partner inside the relay.

    ``conn`` is the user's connection to the aggregator after the relay
    reply; the evaluator plays the TLS server, the garbler the client; the
    partner must hold a ``user`` certificate named ``partner`` (the name the
    aggregator announced).
    """
    if tls is None:
        from .wire import CollectError

        raise CollectError(
            "the tls pair channel needs this user's certificate (--tls DIR --name NAME); a task "
            "among users without certificates (plaintext loopback) uses --pair-channel plain"
        )
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    return TLSTunnel(conn, tls, server=(role == "evaluator"), peer_name=partner, peer_roles=("user",), timeout=timeout)


def run_pair(
    open_channel,
    *,
    role: str,
    task_id: str,
    pair_id: str | int,
    circuit: Circuit,
    value: int,
    timeout: float,
    compiled: bool = False,
) -> tuple[int | None, PairCosts]:
    """Run this user's side of one pair; returns (the noisy output for the evaluator, None for the garbler; costs).

    ``open_channel()`` returns the pair's channel (e.g. :func:`tls_pair_channel`
    over the relayed connection); its cost is the ``tls`` phase.  ``value``:
    this user's kernel input as the circuit's input group expects it (``x``
    for the garbler, ``y`` for the evaluator; e.g.
    :func:`pairwise.circuits.kernels.pack_pair` for kendall), already clamped
    and quantized to the task's public domain.  If the channel has a
    ``finish`` (a :class:`TLSTunnel`), it runs before the output is returned.
    ``compiled``: use the numba path (worth it only for a process that runs
    hundreds of executions; a pair is one, so the default runs the numpy
    program, as ``pairwise 2pc`` does).
    """
    from pairwise.mpc.garble import jit

    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    if compiled:
        return _run_pair(open_channel, role, task_id, pair_id, circuit, value, timeout)
    with jit.disabled():
        return _run_pair(open_channel, role, task_id, pair_id, circuit, value, timeout)


def _run_pair(open_channel, role, task_id, pair_id, circuit, value, timeout):
    garbler = role == "garbler"
    costs = PairCosts()
    ch = None
    try:
        with _Phase(costs, "tls"):
            ch = open_channel()
        sid = session_id(task_id, pair_id)
        digest = circuit_digest(circuit)
        with _Phase(costs, "setup"):
            # one base OT per evaluator input bit for circuits this small, as a fresh ``pairwise 2pc`` session
            s = (GarblerSession if garbler else EvaluatorSession)(ch, sid, extra=digest, cot=fresh_cot(circuit))
        with _Phase(costs, "run"):
            res = s.run(circuit, {"x" if garbler else "y": int(value)}, output="evaluator", random=("rx", "ry"))
        finish = getattr(ch, "finish", None)
        if finish is not None:
            with _Phase(costs, "finish"):
                finish(timeout)
    except BaseException:
        if ch is not None:
            ch.close()
        raise
    w = ch.wire_stats() if hasattr(ch, "wire_stats") else ch.stats()
    costs.wire_sent, costs.wire_received = w["bytes_sent"], w["bytes_received"]
    out = None if garbler else int(res.outputs[0])
    return out, costs
