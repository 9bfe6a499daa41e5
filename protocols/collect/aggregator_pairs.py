"""The aggregator's side of the 2PC model: control connections, pairing, relays and the end of a running task.

What it does
    :class:`PairOps` is a mixin of :class:`pairwise.protocols.collect.aggregator.Aggregator`
    ([BBGK20, Sec. 5]).  A joining user's connection stays open as its
    *control* connection (pings both ways, :data:`~pairwise.protocols.collect.wire.HEARTBEAT`).
    At close :meth:`PairOps._pair` pairs the connected users (P permutations,
    OS CSPRNG; the pairs are stored before anyone hears of them) and sends
    each its sessions.  For each session both users open a connection and
    ask to ``relay`` it; the session is marked started (stored) and the
    :class:`~pairwise.protocols.collect.relay.Relay` splices the two
    connections (opaque bytes; ``relay_tap`` sees them), so a session runs
    at most once.  The evaluator then reports the noisy value on its control
    connection; it is checked against the circuit's outputs and stored.  A
    user who disconnects, stalls past the task's ``timeout`` or reports a
    failed session loses its pairs (:meth:`PairOps._drop`); its partners'
    other pairs go on, and nobody is paired again.  When every pair is
    completed or dropped, :meth:`PairOps._maybe_finish` averages the
    completed ones.

Security model
    As the aggregator's (:mod:`pairwise.protocols.collect.aggregator`): it
    learns who is paired with whom, byte counts and the noisy values, never a
    user's value.  Every wait has a timeout: the task's ``timeout`` for a
    partner and for a relay, :data:`~pairwise.protocols.collect.wire.DEAD_AFTER`
    on a control connection.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pairwise.mpc.errors import ChannelError, ProtocolError

from ..service.aio import AsyncConnection
from . import storage as st
from .wire import DEAD_AFTER, AlreadyJoined, CollectError, Unauthorized, error_code

if TYPE_CHECKING:
    from collections.abc import Callable

    from .aggregator import _Task
    from .relay import Relay
    from .storage import AggregatorStore
    from .tasks.base import PairProtocol

__all__ = ["PairOps"]

#: A handler's reply meaning "the handler kept the connection (and closed it)": no reply is sent.
_HANDOFF = object()


@dataclass
class _Session:
    """One sampled pair of a running task, in memory (its durable state is a row of ``pairs``)."""

    row: st.PairRow
    planned_at: float
    waiting: dict = field(default_factory=dict)  # user name -> (connection, future)
    relay_ended_at: float | None = None
    evaluator_gone: bool = False
    interrupted: bool = False  # started before the aggregator restarted: never relayed again
    handed: bool = False  # told to a polling user (.aggregator_poll); planned_at is then its due time

    def role_of(self, name: str) -> str | None:
        return "garbler" if name == self.row.garbler else ("evaluator" if name == self.row.evaluator else None)

    def partner_of(self, name: str) -> str:
        return self.row.evaluator if name == self.row.garbler else self.row.garbler


def _pair_protocol(t: _Task) -> PairProtocol:
    """The task's protocol, which is a 2PC one on every path of this module."""
    return cast("PairProtocol", t.proto)


class PairOps:
    """Mixin of the aggregator (see the module docstring); uses its ``tasks``, ``store``, ``relay``, ``_db``,
    ``_log``, ``_stop``, ``_task``, ``_done``, ``_fail``."""

    if TYPE_CHECKING:  # provided by the aggregator
        store: AggregatorStore
        relay: Relay
        _stop: asyncio.Event | None
        _log: Callable[[str], None]

        async def _db(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any: ...
        def _task(self, req: dict) -> _Task: ...
        async def _done(self, t: _Task, result: dict, **counts: Any) -> None: ...
        async def _fail(self, t: _Task, reason: str) -> None: ...
        def _alive(self, t: _Task) -> list[str]: ...

    # ------------------------------------------------------------------ 2PC: control connections
    async def _control(self, t: _Task, conn: AsyncConnection, name: str) -> None:
        t.live[name] = conn
        try:
            if t.row.state == st.RUNNING:
                self._send_sessions(t, name)
            elif t.row.state in (st.DONE, st.FAILED):
                self._event(conn, {"event": "finished", "state": t.row.state, "reason": t.row.reason})
            while self._stop is not None and not self._stop.is_set():
                try:
                    msg = await conn.recv_json(timeout=DEAD_AFTER)
                except ProtocolError as exc:
                    self._log(f"{name} on task {t.id}: {exc}")
                    return
                op = msg.get("op")
                try:
                    if op == "ping":
                        self._event(conn, {"event": "pong", "state": t.row.state, "users": len(t.users)})
                    elif op in ("pair_result", "pair_done", "pair_failed"):
                        await self._pair_report(t, name, op, msg)
                    else:
                        raise CollectError(f"unexpected {op!r} on a control connection")
                except CollectError as exc:
                    self._event(
                        conn,
                        {"event": "error", "session": msg.get("session"), "error": str(exc), "code": error_code(exc)},
                    )
        except ChannelError:
            pass
        finally:
            if t.live.get(name) is conn:
                del t.live[name]
                await self._user_gone(t, name)
            await conn.close()

    def _event(self, conn: AsyncConnection, msg: dict) -> None:
        from ..service.frames import encode_json

        try:
            conn.send(encode_json(msg))
        except ChannelError:
            pass

    def _send_sessions(self, t: _Task, name: str) -> None:
        conn = t.live.get(name)
        if conn is None:
            return
        mine = [
            {
                "session": s.row.session,
                "role": s.role_of(name),
                "partner": s.partner_of(name),
                "round": s.row.round,
                "state": "started" if s.row.state == st.STARTED else s.row.state,
            }
            for s in t.sessions.values()
            if s.role_of(name) and s.row.state in (st.PLANNED, st.STARTED)
        ]
        self._event(conn, {"event": "sessions", "sessions": mine, "pair_channel": t.spec.get("pair_channel", "plain")})

    async def _user_gone(self, t: _Task, name: str) -> None:
        """A 2PC user's control connection ended: its unstarted sessions are dropped, its partners go on."""
        if t.row.state != st.RUNNING:
            return
        for s in list(t.sessions.values()):
            role = s.role_of(name)
            if role is None:
                continue
            if s.row.state == st.PLANNED:
                await self._drop(t, s, f"{name} left before the session started")
            elif s.row.state == st.STARTED and role == "evaluator":
                s.evaluator_gone = True
                if s.relay_ended_at is not None or s.interrupted:
                    await self._drop(t, s, f"the evaluator {name} left without reporting the value")
        await self._maybe_finish(t)

    async def _pair_report(self, t: _Task, name: str, op: str, msg: dict) -> None:
        sid = msg.get("session")
        s = t.sessions.get(sid) if isinstance(sid, int) and not isinstance(sid, bool) else None
        if s is None or s.role_of(name) is None:
            raise CollectError(f"{name!r} has no session {sid!r} in task {t.id}")
        conn = t.live.get(name)
        async with t.lock:
            state = s.row.state
            if op == "pair_result":
                if s.role_of(name) != "evaluator":
                    raise Unauthorized(f"only the evaluator of session {sid} reports its value")
                if state == st.COMPLETED:
                    if s.row.value != msg.get("value"):
                        raise AlreadyJoined(f"session {sid} was completed with another value; nothing changed")
                elif state == st.STARTED:
                    value = _pair_protocol(t).check_value(t.spec, msg.get("value"))  # BadReport: refused for this user
                    await self._db(self.store.update_pair, t.id, sid, st.COMPLETED, value=value, nbytes=s.row.bytes)
                    s.row.state, s.row.value = st.COMPLETED, value
                elif state == st.PLANNED:
                    raise CollectError(f"session {sid} never started")
            elif op == "pair_failed" and state in (st.PLANNED, st.STARTED):
                why = str(msg.get("error", "no reason given"))[:300]
                await self._drop_locked(t, s, f"{name} ({s.role_of(name)}) failed: {why}")
        if conn is not None:
            self._event(conn, {"event": "ack", "session": sid, "state": s.row.state})
        await self._maybe_finish(t)

    # ------------------------------------------------------------------ 2PC: relays
    async def _op_relay(self, conn: AsyncConnection, name: str, req: dict):
        t = self._task(req)
        if t.row.state != st.RUNNING:
            raise CollectError(f"task {t.id} is {t.row.state}: no session to relay")
        sid = req.get("session")
        s = t.sessions.get(sid) if isinstance(sid, int) and not isinstance(sid, bool) else None
        if s is None or s.role_of(name) is None:
            raise Unauthorized(f"{name!r} is not a user of session {sid!r} of task {t.id}")
        if s.row.state != st.PLANNED or s.interrupted:
            raise CollectError(f"session {sid} of task {t.id} is {s.row.state}: a session runs at most once")
        if name in s.waiting:
            raise AlreadyJoined(f"{name!r} is already waiting for session {sid}")
        paired = asyncio.get_running_loop().create_future()
        s.waiting[name] = (conn, paired)
        if len(s.waiting) < 2:  # the first of the two: wait for the partner, then for the end of the relay
            limit = t.spec["timeout"]
            try:
                ended = await asyncio.wait_for(asyncio.shield(paired), limit)
            except TimeoutError:
                s.waiting.pop(name, None)
                await self._drop(t, s, f"{s.partner_of(name)} did not come within {limit:g} s")
                raise CollectError(
                    f"session {sid}: the partner did not come within {limit:g} s; the pair is dropped"
                ) from None
            except CollectError:  # dropped while waiting (the partner left)
                s.waiting.pop(name, None)
                raise
            await ended.wait()
            return _HANDOFF
        async with t.lock:
            if s.row.state != st.PLANNED:  # dropped while the second user arrived
                s.waiting.pop(name, None)
                raise CollectError(f"session {sid} was dropped: {s.row.reason}")
            await self._db(self.store.update_pair, t.id, sid, st.STARTED)  # on disk before any byte is relayed
            s.row.state = st.STARTED
        (gc, gf), (ec, ef) = s.waiting.pop(s.row.garbler), s.waiting.pop(s.row.evaluator)
        ended = asyncio.Event()
        for f in (gf, ef):
            if not f.done():
                f.set_result(ended)
        channel = t.spec.get("pair_channel", "plain")
        try:
            for c, who in ((gc, s.row.garbler), (ec, s.row.evaluator)):
                await c.send_json(
                    {
                        "ok": True,
                        "session": sid,
                        "role": s.role_of(who),
                        "partner": s.partner_of(who),
                        "pair_channel": channel,
                    }
                )
            stats = await self.relay.splice(gc, ec, f"{t.id}/{sid}", idle_timeout=t.spec["timeout"])
            s.row.bytes = stats.total
        except ChannelError as exc:
            self._log(f"session {t.id}/{sid}: {exc}")
        finally:
            s.relay_ended_at = time.monotonic()
            ended.set()
            await gc.close()
            await ec.close()
        if s.evaluator_gone and s.row.state == st.STARTED:
            await self._drop(t, s, f"the evaluator {s.row.evaluator} left without reporting the value")
        await self._maybe_finish(t)
        return _HANDOFF

    async def _drop(self, t: _Task, s: _Session, reason: str) -> None:
        async with t.lock:
            await self._drop_locked(t, s, reason)

    async def _drop_locked(self, t: _Task, s: _Session, reason: str) -> None:
        if s.row.state in (st.COMPLETED, st.DROPPED):
            return
        await self._db(self.store.update_pair, t.id, s.row.session, st.DROPPED, nbytes=s.row.bytes, reason=reason)
        s.row.state, s.row.reason = st.DROPPED, reason
        for _, fut in list(s.waiting.values()):
            if not fut.done():
                fut.set_exception(CollectError(f"session {s.row.session} was dropped: {reason}"))
        for who in (s.row.garbler, s.row.evaluator):
            c = t.live.get(who)
            if c is not None:
                self._event(c, {"event": "dropped", "session": s.row.session, "reason": reason})

    async def _pair(self, t: _Task) -> None:
        """Sec. 5, step 1: pair the connected users (OS CSPRNG); stored before anyone hears of it."""
        from pairwise.protocols.ustat.stats import csprng_generator

        alive = set(self._alive(t))  # a control connection, or polling in time (.aggregator_poll)
        users = [(name, t.users[name][0]) for name in t.users if name in alive]
        try:
            pairs = _pair_protocol(t).pair(t.spec, users, csprng_generator())
        except CollectError as exc:
            await self._fail(t, str(exc))
            return
        await self._db(self.store.start_pairs, t.id, pairs)
        t.row.state = st.RUNNING
        now = time.monotonic()
        t.started = now
        for sid, (g, e, rnd) in enumerate(pairs):
            # a polling user hears of its session at the poll it was told to make: both come at the later time
            due = max([now] + [t.next_poll[u] for u in (g, e) if u in t.next_poll and u not in t.live])
            t.sessions[sid] = _Session(st.PairRow(sid, rnd, g, e, st.PLANNED), planned_at=due)
            t.mine.setdefault(g, []).append(sid)
            t.mine.setdefault(e, []).append(sid)
        self._log(f"task {t.id}: {len(users)} users paired into {len(pairs)} sessions")
        for name in list(t.live):
            self._send_sessions(t, name)

    async def _maybe_finish(self, t: _Task) -> None:
        if t.row.state != st.RUNNING or any(s.row.state in (st.PLANNED, st.STARTED) for s in t.sessions.values()):
            return
        async with t.lock:
            if t.row.state != st.RUNNING:
                return
            done = [s for s in t.sessions.values() if s.row.state == st.COMPLETED]
            users = {u for s in t.sessions.values() for u in (s.row.garbler, s.row.evaluator)}
            stats = {
                "users_paired": len(users),
                "pairs_planned": len(t.sessions),
                "garblers": len({s.row.garbler for s in t.sessions.values()}),
                "evaluators": len({s.row.evaluator for s in t.sessions.values()}),
                "pairs_dropped": len(t.sessions) - len(done),
                "bytes": sum(s.row.bytes for s in t.sessions.values()),
                "seconds": time.monotonic() - t.started,
            }
            try:
                result = await self._db(_pair_protocol(t).finish, dict(t.spec), [s.row.value for s in done], stats)
            except (CollectError, ValueError) as exc:
                await self._fail(t, str(exc))
                return
            await self._done(
                t,
                result,
                pairs_planned=len(t.sessions),
                pairs_completed=len(done),
                pairs_dropped=len(t.sessions) - len(done),
            )
