"""Multi-server differentially private ECDF service ([BMR25, Sec. 4]).

Modules, from the bottom up:

- :mod:`pairwise.protocols.ecdf.wire`: addresses, JSON control frames, frame limits, roles and errors.
- :mod:`pairwise.protocols.ecdf.ops`: one frozen dataclass per request, validated field by field.
- :mod:`pairwise.protocols.ecdf.auth`: who may do what (``Policy.authorize(op, peer)``).
- :mod:`pairwise.protocols.ecdf.shares`: client key generation (DCF, m-party
  shares, pointwise) and the servers' share evaluation.
- :mod:`pairwise.protocols.ecdf.validation`: the verifiable keys of two
  servers (``vdpf``) and the servers' check of every client (robust aggregation).
- :mod:`pairwise.protocols.ecdf.noise`: noise between the servers (garbled
  two-server discrete Laplace, Polya shares for m > 2).
- :mod:`pairwise.protocols.ecdf.storage`: durable state in SQLite (datasets, keys, ledger).
- :mod:`pairwise.protocols.ecdf.ledger`: the privacy ledger (reserve, charge before noise, agree).
- :mod:`pairwise.protocols.ecdf.dataset`: sealed datasets, digests, consistent snapshots.
- :mod:`pairwise.protocols.ecdf.release`: release plans and one server's part of a release.
- :mod:`pairwise.protocols.ecdf.peers`: the server-to-server channels (two-server noise, the upload's check).
- :mod:`pairwise.protocols.ecdf.handlers`: request handlers (uploads, status, releases).
- :mod:`pairwise.protocols.ecdf.server`: the server process (connections, deadlines, shutdown).
- :mod:`pairwise.protocols.ecdf.uploader`, :mod:`pairwise.protocols.ecdf.querier`,
  :mod:`pairwise.protocols.ecdf.processes`: the client side (gathered in
  :mod:`pairwise.protocols.ecdf.client`).

Security model: servers are semi-honest and do not collude; clients and
queriers may deviate (two servers check every client); see each module and
:mod:`pairwise.protocols.ecdf.server`.
"""
