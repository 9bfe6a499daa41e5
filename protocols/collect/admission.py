"""Admission control of the collect aggregator: refuse connections before TLS when handshakes pile up.

What it does
    The aggregator accepts plain TCP and starts TLS itself
    (``StreamWriter.start_tls``), so it can decide *before* paying for a
    handshake.  :class:`HandshakeGate` bounds the handshakes in flight (TLS,
    admission and the session hello): at most ``max_handshakes`` at once and
    at most ``per_address`` from one source address.  A newcomer that finds
    the gate full takes the place of the oldest handshake of its own
    address, else of the address with the most handshakes in flight, if
    that one is older than ``min_age`` seconds (an honest handshake takes
    milliseconds, so strangers holding idle connections from any number of
    addresses are pushed out by whoever comes next: the policy of the ECDF
    server, :mod:`pairwise.protocols.ecdf.server`).  Only a flood of young
    handshakes makes the newcomer wait outside: it is told busy with
    :func:`tell_busy`, a plaintext TLS ``user_canceled`` alert
    (:data:`pairwise.mpc.tls.BUSY_ALERT`, RFC 8446 Sec. 6.1) instead of a
    ServerHello, which the client reports as
    :class:`pairwise.mpc.errors.PeerBusy` and backs off (the user backs off
    with jitter to tens of seconds, :mod:`pairwise.protocols.collect.user`).

    Why: with 10^4 users arriving at once, an aggregator that started every
    handshake finished them after the users had given up waiting, and spent
    its CPU on abandoned connections (``benchmarks/RESULTS.md``, "The seed
    protocols among real users").  A bounded gate finishes the handshakes it
    starts and refuses the rest for the price of an accept.

Security model
    The busy signal is seven fixed bytes sent before anything is read: it
    carries no data and reveals only that the server is busy.  A stranger
    can make users retry, not keep them out: it holds at most ``per_address``
    slots per address, each for at most ``min_age`` seconds once someone
    else needs it (and the handshake timeout in any case).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

__all__ = ["Admission", "HandshakeGate", "tell_busy"]


@dataclass(frozen=True)
class Admission:
    """The aggregator's admission and pacing parameters (public; :class:`pairwise.protocols.collect.aggregator.Aggregator`).

    ``max_handshakes``/``per_address``/``min_age``: the :class:`HandshakeGate`;
    ``handshake_timeout``: seconds for TLS, admission and hello;
    ``poll_rate``: polls per second the waiting 2PC users of a task are
    spread over (each is told to come back after ``users / poll_rate``
    seconds, within [``min_poll``, ``max_poll``]); ``max_sessions``: 2PC
    sessions handed out and not yet ended, per task (a due session beyond it
    is postponed, both partners are told the new time).
    """

    max_handshakes: int = 64
    per_address: int = 64
    min_age: float = 5.0
    handshake_timeout: float = 30.0
    poll_rate: float = 100.0
    min_poll: float = 1.0
    max_poll: float = 300.0
    max_sessions: int = 256

    def __post_init__(self) -> None:
        for k in ("max_handshakes", "per_address", "max_sessions"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be a positive integer, got {v!r}")
        for k in ("min_age", "handshake_timeout", "poll_rate", "min_poll", "max_poll"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{k} must be a positive number, got {v!r}")
        if self.min_poll > self.max_poll:
            raise ValueError(f"min_poll {self.min_poll!r} is above max_poll {self.max_poll!r}")

    def poll_interval(self, waiting: int) -> float:
        """Seconds until a waiting user's next poll when ``waiting`` users poll the task."""
        return min(self.max_poll, max(self.min_poll, waiting / self.poll_rate))


class _Slot:
    __slots__ = ("address", "since", "transport", "evicted")

    def __init__(self, address: str, transport) -> None:
        self.address, self.since, self.transport, self.evicted = address, time.monotonic(), transport, False


class HandshakeGate:
    """The handshakes in flight (see the module docstring); :meth:`enter` before TLS, :meth:`leave` after."""

    def __init__(self, admission: Admission) -> None:
        self.limit, self.per_address, self.min_age = (
            admission.max_handshakes,
            admission.per_address,
            admission.min_age,
        )
        self.slots: dict[int, _Slot] = {}
        self.by_address: dict[str, list[_Slot]] = {}
        self.refused = self.evicted = 0

    def __len__(self) -> int:
        return len(self.slots)

    def enter(self, address: str, transport) -> _Slot | None:
        """A slot for a new connection from ``address``, or None (tell it busy)."""
        mine = self.by_address.get(address, [])
        victim = None
        if len(mine) >= self.per_address:
            victim = mine[0]
        elif len(self.slots) >= self.limit:
            crowd = max(self.by_address.values(), key=len)
            victim = crowd[0]
        if victim is not None:
            if time.monotonic() - victim.since < self.min_age:
                self.refused += 1
                return None
            self._evict(victim)
        slot = _Slot(address, transport)
        self.slots[id(slot)] = slot
        self.by_address.setdefault(address, []).append(slot)
        return slot

    def _evict(self, slot: _Slot) -> None:
        self.evicted += 1
        slot.evicted = True
        self.leave(slot)
        try:
            slot.transport.abort()
        except (OSError, RuntimeError, AttributeError):
            pass

    def leave(self, slot: _Slot) -> None:
        if self.slots.pop(id(slot), None) is None:
            return
        mine = self.by_address.get(slot.address)
        if mine is not None:
            mine.remove(slot)
            if not mine:
                del self.by_address[slot.address]


async def tell_busy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, linger: float = 2.0) -> None:
    """Send :data:`~pairwise.mpc.tls.BUSY_ALERT` instead of a handshake, half-close, and close once the client
    closed (within ``linger`` seconds): reading its ClientHello first means the close sends no reset that could
    destroy the alert."""
    from pairwise.mpc.tls import BUSY_ALERT

    try:
        writer.write(BUSY_ALERT)
        if writer.can_write_eof():
            writer.write_eof()
        end = time.monotonic() + linger
        while (left := end - time.monotonic()) > 0:
            if not await asyncio.wait_for(reader.read(4096), left):
                break
    except (TimeoutError, ConnectionError, OSError, RuntimeError):
        pass
    finally:
        writer.close()
