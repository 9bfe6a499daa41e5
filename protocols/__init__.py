"""Protocol drivers of pairwise (library code; the ``pairwise`` command line is :mod:`pairwise.cli`).

- :mod:`pairwise.protocols.ustat`: DP U-statistics with the 2PC subsampling
  protocol ([BBGK20, Sec. 5, Theorem 5]).
- :mod:`pairwise.protocols.ecdf`: the multi-server DP ECDF service ([BMR25, Sec. 4]).
- :mod:`pairwise.protocols.service`: what the services share (SQLite state, control frames,
  role-based authorization, service processes on loopback).
- :mod:`pairwise.protocols.ldp`: the papers' local-model and shuffle-model protocols.
- :mod:`pairwise.protocols.datasets`: the real datasets shipped in ``protocols/data`` and CSV loading.
- :mod:`pairwise.protocols.cluster`: Dask distributed, shared by the U-statistic simulation and the ECDF servers.
- :mod:`pairwise.protocols.transport`: the ``--tls``/``--name``/``--insecure`` options of every networked process.
- :mod:`pairwise.protocols.processes`: child processes that die with their parent; SIGTERM as a clean exit.
- :mod:`pairwise.protocols.cli` and :mod:`pairwise.protocols.commands`: deprecated aliases of
  :mod:`pairwise.cli` and :mod:`pairwise.commands` (the command line moved there), for one release.

Security model: per module; the 2PC protocols assume semi-honest parties.
"""
