"""Protocol drivers of pairwise and the ``pairwise`` command line.

- :mod:`pairwise.protocols.ustat`: DP U-statistics with the 2PC subsampling
  protocol (ustats paper, Sec. 5, Theorem 5).
- :mod:`pairwise.protocols.ecdf`: the multi-server DP ECDF service (dp-ecdf paper, Sec. 4).
- :mod:`pairwise.protocols.ldp`: the papers' local-model and shuffle-model protocols.
- :mod:`pairwise.protocols.datasets`: the real datasets shipped in ``protocols/data`` and CSV loading.
- :mod:`pairwise.protocols.cli` and :mod:`pairwise.protocols.commands`: the command line.
- :mod:`pairwise.protocols.processes`: child processes that die with their parent; SIGTERM as a clean exit.

Security model: per module; the 2PC protocols assume semi-honest parties.
"""
