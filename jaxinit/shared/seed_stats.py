"""Seed statistics of the initialization-memory spread: common sigma_w grid, per-seed spreads and
memory slopes, log-log norm slopes (the t interval: `jaxinit.intervals`).

Pure numbers (numpy); no knowledge of rows or summaries, which
`memory.spread` turns into the mappings used here.
"""
from __future__ import annotations

import math
from typing import Hashable, Mapping, Sequence

import numpy as np

from jaxinit.intervals import t_interval


def common_grid(usable: Mapping[Hashable, set]) -> list:
    """The sigma_w values usable in every seed: the sorted intersection of the seeds' sets.

    `usable`: {seed: set of usable sigma_w}; a seed is listed only if it has at least one. Spreads of
    different seeds are comparable only over the same grid, so every seed's spread is taken over this.
    """
    sets = list(usable.values())
    return sorted(set.intersection(*map(set, sets))) if sets else []


def per_seed_spreads(values: Mapping[Hashable, Mapping[float, float]], grid: Sequence[float]) -> list[float] | None:
    """100 * (max - min over `grid`) per seed, in sorted seed order; None if a value is missing or not finite.

    `values`: {seed: {sigma_w: accuracy (a fraction)}}. A seed's spread needs a finite value at every grid
    point, else the seeds would again be compared over different sets of sigma_w.
    """
    if len(grid) < 2:
        return None
    out = []
    for seed in sorted(values):
        accs = [values[seed].get(s, math.nan) for s in grid]
        if not all(math.isfinite(a) for a in accs):
            return None
        out.append(100.0 * (max(accs) - min(accs)))
    return out


def sample_std(xs: Sequence[float]) -> float | None:
    """Standard deviation with ddof = 1; None below 2 values."""
    return float(np.std(np.asarray(xs, np.float64), ddof=1)) if len(xs) >= 2 else None


def seed_statistics(per_seed: Sequence[float] | None) -> tuple[float | None, float | None, list[float] | None]:
    """(mean, std, 95 % t interval) of the per-seed spreads; all None when there are none."""
    if not per_seed:
        return None, None, None
    return float(np.mean(per_seed)), sample_std(per_seed), t_interval(per_seed)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson r, or None with fewer than 3 points (2 points always give +-1) or zero variance."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


# --------------------------------------------------------------------------- slopes (signed memory)
def ls_slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Least-squares slope b of y = a + b x: sum (x - x_bar)(y - y_bar) / sum (x - x_bar)^2.

    None below 2 points or when x has no spread; non-finite pairs are not allowed (the caller decides
    what a missing value means), so a NaN anywhere gives None.
    """
    a, b = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if a.size < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return None
    xc = a - a.mean()
    sxx = float(xc @ xc)
    return float(xc @ (b - b.mean())) / sxx if sxx > 0 else None


def per_seed_slopes(values: Mapping[Hashable, Mapping[float, float]], grid: Sequence[float]) -> list[float] | None:
    """Per seed (sorted seed order) the memory slope: 100 * d(accuracy) / d(ln sigma_w), pp per e-fold.

    The least-squares slope of the seed's accuracies (fractions) on `grid` against ln sigma_w. It is
    signed (negative: larger init scales generalize worse) and, unlike max - min, has expectation 0
    when accuracy does not depend on sigma_w. None under the conditions of `per_seed_spreads`.
    """
    if len(grid) < 2:
        return None
    x = np.log(np.asarray(grid, np.float64))
    out = []
    for seed in sorted(values):
        b = ls_slope(x, [values[seed].get(s, math.nan) for s in grid])
        if b is None:
            return None
        out.append(100.0 * b)
    return out


def loglog_slopes(pairs: Mapping[Hashable, Sequence[tuple[float, float]]]) -> list[float] | None:
    """Per seed (sorted order) the least-squares slope of ln(norm) against ln(initial norm).

    `pairs`: {seed: [(initial kernel norm, kernel norm later), ...]} over the common sigma_w grid.
    The slope is the norm coupling: 1 when the later norm is proportional to the initial one (the
    radius remembers the init scale fully), 0 when every member ends at one common norm. None if a
    seed has fewer than 2 pairs or a norm that is not positive and finite.
    """
    out = []
    for seed in sorted(pairs):
        p = np.asarray(pairs[seed], np.float64).reshape(-1, 2)
        if p.shape[0] < 2 or not np.all(np.isfinite(p)) or not np.all(p > 0):
            return None
        b = ls_slope(np.log(p[:, 0]), np.log(p[:, 1]))
        if b is None:
            return None
        out.append(b)
    return out or None
