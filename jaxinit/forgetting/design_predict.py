"""Out-of-sample test of a clock: the curve one design's trained cells trace on a candidate clock, asked to
predict the trained cells of another design made of new points.

A clock collapse fitted and scored on the same cells (`horizon.clock_collapse`) favours whatever clock was
chosen after seeing them. Here, for each candidate clock c, the polynomial of `degree` in ln c is fitted to
the *fit* design's trained cells (their replicate-mean spreads) and evaluated at the clock values of the
*test* design's trained cells; the score is the mean squared prediction error

    MSE_c = mean_cells (ybar_cell - p_c(ln c_cell))^2      (pp^2),

and the verdict the differences MSE_a - MSE_b with 95 % (bias-corrected) percentile intervals over a bootstrap
that redraws both designs' replicates (two levels, `design_stats.resample`: splits, then seeds within them), so the
uncertainty of the fitted curve and of the predicted cells both enter. Pure numpy.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from jaxinit.forgetting import design, design_stats
from jaxinit.forgetting.horizon import collapse_fit
from jaxinit.shared.nulls import N_BOOT, SEED, percentile_interval


def cell_table(cells: Mapping[str, list], clocks: Sequence[str], rule: str, threshold: float):
    """(clock values {c: (n,)}, per-replicate spreads (R, n), replicates, cell ids) over the trained cells of a
    design, replicates shared by every cell (those of the first)."""
    xs: dict[str, list] = {c: [] for c in clocks}
    cols, ids, reps = [], [], None
    for name, mine in cells.items():
        for c in mine:
            if not design.trained(c, rule, threshold):
                continue
            per = design.per_replicate(c, rule)
            reps = reps or sorted(per)
            if not set(reps) <= set(per):
                continue
            cols.append([per[r] for r in reps])
            ids.append([name, c["epoch"]])
            for k in clocks:
                v = c["clocks"].get(k)
                xs[k].append(math.nan if v is None else float(v))
    return {k: np.asarray(v) for k, v in xs.items()}, np.asarray(cols).T, reps or [], ids


def _mse(x_fit, y_fit, x_test, y_test, degree: int) -> float:
    fit = collapse_fit(x_fit, y_fit, degree)
    if fit is None:
        return math.nan
    ok = np.isfinite(x_test) & (x_test > 0)
    return float(np.mean((y_test[ok] - np.polyval(fit[0], np.log(x_test[ok]))) ** 2)) if ok.any() else math.nan


def prediction(fit_cells: Mapping[str, list], test_cells: Mapping[str, list], clocks: Sequence[str], rule: str,
               threshold: float, degree: int = 2, n_boot: int = N_BOOT, seed: int = SEED) -> dict[str, Any]:
    """{"mse": {c: {"mse_pp2", "ci95"}}, "pairwise": {"a - b": {"difference_pp2", "ci95"}}, "better", "n_fit",
    "n_test", "cells_test", "rule", "degree"}: each clock's curve from `fit_cells` scored on `test_cells`."""
    xf, yf, rf, _ = cell_table(fit_cells, clocks, rule, threshold)
    xt, yt, rt, ids = cell_table(test_cells, clocks, rule, threshold)
    if yf.size == 0 or yt.size == 0:
        return {"mse": {}, "pairwise": {}, "better": None, "n_fit": int(yf.shape[-1]) if yf.size else 0,
                "n_test": int(yt.shape[-1]) if yt.size else 0, "cells_test": ids, "rule": rule, "degree": degree}
    point = {c: _mse(xf[c], yf.mean(0), xt[c], yt.mean(0), degree) for c in clocks}
    rng = np.random.default_rng(seed)
    boot = {c: np.empty(n_boot) for c in clocks}
    for b in range(n_boot):
        mf = yf[design_stats.resample(rf, rng)].mean(0)
        mt = yt[design_stats.resample(rt, rng)].mean(0)
        for c in clocks:
            boot[c][b] = _mse(xf[c], mf, xt[c], mt, degree)
    finite = [c for c in clocks if math.isfinite(point[c])]

    def interval(samples: np.ndarray, estimate: float) -> list | None:
        # bias-corrected percentiles (as `horizon.clock_collapse`): resampled means are noisier, which lifts every
        # resampled MSE by about the same amount; the shift cancels in the differences
        samples = samples[np.isfinite(samples)]
        ci = percentile_interval(samples) if samples.size and math.isfinite(estimate) else None
        return None if ci is None else [b - (float(samples.mean()) - estimate) for b in ci]
    pairwise = {f"{a} - {b}": {"difference_pp2": point[a] - point[b],
                               "ci95": interval(boot[a] - boot[b], point[a] - point[b])}
                for i, a in enumerate(finite) for b in finite[i + 1:]}
    return {"mse": {c: {"mse_pp2": point[c], "ci95": interval(boot[c], point[c])} for c in clocks},
            "pairwise": pairwise, "better": min(finite, key=point.get) if finite else None,
            "n_fit": int(yf.shape[1]), "n_test": int(yt.shape[1]), "cells_test": ids, "rule": rule, "degree": degree}
