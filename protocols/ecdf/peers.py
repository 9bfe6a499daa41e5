"""Server-to-server channels (m = 2): the noise of a release, the check of an upload; who connects, the rendezvous.

What it does
    A two-server release needs one garbled-circuit session between the
    servers (:mod:`pairwise.protocols.ecdf.noise`): server 0 garbles, server 1
    evaluates.  Server 0 *connects* to server 1 once every server has
    prepared the release (:func:`connect_peer`, request ``link``, before any
    budget is charged), at the address of its own configuration (``ecdf serve --peer 1=HOST:PORT``);
    without one it uses the address the querier listed.  Either way, with
    TLS the connection must reach the certificate name configured for
    server 1 (``--peer-name 1=NAME``) and is authorized as the ``noise``
    operation (:class:`pairwise.protocols.ecdf.auth.Policy`), so an impostor
    at that address is refused and nothing is charged.  The 2PC itself starts
    on that channel when the release runs (:func:`garbler_session`).

    Server 1 *accepts* (:meth:`PeerHub.accept`): the connecting server sends
    ``{"op": "peer", "rid": R, "server_id": 0}``; it must be authorized as
    server 0 and R must be a release this server has prepared
    (:meth:`PeerHub.expect`); the channel is parked until the release's own
    thread picks it up (:meth:`PeerHub.wait`), with a timeout on both sides.

    Uploads of verified (``vdpf``) keys use the same path: server 0 opens a
    :class:`VerifyLink` for the upload when its header is accepted
    (:func:`open_verify_link`), sends ``{"op": "verify", "upload_id", "chunks",
    "server_id": 0}`` and then, as one raw frame, the 64-byte verifier key it
    drew from ``os.urandom``; server 1 parks the channel
    (:meth:`PeerHub.accept`) until its own session of that upload takes it
    (:meth:`PeerHub.verify_link`).  Per chunk the two then exchange one byte
    (parsed or not) and a 16-byte digest per client
    (:meth:`VerifyLink.exchange`; :mod:`pairwise.protocols.ecdf.validation`),
    authorized as the ``verify`` operation, pinned to the configured names.

Security model
    The channel carries garbled tables, labels and OT messages only; the
    noise is hidden from each server by the garbling itself.  An upload's
    check carries the verifier key (secret from every client: only the two
    servers see it, under TLS) and digests that are equal for every valid
    client.  Only the identity check (TLS) keeps a third party from taking a
    server's place.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from pairwise.mpc.channel import TCPChannel
from pairwise.mpc.errors import ChannelError, HandshakeError, ProtocolError

from .auth import Policy, peer_of
from .ops import HoldsRequest, PeerHello, VerifyHello, parse_peer_request
from .wire import (
    ROLE_PEER,
    SESSION_ID,
    ECDFError,
    ServerUnavailable,
    Unauthorized,
    connect,
    error_code,
    format_address,
    raise_refusal,
    recv_json,
    send_json,
)

__all__ = ["PeerHub", "VerifyLink", "ask_holds", "connect_peer", "dial_peer", "garbler_session", "open_verify_link"]

#: Bytes of an upload's verifier key (:data:`pairwise.protocols.ecdf.validation.VERIFY_KEY_BYTES`).
VERIFY_KEY_BYTES = 64


def dial_peer(
    addr: tuple[str, int],
    label: str,
    policy: Policy,
    server_id: int,
    *,
    connect_timeout: float,
    timeout: float,
    tls=None,
    insecure: bool = False,
):
    """A channel to server ``server_id`` at ``addr`` as ``ecdf-peer`` (under TLS only to the certificate name
    this server's configuration expects for it)."""
    return connect(
        addr,
        ROLE_PEER,
        label=label,
        connect_timeout=connect_timeout,
        timeout=timeout,
        tls=tls,
        insecure=insecure,
        peer_names=policy.server_name(server_id),
    )


def connect_peer(
    rid: str,
    addr: tuple[str, int],
    policy: Policy,
    *,
    connect_timeout: float,
    timeout: float,
    tls=None,
    insecure: bool = False,
    dial=None,
) -> tuple[TCPChannel, str]:
    """Server 0, while preparing release ``rid``: connect to server 1, check who it is, announce the release.

    Runs before any budget is charged, so an impostor, a server that is
    down or one that does not expect the release refuses the release for
    free.  Returns (channel, label); :func:`garbler_session` starts the 2PC
    on it when the release runs.  ``dial``: replaces :func:`dial_peer`
    (in-process tests connect the servers by memory channels).
    """
    label = f"peer server 1 ({format_address(addr)})"
    try:
        ch = (dial or dial_peer)(
            addr, label, policy, 1, connect_timeout=connect_timeout, timeout=timeout, tls=tls, insecure=insecure
        )
    except HandshakeError as exc:  # TLS: not the certificate this server is configured to expect as server 1
        raise Unauthorized(f"refusing the release: {exc}") from exc
    try:
        policy.authorize("noise", peer_of(ch), server_id=1)
        send_json(ch, PeerHello(rid).to_json())
        reply = recv_json(ch, timeout=timeout)
        if not reply.get("ok"):
            raise_refusal(label, reply)
        return ch, label
    except ChannelError as exc:
        ch.close()
        if isinstance(exc, ServerUnavailable):
            raise
        raise ServerUnavailable(f"{label}: {exc}") from exc
    except BaseException:
        ch.close()
        raise


def ask_holds(
    addr: tuple[str, int],
    server_id: int,
    question: HoldsRequest,
    policy: Policy,
    *,
    connect_timeout: float,
    timeout: float,
    tls=None,
    insecure: bool = False,
    dial=None,
) -> dict:
    """Ask server ``server_id`` at ``addr`` whether it holds the upload ``question`` names (a
    :class:`~pairwise.protocols.ecdf.ops.HoldsRequest`: dataset, upload id, the asking server), committed or
    staged right now: its reply ``{"dataset", "held", "staged"}``.  Under TLS only the certificate name this
    server's configuration expects for ``server_id`` is asked."""
    label = f"server {server_id} ({format_address(addr)})"
    ch = (dial or dial_peer)(
        addr, label, policy, server_id, connect_timeout=connect_timeout, timeout=timeout, tls=tls, insecure=insecure
    )
    try:
        policy.authorize("peer", peer_of(ch), server_id=server_id)
        send_json(ch, question.to_json())
        reply = recv_json(ch, timeout=timeout)
        if not reply.get("ok"):
            raise_refusal(label, reply)
        return {k: bool(reply.get(k)) for k in ("dataset", "held", "staged")}
    finally:
        ch.close()


def garbler_session(rid: str, ch: TCPChannel, label: str):
    """Server 0, when the release runs: the garbler's side of the 2PC on ``ch``; (session, channel, label)."""
    from pairwise.mpc.twopc import GarblerSession

    try:
        return GarblerSession(ch, session_id=SESSION_ID + b"/" + rid.encode()), ch, label
    except ChannelError as exc:
        ch.close()
        raise ServerUnavailable(f"{label}: {exc}") from exc


class VerifyLink:
    """One upload's check channel between the two servers (``party`` 0 connected, 1 accepted).

    ``key``: the upload's verifier key.  :meth:`exchange` trades one chunk's
    parsed flags and digests (server 0 sends first, server 1 answers).
    """

    def __init__(self, ch: TCPChannel, key: bytes, party: int, label: str) -> None:
        self.ch, self.key, self.party, self.label = ch, key, party, label
        #: seconds spent in :meth:`exchange` (mostly waiting for the other server's check of the chunk)
        self.waited = 0.0

    def __repr__(self) -> str:
        return f"VerifyLink(party={self.party}, {self.label})"

    def _send(self, index: int, ok: np.ndarray, digests: np.ndarray) -> None:
        self.ch.send_array(np.array([index, ok.size], dtype=np.uint64))
        self.ch.send_array(ok.astype(np.uint8))
        self.ch.send_array(np.ascontiguousarray(digests, dtype=np.uint8))

    def _recv(self, index: int, k: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        head = self.ch.recv_array(np.uint64, 2)
        if int(head[0]) != index or int(head[1]) != k:
            raise ProtocolError(
                f"{self.label} checks chunk {int(head[0])} of {int(head[1])} clients, this server chunk {index} of {k}"
            )
        ok = self.ch.recv_array(np.uint8, k).astype(bool)
        return ok, self.ch.recv_array(np.uint8, (k, width))

    def exchange(self, index: int, ok: np.ndarray, digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The other server's (parsed (k,) bool, digests (k, w) uint8) for chunk ``index``."""
        k, width = digests.shape
        t0 = time.perf_counter()
        try:
            if self.party == 0:
                self._send(index, ok, digests)
                return self._recv(index, k, width)
            got = self._recv(index, k, width)
            self._send(index, ok, digests)
            return got
        except ChannelError as exc:
            if isinstance(exc, ServerUnavailable):
                raise
            raise ServerUnavailable(f"the check of this upload with {self.label} failed: {exc}") from exc
        finally:
            self.waited += time.perf_counter() - t0

    def bytes(self) -> int:
        """Bytes both ways on this channel so far (hello, key and digests)."""
        st = self.ch.stats()
        return int(st["bytes_sent"] + st["bytes_received"])

    def close(self) -> None:
        self.ch.close()


def open_verify_link(
    upload_id: str,
    chunks,
    addr: tuple[str, int],
    policy: Policy,
    *,
    connect_timeout: float,
    timeout: float,
    tls=None,
    insecure: bool = False,
    dial=None,
) -> VerifyLink:
    """Server 0, when a ``vdpf`` upload's header is accepted: reach server 1, check it, send the verifier key."""
    label = f"peer server 1 ({format_address(addr)})"
    try:
        ch = (dial or dial_peer)(
            addr, label, policy, 1, connect_timeout=connect_timeout, timeout=timeout, tls=tls, insecure=insecure
        )
    except HandshakeError as exc:
        raise Unauthorized(f"refusing the upload: {exc}") from exc
    try:
        policy.authorize("verify", peer_of(ch), server_id=1)
        key = os.urandom(VERIFY_KEY_BYTES)
        send_json(ch, VerifyHello(upload_id, tuple(int(k) for k in chunks)).to_json())
        ch.send(key)
        reply = recv_json(ch, timeout=timeout)
        if not reply.get("ok"):
            raise_refusal(label, reply)
        return VerifyLink(ch, key, 0, label)
    except ChannelError as exc:
        ch.close()
        if isinstance(exc, ServerUnavailable):
            raise
        raise ServerUnavailable(f"{label}: {exc}") from exc
    except BaseException:
        ch.close()
        raise


class PeerHub:
    """Server 1's side: releases expecting server 0, and server 0's parked channels."""

    def __init__(self, policy: Policy, timeout: float, log) -> None:
        self.policy = policy
        self.timeout = timeout
        self._log = log
        self._cv = threading.Condition()
        self._expected: set[str] = set()
        self._parked: dict[str, tuple[TCPChannel, float]] = {}
        #: ``holds(dataset, upload_id) -> {"dataset": bool, "held": bool, "staged": bool}`` (set by the server)
        self.holds = lambda dataset, upload_id: {"dataset": False, "held": False, "staged": False}
        self._links: dict[str, tuple[TCPChannel, bytes, tuple[int, ...], float]] = {}  # upload id -> parked check

    def expect(self, rid: str) -> None:
        with self._cv:
            self._expected.add(rid)
            self._cv.notify_all()

    def forget(self, rid: str) -> None:
        with self._cv:
            self._expected.discard(rid)
            got = self._parked.pop(rid, None)
        if got is not None:
            got[0].close()

    def accept(self, ch: TCPChannel) -> bool:
        """Serve another server's first message on ``ch``: a peer hello (the channel is parked for the
        release; returns True, the caller must not close it) or a holds query (answered by
        :attr:`holds`; returns False)."""
        try:
            hello = recv_json(ch, timeout=min(self.timeout, 30.0))
            if isinstance(hello, dict) and hello.get("op") == VerifyHello.op:
                return self._accept_verify(ch, VerifyHello.from_json(hello))
            msg = parse_peer_request(hello)
            if isinstance(msg, HoldsRequest):
                self.policy.authorize("peer", peer_of(ch), server_id=msg.server_id)
                send_json(ch, dict(self.holds(msg.dataset, msg.upload_id), ok=True))
                return False
            rid = msg.rid
            self.policy.authorize("noise", peer_of(ch), server_id=0)
            with self._cv:  # the querier prepared this server first; allow a moment for its thread
                end = time.monotonic() + min(self.timeout, 5.0)
                while rid not in self._expected and time.monotonic() < end:
                    self._cv.wait(timeout=0.5)
                if rid not in self._expected:
                    raise ECDFError(f"no release {rid} is prepared on this server")
            send_json(ch, {"ok": True})
        except ECDFError as exc:
            self._log(f"peer connection {ch.peer} refused: {exc}")
            try:
                send_json(ch, {"ok": False, "error": str(exc), "code": error_code(exc)})
            except ChannelError:
                pass
            return False
        except ChannelError as exc:
            self._log(f"peer connection {ch.peer} failed: {exc}")
            return False
        with self._cv:
            now = time.monotonic()
            for old, (och, t0) in list(self._parked.items()):
                if now - t0 > 2 * self.timeout:
                    och.close()
                    del self._parked[old]
            self._parked[rid] = (ch, now)
            self._cv.notify_all()
        return True

    def _accept_verify(self, ch: TCPChannel, hello: VerifyHello) -> bool:
        """Park server 0's check channel of an upload with its verifier key, until this server's session takes it."""
        try:
            self.policy.authorize("verify", peer_of(ch), server_id=0)
            key = ch.recv(min(self.timeout, 30.0), max_size=VERIFY_KEY_BYTES)
            if len(key) != VERIFY_KEY_BYTES:
                raise ProtocolError(f"a verifier key has {VERIFY_KEY_BYTES} bytes, got {len(key)}")
            send_json(ch, {"ok": True})
        except ECDFError as exc:
            self._log(f"peer connection {ch.peer} refused: {exc}")
            try:
                send_json(ch, {"ok": False, "error": str(exc), "code": error_code(exc)})
            except ChannelError:
                pass
            return False
        except ChannelError as exc:
            self._log(f"peer connection {ch.peer} failed: {exc}")
            return False
        with self._cv:
            now = time.monotonic()
            for old, (och, _k, _c, t0) in list(self._links.items()):
                if now - t0 > 2 * self.timeout:
                    och.close()
                    del self._links[old]
            old = self._links.pop(hello.upload_id, None)
            if old is not None:
                old[0].close()
            self._links[hello.upload_id] = (ch, bytes(key), hello.chunks, now)
            self._cv.notify_all()
        return True

    def verify_link(self, upload_id: str, chunks, label: str) -> VerifyLink:
        """Server 1: server 0's check channel of upload ``upload_id`` (waits up to the timeout for it)."""
        deadline = time.monotonic() + self.timeout
        with self._cv:
            while upload_id not in self._links:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerUnavailable(
                        f"{label} did not open the check of upload {upload_id} within "
                        f"{self.timeout:g} s (every vdpf upload is checked by both servers)"
                    )
                self._cv.wait(timeout=min(left, 1.0))
            ch, key, their_chunks, _ = self._links.pop(upload_id)
        if tuple(their_chunks) != tuple(int(k) for k in chunks):
            ch.close()
            raise ProtocolError(
                f"server 0 was announced chunks {list(their_chunks)[:8]}.., this server "
                f"{list(chunks)[:8]}..: the uploader sent the servers different uploads"
            )
        return VerifyLink(ch, key, 1, label)

    def forget_link(self, upload_id: str) -> None:
        with self._cv:
            got = self._links.pop(upload_id, None)
        if got is not None:
            got[0].close()

    def wait(self, rid: str, label: str) -> TCPChannel:
        deadline = time.monotonic() + self.timeout
        with self._cv:
            while rid not in self._parked:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerUnavailable(f"{label} did not connect for release {rid} within {self.timeout:g} s")
                self._cv.wait(timeout=min(left, 1.0))
            ch, _ = self._parked.pop(rid)
        return ch

    def open_evaluator(self, rid: str, label: str):
        """Server 1: wait for server 0's channel of release ``rid``; returns (EvaluatorSession, channel, label)."""
        from pairwise.mpc.twopc import EvaluatorSession

        ch = self.wait(rid, label)
        try:
            return EvaluatorSession(ch, session_id=SESSION_ID + b"/" + rid.encode()), ch, label
        except ChannelError as exc:
            ch.close()
            raise ServerUnavailable(f"{label}: {exc}") from exc

    def close_all(self) -> None:
        with self._cv:
            parked, self._parked = self._parked, {}
            links, self._links = self._links, {}
        for ch, _ in parked.values():
            ch.close()
        for ch, *_ in links.values():
            ch.close()
