"""Wire format, limits, addresses and errors shared by the ECDF servers, clients and querier.

What it does
    Every connection of the multi-server ECDF service is an
    :class:`pairwise.mpc.channel.TCPChannel` that starts with :func:`pairwise.mpc.channel.handshake`
    (session id ``pairwise-ecdf``, protocol digest ``pairwise-ecdf/3``: version
    3 has the two servers check every ``vdpf`` upload; a peer of another
    version is refused at the handshake, with both versions named); the
    connecting side names its role (``ecdf-client`` uploads keys,
    ``ecdf-querier`` asks for releases, ``ecdf-peer`` is the other server of a
    two-party garbled-circuit release) and the server answers as
    ``ecdf-server``.  The role named in the handshake only selects the
    conversation; *authorization* comes from the transport's peer identity
    (:mod:`pairwise.protocols.ecdf.auth`).  Control messages are JSON objects
    in one frame each (at most :data:`CONTROL_MAX` bytes, UTF-8, parsed with
    :func:`json.loads` only); bulk data (client ids, key lengths, keys,
    shares) are raw little-endian arrays
    (:meth:`pairwise.mpc.channel.Channel.send_array`) or byte frames whose
    sizes follow exactly from the preceding JSON.  Nothing is ever pickled.

    Replies are ``{"ok": true, ...}`` or ``{"ok": false, "error": message,
    "code": kind}``; :func:`raise_refusal` turns the latter into the matching
    exception, naming the server.

Bounded resources
    No frame is larger than :data:`CONTROL_MAX` (control) or
    :data:`UPLOAD_FRAME_MAX` (bulk upload data).  The size of every bulk
    frame of an upload is computed from public parameters -- the scheme's key
    sizes (:func:`key_lengths`), the number of series and the chunk's client
    count, itself capped by :func:`chunk_clients` -- and a frame of any other
    size is refused before its payload is read.

Security model
    With ``tls`` every connection is mutual TLS 1.3 (:mod:`pairwise.mpc.tls`)
    and clients accept only a ``server`` certificate from the CA; in
    plaintext (loopback only, unless ``insecure``) the transport gives no
    confidentiality or integrity.  Messages are validated for type and size
    before use.  No message carries secrets in the clear except the clients' keys to their own server and
    shares, which are what the protocol sends.
"""

from __future__ import annotations

from fractions import Fraction

from pairwise.dp.errors import PairwiseError
from pairwise.mpc.channel import Channel, TCPChannel, handshake
from pairwise.mpc.errors import ChannelError

from ..service.frames import CONTROL_MAX, format_address, parse_address, recv_json, send_json

__all__ = [
    "CONTROL_MAX",
    "PROTOCOL_DIGEST",
    "ROLE_CLIENT",
    "ROLE_PEER",
    "ROLE_QUERIER",
    "ROLE_SERVER",
    "SESSION_ID",
    "UPLOAD_FRAME_MAX",
    "BudgetExceeded",
    "DatasetError",
    "DatasetExists",
    "DatasetMismatch",
    "ECDFError",
    "QueryRefused",
    "ServerBusy",
    "ServerUnavailable",
    "Unauthorized",
    "UnknownDataset",
    "call",
    "call_ok",
    "chunk_clients",
    "connect",
    "connect_all",
    "error_code",
    "fmt_eps",
    "format_address",
    "key_lengths",
    "parallel",
    "parse_address",
    "parse_epsilon",
    "parse_servers",
    "raise_refusal",
    "recv_json",
    "send_json",
    "server_label",
]

SESSION_ID = b"pairwise-ecdf"
PROTOCOL_DIGEST = b"pairwise-ecdf/3"  # 3: verified uploads (vdpf keys, the servers' check channel)
ROLE_SERVER = "ecdf-server"
ROLE_CLIENT = "ecdf-client"
ROLE_QUERIER = "ecdf-querier"
ROLE_PEER = "ecdf-peer"
#: Largest bulk frame of an upload (ids, key lengths, keys, pointwise shares): 8 MiB.
UPLOAD_FRAME_MAX = 8 << 20
#: Largest epsilon accepted in one request.
MAX_EPSILON = Fraction(10**6)


class ECDFError(PairwiseError, ValueError):
    """A request of the ECDF service cannot be served as asked (the message says why)."""


class BudgetExceeded(ECDFError):
    """The dataset's privacy budget would be exceeded; the server refused the query."""


class DatasetError(ECDFError):
    """Unknown dataset, or an upload that does not match the dataset's parameters."""


class UnknownDataset(DatasetError):
    """The server holds no dataset of that id."""


class DatasetExists(DatasetError):
    """The dataset id is taken (datasets are sealed): release with ``ecdf query``, or append new clients.

    A new id is no way around the budget: by default every dataset of one data owner draws from that owner's
    budget (``--budget-per-owner``)."""


class DatasetMismatch(DatasetError):
    """The servers hold different data under one dataset id; releases over it are refused."""


class QueryRefused(ECDFError):
    """A server refused a request (bad parameters, inconsistent state)."""


class Unauthorized(ECDFError):
    """The peer's identity does not allow this request (see :mod:`pairwise.protocols.ecdf.auth`)."""


class ServerUnavailable(ChannelError, ConnectionError):
    """A server could not be reached or dropped the connection; the message names it."""


class ServerBusy(ServerUnavailable):
    """A server serves its maximum number of connections; retry later."""


def fmt_eps(x: Fraction) -> str:
    """An epsilon for messages: 6 significant digits."""
    return f"{float(x):.6g}"


def key_lengths(
    scheme: str, domain_bits: int, output_bits: int, series: dict[str, int] | None = None
) -> tuple[int, ...]:
    """The byte lengths a serialized key of ``scheme`` may have (dcf: one; mshare: seed or vector key; vdpf:
    the key bundles of the dataset's ``series`` layout, :mod:`pairwise.protocols.ecdf.validation`)."""
    from .shares import key_bytes

    if scheme == "vdpf":
        from .validation import layout_for

        return layout_for(dict(series or {"all": 1}), domain_bits, output_bits).lengths()
    if scheme == "mshare":
        return (
            key_bytes("mshare", domain_bits, output_bits),
            key_bytes("mshare", domain_bits, output_bits, vector=True),
        )
    return (key_bytes(scheme, domain_bits, output_bits),)


def chunk_clients(per_client: int, want: int | None = None) -> int:
    """Most clients in one upload chunk whose bulk frames each stay within :data:`UPLOAD_FRAME_MAX`.

    ``per_client``: the largest number of bytes one client adds to the
    largest frame of a chunk.  Raises :class:`QueryRefused` if a single client
    does not fit.  ``want`` (a smaller preferred size) is honoured.
    """
    per = max(int(per_client), 8)  # the id frame has 8 bytes per client
    if per > UPLOAD_FRAME_MAX:
        raise QueryRefused(
            f"one client's data ({per} bytes) exceeds the {UPLOAD_FRAME_MAX}-byte frame limit; "
            "use fewer thresholds or series, or the FSS keys"
        )
    k = UPLOAD_FRAME_MAX // per
    return k if want is None else max(1, min(k, int(want)))


# refusal codes, most specific class first
_CODES = (
    ("budget", BudgetExceeded),
    ("exists", DatasetExists),
    ("mismatch", DatasetMismatch),
    ("unknown", UnknownDataset),
    ("dataset", DatasetError),
    ("unauthorized", Unauthorized),
    ("busy", ServerBusy),
    ("unavailable", ServerUnavailable),
)


def error_code(exc: BaseException) -> str:
    """The ``code`` of a refusal reply for ``exc`` (inverse of :func:`raise_refusal`)."""
    return next((code for code, cls in _CODES if isinstance(exc, cls)), "refused")


def parse_servers(text: str | list) -> list[tuple[str, int]]:
    """``HOST:PORT,HOST:PORT,...`` (or a list of addresses/tuples) -> list of (host, port), m >= 2."""
    if isinstance(text, str):
        items = [p for p in (x.strip() for x in text.split(",")) if p]
        addrs = [parse_address(p) for p in items]
    else:
        addrs = [tuple(a) if not isinstance(a, str) else parse_address(a) for a in text]
        addrs = [(str(h), int(p)) for h, p in addrs]
    if len(addrs) < 2:
        raise ValueError(f"need at least 2 servers (HOST:PORT,HOST:PORT), got {len(addrs)}")
    if any(p == 0 for _, p in addrs):
        raise ValueError("server ports must be non-zero")
    if len(set(addrs)) != len(addrs):
        raise ValueError("the server list names the same address twice")
    return addrs


def connect(
    addr: tuple[str, int],
    role: str,
    *,
    label: str,
    connect_timeout: float,
    timeout: float,
    tls=None,
    insecure: bool = False,
    peer_names=None,
) -> TCPChannel:
    """Connect and handshake as ``role``; failures name ``label``.

    With ``tls`` (a :class:`pairwise.mpc.tls.TLSConfig`) the connection is
    mutual TLS and the other end must hold a ``server`` certificate (and one
    of ``peer_names``, if given); a refused identity raises
    :class:`pairwise.mpc.errors.AuthenticationError` or ``AccessDenied``.
    Without ``tls`` the address must be loopback unless ``insecure``.  A
    server that cannot be reached raises :class:`ServerUnavailable`; one that
    stays busy until ``connect_timeout`` (it cancels TLS handshakes while its
    authentication stage is full) raises :class:`ServerBusy`.
    """
    from pairwise.mpc.errors import HandshakeError, InsecureTransport, PeerBusy

    host, port = addr
    where = f"{label} at {format_address(addr)}"
    try:
        ch = TCPChannel.connect(
            host,
            port,
            deadline=connect_timeout,
            timeout=timeout,
            tls=tls,
            insecure=insecure,
            peer_roles=None if tls is None else ("server",),
            peer_names=peer_names,
        )
    except (HandshakeError, InsecureTransport) as exc:  # an identity or transport refusal: keep its class
        raise type(exc)(f"{where}: {exc}") from exc
    except PeerBusy as exc:  # retried until connect_timeout: still busy
        raise ServerBusy(
            f"{where} is busy (it serves its maximum of connections; tried for {connect_timeout:g} s): retry later"
        ) from exc
    except ChannelError as exc:
        raise ServerUnavailable(f"{where} is unavailable: {exc}") from exc
    try:
        handshake(
            ch,
            role,
            SESSION_ID,
            PROTOCOL_DIGEST,
            peer_role=ROLE_SERVER,
            extra_label="protocol",
            timeout=min(timeout, 30.0),
        )
    except ChannelError as exc:
        ch.close()
        raise ServerUnavailable(f"{where}: handshake failed: {exc}") from exc
    return ch


def parse_epsilon(value: object, name: str = "epsilon") -> Fraction:
    """A positive, finite epsilon as an exact Fraction of its decimal form (0.1 -> 1/10)."""
    if isinstance(value, bool):
        raise ECDFError(f"{name} must be a number, got {value!r}")
    try:
        eps = Fraction(str(value)) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise ECDFError(f"{name} must be a positive number, got {value!r}") from None
    if not 0 < eps <= MAX_EPSILON:
        raise ECDFError(f"{name} must lie in (0, {MAX_EPSILON}], got {value!r}")
    if eps.denominator > 10**30:  # e.g. "1e-999999": exact, but useless and too long to print or send
        raise ECDFError(f"{name} must be at least 1e-30 with at most 30 decimals, got {value!r}")
    return eps


def raise_refusal(label: str, reply: dict) -> None:
    """Raise the exception matching a ``{"ok": false}`` reply of server ``label``."""
    msg = f"{label} refused: {reply.get('error', 'unknown error')}"
    raise dict(_CODES).get(reply.get("code"), QueryRefused)(msg)


def server_label(servers, j: int) -> str:
    """``server J (HOST:PORT)`` for messages."""
    return f"server {j} ({format_address(servers[j])})"


def parallel(fn, count: int) -> list:
    """Run fn(j) for j < count in threads (one channel each); re-raise the first error by server order."""
    import threading

    results: list = [None] * count
    errors: list = [None] * count

    def work(j):
        try:
            results[j] = fn(j)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors[j] = exc

    threads = [threading.Thread(target=work, args=(j,), daemon=True) for j in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def connect_all(
    servers, role: str, connect_timeout: float, timeout: float, *, tls=None, insecure: bool = False
) -> list:
    """Connect to every server (in parallel) before sending anything; a down server fails the whole call."""
    chans: list = [None] * len(servers)

    def one(j):
        chans[j] = connect(
            servers[j],
            role,
            label=server_label(servers, j),
            connect_timeout=connect_timeout,
            timeout=timeout,
            tls=tls,
            insecure=insecure,
        )

    try:
        parallel(one, len(servers))
    except BaseException:
        for ch in chans:
            if ch is not None:
                ch.close()
        raise
    return chans


def call(servers, j: int, ch: Channel, msg: dict | None, timeout: float | None = None) -> dict:
    """Send ``msg`` (if any) to server j and return its reply; channel failures name the server."""
    try:
        if msg is not None:
            send_json(ch, msg)
        return recv_json(ch, timeout=timeout)
    except ChannelError as exc:
        if isinstance(exc, ServerUnavailable):
            raise
        raise ServerUnavailable(f"{server_label(servers, j)} failed during the request: {exc}") from exc


def call_ok(servers, j: int, ch: Channel, msg: dict | None, timeout: float | None = None) -> dict:
    """:func:`call`, raising the server's refusal as an exception."""
    reply = call(servers, j, ch, msg, timeout)
    if not reply.get("ok"):
        raise_refusal(server_label(servers, j), reply)
    return reply
