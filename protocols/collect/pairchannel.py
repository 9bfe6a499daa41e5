"""The channel two paired users run their 2PC session over, inside the aggregator's relay (the users' seam).

What it does
    After the aggregator answers a user's ``relay`` request, that user's
    connection to the aggregator carries the session's bytes to and from
    the partner, unchanged (:mod:`pairwise.protocols.collect.relay`).
    :func:`open_pair_channel` turns that connection into the
    :class:`pairwise.mpc.channel.Channel` the 2PC runs on, by the kind the
    task names (``pair_channel`` in its spec):

    * ``plain`` (:func:`plain_channel`): the frames of the 2PC go through the
      relay as they are (the connection itself, its counters restarted);
    * ``tls`` (:func:`pairwise.protocols.collect.pair.tls_pair_channel`): TLS
      1.3 between the two users inside the relayed stream, each pinning the
      partner certificate name the aggregator announced (``partner``), so
      the aggregator relays only ciphertext and a tampering relay fails both
      users (:class:`pairwise.mpc.channel.TLSTunnel`);
    * other kinds register here with :func:`register_pair_channel`.

    A factory is called as ``factory(conn, role=..., partner=..., tls=...,
    timeout=...)`` with ``conn`` the user's :class:`~pairwise.mpc.channel.TCPChannel`
    to the aggregator (positioned right after the relay reply; its socket is
    ``conn._sock`` for a factory that needs raw bytes), ``role`` ``garbler``
    or ``evaluator`` (in ``tls``, the garbler is the TLS client), ``partner`` the
    partner's certificate name and ``tls`` this user's
    :class:`pairwise.mpc.tls.TLSConfig` (None on plaintext loopback).

Security model
    ``tls``: the aggregator sees record sizes and timing only.  ``plain``: the aggregator sees the 2PC messages it relays (labels, OT
    messages, masked inputs) and could alter them undetected; the
    semi-honest 2PC still hides each user's value from the partner.  A user
    refuses a kind it does not know (nothing is sent).
"""

from __future__ import annotations

from collections.abc import Callable

from pairwise.mpc.channel import Channel

from .wire import CollectError

__all__ = ["PAIR_CHANNELS", "open_pair_channel", "plain_channel", "register_pair_channel"]


def plain_channel(conn, *, role: str, partner: str, tls=None, timeout: float = 120.0) -> Channel:
    """The relayed connection itself: the 2PC frames pass through the relay as they are."""
    conn.timeout = float(timeout)
    conn.bytes_sent = conn.bytes_received = conn.messages_sent = conn.messages_received = 0
    return conn


def _tls_channel(conn, **kw) -> Channel:
    from .pair import tls_pair_channel  # TLS 1.3 between the two users inside the relayed stream

    return tls_pair_channel(conn, **kw)


#: kind -> factory (see the module docstring)
PAIR_CHANNELS: dict[str, Callable[..., Channel]] = {"plain": plain_channel, "tls": _tls_channel}


def register_pair_channel(kind: str, factory: Callable[..., Channel]) -> None:
    """Make ``kind`` available to tasks that name it (e.g. ``"tls"``)."""
    PAIR_CHANNELS[str(kind)] = factory


def open_pair_channel(kind: str, conn, *, role: str, partner: str, tls=None, timeout: float = 120.0) -> Channel:
    """The channel of one pair session over ``conn`` (see the module docstring)."""
    factory = PAIR_CHANNELS.get(kind)
    if factory is None:
        raise CollectError(
            f"this pairwise has no pair channel {kind!r} (known: {', '.join(sorted(PAIR_CHANNELS))}); "
            "upgrade pairwise to join this task"
        )
    if role not in ("garbler", "evaluator"):
        raise CollectError(f"a pair session role is garbler or evaluator, got {role!r}")
    return factory(conn, role=role, partner=partner, tls=tls, timeout=timeout)
