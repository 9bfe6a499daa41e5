"""2PC subsampling U-statistics (ustats-local-model-and-beyond, Sec. 5, Theorem 5).

Modules:

- :mod:`pairwise.protocols.ustat.stats`: pair sampling (Sec. 5 step 1), exact
  U-statistics, zeta_1/zeta_2 and Theorem 5's MSE (pure functions).
- :mod:`pairwise.protocols.ustat.driver`: :func:`run_ustat`, the protocol driver
  in simulate mode (one process) and network mode (worker processes).
- :mod:`pairwise.protocols.ustat.worker`: the worker process of network mode.

Security model: semi-honest parties; see :mod:`pairwise.protocols.ustat.driver`.
"""

from .driver import STATISTICS, UStatError, UStatResult, prepare_data, run_ustat

__all__ = ["run_ustat", "UStatResult", "UStatError", "prepare_data", "STATISTICS"]
