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
    from scipy import stats  # slow to import; only intervals need it
    half = float(stats.t.ppf(0.5 + level / 2, a.size - 1)) * float(a.std(ddof=1)) / math.sqrt(a.size)
    mean = float(a.mean())
    return [mean - half, mean + half]


def binomial_interval(k: int, n: int, level: float = LEVEL) -> list[float] | None:
    """Clopper-Pearson (exact) interval for a proportion k / n: the Beta quantiles
    `B((1-level)/2; k, n-k+1)` and `B((1+level)/2; k+1, n-k)` (0 and 1 at the ends); None for n = 0.
    Conservative: covers at least `level` for every true proportion."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    from scipy import stats
    alpha = 1.0 - level
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return [lo, hi]


def fisher_p(k1: int, n1: int, k2: int, n2: int) -> float | None:
    """Two-sided Fisher exact p-value of k1 / n1 against k2 / n2 (successes / trials); None if a group is empty.
    3 of 3 against 0 of 3 gives p = 0.10: three seeds cannot carry "only"."""
    if n1 <= 0 or n2 <= 0:
        return None
    from scipy import stats
    return float(stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)
