"""Waiting 2PC users hold no connection: they poll at times the aggregator names (a mixin of the aggregator).

What it does
    A 2PC user who joins with ``"poll": true`` is registered (stored, as any
    join) and told ``retry_after``: when to come back.  It closes its
    connection and ``poll``\\ s then, each time on a fresh connection.  While
    registration is open, a user is told to come back just after the
    registration is expected to close (``min_users`` at the recent pace of
    registrations, not before the deadline), spread over ``users /
    poll_rate`` seconds (:class:`~pairwise.protocols.collect.admission.Admission`),
    never later than ``max_poll``; so 10^4 waiting users cost 10^4 rows, not
    10^4 sockets, about one poll each while they wait, and a bounded rate of
    handshakes when the pairing is announced.
    A registered user counts as present while it is not more than
    :data:`GRACE` seconds late for the poll it was told to make; pairing
    ([BBGK20, Sec. 5, step 1]) takes only present users.

    A session is *due* at the later of its two users' next polls (both were
    told that time), so partners reach the relay together.  A poll at or
    after the due time hands the session out, unless ``max_sessions``
    sessions of the task are handed out and not ended: then it is postponed
    until those are likely to have ended (at the recent pace of session
    ends), and the partner, polling, hears the same new time.  A
    poll before it answers "come back at the due time".  The users report
    their sessions (``pair_result``/``pair_done``/``pair_failed``) as
    requests; a session not started ``timeout`` seconds after it was due is
    dropped, as one whose evaluator reports nothing ``timeout`` seconds after
    the relay ended (:meth:`pairwise.protocols.collect.aggregator.Aggregator._tick`).

Security model
    As the aggregator's: a poll tells a user only its own sessions (partner
    names, roles) and the task's public state.  The poll times are public
    pacing, drawn with ``random`` (not a secret).  A user polling more often
    than told costs it a handshake and is refused when the gate is full.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from . import storage as st
from .admission import Admission
from .wire import DEAD_AFTER, CollectError

__all__ = ["GRACE", "PollOps"]

#: Registrations needed before their pace predicts when registration closes.
PACE_SAMPLE = 16
#: Seconds a polling user may be late for the poll it was told to make before it counts as gone.
GRACE = DEAD_AFTER


class PollOps:
    """``poll`` and the pacing of polling users (mixed into :class:`~pairwise.protocols.collect.aggregator.Aggregator`)."""

    admission: Admission  # the aggregator's (set in its __init__)
    _task: Callable[[dict], Any]  # the aggregator's task lookup

    def _alive(self, t) -> list[str]:
        """The registered users of 2PC task ``t`` who are present: a control connection, or polling in time."""
        now = time.monotonic()
        return [n for n in t.users if n in t.live or now <= t.next_poll.get(n, -GRACE - 1.0) + GRACE]

    def _tell_when(self, t, name: str, at: float | None = None) -> float:
        """Record when ``name`` comes back (``at``, monotonic; default: paced, see :meth:`_paced`); seconds."""
        now = time.monotonic()
        if at is None:
            at = self._paced(t, now)
        t.next_poll[name] = at
        return round(max(0.0, at - now), 3)

    def _paced(self, t, now: float) -> float:
        """When a waiting user should come back: while registration is open, just after it is expected to close
        (``min_users`` at the recent rate of registrations, not before the deadline), spread over
        ``users / poll_rate`` seconds so the pairing's first polls do not all come at once; otherwise (or when
        that is too far) the paced interval ``users / poll_rate`` with jitter; within ``max_poll``."""
        a = self.admission
        users = max(len(t.users), int(t.spec.get("min_users", 0)))
        spread = a.poll_interval(users)
        at = now + spread * random.uniform(0.75, 1.25)
        if t.row.state == st.OPEN:
            recent = t.joined_at
            missing = int(t.spec.get("min_users", 0)) - len(t.users)
            close = now + max(0.0, t.spec["deadline_at"] - time.time())
            if missing > 0 and len(recent) >= PACE_SAMPLE and recent[-1] > recent[0]:
                close = max(close, now + missing * (recent[-1] - recent[0]) / (len(recent) - 1))
            elif missing > 0:  # too few registrations to tell a pace: the paced interval
                close = now
            at = max(at if close <= now else now + a.min_poll, close + spread * random.random())
        return min(at, now + a.max_poll)

    def _in_flight(self, t) -> int:
        now = time.monotonic()
        for sid in list(t.handed):
            s = t.sessions[sid]
            if s.row.state in (st.COMPLETED, st.DROPPED) or s.relay_ended_at is not None:
                t.handed.discard(sid)
                t.ended_at.append(now)
        return len(t.handed)

    def _drain_time(self, t) -> float:
        """Seconds until the sessions handed out are likely to have ended, at the recent pace of their ends
        (a postponed session comes back then: postponing by a fixed few seconds made thousands of users poll
        every few seconds, a TLS handshake each, while 256 sessions ran)."""
        a = self.admission
        ends = t.ended_at
        if len(ends) >= 2 and ends[-1] > ends[0]:
            pace = (len(ends) - 1) / (ends[-1] - ends[0])
            return min(a.max_poll, max(a.min_poll, len(t.handed) / pace))
        return min(a.max_poll, max(a.min_poll, 2.0 * a.min_poll))

    async def _op_poll(self, conn, name: str, req: dict) -> dict:
        t = self._task(req)
        if t.proto.model != "2pc":
            raise CollectError(f"task {t.id} is a {t.proto.model}-model task: nothing to poll")
        if name not in t.users:
            raise CollectError(f"{name!r} has not joined task {t.id}: join first")
        state = t.row.state
        if state in (st.DONE, st.FAILED):
            t.next_poll.pop(name, None)
            return {"state": state, "finished": True, "reason": t.row.reason}
        if state != st.RUNNING:
            return {"state": state, "users": len(t.users), "retry_after": self._tell_when(t, name)}
        now = time.monotonic()
        sessions, due = [], []
        for sid in t.mine.get(name, ()):
            s = t.sessions[sid]
            shown = s.row.state
            if s.row.state == st.PLANNED and not s.interrupted:
                if not s.handed:
                    if now < s.planned_at:
                        due.append(s.planned_at)
                        continue
                    if self._in_flight(t) >= self.admission.max_sessions:
                        s.planned_at = now + self._drain_time(t) * random.uniform(1.0, 2.0)
                        due.append(s.planned_at)
                        continue
                    s.handed = True
                    t.handed.add(sid)
            elif s.row.state == st.PLANNED:
                shown = st.STARTED  # started before a restart: never run again
            sessions.append(
                {
                    "session": sid,
                    "role": s.role_of(name),
                    "partner": s.partner_of(name),
                    "round": s.row.round,
                    "state": shown,
                }
            )
        at = min(due) if due else None
        return {
            "state": state,
            "sessions": sessions,
            "pending": len(due),
            "pair_channel": t.spec.get("pair_channel", "plain"),
            "retry_after": self._tell_when(t, name, at),
        }
