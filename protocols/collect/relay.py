"""The aggregator's relay: it forwards the opaque byte stream of one 2PC session between two users' connections.

What it does
    Users connect only outbound (phones and laptops behind NAT accept no
    connections), so the two users of a pair each open a connection to the
    aggregator and ask it to ``relay`` their session
    (:mod:`pairwise.protocols.collect.aggregator` checks that they are the
    session's two users and that it never ran).  From then on
    :meth:`Relay.splice` copies bytes both ways, unchanged and unparsed:

    * each direction is one pump (read up to 64 KiB, write, wait until the
      other side's socket took it), so a slow reader slows its sender and the
      aggregator never buffers more than a few frames per session;
    * a direction that stays silent for ``idle_timeout`` seconds ends the
      session (both connections are dropped); the end of one side's stream
      ends the other side's after everything before it was delivered; a
      side that cannot be written to any more is gone, and what its partner
      still sends is read and discarded, so the partner reads what the
      departed side said last (the TLS alert of a tampered stream) instead of
      a reset;
    * the bytes of each direction are counted (``RelayStats``), and an
      optional ``tap(session, direction, data)`` sees them as they pass
      (tests use it to check what a relay can see).

    The seam: what runs inside the relayed stream is the users' business.
    Today the two users run their :class:`pairwise.mpc.twopc.GarblerSession` /
    ``EvaluatorSession`` frames over it directly (the ``plain`` pair channel
    of :mod:`pairwise.protocols.collect.pairchannel`); a pair channel that runs
    TLS 1.3 between the two users inside the stream changes nothing here.

Security model
    With the ``plain`` pair channel the aggregator can read the 2PC messages
    (garbled tables, OT messages, the evaluator's masked inputs): it learns
    nothing about the users' values from a semi-honest 2PC transcript it
    does not take part in only if it does not collude with either user, and
    it could tamper undetected.  A TLS pair channel (the partner's
    certificate name pinned) leaves it only ciphertext and byte counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from pairwise.mpc.errors import ChannelError

from ..service.aio import AsyncConnection

__all__ = ["READ_CHUNK", "Relay", "RelayStats"]

#: Bytes read from one side before they are written to the other.
READ_CHUNK = 1 << 16


@dataclass
class RelayStats:
    """What one relayed session moved: bytes from the first connection to the second, and back; why it ended."""

    forward: int = 0
    backward: int = 0
    ended: str = ""

    @property
    def total(self) -> int:
        return self.forward + self.backward


class Relay:
    """Splices pairs of connections (see the module docstring)."""

    def __init__(self, idle_timeout: float, tap: Callable[[str, str, bytes], None] | None = None) -> None:
        self.idle_timeout = float(idle_timeout)
        self.tap = tap

    async def splice(
        self, a: AsyncConnection, b: AsyncConnection, session: str = "", idle_timeout: float | None = None
    ) -> RelayStats:
        """Copy bytes a -> b and b -> a until both directions end; returns the counts."""
        idle = self.idle_timeout if idle_timeout is None else float(idle_timeout)
        stats = RelayStats()

        async def pump(src: AsyncConnection, dst: AsyncConnection, direction: str) -> None:
            dst_gone = False
            try:
                while True:
                    data = await src.read_bytes(READ_CHUNK, idle)
                    if not data:
                        stats.ended = stats.ended or f"{direction}: end of stream"
                        if not dst_gone:
                            dst.write_eof()
                        return
                    if dst_gone:
                        continue  # the receiver left: drain the sender, so it reads what the receiver said last
                    if self.tap is not None:
                        self.tap(session, direction, data)
                    try:
                        dst.write_bytes(data)
                        await dst.drain(idle)
                    except (ChannelError, OSError) as exc:
                        # the other pump delivers what the departed side sent before it left (e.g. the TLS
                        # alert that tells this sender why), then ends its stream; this side ends on its own
                        stats.ended = stats.ended or f"{direction}: {exc}"
                        dst_gone = True
                        continue
                    if direction == "forward":
                        stats.forward += len(data)
                    else:
                        stats.backward += len(data)
            except (ChannelError, OSError) as exc:  # a stalled or broken sender: end the session
                stats.ended = stats.ended or f"{direction}: {exc}"
                a.abort()
                b.abort()

        await asyncio.gather(pump(a, b, "forward"), pump(b, a, "backward"))
        return stats
