"""The user client: one person, one record, joining a collect task from their own device.

What it does
    :func:`join` (``pairwise collect join``, and the Python API
    ``pairwise.collect.join``) holds only this user's data and runs:

    1. fetch the task's public parameters (``task_info``) and show them;
    2. refuse, with nothing else sent, a task whose epsilon is above the
       user's cap (``max_epsilon``, default 1) or above what the user's own
       ledger has left (:mod:`pairwise.protocols.collect.ledger`), a task whose
       registration closed, or input of the wrong shape; then charge the
       ledger durably;
    3. clamp its value into the task's public domain and run its part: in the
       local model, randomize with the OS CSPRNG and upload the report once
       (kept in the ledger for retries); in 2PC ([BBGK20, Sec. 5]), register, hang
       up and poll when the aggregator says (holding no connection while
       waiting, :mod:`.aggregator_poll`), then run each due session in its
       own thread over a connection the aggregator relays to the partner
       (:mod:`.pairchannel`), as garbler or evaluator of the task's
       noisy-kernel circuit.  Step by step: ``docs/collect.md``, "The user
       client, step by step".

    A busy aggregator (it refused before TLS, :mod:`.admission`) and
    connections lost to one that restarts are retried with jittered backoff
    up to :data:`MAX_BACKOFF` until ``timeout``; the aggregator recognises a
    user who joined before, so nothing is counted twice and no session runs
    twice.

Security model
    The user's value never leaves the device except as a randomized report
    (local model) or inside the garbled circuit (2PC).  The aggregator must
    hold a ``server`` certificate of the CA (``server_name`` pins its name).
    Caps and the ledger are the user's: the aggregator cannot raise them.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pairwise.dp.validate import no_more_keywords, with_legacy
from pairwise.mpc.errors import (
    AccessDenied,
    AuthenticationError,
    ChannelError,
    InsecureTransport,
    ProtocolError,
)

from ..service.frames import parse_address
from .ledger import DEFAULT_BUDGET, DEFAULT_MAX_EPSILON, open_ledger
from .pairchannel import open_pair_channel
from .tasks import protocol_of
from .wire import (
    ROLE_USER,
    AggregatorUnavailable,
    CapExceeded,
    CollectError,
    RegistrationClosed,
    call,
    check_task_id,
    connect,
)

__all__ = ["JoinOptions", "JoinOutcome", "join"]

#: How long a 2PC user waits for pairing beyond the task's registration deadline (seconds).
DEFAULT_WAIT = 3600.0
#: The longest backoff between two attempts to reach a busy or lost aggregator (seconds).
MAX_BACKOFF = 30.0
#: The longest wait a user accepts from the aggregator's ``retry_after`` before polling again (seconds).
MAX_RETRY_AFTER = 600.0


@dataclass
class JoinOutcome:
    """What joining did: the task, what was charged, and the outcome (``report`` or the 2PC ``sessions``)."""

    task: str
    protocol: str
    model: str
    aggregator: str
    epsilon: float
    delta: float
    status: str
    spec: dict = field(default_factory=dict)
    report: dict | None = None
    sessions: list[dict] = field(default_factory=list)
    task_state: str = ""

    def as_dict(self) -> dict:
        return {
            "task": self.task,
            "protocol": self.protocol,
            "model": self.model,
            "aggregator": self.aggregator,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "status": self.status,
            "task_state": self.task_state,
            "sessions": self.sessions,
            "spec": self.spec,
        }


class _Link:
    """How to reach the aggregator (address, TLS, pinned name, this user's name on plaintext loopback)."""

    def __init__(self, server, tls, insecure: bool, server_name, user, connect_timeout: float, timeout: float):
        self.addr = parse_address(server) if isinstance(server, str) else (str(server[0]), int(server[1]))
        self.tls, self.insecure, self.server_name = tls, insecure, server_name
        self.user = user if tls is None else None
        self.connect_timeout, self.timeout = connect_timeout, timeout
        if tls is None and not user:
            raise CollectError("without TLS a user names itself: pass user=NAME (plaintext loopback only)")

    def open(self):
        return connect(
            self.addr,
            ROLE_USER,
            tls=self.tls,
            insecure=self.insecure,
            server_name=self.server_name,
            connect_timeout=self.connect_timeout,
            timeout=self.timeout,
            once=True,
        )

    def msg(self, **kw) -> dict:
        return kw if self.user is None else {**kw, "user": self.user}


def _retrying(fn, deadline: float, what: str):
    """``fn()``, again after an aggregator that went away or was busy, until ``deadline`` (monotonic).

    Backoff with jitter: waits drawn from [d/2, d], d doubling from 0.5 s to
    :data:`MAX_BACKOFF` (tens of seconds), so 10^4 users refused at once come
    back spread out instead of together.  A refused identity or transport
    (``AccessDenied``, ``InsecureTransport``) and a peer that speaks another
    protocol are not retried; a failed TLS handshake is retried three times
    (an overloaded aggregator drops handshakes; a wrong certificate fails
    the same way every time); a busy aggregator (it refused before TLS) is
    retried until ``deadline``.
    """
    delay, tls_failures = 0.5, 0
    while True:
        try:
            return fn()
        except (AccessDenied, InsecureTransport, ProtocolError):
            raise
        except (AggregatorUnavailable, ChannelError) as exc:
            if isinstance(exc, AuthenticationError):
                tls_failures += 1
                if tls_failures >= 3:
                    raise
            pause = random.uniform(delay / 2, delay)
            if time.monotonic() + pause >= deadline:
                raise AggregatorUnavailable(f"{what}: {exc}") from exc
            time.sleep(pause)
            delay = min(2 * delay, MAX_BACKOFF)


@dataclass(frozen=True)
class JoinOptions:
    """How one user joins a task (each field is also a keyword of :func:`join`; see there)."""

    tls: Any = None
    insecure: bool = False
    server_name: str | None = None
    user: str | None = None
    max_epsilon: float = DEFAULT_MAX_EPSILON
    budget: float = DEFAULT_BUDGET
    state_dir: str | None = None
    timeout: float | None = None
    connect_timeout: float = 30.0
    wait: float = DEFAULT_WAIT
    show: Callable[[dict], Any] | None = None
    log: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        for name in ("timeout", "connect_timeout", "wait"):
            v = getattr(self, name)
            if v is None and name == "timeout":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v != v:
                raise CollectError(f"{name} must be a non-negative number of seconds, got {v!r}")


@dataclass(frozen=True)
class _Joined:
    """A user's task once its parameters are checked and its budget charged: what the model's step needs."""

    link: _Link
    ledger: Any
    aggregator: str
    task: str
    proto: Any
    spec: dict
    info: dict
    eps: Fraction
    timeout: float
    log: Callable[[str], Any]

    def outcome(self, status: str, report) -> JoinOutcome:
        return JoinOutcome(
            self.task,
            self.proto.name,
            self.proto.model,
            self.aggregator,
            float(self.eps),
            self.proto.delta(self.spec),
            status,
            self.spec,
            report,
            task_state=self.info["state"],
        )


def join(
    server, task: str, value, value2=None, label=None, *, options: JoinOptions | None = None, **legacy: Any
) -> JoinOutcome:
    """Join ``task`` on the aggregator at ``server`` (``HOST:PORT``) with this user's value(s).

    ``options``: a :class:`JoinOptions`, or its fields as keywords (``tls=``, ``user=``, ``timeout=``, ...):

    ``tls``: this user's :class:`pairwise.mpc.tls.TLSConfig` (a ``user``
    certificate); without it, plaintext loopback only, and ``user`` names
    this user.  ``value`` (and ``value2``: kendall's y, the QMLE's
    covariate) and ``label`` (the public 0/1 class of two-sample tasks) are
    this user's own.  ``max_epsilon``: this user's cap on one task's
    epsilon; ``budget``: the total its ledger (``state_dir``) allows.
    ``timeout``: how long to keep retrying a lost aggregator and to wait for
    a partner (default: the task's timeout); ``wait``: how long a 2PC user
    waits for pairing after the registration deadline.  ``show(info)`` is
    called with the task's public parameters before anything else happens;
    it may raise to refuse.  Raises :class:`~pairwise.protocols.collect.wire.CapExceeded`
    when the task asks too much (nothing sent), and the other
    :class:`~pairwise.protocols.collect.wire.CollectError` subclasses.
    """
    from pairwise.dp.accounting import check_epsilon

    o = with_legacy(options, JoinOptions, legacy, "join")
    no_more_keywords(legacy, "join")
    tls, insecure, server_name, user, max_epsilon, budget = (
        o.tls,
        o.insecure,
        o.server_name,
        o.user,
        o.max_epsilon,
        o.budget,
    )
    state_dir, timeout, connect_timeout, wait, show, log = (
        o.state_dir,
        o.timeout,
        o.connect_timeout,
        o.wait,
        o.show,
        o.log,
    )
    check_task_id(task)
    cap = Fraction(repr(check_epsilon(max_epsilon, "max_epsilon")))
    total = Fraction(repr(check_epsilon(budget, "budget")))
    log = log or (lambda m: None)
    link = _Link(server, tls, insecure, server_name, user, connect_timeout, 120.0 if timeout is None else timeout)

    def first_contact():
        c = link.open()
        try:
            return c, call(c, link.msg(op="task_info", task=task))["task"]
        except BaseException:
            c.close()
            raise

    ch, info = _retrying(
        first_contact,
        time.monotonic() + max(connect_timeout, link.timeout),
        f"task {task!r}: cannot reach the aggregator",
    )
    try:
        aggregator = ch.peer_identity.name if ch.peer_identity is not None else f"{link.addr[0]}:{link.addr[1]}"
        spec = info["spec"]
        proto = protocol_of(info["protocol"])
        if show is not None:
            show(info)
        eps = Fraction(repr(float(spec["epsilon"])))
        if eps > cap:
            raise CapExceeded(
                f"refusing task {task!r}: its epsilon {float(eps):g} is above this user's cap "
                f"--max-epsilon {float(cap):g}; nothing was sent"
            )
        proto.check_user(spec, value, value2, label)
        ledger = open_ledger(state_dir)
        try:
            known = ledger.entry(aggregator, task)
            if info["state"] != "open" and (known is None or proto.model in ("local", "shuffle")):
                if known is not None and known["report"] is not None:
                    return JoinOutcome(
                        task,
                        proto.name,
                        proto.model,
                        aggregator,
                        float(eps),
                        proto.delta(spec),
                        "already reported",
                        spec,
                        known["report"],
                        task_state=info["state"],
                    )
                raise RegistrationClosed(f"task {task!r} is {info['state']}: registration closed; nothing was sent")
            ledger.check(eps, total, aggregator=aggregator, task=task)  # refuses before anything is sent
            if proto.model == "2pc":
                word = proto.encode(spec, value, value2, label)  # clamped into the public domain, on the grid
                nc = proto.circuit(spec)
                _ = nc.circuit.levels  # the (cached) schedule, computed before any session: off the partner's clock
            ledger.charge(aggregator, task, proto.name, eps, proto.delta(spec), total)
            timeout_s = float(spec["timeout"]) if timeout is None else float(timeout)
            link.timeout = timeout_s
            joined = _Joined(link, ledger, aggregator, task, proto, spec, info, eps, timeout_s, log)
            if proto.model == "local":
                return _local(joined, ch, value, value2, label)
            if proto.model == "shuffle":
                return _shuffle(joined, value)
            deadline = max(0.0, spec["deadline_at"] - time.time()) + wait
            part = _Participant(link, task, spec, proto, nc, word, label, timeout_s, deadline, log)
            part.first, ch = ch, None  # the join goes on this connection (one handshake fewer), then it is closed
            sessions, state = part.run()
            return JoinOutcome(
                task,
                proto.name,
                proto.model,
                aggregator,
                float(eps),
                proto.delta(spec),
                "sessions finished",
                spec,
                sessions=sessions,
                task_state=state,
            )
        finally:
            ledger.close()
    finally:
        if ch is not None:
            ch.close()


def _local(j: _Joined, ch, value, value2, label) -> JoinOutcome:
    """Local model: join (public assignment), randomize (CSPRNG), keep the report, upload it once."""
    link, ledger, aggregator, task, proto, spec = j.link, j.ledger, j.aggregator, j.task, j.proto, j.spec
    deadline = time.monotonic() + j.timeout
    conn = [ch]

    def attempt():
        if conn[0] is None:
            conn[0] = link.open()
        try:
            reply = call(conn[0], link.msg(op="join", task=task, label=label))
            fresh = proto.randomize(spec, reply["assignment"], value, value2, label)
            report = ledger.keep_report(aggregator, task, fresh)  # kept before it is sent; a retry re-sends it
            return report, call(conn[0], link.msg(op="report", task=task, report=report))
        except (AggregatorUnavailable, ChannelError):
            if conn[0] is not None:
                conn[0].close()
            conn[0] = None
            raise

    try:
        report, reply = _retrying(attempt, deadline, f"task {task!r}: the aggregator went away")
    finally:
        if conn[0] is not None and conn[0] is not ch:
            conn[0].close()
    status = "already reported" if reply.get("duplicate") else "reported"
    j.log(f"task {task}: report {status}")
    return j.outcome(status, report)


def _shuffle(j: _Joined, value) -> JoinOutcome:
    """Shuffle model: seal each message to the task's key, kept in the ledger before it leaves, then submit them to
    the task's shuffler (never to the aggregator); a retry re-sends the same boxes, never a fresh randomization."""
    from .histogram import HistogramTask, user_messages
    from .shuffler import ShuffleError, submit

    link, ledger, aggregator, task, spec, timeout = j.link, j.ledger, j.aggregator, j.task, j.spec, j.timeout
    boxes, _ = user_messages(value, HistogramTask.from_spec(spec), bytes.fromhex(spec["seal_public_key"]), task)
    kept = ledger.keep_report(aggregator, task, {"boxes": [b.hex() for b in boxes]})
    boxes = [bytes.fromhex(b) for b in kept["boxes"]]
    host, port = parse_address(spec["shuffler"])
    try:
        _retrying(
            lambda: submit(
                host,
                port,
                task,
                boxes,
                tls=link.tls,
                insecure=link.insecure,
                peer_names=spec.get("shuffler_name"),
                user=link.user,
                timeout=timeout,
                connect_timeout=link.connect_timeout,
            ),
            time.monotonic() + timeout,
            f"task {task!r}: the shuffler at {spec['shuffler']} is unavailable",
        )
        status = "submitted to the shuffler"
    except ShuffleError as exc:
        if exc.code != "duplicate":
            raise CollectError(str(exc)) from None
        status = "already submitted"
    j.log(f"task {task}: {len(boxes)} sealed messages {status}")
    return j.outcome(status, {"boxes": len(boxes)})


class _Participant:
    """A 2PC user: register, wait without a connection (poll when told), run each session in its own thread."""

    def __init__(
        self, link: _Link, task: str, spec: dict, proto, nc, word: int, label, timeout: float, wait: float, log
    ) -> None:
        self.link, self.task, self.spec, self.proto, self.nc, self.word = link, task, spec, proto, nc, word
        self.label, self.timeout, self.log = label, timeout, log
        self.wait_until = time.monotonic() + wait
        self.lock = threading.Lock()  # guards the tables below
        self.known: dict[int, dict] = {}  # session -> outcome (state: running, completed, failed, dropped, ...)
        self.unacked: dict[int, dict] = {}  # session -> report message not yet acknowledged
        self.threads: list[threading.Thread] = []
        self.heard_sessions = False
        self.pending = 0
        self.finished_state = ""
        self.first = None  # an open connection for the first request (the one task_info came on)
        self.changed = threading.Event()  # set when a session thread ends

    def _request(self, what: str, **msg) -> dict:
        """One request on a fresh connection (closed after it), retried with backoff until ``timeout``."""

        def once():
            ch, self.first = self.first or self.link.open(), None
            try:
                return call(ch, self.link.msg(**msg))
            finally:
                ch.close()

        return _retrying(once, time.monotonic() + self.timeout, f"task {self.task!r}: {what}")

    def _done(self) -> bool:
        with self.lock:
            if self.finished_state:
                return True
            if not self.heard_sessions or self.pending:
                return False
            return all(o["state"] not in ("running", "waiting") for o in self.known.values()) and not self.unacked

    def run(self) -> tuple[list[dict], str]:
        reply = self._request("cannot join", op="join", task=self.task, label=self.label, poll=True)
        try:
            while True:
                self.changed.clear()  # before looking: a session that ends after this wakes the wait below
                if self._done():
                    break
                now = time.monotonic()
                if now > self.wait_until:
                    raise CollectError(f"task {self.task!r}: gave up waiting for pairing and sessions")
                # the aggregator's hint (capped; never past our own limit), or a short wait while sessions run
                hint = reply.get("retry_after") if isinstance(reply, dict) else None
                if isinstance(hint, (int, float)) and not isinstance(hint, bool) and hint >= 0:
                    pause = min(float(hint), MAX_RETRY_AFTER)
                else:
                    pause = 5.0
                with self.lock:
                    busy = any(o["state"] in ("running", "waiting") for o in self.known.values()) or self.unacked
                if busy:  # our sessions report on their own; look again only to learn of later ones
                    pause = max(pause, 1.0)
                self._sleep(min(pause, max(0.0, self.wait_until - now)))
                if self._done():
                    break
                reply = self._request("the aggregator did not come back", op="poll", task=self.task)
                self._poll_reply(reply)
        finally:
            for t in self.threads:
                t.join(self.timeout + 60)
        with self.lock:
            return [dict(o) for _, o in sorted(self.known.items())], self.finished_state or "running"

    def _sleep(self, seconds: float) -> None:
        """Sleep, waking early when a session of ours ends (so a finished user returns at once); no polling of
        our own state: thousands of users in one process would wake the interpreter thousands of times a second."""
        self.changed.wait(seconds)

    def _poll_reply(self, reply: dict) -> None:
        if reply.get("finished"):
            with self.lock:
                self.finished_state = reply.get("state", "done")
                for o in self.known.values():
                    if o["state"] == "waiting":
                        o["state"] = "dropped"
            return
        if reply.get("state") != "running":
            return
        kind = reply.get("pair_channel", "plain")
        with self.lock:
            self.heard_sessions = True
            self.pending = int(reply.get("pending") or 0)
        for s in reply.get("sessions") or []:
            sid = s.get("session")
            with self.lock:
                o = self.known.get(sid)
                if o is not None:
                    if s.get("state") == "dropped" and o["state"] == "waiting":
                        o["state"] = "dropped"
                    continue
                out = {"session": sid, "role": s.get("role"), "partner": s.get("partner"), "round": s.get("round")}
                self.known[sid] = out
                if s.get("state") != "planned":  # started before a restart, or already ended: never run again
                    out["state"] = {"started": "interrupted"}.get(s.get("state"), s.get("state"))
                    continue
                out["state"] = "running"
            t = threading.Thread(target=self._session, args=(out, kind), name=f"collect-session-{sid}", daemon=True)
            self.threads.append(t)
            t.start()

    def _report(self, msg: dict) -> None:
        """Report a session's end on a fresh connection until acknowledged (the aggregator recognises a repeat)."""
        sid = msg["session"]
        with self.lock:
            self.unacked[sid] = msg
        try:
            reply = self._request(f"session {sid}: cannot report", **msg)
        except CollectError as exc:  # refused (e.g. a value outside the circuit's outputs)
            self.log(f"aggregator: {exc}")
            with self.lock:
                self.unacked.pop(sid, None)
                o = self.known[sid]
                o["state"], o["error"] = ("refused", str(exc)) if o["state"] == "done" else (o["state"], str(exc))
            return
        except (AggregatorUnavailable, ChannelError) as exc:
            self.log(f"session {sid}: the report was not acknowledged ({exc})")
            with self.lock:
                self.unacked.pop(sid, None)
            return
        with self.lock:
            self.unacked.pop(sid, None)
            o = self.known[sid]
            state = reply.get("state")
            if o["state"] == "done":
                if state == "completed":
                    o["state"] = "completed"
                elif state == "dropped":
                    o["state"] = "dropped"
                else:
                    o["state"] = "finished"  # the garbler's part is done (its partner reports the value)

    # ------------------------------------------------------------------ one session
    def _session(self, out: dict, kind: str) -> None:
        from pairwise.mpc import jit

        # a user runs a few executions: the numpy program beats loading the compiled loops (0.4-0.9 s per
        # process, seconds on a first compile, all of it on the partner's clock), as in ``pairwise 2pc``
        try:
            with jit.disabled():
                self._run_session(out, kind)
        finally:
            self.changed.set()

    def _run_session(self, out: dict, kind: str) -> None:
        from .pair import run_pair

        sid, role = out["session"], out["role"]
        ch = None
        try:
            # when thousands of sessions start at once the aggregator's handshakes queue up: retry the connection
            # (nothing about the session is stored until the relay request itself)
            ch = _retrying(self.link.open, time.monotonic() + self.timeout, f"session {sid}: cannot reach the relay")
            reply = call(ch, self.link.msg(op="relay", task=self.task, session=sid), timeout=self.timeout + 30)
            if reply.get("partner") != out["partner"] or reply.get("role") != role:
                raise CollectError(
                    f"session {sid}: the relay announced {reply.get('partner')!r} as "
                    f"{reply.get('role')}, not the partner the pairing named"
                )
            # the pair channel (tls: the partner's name pinned), the 2PC, then finish() before any report
            value, costs = run_pair(
                lambda: open_pair_channel(
                    reply.get("pair_channel", kind),
                    ch,
                    role=role,
                    partner=out["partner"],
                    tls=self.link.tls,
                    timeout=self.timeout,
                ),
                role=role,
                task_id=self.task,
                pair_id=sid,
                circuit=self.nc.circuit,
                value=self.word,
                timeout=self.timeout,
            )
            out["bytes"] = costs.wire_sent + costs.wire_received
            out["costs"] = costs.as_dict()
            if role == "evaluator":
                with self.lock:
                    out["state"] = "done"
                self._report({"op": "pair_result", "task": self.task, "session": sid, "value": value})
            else:  # the garbler's part is done; its partner reports the value (no connection needed to say so)
                with self.lock:
                    out["state"] = "finished"
        except (CollectError, ChannelError, ValueError, OSError) as exc:
            with self.lock:
                out["state"], out["error"] = "failed", str(exc)
            self.log(f"session {sid} ({role} with {out['partner']}) failed: {exc}")
            self._report({"op": "pair_failed", "task": self.task, "session": sid, "error": str(exc)[:300]})
        finally:
            if ch is not None:
                ch.close()
