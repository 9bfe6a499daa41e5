"""Protocol drivers of pairwise and the ``pairwise`` command line.

- :mod:`pairwise.protocols.ustat` / :mod:`pairwise.protocols.ustat_math`: DP U-statistics with the
  2PC subsampling protocol (ustats paper, Sec. 5, Theorem 5).
- :mod:`pairwise.protocols.ldp_ustat`, :mod:`pairwise.protocols.ldp_auc`, :mod:`pairwise.protocols.qmle`,
  :mod:`pairwise.protocols.shuffle`: the papers' local-model and shuffle-model protocols.
- :mod:`pairwise.protocols.datasets`: the real datasets shipped in ``protocols/data`` and CSV loading.
- :mod:`pairwise.protocols.cli` and :mod:`pairwise.protocols.commands`: the command line.

Security model: per module; the 2PC protocols assume semi-honest parties.
"""
