"""Server-to-server channels for the two-server noise (m = 2): who connects to whom, and the rendezvous.

What it does
    A two-server release needs one garbled-circuit session between the
    servers (:mod:`pairwise.protocols.ecdf.noise`): server 0 garbles, server 1
    evaluates.  Server 0 *connects* to server 1 (:func:`open_garbler`) at the
    address of the server's own configuration (``ecdf serve --peer
    1=HOST:PORT``); without one it uses the address the querier listed.
    Either way the connection is authorized as the ``noise`` operation with
    the transport identity of server 1 (:class:`pairwise.protocols.ecdf.auth.Policy`),
    so with certificates an impostor at that address is refused.

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
from pairwise.mpc.errors import ChannelError, ProtocolError

from .auth import Policy, peer_of
from .release import check_rid
from .wire import (
    ROLE_PEER,
    SESSION_ID,
    ECDFError,
    ServerUnavailable,
    connect,
    error_code,
    format_address,
    raise_refusal,
    recv_json,
    send_json,
)

__all__ = ["PeerHub", "open_garbler"]


def open_garbler(rid: str, addr: tuple[str, int], policy: Policy, *, connect_timeout: float, timeout: float):
    """Server 0: connect to server 1 for release ``rid``; returns (GarblerSession, channel, label)."""
    from pairwise.mpc.twopc import GarblerSession

    label = f"peer server 1 ({format_address(addr)})"
    ch = connect(addr, ROLE_PEER, label=label, connect_timeout=connect_timeout, timeout=timeout)
    try:
        policy.authorize("noise", peer_of(ch), server_id=1)
        send_json(ch, {"op": "peer", "rid": rid, "server_id": 0})
        reply = recv_json(ch, timeout=timeout)
        if not reply.get("ok"):
            raise_refusal(label, reply)
        return GarblerSession(ch, session_id=SESSION_ID + b"/" + rid.encode()), ch, label
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

    def expect(self, rid: str) -> None:
        with self._cv:
            self._expected.add(rid)

    def forget(self, rid: str) -> None:
        with self._cv:
            self._expected.discard(rid)
            got = self._parked.pop(rid, None)
        if got is not None:
            got[0].close()

    def accept(self, ch: TCPChannel) -> bool:
        """Serve a peer hello on ``ch``; True if the channel was parked (the caller must not close it)."""
        try:
            msg = recv_json(ch, timeout=min(self.timeout, 30.0))
            if msg.get("op") != "peer" or msg.get("server_id") != 0:
                raise ProtocolError("expected a peer hello {op: peer, rid, server_id: 0}")
            rid = check_rid(msg.get("rid"))
            self.policy.authorize("noise", peer_of(ch), server_id=0)
            with self._cv:
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
