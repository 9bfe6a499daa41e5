"""Protocol drivers of pairwise and the ``pairwise`` command line.

- :mod:`protocols.ustat` / :mod:`protocols.ustat_math`: DP U-statistics with the
  2PC subsampling protocol (ustats paper, Sec. 5, Theorem 5).
- :mod:`protocols.ldp_ustat`, :mod:`protocols.ldp_auc`, :mod:`protocols.qmle`,
  :mod:`protocols.shuffle`: the papers' local-model and shuffle-model protocols.
- :mod:`protocols.datasets`: the real datasets shipped in ``protocols/data`` and CSV loading.
- :mod:`protocols.cli` and :mod:`protocols.commands`: the command line.

Security model: per module; the 2PC protocols assume semi-honest parties.
"""
