"""Local-model and shuffle-model protocols.

Modules:

- :mod:`pairwise.protocols.ldp.ustat`: [BBGK20, Algorithm 1]
  (quantization + k-ary randomized response), Theorem 1.
- :mod:`pairwise.protocols.ldp.auc`: the hierarchical-histogram AUC protocol ([BBGK20, Sec. 4, App. B]).
- :mod:`pairwise.protocols.ldp.qmle`: one-bit bit-flip submissions and the QMLE for
  quantile regression ([OMH22]).
- :mod:`pairwise.protocols.ldp.shuffle`: shuffled-model binary sums and histograms
  ([BC20]).
- :mod:`pairwise.protocols.ldp.errors`: their exceptions (``LDPParameterError``,
  ``UnknownKernel``, ``LDPDataError``, ``ReportError``; all ``ValueError``).

Security model: each user randomizes locally with the OS CSPRNG; ``simulate_*``
functions take a seeded generator and are for experiments only.
"""

from .errors import LDPDataError, LDPError, LDPParameterError, ReportError, UnknownKernel

__all__ = ["LDPError", "LDPParameterError", "UnknownKernel", "LDPDataError", "ReportError"]
