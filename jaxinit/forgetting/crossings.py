"""Where a spread curve crosses a level on a clock, and how sure that is.

`crossing`: the first clock value at which a family's spread falls below a level, log-linear between the
bracketing points. `crossing_interval`: its percentile interval over seed-bootstrap draws of every point's
spread (`nulls.bootstrap_means`). Pure numpy; used by `clock_lines.verdicts`.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from jaxinit.shared.nulls import percentile_interval

_TIE_REL = 1e-9   # clock values this close are one point: T_SGD of lr 0.1 / b 128 and 0.05 / b 64 differ by rounding


def _tied_means(xs: Sequence[float], ys: Sequence[float]) -> list[tuple[float, float]]:
    """(clock, spread) sorted by clock, tied clock values merged into one point at the mean of their spreads."""
    pts = sorted((float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None and x > 0)
    groups: list[list[tuple[float, float]]] = []
    for x, y in pts:
        if groups and x - groups[-1][0][0] <= _TIE_REL * x:
            groups[-1].append((x, y))
        else:
            groups.append([(x, y)])
    return [(g[0][0], float(np.mean([y for _, y in g]))) for g in groups]


def crossing(xs: Sequence[float], ys: Sequence[float], level: float) -> float | None:
    """The first clock value where the spread falls below ``level``, log-linear between the bracketing
    points (points sorted by clock; points at one clock value count once, at the mean of their spreads);
    the first point's clock if it already is below; None if never."""
    pts = _tied_means(xs, ys)
    for i, (x, y) in enumerate(pts):
        if y < level:
            if i == 0:
                return x
            (x0, y0) = pts[i - 1]
            t = (y0 - level) / (y0 - y)
            return float(math.exp(math.log(x0) + t * (math.log(x) - math.log(x0))))
    return None


def crossing_interval(xs: Sequence[float], draws: Sequence[np.ndarray | None],
                      level_draws: np.ndarray | None) -> list | None:
    """95 % percentile interval of `crossing` over bootstrap draws.

    `xs`: the points' clock values; `draws[i][b]`: point i's spread in draw b (`nulls.bootstrap_means`);
    `level_draws[b]`: the level in draw b (half the redrawn reference spread, or a constant). A draw that
    never crosses counts as beyond the swept range (+inf), so an upper bound on such draws is None.
    None when there are no points or a point (or the level) has no draws.
    """
    if not xs or any(d is None for d in draws) or level_draws is None:
        return None
    got = [crossing(xs, [d[b] for d in draws], level_draws[b]) for b in range(len(level_draws))]
    return percentile_interval([math.inf if g is None else g for g in got])
