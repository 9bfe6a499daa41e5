"""Multi-server differentially private ECDF service (dp-ecdf paper, Sec. 4).

Modules:

- :mod:`pairwise.protocols.ecdf.wire`: addresses, JSON control frames, roles and errors.
- :mod:`pairwise.protocols.ecdf.shares`: client key generation (DCF, m-party
  shares, pointwise) and the servers' share evaluation.
- :mod:`pairwise.protocols.ecdf.noise`: noise between the servers (garbled
  two-server discrete Laplace, Polya shares for m > 2).
- :mod:`pairwise.protocols.ecdf.server`: the server process.
- :mod:`pairwise.protocols.ecdf.client`: upload, the querier and server processes for demos.

Security model: at least one server is honest and servers are semi-honest; see
each module.
"""
