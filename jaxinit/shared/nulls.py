"""Nulls and resampling for initialization memory: the noise floor of the spread, a randomization test
of the sigma_w labels within each seed, and the seed bootstrap behind crossing and collapse intervals.

The data of one setting and selection rule are a matrix A[s, k]: the test accuracy (a fraction) of
seed s at grid point k of the common sigma_w grid (`stats.common_grid`), n seeds by K values.

**Noise floor** (`noise_floor`). With no sigma_w dependence, A[s, k] = a_s + e[s, k], and the spread
max_k - min_k of a seed is the range of K noise values: E[spread_pp] = E[range of K draws] > 0
(about 2.5 sd for K = 6 Gaussian draws), so a spread is evidence of memory only above this floor.
The noise is estimated from the seed-to-seed variation at fixed sigma_w, which no sigma_w effect
enters: the residuals r[s, k] = A[s, k] - mean_s' A[s', k] are, for fixed s, K independent draws of
variance (1 - 1/n) sd^2, so

    spread_null_pp = 100 sqrt(n / (n - 1)) mean_s (max_k r[s, k] - min_k r[s, k])

is the spread expected with no sigma_w dependence (unbiased for Gaussian noise; needs n >= 2 seeds).
It removes an additive sigma_w effect before measuring, so it does not grow with the memory itself.

**Randomization test** (Fisher's test of a randomized complete block design: blocks = seeds,
treatments = sigma_w). H0: within each seed the accuracies do not depend on sigma_w, i.e. the K values
of a row are exchangeable. Under H0 the relabelled matrix A[s, pi_s(k)], with an independent
permutation pi_s for every seed, has the law of A. Statistics and their one-draw p-values:

- spread: the excess spread_pp - spread_null_pp. spread_pp is max - min within a seed and is not
  changed by relabelling, while relabelling misaligns the seeds' curves and so raises the floor when
  the seeds share a sigma_w dependence: `spread_p` = P(excess_null >= excess_obs) (one-sided).
- slope: the mean over seeds of the per-seed least-squares slope against ln sigma_w (`stats.
  per_seed_slopes`): `slope_p` = P(|slope_null| >= |slope_obs|) (two-sided).

Why not one common permutation for every seed: a common relabelling only reorders the columns of A,
which leaves every order-free statistic (spread_pp, the floor, the spread of the seed-averaged curve)
unchanged, so a spread test under it gives p = 1 whatever the data. The slope test could use it, but
one scheme for both keeps the two p-values about the same null.

Arrangements: all (K!)^n of them when there are at most `MAX_EXACT` (p = share of arrangements at
least as extreme, the identity included); else `N_DRAWS` random ones from a Generator seeded with
`SEED` (p = (1 + count) / (1 + N), which keeps the test valid), so equal inputs give equal p-values.
"""
from __future__ import annotations

import itertools
import math
from typing import Hashable, Mapping, Sequence

import numpy as np

from jaxinit import intervals
from jaxinit.shared import seed_stats as stats

MAX_EXACT = 5040          # 7!: one seed and 7 sigma_w, or 2 seeds and 4, are enumerated exactly
N_DRAWS = 10_000          # random arrangements otherwise: p resolves down to 1e-4
SEED = 0                  # the Generator seed of every draw: equal inputs give equal summaries
N_BOOT = 2000             # seed-bootstrap resamples of crossing and collapse intervals
_TIE = 1e-9               # relative: a null statistic this close to the observed one counts as a tie


def accuracy_matrix(values: Mapping[Hashable, Mapping[float, float]], grid: Sequence[float]) -> np.ndarray | None:
    """A[s, k] from {seed: {sigma_w: accuracy}} (sorted seeds, `grid` order); None if a value is missing."""
    if len(grid) < 2 or not values:
        return None
    a = np.array([[values[s].get(g, math.nan) for g in grid] for s in sorted(values)], np.float64)
    return a if np.all(np.isfinite(a)) else None


def noise_floor(a: np.ndarray) -> np.ndarray | float | None:
    """spread_null_pp of A (..., n, K) (module docstring); None (scalar input) below 2 seeds."""
    n = a.shape[-2]
    if n < 2:
        return None
    r = a - a.mean(axis=-2, keepdims=True)
    floor = 100.0 * math.sqrt(n / (n - 1)) * (r.max(axis=-1) - r.min(axis=-1)).mean(axis=-1)
    return float(floor) if np.ndim(floor) == 0 else floor


def arrangements(n: int, k: int, max_exact: int = MAX_EXACT, n_draws: int = N_DRAWS,
                 seed: int = SEED) -> tuple[np.ndarray, bool]:
    """Within-seed relabellings as an index array (N, n, k), and whether they are all (k!)^n of them."""
    if math.factorial(k) ** n <= max_exact:
        perms = list(itertools.permutations(range(k)))
        return np.array(list(itertools.product(perms, repeat=n)), np.intp).reshape(-1, n, k), True
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((n_draws, n, k)), axis=-1), False


def _p_value(null: np.ndarray, obs: float, exact: bool) -> float:
    count = int(np.sum(null >= obs - _TIE * max(1.0, abs(obs))))
    return count / null.size if exact else (1 + count) / (1 + null.size)


def randomization_test(a: np.ndarray, grid: Sequence[float], max_exact: int = MAX_EXACT,
                       n_draws: int = N_DRAWS, seed: int = SEED) -> dict:
    """`spread_null_pp`, `spread_p`, `slope_p`, `null_draws`, `null_exact` of A (n, K) (module docstring).

    Spread entries are None below 2 seeds (no seed-to-seed noise to measure); the slope test works
    with one seed. `null_draws`: the number of arrangements the p-values rest on.
    """
    n, k = a.shape
    idx, exact = arrangements(n, k, max_exact, n_draws, seed)
    null_a = np.take_along_axis(np.broadcast_to(a, idx.shape), idx, axis=-1)
    xc = np.log(np.asarray(grid, np.float64))
    xc = xc - xc.mean()
    slope = lambda m: 100.0 * (m @ xc).mean(axis=-1) / float(xc @ xc)   # noqa: E731 (mean per-seed slope)
    out = {"slope_p": _p_value(np.abs(slope(null_a)), abs(float(slope(a))), exact),
           "null_draws": int(idx.shape[0]), "null_exact": exact,
           "spread_null_pp": noise_floor(a), "spread_p": None}
    if n >= 2:
        # spread_pp is invariant under relabelling: excess_null >= excess_obs  <=>  -floor_null >= -floor_obs
        out["spread_p"] = _p_value(-noise_floor(null_a), -out["spread_null_pp"], exact)
    return out


def memory_statistics(values: Mapping[Hashable, Mapping[float, float]], grid: Sequence[float]) -> dict:
    """Spread, slope and their nulls of one setting and rule, keyed as for the `best_val` rule.

    `values`: {seed: {sigma_w: test accuracy}}; `grid`: the common sigma_w grid. Returns
    `spread_pp`, `spread_pp_std`, `spread_ci95`, `spread_pp_per_seed` (`stats`), `memory_slope` (mean
    per-seed slope, pp per e-fold of sigma_w), `memory_slope_std`, `memory_slope_ci95` (95 % t interval
    over seeds), `memory_slope_per_seed`, and `randomization_test`'s keys; all None (per-seed lists
    empty) when a value is missing or the grid has fewer than 2 points.
    """
    spreads = stats.per_seed_spreads(values, grid)
    slopes = stats.per_seed_slopes(values, grid)
    a = accuracy_matrix(values, grid)
    s_mean, s_std, s_ci = stats.seed_statistics(spreads)
    b_mean, b_std, b_ci = stats.seed_statistics(slopes)
    null = randomization_test(a, grid) if a is not None and spreads is not None else dict.fromkeys(
        ("slope_p", "null_draws", "null_exact", "spread_null_pp", "spread_p"))
    return {"spread_pp": s_mean, "spread_pp_std": s_std, "spread_ci95": s_ci, "spread_pp_per_seed": spreads or [],
            "memory_slope": b_mean, "memory_slope_std": b_std, "memory_slope_ci95": b_ci,
            "memory_slope_per_seed": slopes or [], **null}


# --------------------------------------------------------------------------- seed bootstrap
def bootstrap_means(per_seed: Sequence[float], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `n_boot` resamples (with replacement) of the per-seed values: one point's spread redrawn."""
    v = np.asarray(per_seed, np.float64)
    return v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1)


def percentile_interval(samples: Sequence[float], level: float = intervals.LEVEL) -> list[float | None] | None:
    """[lo, hi] percentile interval of bootstrap samples; +inf samples (a crossing beyond the swept
    range) count as larger than any value, and a bound that falls on them is None. None if no samples."""
    s = np.asarray(samples, np.float64)
    if s.size == 0:
        return None
    lo, hi = np.quantile(s, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return [float(lo) if np.isfinite(lo) else None, float(hi) if np.isfinite(hi) else None]
