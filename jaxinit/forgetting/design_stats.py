"""Statistics of designs replicated over data splits: the split is a random effect of every interval.

A design's unit of replication is a replicate r = (split j, seed s): the data split (`data.split_seed`:
which examples train and which validate) and, within it, the seed (init draw and data order). A
statistic with one value per replicate is modelled as

    x_js = mu + a_j + e_js,      a_j ~ (0, s_a^2) the split's effect,  e_js ~ (0, s_e^2),

so the mean over N replicates in J splits has variance s_a^2 / J + s_e^2 / N, and a t interval over
seeds alone (N - 1 degrees of freedom) leaves s_a^2 out: it does not hold on another split.
`mixed_interval` is the one-way random-effects interval: the mean of the split means ybar_j with the
standard error sd(ybar_j) / sqrt(J) on J - 1 degrees of freedom (balanced: E[MS_between] / (J n) is exactly
Var(grand mean)), with the variance components by moments, s_e^2 = MS_within and s_a^2 =
max(0, (MS_between - MS_within) / n) (`components`). One split: the seed t interval, flagged.

The memory of one cell (a point of a design at a horizon, under one selection rule) is a matrix A (R, K)
of test accuracies, R replicates by K sigma_w (`cell`): per replicate the spread (max - min, pp) and the
slope (pp per e-fold of sigma_w), each with its mixed interval; the noise floor of `nulls` with the
residuals centred within each split (a split's data shift every sigma_w's accuracy alike, which is not
noise); randomization p-values of spread and slope, sigma_w relabelled within every replicate (`nulls`).

Paired contrasts (`paired`): two cells that share replicates (same split and seed: the same data,
init draw and data order) differ by d_r = x_r(B) - x_r(A), with the mixed interval and a sign-flip p.
`resample`: a two-level bootstrap of replicates (splits with replacement, then seeds within each
drawn split) for statistics that are not means (collapse residuals). Pure numpy.
"""
from __future__ import annotations

import math
from typing import Any, Hashable, Sequence

import numpy as np

from jaxinit.shared import nulls
from jaxinit.intervals import LEVEL as CI_LEVEL
from jaxinit.intervals import t_interval

Replicate = tuple[int, int]     # (split, seed)


def _groups(values: Sequence[float], splits: Sequence[Hashable]) -> dict[Hashable, np.ndarray]:
    out: dict[Hashable, list[float]] = {}
    for v, j in zip(values, splits):
        out.setdefault(j, []).append(float(v))
    return {j: np.asarray(v) for j, v in out.items()}


def components(values: Sequence[float], splits: Sequence[Hashable]) -> dict[str, float | None]:
    """Variance components by moments: `var_split` (s_a^2), `var_seed` (s_e^2), `icc` = s_a^2 / (s_a^2 +
    s_e^2); None where a split has a single replicate (no within-split variance) or there is one split."""
    g = _groups(values, splits)
    n = [v.size for v in g.values()]
    if len(g) < 2 or min(n) < 2:
        return {"var_split": None, "var_seed": None, "icc": None}
    ms_within = sum(((v - v.mean()) ** 2).sum() for v in g.values()) / (sum(n) - len(g))
    means = np.array([v.mean() for v in g.values()])
    n_bar = float(np.mean(n))
    var_split = max(0.0, float(np.var(means, ddof=1)) - ms_within / n_bar)
    total = var_split + ms_within
    return {"var_split": var_split, "var_seed": float(ms_within), "icc": var_split / total if total > 0 else None}


def mixed_interval(values: Sequence[float], splits: Sequence[Hashable], level: float = CI_LEVEL) -> dict[str, Any]:
    """{"mean", "ci95", "df", "n_splits", "n"}: the mean of the split means with the t interval over them
    (J - 1 df); with one split, the mean and t interval over its replicates (`df` N - 1, `n_splits` 1: the
    interval then holds for this split only). None entries below 2 values."""
    v = np.asarray(values, np.float64)
    g = _groups(v, splits)
    out = {"mean": None, "ci95": None, "df": None, "n_splits": len(g), "n": int(v.size)}
    if v.size == 0:
        return out
    units = np.array([x.mean() for x in g.values()]) if len(g) >= 2 else v
    out["mean"] = float(units.mean())
    if units.size >= 2:
        out.update(ci95=t_interval(units, level), df=int(units.size - 1))
    return out


def _blocked_floor(a: np.ndarray, split_of: np.ndarray) -> np.ndarray | float | None:
    """The noise floor of `nulls.noise_floor` over A (..., R, K) with residuals centred within each split:
    100 mean_r sqrt(n_j / (n_j - 1)) (max_k r - min_k r); None when a split has one replicate."""
    r = np.empty_like(a)
    factor = np.empty(a.shape[-2])
    for j in np.unique(split_of):
        rows = split_of == j
        if rows.sum() < 2:
            return None
        r[..., rows, :] = a[..., rows, :] - a[..., rows, :].mean(axis=-2, keepdims=True)
        factor[rows] = math.sqrt(rows.sum() / (rows.sum() - 1))
    floor = 100.0 * (factor * (r.max(axis=-1) - r.min(axis=-1))).mean(axis=-1)
    return float(floor) if np.ndim(floor) == 0 else floor


def cell(acc: np.ndarray, replicates: Sequence[Replicate], grid: Sequence[float], level: float = CI_LEVEL,
         n_draws: int = nulls.N_DRAWS, seed: int = nulls.SEED) -> dict[str, Any]:
    """Memory of a cell: `acc` (R, K) test accuracies (fractions) of R replicates at the K sigma_w of `grid`.

    Returns `spread` and `slope` ({"mean", "ci95", "df", "n_splits", "n"}: `mixed_interval`), their
    per-replicate values, `null` (the split-blocked noise floor, pp), `spread_p` (one-sided: the excess
    spread - floor against relabellings within every replicate) and `slope_p` (two-sided, |mean slope|),
    `components` of the spreads. Spread entries of the null are None when a split has one replicate.
    """
    a = np.asarray(acc, np.float64)
    split_of = np.array([j for j, _ in replicates])
    spreads = 100.0 * (a.max(axis=1) - a.min(axis=1))
    x = np.log(np.asarray(grid, np.float64))
    xc = x - x.mean()
    slopes = 100.0 * (a @ xc) / float(xc @ xc)
    idx, _ = nulls.arrangements(a.shape[0], a.shape[1], 0, n_draws, seed)   # always random draws
    null_a = np.take_along_axis(np.broadcast_to(a, idx.shape), idx, axis=-1)
    slope_null = np.abs(100.0 * (null_a @ xc).mean(axis=-1) / float(xc @ xc))
    obs_slope = abs(float(slopes.mean()))
    out = {"spread": mixed_interval(spreads, split_of, level), "spread_per_replicate": spreads.tolist(),
           "slope": mixed_interval(slopes, split_of, level), "slope_per_replicate": slopes.tolist(),
           "slope_p": float((1 + np.sum(slope_null >= obs_slope * (1 - 1e-9))) / (1 + idx.shape[0])),
           "null": None, "spread_p": None, "components": components(spreads, split_of)}
    floor = _blocked_floor(a, split_of)
    if floor is not None:
        floors = _blocked_floor(null_a, split_of)
        out.update(null=floor, spread_p=float((1 + np.sum(-floors >= -floor * (1 + 1e-9))) / (1 + idx.shape[0])))
    return out


def paired(a: dict[Replicate, float], b: dict[Replicate, float], level: float = CI_LEVEL) -> dict[str, Any]:
    """B - A over the replicates both cells have: {"mean", "ci95", "df", "n_splits", "n", "p", "per_replicate"}
    (`mixed_interval` of the differences; `p`: two-sided sign-flip p of the mean difference)."""
    from jaxinit.forgetting.compare import sign_flip_p
    common = sorted(set(a) & set(b))
    d = [b[r] - a[r] for r in common]
    return {**mixed_interval(d, [j for j, _ in common], level), "p": sign_flip_p(d), "per_replicate": d}


def resample(replicates: Sequence[Replicate], rng: np.random.Generator) -> np.ndarray:
    """Indices into `replicates` of one two-level bootstrap draw: J splits drawn with replacement, then within
    each drawn split as many seeds as it has, with replacement. One split: seeds only."""
    split_of = [j for j, _ in replicates]
    splits = sorted(set(split_of))
    rows = {j: [i for i, s in enumerate(split_of) if s == j] for j in splits}
    drawn = [splits[k] for k in rng.integers(0, len(splits), len(splits))] if len(splits) > 1 else splits
    return np.concatenate([np.asarray(rows[j])[rng.integers(0, len(rows[j]), len(rows[j]))] for j in drawn])
