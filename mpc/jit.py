"""Former home of the compiled one-instance garbling path, now :mod:`pairwise.mpc.garble.jit`.

``pairwise.mpc.jit`` *is* that module: importing this one puts
:mod:`pairwise.mpc.garble.jit` in its place in ``sys.modules``, so
``jit.ENABLED``, ``jit.disabled()``, ``jit.warm_up()`` and settings made
through either name act on the one module the engine reads.  Kept for the
callers of the older layout (see CHANGELOG once it exists).
"""

import sys

from .garble import jit as _jit
from .garble.jit import ENABLED, HEADER, disabled, kernels, program, ready, warm_up  # noqa: F401 (for readers and type checkers)

sys.modules[__name__] = _jit
