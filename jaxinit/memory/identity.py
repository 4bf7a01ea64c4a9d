"""Does a network's own class preference survive training? The continuous identity statistic and its null (pure).

Data of one stratum (a point of one case): the class-frequency vectors on the off-distribution inputs of its S
seeds at init, ``F0[s, c]``, and after training, ``F1[s, c]`` (C classes). What every seed shares after training
(the data's own bias on Gaussian inputs, the same in every seed) is not the initialisation's, so each is taken
relative to the across-seed mean of its stratum:

    R0[s, c] = F0[s, c] - mean_s' F0[s', c],    R1[s, c] = F1[s, c] - mean_s' F1[s', c].

The statistic, pooled over the strata g of a set (one point: one stratum):

    r = sum_g sum_{s,c} R0 R1 / sqrt(sum_g sum R0^2 . sum_g sum R1^2)

(a correlation: 1 when each trained seed keeps exactly its own init preference, 0 when the trained preference is
unrelated to the seed's init, negative when it turns away from it), and beside it the retained amplitude
``beta = sum R0 R1 / sum R0^2`` (the least-squares slope of R1 on R0: 1 when the preference is untouched, as in a
network that did not move; small when training overwrote it even if what is left still correlates).

Null (`test`): the trained vectors permuted among the seeds of each stratum (H0: a seed's trained preference is
unrelated to its own init). The residuals of a stratum sum to zero over seeds, so the null's mean is exactly 0
(the identity permutation included). ``p`` = (1 + #{null >= r}) / (1 + N), one-sided, over `N_DRAWS` random
permutations (all of them when there are at most `MAX_EXACT`). The interval: a seed bootstrap (seeds resampled
with replacement within each stratum, the residuals re-centred on the resample), percentile 95 %. Power: with
the null's standard deviation sd0 and the permutation test one-sided at 5 %, the smallest r detected with 80 %
power is about (z_0.95 + z_0.80) sd0 (``mde80``: the normal approximation of the null, the alternative's spread
taken as the null's), and ``power_r03`` the power at r = 0.3 under the same approximation.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats as sps

N_DRAWS = 10_000      # random permutations: p resolves down to 1e-4
MAX_EXACT = 5040      # 7!: one stratum of up to 7 seeds is enumerated exactly
N_BOOT = 2000         # seed-bootstrap resamples of the interval
SEED = 0              # every Generator: equal inputs give equal summaries
ALPHA, POWER, R_REF = 0.05, 0.8, 0.3
_EPS = 1e-12          # a residual sum of squares below this is "no seed-specific variation"


def residuals(f_SC) -> np.ndarray:
    """The seed-specific part of one stratum's class frequencies: F - its mean over seeds (axis 0)."""
    f = np.asarray(f_SC, float)
    return f - f.mean(axis=0, keepdims=True)


def _sums(r0, r1) -> tuple[float, float, float]:
    return float(np.sum(r0 * r1)), float(np.sum(r0 * r0)), float(np.sum(r1 * r1))


def correlation(groups0, groups1) -> float | None:
    """Pooled r over strata (lists of (S_g, C) arrays of F0 and F1); None without seed-specific variation."""
    cross = sq0 = sq1 = 0.0
    for f0, f1 in zip(groups0, groups1):
        c, a, b = _sums(residuals(f0), residuals(f1))
        cross, sq0, sq1 = cross + c, sq0 + a, sq1 + b
    return cross / math.sqrt(sq0 * sq1) if sq0 > _EPS and sq1 > _EPS else None


def retained(groups0, groups1) -> float | None:
    """Pooled beta = sum R0 R1 / sum R0^2 (the slope of the trained residual on the init residual)."""
    cross = sq0 = 0.0
    for f0, f1 in zip(groups0, groups1):
        c, a, _ = _sums(residuals(f0), residuals(f1))
        cross, sq0 = cross + c, sq0 + a
    return cross / sq0 if sq0 > _EPS else None


def split(f0_MC, f1_MC, strata) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per stratum (sorted labels) the rows of ``f0_MC`` and ``f1_MC``; members with a non-finite vector in either
    are left out, strata with fewer than 2 members dropped."""
    f0, f1, s = np.asarray(f0_MC, float), np.asarray(f1_MC, float), np.asarray(strata)
    ok = np.isfinite(f0).all(axis=1) & np.isfinite(f1).all(axis=1)
    g0, g1 = [], []
    for g in np.unique(s[ok]):
        idx = np.flatnonzero(ok & (s == g))
        if idx.size >= 2:
            g0.append(f0[idx])
            g1.append(f1[idx])
    return g0, g1


def _null(r0s, r1s, n_draws: int, rng) -> tuple[np.ndarray, bool]:
    """(the permutation distribution of the pooled r, exact): every arrangement when there are at most
    `MAX_EXACT`, else ``n_draws`` random ones."""
    sq0 = sum(float(np.sum(a * a)) for a in r0s)
    sq1 = sum(float(np.sum(b * b)) for b in r1s)
    sizes = [a.shape[0] for a in r0s]
    total = math.prod(math.factorial(n) for n in sizes)
    if total <= MAX_EXACT:
        perms = [list(itertools.permutations(range(n))) for n in sizes]
        cross = np.array([sum(float(np.sum(a * b[list(p)])) for a, b, p in zip(r0s, r1s, combo))
                          for combo in itertools.product(*perms)])
        return cross / math.sqrt(sq0 * sq1), True
    cross = np.zeros(n_draws)
    for a, b in zip(r0s, r1s):
        order = np.argsort(rng.random((n_draws, a.shape[0])), axis=1)        # (N, S_g)
        cross += np.einsum("sc,nsc->n", a, b[order])
    return cross / math.sqrt(sq0 * sq1), False


def _boot(groups0, groups1, n_boot: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Seed-bootstrap draws of (r, beta): seeds resampled with replacement within each stratum."""
    r, beta = np.full(n_boot, np.nan), np.full(n_boot, np.nan)
    for k in range(n_boot):
        picks = [rng.integers(0, f.shape[0], f.shape[0]) for f in groups0]
        b0, b1 = [f[i] for f, i in zip(groups0, picks)], [f[i] for f, i in zip(groups1, picks)]
        r[k], beta[k] = (np.nan if v is None else v for v in (correlation(b0, b1), retained(b0, b1)))
    return r, beta


def power(sd0: float) -> dict:
    """``mde80`` and ``power_r03`` of a one-sided 5 % test whose null has standard deviation ``sd0`` (module
    docstring: the normal approximation)."""
    z_a, z_b = sps.norm.ppf(1 - ALPHA), sps.norm.ppf(POWER)
    return {"mde80": float((z_a + z_b) * sd0), "power_r03": float(sps.norm.sf(z_a - R_REF / sd0))}


def test(f0_MC, f1_MC, strata, n_draws: int = N_DRAWS, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """The pooled identity statistic of members with init / trained class frequencies ``f0_MC`` / ``f1_MC`` in
    ``strata`` (module docstring): ``r``, ``ci95``, ``beta`` (``beta_ci95``), the null's ``null_mean``,
    ``null_sd``, ``null_q95``, ``p``, ``exact``, the power (`power`), ``n`` members and ``strata``. Without
    seed-specific variation (fewer than 2 members in every stratum, or a zero residual) every statistic is None."""
    g0, g1 = split(f0_MC, f1_MC, strata)
    n = int(sum(f.shape[0] for f in g0))
    r = correlation(g0, g1) if g0 else None
    out = {"r": r, "ci95": None, "beta": None, "beta_ci95": None, "null_mean": None, "null_sd": None,
           "null_q95": None, "p": None, "exact": None, "mde80": None, "power_r03": None, "n": n, "strata": len(g0)}
    if r is None:
        return out
    rng = np.random.default_rng(seed)
    r0s, r1s = [residuals(f) for f in g0], [residuals(f) for f in g1]
    null, exact = _null(r0s, r1s, n_draws, rng)
    count = int(np.sum(null >= r - 1e-12))
    p = count / null.size if exact else (1 + count) / (1 + null.size)
    boot, beta_boot = _boot(g0, g1, n_boot, rng)
    sd0 = float(null.std())
    return {**out, "ci95": _percentile(boot), "beta": retained(g0, g1), "beta_ci95": _percentile(beta_boot),
            "null_mean": float(null.mean()), "null_sd": sd0, "null_q95": float(np.quantile(null, 0.95)), "p": p,
            "exact": bool(exact), **power(sd0)}


def _percentile(draws: np.ndarray) -> list[float] | None:
    d = draws[np.isfinite(draws)]
    return [float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975))] if d.size >= 10 else None


def paired_difference(a: tuple, b: tuple, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """r(a) - r(b) for two sets measured on the same seeds (each ``(f0_MC, f1_MC, strata, seed_of_member)``),
    with a paired seed bootstrap (one resample of the seed labels applied to both): ``diff``, ``ci95``, ``n_seeds``
    (the seeds both hold). None where either r is."""
    def groups(f0, f1, strata, seeds, keep):
        f0, f1, strata, seeds = (np.asarray(v) for v in (f0, f1, strata, seeds))
        g0, g1 = [], []
        for g in np.unique(strata):
            rows = {int(s): i for i, s in enumerate(seeds) if strata[i] == g}
            idx = [rows[s] for s in keep if s in rows]
            g0.append(np.asarray(f0, float)[idx])
            g1.append(np.asarray(f1, float)[idx])
        return g0, g1
    common = sorted(set(int(s) for s in a[3]) & set(int(s) for s in b[3]))
    ga, gb = groups(*a, common), groups(*b, common)
    ra, rb = correlation(*ga), correlation(*gb)
    if ra is None or rb is None or len(common) < 2:
        return {"diff": None, "ci95": None, "n_seeds": len(common)}
    rng, draws = np.random.default_rng(seed), []
    for _ in range(n_boot):
        pick = [common[i] for i in rng.integers(0, len(common), len(common))]
        ka, kb = groups(*a, pick), groups(*b, pick)
        x, y = correlation(*ka), correlation(*kb)
        draws.append(np.nan if x is None or y is None else x - y)
    return {"diff": ra - rb, "ci95": _percentile(np.array(draws, float)), "n_seeds": len(common)}


__all__ = ["residuals", "correlation", "retained", "split", "test", "power", "paired_difference"]


def _freqs(recs: list[dict], at: str) -> np.ndarray:
    """The members' off-distribution class-frequency vectors ``off_class_freq_<at>`` as rows (None -> NaN)."""
    return np.array([[math.nan if x is None else float(x) for x in r[f"off_class_freq_{at}"]] for r in recs], float)


def identity_of(recs: list[dict], at: str, **kw) -> dict:
    """`test` of init against ``at`` over member records ``recs`` (`jaxinit.memory.summary.member_record`),
    strata = points."""
    return test(_freqs(recs, "init"), _freqs(recs, at), [r["point"] for r in recs], **kw)


def identity_args(recs: list[dict], at: str) -> tuple:
    """(f0, f1, strata, seeds) of ``recs`` for `paired_difference`."""
    return _freqs(recs, "init"), _freqs(recs, at), [r["point"] for r in recs], [r["seed"] for r in recs]
