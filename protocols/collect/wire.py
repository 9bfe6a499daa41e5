"""Wire format, roles, errors and the client-side connection of the collect service.

What it does
    Every connection to the aggregator is a :class:`pairwise.mpc.channel.TCPChannel`
    (mutual TLS 1.3, or plaintext on loopback) that starts with the session
    handshake (session id ``pairwise-collect``, protocol digest
    ``pairwise-collect/1``); the connecting side says ``collect-user`` or
    ``collect-collector`` and the aggregator answers ``collect-aggregator``.
    Control messages are JSON objects, one per frame
    (:mod:`pairwise.protocols.service.frames`).  A request carries ``op``;
    a reply is ``{"ok": true, ...}`` or ``{"ok": false, "error": message,
    "code": kind}``, turned back into the matching exception by
    :func:`raise_refusal`.  Messages the aggregator sends on its own (a 2PC
    user's control connection: pairs assigned, heartbeats,
    acknowledgements) carry ``event`` instead of ``ok``.

    Authorization is by the *certificate* role (:data:`OPS`,
    :class:`pairwise.protocols.service.auth.RolePolicy`): a ``user`` joins
    tasks, reports and relays its 2PC sessions; a ``collector`` creates,
    lists, closes tasks and reads results; both may read a task's public
    parameters.

Requests (``op``)
    ``task_info`` (any role), ``task_create``, ``task_list``, ``task_show``,
    ``task_close``, ``result`` (collector), ``join``, ``report``, ``relay``,
    ``poll``, ``ping``/``pair_*`` (user), ``shuffle_task``, ``shuffle_batch`` (the
    shuffler, a ``server``); what each does: ``docs/collect.md``, "Requests".

Security model
    With TLS every identity is a certificate of the CA; users require the
    aggregator to hold a ``server`` certificate (and, with ``server_name``,
    that name).  Messages are validated for type and size before use;
    nothing is pickled.
"""

from __future__ import annotations

import re

from pairwise.dp.errors import PairwiseError
from pairwise.mpc.channel import TCPChannel, handshake
from pairwise.mpc.errors import ChannelError, HandshakeError, InsecureTransport, PeerBusy

from ..service.auth import RolePolicy
from ..service.frames import format_address, parse_address, recv_json, send_json

__all__ = [
    "HEARTBEAT",
    "OPS",
    "PROTOCOL_DIGEST",
    "ROLE_AGGREGATOR",
    "ROLE_COLLECTOR",
    "ROLE_SHUFFLER",
    "ROLE_USER",
    "SESSION_ID",
    "AggregatorBusy",
    "AggregatorUnavailable",
    "AlreadyJoined",
    "BadReport",
    "CapExceeded",
    "CollectError",
    "NotFinished",
    "RegistrationClosed",
    "TaskFailed",
    "Unauthorized",
    "UnknownTask",
    "call",
    "check_task_id",
    "connect",
    "error_code",
    "format_address",
    "op_class",
    "parse_address",
    "policy",
    "raise_refusal",
    "recv_json",
    "send_json",
]

SESSION_ID = b"pairwise-collect"
PROTOCOL_DIGEST = b"pairwise-collect/1"
ROLE_AGGREGATOR = "collect-aggregator"
ROLE_USER = "collect-user"
ROLE_COLLECTOR = "collect-collector"
ROLE_SHUFFLER = "collect-shuffler"
#: Seconds between a 2PC user's pings on its control connection (the aggregator answers each); after
#: DEAD_AFTER seconds of silence either side takes the connection for dead.
HEARTBEAT = 10.0
DEAD_AFTER = 6 * HEARTBEAT

#: operation class -> certificate roles allowed
OPS: dict[str, tuple[str, ...]] = {
    "info": ("user", "collector"),
    "participate": ("user",),
    "manage": ("collector",),
    "read": ("collector",),
    "shuffle": ("server",),  # the shuffler (and, per task, only the certificate the task names)
}
_REQUEST_OPS = {
    "task_info": "info",
    "task_create": "manage",
    "task_close": "manage",
    "task_list": "read",
    "task_show": "read",
    "result": "read",
    "join": "participate",
    "report": "participate",
    "relay": "participate",
    "ping": "participate",
    "poll": "participate",
    "pair_result": "participate",
    "pair_done": "participate",
    "pair_failed": "participate",
    "shuffle_task": "shuffle",
    "shuffle_batch": "shuffle",
}
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class CollectError(PairwiseError, ValueError):
    """A collect request cannot be served as asked (the message says why)."""


class UnknownTask(CollectError):
    """The aggregator has no task of that id."""


class RegistrationClosed(CollectError):
    """The task's registration has closed: no new user may join, no report is accepted."""


class AlreadyJoined(CollectError):
    """This user already joined the task (and a different report, or a live connection, is on record)."""


class BadReport(CollectError):
    """A report or a 2PC value outside what the task's randomizer or circuit can output; refused for this user."""


class NotFinished(CollectError):
    """The task has no result yet (registration open, or its sessions are still running)."""


class TaskFailed(CollectError):
    """The task ended without a result (too few users, no pair completed, ...); the message says why."""


class Unauthorized(CollectError):
    """The peer's certificate role does not allow this request."""


class CapExceeded(CollectError):
    """The user refused the task: its epsilon is above the user's cap or what the user's ledger has left."""


class AggregatorUnavailable(ChannelError, ConnectionError):
    """The aggregator could not be reached or dropped the connection; the message names it."""


class AggregatorBusy(AggregatorUnavailable):
    """The aggregator refused the connection before its TLS handshake (too many handshakes at once): back off."""


_CODES = (
    ("unknown", UnknownTask),
    ("closed", RegistrationClosed),
    ("joined", AlreadyJoined),
    ("report", BadReport),
    ("pending", NotFinished),
    ("failed", TaskFailed),
    ("unauthorized", Unauthorized),
    ("unavailable", AggregatorUnavailable),
)


def error_code(exc: BaseException) -> str:
    """The ``code`` of a refusal reply for ``exc`` (inverse of :func:`raise_refusal`)."""
    return next((code for code, cls in _CODES if isinstance(exc, cls)), "refused")


def raise_refusal(label: str, reply: dict) -> None:
    """Raise the exception matching a ``{"ok": false}`` reply of ``label``."""
    cls = dict(_CODES).get(reply.get("code"), CollectError)
    raise cls(f"{label} refused: {reply.get('error', 'unknown error')}")


def op_class(op: object) -> str | None:
    """The operation class of a request ``op`` (None for an unknown op)."""
    return _REQUEST_OPS.get(op) if isinstance(op, str) else None


def policy() -> RolePolicy:
    """The aggregator's authorization table (:data:`OPS`)."""
    return RolePolicy(OPS, error=Unauthorized)


def check_task_id(task: object) -> str:
    """A task id: 1..64 characters from ``[A-Za-z0-9._-]``, starting with a letter or digit."""
    if not isinstance(task, str) or not _TASK_ID.fullmatch(task):
        raise CollectError(
            f"a task id is 1..64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit; got {task!r}"
        )
    return task


def connect(
    addr: tuple[str, int],
    role: str,
    *,
    tls=None,
    insecure: bool = False,
    server_name: str | None = None,
    connect_timeout: float = 30.0,
    timeout: float = 120.0,
    once: bool = False,
) -> TCPChannel:
    """Connect to the aggregator at ``addr`` and handshake as ``role`` (:data:`ROLE_USER` or :data:`ROLE_COLLECTOR`).

    With ``tls`` the aggregator must hold a ``server`` certificate of the CA
    (named ``server_name``, if given); a refused identity keeps its class
    (``AuthenticationError``, ``AccessDenied``).  An aggregator that cannot
    be reached raises :class:`AggregatorUnavailable`; with ``once``, one
    attempt, and a busy aggregator (it refused before TLS) raises
    :class:`AggregatorBusy` at once, for the caller to back off.
    """
    host, port = addr
    where = f"the aggregator at {format_address(addr)}"
    if server_name is not None and tls is None:
        raise ValueError("a pinned aggregator name needs TLS (--tls DIR --name NAME)")
    try:
        if once:  # the caller backs off (seconds, with jitter): a busy aggregator is told so at once
            ch = TCPChannel.connect_once(
                host,
                port,
                timeout=min(timeout, connect_timeout),
                tls=tls,
                insecure=insecure,
                peer_roles=None if tls is None else ("server",),
                peer_names=server_name,
            )
            ch.timeout = timeout
        else:
            ch = TCPChannel.connect(
                host,
                port,
                deadline=connect_timeout,
                timeout=timeout,
                tls=tls,
                insecure=insecure,
                peer_roles=None if tls is None else ("server",),
                peer_names=server_name,
            )
    except PeerBusy as exc:
        raise AggregatorBusy(f"{where} is busy (too many connections at once): {exc}") from exc
    except (HandshakeError, InsecureTransport) as exc:
        raise type(exc)(f"{where}: {exc}") from exc
    except ChannelError as exc:
        raise AggregatorUnavailable(f"{where} is unavailable: {exc}") from exc
    try:
        handshake(
            ch,
            role,
            SESSION_ID,
            PROTOCOL_DIGEST,
            peer_role=ROLE_AGGREGATOR,
            extra_label="protocol",
            timeout=min(timeout, 30.0),
        )
    except ChannelError as exc:
        ch.close()
        raise AggregatorUnavailable(f"{where}: handshake failed: {exc}") from exc
    return ch


def call(ch: TCPChannel, msg: dict, *, label: str = "the aggregator", timeout: float | None = None) -> dict:
    """Send ``msg``, return the reply; a refusal raises its exception, a broken connection :class:`AggregatorUnavailable`."""
    try:
        send_json(ch, msg)
        reply = recv_json(ch, timeout=timeout)
    except ChannelError as exc:
        if isinstance(exc, AggregatorUnavailable):
            raise
        raise AggregatorUnavailable(f"{label} failed during the request: {exc}") from exc
    if not reply.get("ok"):
        raise_refusal(label, reply)
    return reply
