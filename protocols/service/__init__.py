"""Infrastructure that several services share (the ECDF servers, the collect aggregator).

Modules, from the bottom up:

- :mod:`pairwise.protocols.service.frames`: JSON control frames (size limit
  :data:`~pairwise.protocols.service.frames.CONTROL_MAX`), ``HOST:PORT`` addresses.
- :mod:`pairwise.protocols.service.aio`: the same frames, the TLS admission
  step and the session handshake on asyncio streams (for asyncio servers).
- :mod:`pairwise.protocols.service.auth`: role-based authorization from the
  transport's verified identity (``RolePolicy.authorize(op, peer)``).
- :mod:`pairwise.protocols.service.storage`: one SQLite file per party (0700
  directory, 0600 file, WAL, ``synchronous=FULL``, an exclusive lock file,
  schema version), :class:`~pairwise.protocols.service.storage.StorageError`.
- :mod:`pairwise.protocols.service.processes`: a service as a real process on
  loopback (start, wait for its ``listening`` line, kill, restart on the same port).

TLS roles and certificates are :mod:`pairwise.mpc.tls` (``pairwise certs``);
child processes that die with their parent and SIGTERM as a clean exit are
:mod:`pairwise.protocols.processes`; the ``--tls/--name/--insecure`` options
are :mod:`pairwise.protocols.transport`.

Security model: per module; nothing here is specific to one protocol.
"""
