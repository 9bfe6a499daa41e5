"""2PC subsampling U-statistics ([BBGK20, Sec. 5, Theorem 5]).

Modules:

- :mod:`pairwise.protocols.ustat.config`: :class:`UStatConfig`, the validated
  public settings of one run (its transport: :class:`pairwise.protocols.transport.Transport`).
- :mod:`pairwise.protocols.ustat.data`: public domains and fixed-point data.
- :mod:`pairwise.protocols.ustat.stats`: pair sampling (Sec. 5 step 1), exact
  U-statistics, zeta_1/zeta_2 and Theorem 5's MSE (pure functions).
- :mod:`pairwise.protocols.ustat.runners`: one runner interface for the
  simulate, cluster and network modes.
- :mod:`pairwise.protocols.ustat.result`: :class:`UStatResult` in typed groups
  (public parameters, costs, the DP release, what is not private).
- :mod:`pairwise.protocols.ustat.public`: the public side (parameter checks, public
  domain and circuit width, the noisy kernel circuit, the aggregator's estimate), shared
  with the deployment among real users (:mod:`pairwise.protocols.collect`).
- :mod:`pairwise.protocols.ustat.driver`: :func:`run_ustat`, the protocol driver.
- :mod:`pairwise.protocols.ustat.worker`: the worker process of network mode.

Security model: semi-honest parties; see :mod:`pairwise.protocols.ustat.driver`.
"""

from .config import STATISTICS, UStatConfig, UStatError
from .data import prepare_data
from .driver import run_ustat
from .result import UStatResult

__all__ = ["run_ustat", "UStatConfig", "UStatResult", "UStatError", "prepare_data", "STATISTICS"]
