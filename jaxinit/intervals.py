"""Confidence intervals over seeds, shared by both studies.

Pure numbers (numpy, and scipy.stats for the t quantile, imported on first use: one seed trains without scipy).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

LEVEL = 0.95


def t_interval(values: Sequence[float], level: float = LEVEL) -> list[float] | None:
    """Student-t interval for the mean: mean -+ t_{(1+level)/2, n-1} s / sqrt(n); None below 2 values.

    Treats the values (one per seed) as iid draws; the choice of the swept grid and the
    machine-to-machine (float-order) variation are not in it.
    """
    a = np.asarray(values, np.float64)
    if a.size < 2:
        return None
    from scipy import stats  # ~0.3 s to import; only intervals need it
    half = float(stats.t.ppf(0.5 + level / 2, a.size - 1)) * float(a.std(ddof=1)) / math.sqrt(a.size)
    mean = float(a.mean())
    return [mean - half, mean + half]
