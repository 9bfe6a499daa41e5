"""Noise power of ``pairwise noise sample``: the garbled gadget and the exact sampler give DL(exp(-eps/S)).

The command is run as a user runs it (``python -m pairwise noise sample ...
--json``, a real subprocess; ``--garbled`` garbles and evaluates the gadget
in SIMD batches on both parties' CSPRNG bits).  Its histogram is compared
with the ideal discrete Laplace P[z] ~ a^|z|, a = exp(-eps / S), computed here
(the designed gadget, :func:`pairwise.dp.dyadic.choose_discrete_laplace`,
is within total variation 1e-4 of it at these parameters, which moves the
chi-square statistic of 3000 draws by far less than its standard deviation);
the guarantee the command prints is not used.  Chi-square goodness of fit, alpha = 1e-5, power >= 0.99 against the noise
scale x2 and x1/2 asserted before the run (computed: 1.0 and 1.0 at 3000 samples).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from tests.support.noise_power import GofTest, discrete_laplace

EPS, S, COUNT = 0.5, 2, 3000


@pytest.mark.parametrize("garbled", [True, False], ids=["garbled", "exact"])
def test_noise_sample_command_draws_the_discrete_laplace(garbled):
    law = lambda f=1.0: discrete_laplace(alpha=math.exp(-EPS / (S * f)))  # noqa: E731
    test = GofTest([(law(), COUNT)])
    test.require_power({"scale x2": [law(2.0)], "scale x1/2": [law(0.5)]})
    cmd = [
        sys.executable,
        "-m",
        "pairwise",
        "noise",
        "sample",
        "--epsilon",
        str(EPS),
        "--sensitivity",
        str(S),
        "--count",
        str(COUNT),
        "--json",
    ] + (["--garbled"] if garbled else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["garbled"] is garbled and sum(out["counts"]) == COUNT
    samples = np.repeat(np.asarray(out["values"]), np.asarray(out["counts"]))
    test.check([samples], f"pairwise noise sample{' --garbled' if garbled else ''}")
