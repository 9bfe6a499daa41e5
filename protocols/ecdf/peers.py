"""Server-to-server channels for the two-server noise (m = 2): who connects to whom, and the rendezvous.

What it does
    A two-server release needs one garbled-circuit session between the
    servers (:mod:`pairwise.protocols.ecdf.noise`): server 0 garbles, server 1
    evaluates.  Server 0 *connects* to server 1 once every server has
    prepared the release (:func:`connect_peer`, request ``link``, before any
    budget is charged), at the
    address of its own configuration (``ecdf serve --peer 1=HOST:PORT``);
    without one it uses the address the querier listed.  Either way, with
    TLS the connection must reach the certificate name configured for
    server 1 (``--peer-name 1=NAME``) and is authorized as the ``noise``
    operation (:class:`pairwise.protocols.ecdf.auth.Policy`), so an impostor
    at that address is refused and nothing is charged.  The 2PC itself starts
    on that channel when the release runs (:func:`garbler_session`).

    Server 1 *accepts* (:meth:`PeerHub.accept`): the connecting server sends
    ``{"op": "peer", "rid": R, "server_id": 0}``; it must be authorized as
    server 0 and R must be a release this server has prepared
    (:meth:`PeerHub.expect`); the channel is then parked until the release's
    own thread picks it up (:meth:`PeerHub.wait`), with a timeout on both
    sides.

Security model
    The channel carries garbled tables, labels and OT messages only; the
    noise is hidden from each server by the garbling itself.  Only the
    identity check (TLS) keeps a third party from taking a server's place.
"""

from __future__ import annotations

import threading
import time

from pairwise.mpc.channel import TCPChannel
from pairwise.mpc.errors import ChannelError, HandshakeError

from .auth import Policy, peer_of
from .ops import HoldsRequest, PeerHello, parse_peer_request
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

__all__ = ["PeerHub", "ask_holds", "connect_peer", "dial_peer", "garbler_session"]


def dial_peer(addr: tuple[str, int], label: str, policy: Policy, server_id: int, *, connect_timeout: float,
              timeout: float, tls=None, insecure: bool = False):
    """A channel to server ``server_id`` at ``addr`` as ``ecdf-peer`` (under TLS only to the certificate name
    this server's configuration expects for it)."""
    return connect(addr, ROLE_PEER, label=label, connect_timeout=connect_timeout, timeout=timeout, tls=tls,
                   insecure=insecure, peer_names=policy.server_name(server_id))


def connect_peer(rid: str, addr: tuple[str, int], policy: Policy, *, connect_timeout: float, timeout: float,
                 tls=None, insecure: bool = False, dial=None) -> tuple[TCPChannel, str]:
    """Server 0, while preparing release ``rid``: connect to server 1, check who it is, announce the release.

    Runs before any budget is charged, so an impostor, a server that is
    down or one that does not expect the release refuses the release for
    free.  Returns (channel, label); :func:`garbler_session` starts the 2PC
    on it when the release runs.  ``dial``: replaces :func:`dial_peer`
    (in-process tests connect the servers by memory channels).
    """
    label = f"peer server 1 ({format_address(addr)})"
    try:
        ch = (dial or dial_peer)(addr, label, policy, 1, connect_timeout=connect_timeout, timeout=timeout, tls=tls,
                                 insecure=insecure)
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


def ask_holds(addr: tuple[str, int], server_id: int, me: int, dataset: str, upload_id: str, policy: Policy, *,
              connect_timeout: float, timeout: float, tls=None, insecure: bool = False, dial=None) -> dict:
    """Ask server ``server_id`` at ``addr`` whether it holds ``upload_id`` of ``dataset`` (committed, or staged
    right now): its reply ``{"dataset", "held", "staged"}``.  Under TLS only the certificate name this
    server's configuration expects for ``server_id`` is asked."""
    label = f"server {server_id} ({format_address(addr)})"
    ch = (dial or dial_peer)(addr, label, policy, server_id, connect_timeout=connect_timeout, timeout=timeout,
                             tls=tls, insecure=insecure)
    try:
        policy.authorize("peer", peer_of(ch), server_id=server_id)
        send_json(ch, HoldsRequest(dataset, upload_id, me).to_json())
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
            msg = parse_peer_request(recv_json(ch, timeout=min(self.timeout, 30.0)))
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
        for ch, _ in parked.values():
            ch.close()
