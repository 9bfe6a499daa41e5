"""Shared data of the ustat protocol tests: the shipped columns on their public domains, the noiseless reference."""

from __future__ import annotations

import numpy as np

from pairwise.protocols.datasets import load_dataset


def noiseless_reference(statistic, pd, pairs):
    if statistic == "gini":
        return np.abs(pd.x[pairs[:, 0]] - pd.x[pairs[:, 1]]).mean() * pd.scale
    if statistic == "kendall":
        return (np.sign(pd.x[pairs[:, 0]] - pd.x[pairs[:, 1]]) * np.sign(pd.y[pairs[:, 0]] - pd.y[pairs[:, 1]])).mean()
    return ((pd.x[pairs[:, 0]] > pd.y[pairs[:, 1]]) + 0.5 * (pd.x[pairs[:, 0]] == pd.y[pairs[:, 1]])).mean()


DATA = {
    # kernel range 2 (values mod 3 on the public domain [0, 2]), so that alpha = exp(-60/2) makes the noise vanish
    "gini": lambda: (load_dataset("diabetes")["progression"][:120] % 3, None, None),
    "kendall": lambda: (load_dataset("fair")["rate_marriage"][:120], load_dataset("fair")["religious"][:120], None),
    "auc": lambda: (
        load_dataset("breast_cancer")["mean_radius"][:150],
        None,
        load_dataset("breast_cancer")["malignant"][:150],
    ),
}


BOUNDS = {  # public domains (protocols/data/domains.json for the shipped columns)
    "gini": dict(lower=0, upper=2, decimals=0),
    "kendall": dict(lower=[1, 1], upper=[5, 4], decimals=[0, 0]),
    "auc": dict(lower=5, upper=30, decimals=3),
}
