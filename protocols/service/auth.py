"""Role-based authorization of a service's requests, from the transport's verified identity.

What it does
    A service asks :meth:`RolePolicy.authorize` ``(op, peer)`` once per
    request, before it reads bulk data or touches state.  ``peer`` is the
    identity the *transport* established for the connection (:class:`Peer`,
    or the :class:`pairwise.mpc.tls.PeerIdentity` of a mutual-TLS channel:
    the certificate's name and role), never something the other side merely
    claims in a message.  A policy is a table ``operation class -> roles
    allowed``; each service names its own (the ECDF servers in
    :mod:`pairwise.protocols.ecdf.auth`, the collect aggregator in
    :mod:`pairwise.protocols.collect.wire`).

    ``peer is None`` means a plaintext connection, which the services accept
    on loopback only unless started with ``--insecure``: there is no
    identity to check, and every request is allowed.

Security model
    Authorization is only as good as the identity: with mutual TLS and role
    certificates (:mod:`pairwise.mpc.tls`) a refused request gets a clear
    ``unauthorized`` error and nothing is stored or charged for it; over
    plaintext anyone who can connect is trusted, which is why plaintext stays
    on loopback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Peer", "RolePolicy", "peer_of"]


@dataclass(frozen=True)
class Peer:
    """The authenticated identity of the other end of a connection."""

    name: str
    role: str

    def __str__(self) -> str:
        return f"{self.name!r} ({self.role})"


def peer_of(channel) -> Peer | None:
    """The transport identity of ``channel`` (``peer_identity`` set by a TLS transport; None in plaintext)."""
    return getattr(channel, "peer_identity", None)


class RolePolicy:
    """Which certificate roles may perform each operation class (``ops``); ``error``: the refusal's class.

    Subclasses add service-specific checks (e.g. the name a peer server must
    carry) by overriding :meth:`authorize` and calling ``super()``.
    """

    def __init__(self, ops: Mapping[str, tuple[str, ...]], *, error: type[Exception] = PermissionError) -> None:
        self.ops = {str(k): tuple(v) for k, v in ops.items()}
        self.error = error

    def authorize(self, op: str, peer) -> None:
        """Raise ``error`` unless ``peer`` (None: plaintext) may perform operation class ``op``."""
        if op not in self.ops:
            raise self.error(f"unknown operation {op!r}")
        if peer is None:
            return  # plaintext loopback: no identity to check (see the module docstring)
        if peer.role not in self.ops[op]:
            allowed = " or ".join(self.ops[op])
            raise self.error(f"{peer} may not {op}: that needs the role {allowed}")
