"""Who may do what on an ECDF server: one authorization call per request, from the peer's identity.

What it does
    A server asks :meth:`Policy.authorize` ``(op, peer)`` once for every
    request, before it reads any bulk data or touches any state.  ``peer`` is
    the identity the *transport* established for the connection
    (:class:`Peer`: a name and a role, e.g. from a TLS client certificate),
    never something the other side merely claims in a message.  The roles:

    ==========  ==========================================================
    op          allowed roles
    ==========  ==========================================================
    upload      ``client``, ``querier`` (upload keys, commit or abort them)
    status      ``querier``
    release     ``querier`` (prepare / go / abort, ledger reconciliation)
    noise       ``server``, and the peer's name must be the one this
                server's configuration expects for that server id (not
                whatever a querier names)
    peer        the same, for the other questions one server asks another
                (whether it holds an upload, before a repair drops it)
    verify      ``server``, with the same name check: the two servers'
                check of an upload's keys (:mod:`pairwise.protocols.ecdf.validation`)
    ==========  ==========================================================

    ``peer is None`` means a plaintext connection.  The service accepts
    plaintext only on loopback (one machine, one operator, e.g. demos and
    tests) unless started with ``--insecure``; every request is then allowed:
    there is no identity to check.  With TLS (:mod:`pairwise.mpc.tls`) the
    identity is the verified certificate's name and role
    (:class:`pairwise.mpc.tls.PeerIdentity`, read from the channel's
    ``peer_identity``), and a server must be told the certificate name of
    every other server it runs noise with (``--peer-name J=NAME``).

Security model
    Authorization is only as good as the identity: over plaintext TCP anyone
    who can connect is trusted, which is why plaintext stays on loopback.
    With mutual TLS (certificates carrying the role) a refused request gets a
    clear ``unauthorized`` error and the server keeps serving; nothing is
    stored or charged for it.
"""

from __future__ import annotations

from ..service.auth import Peer, RolePolicy, peer_of
from .wire import Unauthorized

__all__ = ["OPS", "ROLE_NAMES", "Peer", "Policy", "op_of", "peer_of"]

#: Certificate roles.
ROLE_NAMES = ("server", "querier", "client")

#: Which roles may perform each operation class.
OPS: dict[str, tuple[str, ...]] = {
    "upload": ("client", "querier"),
    "status": ("querier",),
    "release": ("querier",),
    "repair": ("querier",),
    "noise": ("server",),
    "peer": ("server",),
    "verify": ("server",),
}

# request "op" -> operation class
_REQUEST_OPS = {
    "upload": "upload",
    "pointwise": "upload",
    "commit": "upload",
    "discard": "upload",
    "status": "status",
    "uploads": "status",
    "drop_upload": "repair",
    "prepare": "release",
    "link": "release",
    "go": "release",
    "abort": "release",
    "ledger": "release",
    "adopt": "release",
    "peer": "noise",
    "verify": "verify",
}


def op_of(request_op: object) -> str | None:
    """The operation class of a request ``op`` (None for an unknown op)."""
    return _REQUEST_OPS.get(request_op) if isinstance(request_op, str) else None


class Policy(RolePolicy):
    """Role-based authorization of one server (the shared role table check of
    :class:`pairwise.protocols.service.auth.RolePolicy`, plus the names of the peer servers).

    ``server_names`` maps server ids to the names their certificates must
    carry (the local configuration); without an entry, any ``server``
    certificate is accepted for that id.
    """

    def __init__(self, server_names: dict[int, str] | None = None, *, tls: bool = False) -> None:
        super().__init__(OPS, error=Unauthorized)
        self.server_names = {int(j): str(n) for j, n in (server_names or {}).items()}
        self.tls = bool(tls)

    def server_name(self, server_id: int) -> str | None:
        """The certificate name server ``server_id`` must present (None in plaintext).

        Under TLS a server without that configuration cannot run a two-server
        release: anyone holding some server certificate of the CA could
        otherwise take the other server's place.
        """
        if not self.tls:
            return None
        name = self.server_names.get(server_id)
        if name is None:
            raise Unauthorized(
                f"this server does not know which certificate server {server_id} holds: "
                f"start it with --peer-name {server_id}=NAME"
            )
        return name

    def authorize(self, op: str, peer: Peer | None, *, server_id: int | None = None) -> None:
        """Raise :class:`Unauthorized` unless ``peer`` may perform operation class ``op``.

        ``server_id``: for ``noise`` and ``verify``, the server id the peer must be.
        """
        super().authorize(op, peer)
        if peer is None:
            return
        if op in ("noise", "peer", "verify") and server_id is not None:
            want = self.server_names.get(server_id) if not self.tls else self.server_name(server_id)
            if want is not None and peer.name != want:
                raise Unauthorized(
                    f"{peer} is not server {server_id}: this server's configuration expects "
                    f"{want!r} as server {server_id}"
                )
