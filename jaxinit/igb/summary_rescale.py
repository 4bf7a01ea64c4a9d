"""The rescaling test's summary (summary.json), its paired statistics and its table.

Conventions: accuracies and f_max are fractions in [0, 1]; "steps to target" is the first evaluated step with
test accuracy >= ``finetune.target_fraction`` x the ridge baseline's test accuracy (`stats.steps_to_target`);
"absorbed" is the sustained absorption step (`jaxinit.igb.absorption.sustained_absorption`: f_max within 0.05
of the majority share and accuracy above chance from that evaluation to the end); None = never within the run.
Per arm: medians of step counts (never counted as later than any step; None when more than half never) with a
distribution-free order-statistic interval whose lower end is moved down by the evaluation interval it stands for
(`median_interval`: a step is only known to within the evaluation grid, so ties such as eight seeds at step 40 give
(30, 40] at a stride of 10, not [40, 40]), final accuracy mean with its 95 % Student-t interval. Between arms, seeds
are paired (same readout draw and batches): the difference of two arms (mean of final accuracies, median of
step counts with never censored at final_step + 1) gets a 95 % paired bootstrap interval (10,000 resamples of
seeds, fixed generator: equal runs give equal files) and a two-sided sign-flip permutation p-value (exact
enumeration up to 16 seeds); for step counts also the Hodges-Lehmann shift with its signed-rank interval widened
by the grid's resolution (`hodges_lehmann`), the interval the docs quote. The rate selection (the arms as the points of `jaxinit.shared.selection`) is reported
once (``selection``) and per arm (its rate beside the short horizon's, its selection curve).
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, NamedTuple

import numpy as np

from jaxinit.igb import absorption
from jaxinit.igb.baseline import RIDGE_ALPHAS, majority_share, ridge_accuracies, select_on_validation
from jaxinit.intervals import t_interval
from jaxinit.jsonsafe import to_json
from jaxinit.shared import igb_stats as stats, selection

N_BOOT = 10_000
EXACT_MAX = 16


class Context(NamedTuple):
    """What the summary needs beside the reported run's rows (`jaxinit.igb.rescale.run`)."""
    cfg: Any
    arms: list                 # `rescale.Arm`
    select_arrays: dict        # `jaxinit.shared.selection.arrays`, the arms as its points (in `arms` order)
    member_factors: dict       # arm -> measured backward factor per reported seed at its init (`rescale.init_factors`)
    baseline: dict             # `ridge_baseline`
    pre_arrays: dict           # pretraining curve
    stats_share: float         # majority label share of the test split (chance accuracy)
    sigma_w2: float            # EOC sigma_w2 of the init and of every fresh readout


# --------------------------------------------------------------------------- arrays
def curves(rows: list[dict], members: list[int], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``step`` (evals,), ``alive`` and every key of ``keys`` (evals, members) for ``members`` (global indices,
    in this order); None (NaN in JSON) becomes NaN (`jaxinit.shared.case_train.case_arrays`)."""
    from jaxinit.shared.case_train import case_arrays
    arrays = case_arrays(rows, members)
    return {"step": arrays["step"], **{k: arrays[k] for k in keys}, "alive": arrays["alive"]}


def majority(labels) -> float:
    return majority_share(np.asarray(labels))


def ridge_baseline(ds) -> dict:
    """Ridge classification on phase B's own split (`jaxinit.igb.baseline.ridge_accuracies`), alpha chosen on
    validation from `jaxinit.igb.baseline.RIDGE_ALPHAS` (ties: the strongest). Logistic regression is left out:
    lbfgs on 784-d sphere inputs took ~55 s per value of C on the 2-core CPU."""
    tr = (np.asarray(ds.x_train), np.asarray(ds.y_train))
    va, te = (np.asarray(ds.x_val), np.asarray(ds.y_val)), (np.asarray(ds.x_test), np.asarray(ds.y_test))
    r = select_on_validation(ridge_accuracies, RIDGE_ALPHAS, tr, va, te)
    return {"model": "ridge", "alpha": r["param"], "val_acc": r["val_acc"], "test_acc": r["test_acc"],
            "grid": [{"alpha": g["param"], "val_acc": g["val_acc"], "test_acc": g["test_acc"]} for g in r["grid"]]}


# --------------------------------------------------------------------------- statistics
def median_steps(steps) -> float:
    """Median with never (NaN) later than any step: inf when more than half never."""
    return float(np.median(np.where(np.isfinite(steps), steps, np.inf)))


def resolution(grid_steps, steps) -> np.ndarray:
    """Per recorded step s, the width of the evaluation interval it stands for: an event first seen at the
    evaluation of step s happened in (s_prev, s], s_prev the evaluation before (0 at the first evaluation, 0 for
    never)."""
    grid = np.asarray(grid_steps, float)
    v = np.asarray(steps, float)
    i = np.searchsorted(grid, v)
    prev = np.where(i > 0, grid[np.maximum(i - 1, 0)], v)
    return np.where(np.isfinite(v), v - prev, 0.0)


def _binom_cdf(k: int, n: int) -> float:
    return float(sum(math.comb(n, j) for j in range(k + 1)) / 2 ** n)


def median_interval(steps, grid_steps, level: float = 0.95) -> list[float] | None:
    """Distribution-free interval of the median step over seeds, honest under ties: the order statistics
    [x_(k), x_(n+1-k)] with the largest k such that P(Bin(n, 1/2) <= k - 1) <= (1 - level) / 2 (coverage >= level
    whatever the distribution), the lower end moved down by its evaluation interval (`resolution`: the event
    happened after the previous evaluation). Never = inf (None in JSON); None below 6 seeds (no such k)."""
    v = np.sort(np.where(np.isfinite(steps), np.asarray(steps, float), np.inf))
    n, k = len(v), 0
    while k + 1 <= n // 2 and _binom_cdf(k, n) <= (1 - level) / 2:
        k += 1
    if k == 0:
        return None
    lo, hi = v[k - 1], v[n - k]
    return [float(lo - resolution(grid_steps, [lo])[0]) if np.isfinite(lo) else float(lo), float(hi)]


def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(W+ <= w), w = 0 .. n(n+1)/2, of the signed-rank statistic of n untied, non-zero differences."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1
    for i in range(1, n + 1):
        counts[i:] = counts[i:] + counts[:-i].copy()
    return np.cumsum(counts) / 2 ** n


def hodges_lehmann(a, b, grid_steps, level: float = 0.95) -> dict:
    """Paired shift a - b of step counts (never censored by the caller): the Hodges-Lehmann estimate (median of the
    Walsh averages (d_i + d_j) / 2, i <= j) and the Wilcoxon signed-rank interval [W_(k), W_(M+1-k)] (M Walsh
    averages, k - 1 the largest w with P(W+ <= w) <= (1 - level) / 2), widened on each side by the largest evaluation
    interval among the observations (each step is only known to within its interval, so their difference to within
    the sum of two: ``resolution``); ties and zero differences are counted (``n_ties``, ``n_zero``): with them the
    interval's coverage is approximate. None below 6 pairs."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = a - b
    n = d.size
    walsh = np.sort([(d[i] + d[j]) / 2 for i in range(n) for j in range(i, n)])
    res = float(np.max(resolution(grid_steps, np.concatenate([a, b])))) if n else 0.0
    out = {"estimate": float(np.median(walsh)) if n else None, "resolution": res, "n": int(n),
           "n_zero": int(np.sum(d == 0)), "n_ties": int(n - np.unique(np.abs(d)).size), "ci95": None}
    if n >= 6:
        cdf = _signed_rank_cdf(n)
        k = int(np.searchsorted(cdf, (1 - level) / 2, side="right"))      # P(W+ <= k - 1) <= alpha / 2
        if k >= 1:
            out["ci95"] = [float(walsh[k - 1] - res), float(walsh[len(walsh) - k] + res)]
    return out


def mean_diff(a, b):
    return np.mean(a - b, axis=-1)


def median_diff(a, b):
    return np.median(a, axis=-1) - np.median(b, axis=-1)


def _swaps(n: int, seed: int) -> np.ndarray:
    """(F, n) bool: every swap pattern of n pairs (n <= EXACT_MAX), else N_BOOT random ones."""
    if n <= EXACT_MAX:
        return np.array(list(itertools.product((False, True), repeat=n)), bool).reshape(-1, n)
    return np.random.default_rng(seed + 1).random((N_BOOT, n)) < 0.5


def paired(a, b, stat: Callable, seed: int = 0) -> dict:
    """Difference ``stat(a, b)`` of two arms over paired seeds, its 95 % paired bootstrap interval and the
    two-sided sign-flip permutation p-value (each seed's pair swapped or not)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    obs = float(stat(a, b))
    idx = np.random.default_rng(seed).integers(0, len(a), (N_BOOT, len(a)))
    lo, hi = np.percentile(stat(a[idx], b[idx]), [2.5, 97.5])
    swap = _swaps(len(a), seed)
    null = stat(np.where(swap, b, a), np.where(swap, a, b))
    p = float(np.mean(np.abs(null) >= abs(obs) - 1e-9))
    return {"diff": obs, "ci95": [float(lo), float(hi)], "p_perm": p, "n": int(len(a))}


# --------------------------------------------------------------------------- summary.json
def _steps_list(v) -> list:
    return [None if not np.isfinite(x) else int(x) for x in v]


def arm_arrays(ctx: Context, rows: list[dict], members: list[int], target: float) -> dict[str, np.ndarray]:
    c = curves(rows, members, ("test_acc", "test_fmax", "val_acc"))
    c["to_target"] = stats.steps_to_target(c["step"], c["test_acc"], target)
    c["absorbed"] = absorption.sustained_absorption(c["step"], c["test_fmax"], c["test_acc"], ctx.stats_share)
    return c


def _reported(ctx: Context, arm) -> tuple[list[int], np.ndarray]:
    """The reported seeds of an arm and their per-layer factors (seeds, L-1)."""
    seeds = list(range(ctx.cfg.finetune.seeds))
    return seeds, np.array([arm.scales[s][1] for s in seeds], float)


def arm_summary(ctx: Context, arm, c: dict) -> dict:
    final = c["test_acc"][-1]
    point = [a.label for a in ctx.arms].index(arm.label)
    init_b, (seeds, factors) = ctx.member_factors[arm.label], _reported(ctx, arm)
    rescaled = arm.target is not None
    return {"arm": arm.label, "kind": "rescaled" if rescaled else "control", "target_backward_factor": arm.target,
            "backward_factor_init": init_b.tolist(), "backward_factor_init_median": float(np.median(init_b)),
            "chi_per_layer": [arm.chi[s] for s in seeds] if rescaled else None,
            "factors_median": np.median(factors, axis=0).tolist() if rescaled else None,
            "factors_range": [float(factors.min()), float(factors.max())] if rescaled else None,
            **selection.point_report(ctx.select_arrays, point),
            "n_seeds": int(final.size), "fmax0_mean": float(np.mean(c["test_fmax"][0])),
            "steps_to_target": _steps_list(c["to_target"]), "steps_to_target_median": median_steps(c["to_target"]),
            "steps_to_target_ci95": median_interval(c["to_target"], c["step"]),
            "n_reached": int(np.isfinite(c["to_target"]).sum()),
            "steps_absorbed": _steps_list(c["absorbed"]), "steps_absorbed_median": median_steps(c["absorbed"]),
            "steps_absorbed_ci95": median_interval(c["absorbed"], c["step"]),
            "n_absorbed": int(np.isfinite(c["absorbed"]).sum()),
            "final_test_acc": final.tolist(), "final_test_acc_mean": float(np.mean(final)),
            "final_test_acc_ci95": t_interval(final), "best_test_acc_mean": float(np.mean(np.nanmax(c["test_acc"], 0))),
            "final_val_acc_mean": float(np.mean(c["val_acc"][-1])),
            "test_acc_curve_mean": np.nanmean(c["test_acc"], axis=1).tolist(),
            "diverged": int((~c["alive"][-1]).sum())}


def comparisons(arrays: dict[str, dict], controls: list[str], final_step: int) -> list[dict]:
    """Every arm against every control (paired by seed): final accuracy, steps to target, sustained absorption."""
    censor = lambda v: np.where(np.isfinite(v), v, final_step + 1.0)
    out = []
    for ctrl in controls:
        for label, c in arrays.items():
            if label == ctrl:
                continue
            b, grid = arrays[ctrl], c["step"]
            out.append({"arm": label, "vs": ctrl,
                        "final_test_acc": paired(c["test_acc"][-1], b["test_acc"][-1], mean_diff),
                        "steps_to_target_median": paired(censor(c["to_target"]), censor(b["to_target"]), median_diff),
                        "steps_absorbed_median": paired(censor(c["absorbed"]), censor(b["absorbed"]), median_diff),
                        "steps_to_target_shift": hodges_lehmann(censor(c["to_target"]), censor(b["to_target"]), grid),
                        "steps_absorbed_shift": hodges_lehmann(censor(c["absorbed"]), censor(b["absorbed"]), grid)})
    return out


def summarize(ctx: Context, rows: list[dict], members: dict[str, list[int]]) -> tuple[dict, dict]:
    """(summary.json, arrays per arm) of the reported run."""
    cfg = ctx.cfg
    target = cfg.finetune.target_fraction * ctx.baseline["test_acc"]
    arrays = {a.label: {**arm_arrays(ctx, rows, members[a.label], target), "factors": _reported(ctx, a)[1],
                        "backward_factor_init": ctx.member_factors[a.label]} for a in ctx.arms}
    final_step = int(next(iter(arrays.values()))["step"][-1])
    controls = [a.label for a in ctx.arms if a.target is None]
    m = cfg.model
    summary = {
        "task": {"pretrain_digits": list(cfg.pretrain.digits), "finetune_digits": list(cfg.finetune.digits),
                 "labels": "parity" if cfg.data.binarize else "digit index", "readout": "fresh",
                 "data": cfg.data.name, "n_train": cfg.finetune.n_train, "n_val": cfg.finetune.n_val,
                 "n_test": cfg.finetune.n_test, "optimizer": cfg.opt.optimizer, "lr_grid": list(cfg.opt.lrs)},
        "model": {"act": m.act, "width": m.width, "depth": m.depth, "sigma_w2": ctx.sigma_w2, "sigma_b2": m.sigma_b2},
        "pretrain": {"steps": cfg.pretrain.steps, "lr": cfg.pretrain.lr,
                     "final_test_acc": float(ctx.pre_arrays["pretrain_test_acc"][-1])},
        "selection": selection.report(ctx.select_arrays), "baseline": ctx.baseline, "target_acc": target,
        "majority_share": ctx.stats_share, "final_step": final_step,
        "arms": [arm_summary(ctx, a, arrays[a.label]) for a in ctx.arms],
        "comparisons": comparisons(arrays, controls, final_step)}
    return to_json(summary), arrays


# --------------------------------------------------------------------------- table
def _fmt(v, spec: str = ".3g") -> str:
    return "never" if v is None or not np.isfinite(v) else format(v, spec)


def _interval(ci, spec: str) -> str:
    return "[-]" if ci is None else f"[{_fmt(ci[0], spec)}, {_fmt(ci[1], spec)}]"


def table(summary: dict) -> str:
    """The markdown table of the notes: one row per arm."""
    lines = ["| arm | measured backward factor at init, median [min, max] | chosen lr | steps to target, median "
             "[95% order-statistic CI at the grid's resolution] | sustained absorption, median (absorbed/n) | "
             "final test acc, mean [95% CI] | n |",
             "|---|---|---|---|---|---|---|"]
    for a in summary["arms"]:
        init = a["backward_factor_init"]
        lines.append(f"| {a['arm']} | {_fmt(a['backward_factor_init_median'])} "
                     f"[{_fmt(min(init))}, {_fmt(max(init))}] | {a['lr']:g} | {_fmt(a['steps_to_target_median'], 'g')} "
                     f"{_interval(a['steps_to_target_ci95'], 'g')} | {_fmt(a['steps_absorbed_median'], 'g')} "
                     f"({a['n_absorbed']}/{a['n_seeds']}) | {a['final_test_acc_mean']:.3f} "
                     f"{_interval(a['final_test_acc_ci95'], '.3f')} | {a['n_seeds']} |")
    return "\n".join(lines)


def comparison_table(summary: dict) -> str:
    """Paired differences (arm - control): mean final accuracy, median steps to target / absorbed."""
    lines = ["| arm - control | final acc diff [95% boot CI], p | steps to target: Hodges-Lehmann shift "
             "[95% signed-rank CI +- the grid], p | absorbed: the same |", "|---|---|---|---|"]
    for c in summary["comparisons"]:
        cell = lambda d, spec: f"{_fmt(d['diff'], spec)} {_interval(d['ci95'], spec)}, p={d['p_perm']:.3f}"
        shift = lambda d, p: (f"HL {_fmt(d['estimate'], '+g')} {_interval(d['ci95'], '+g')} (grid {d['resolution']:g}), "
                              f"p={p['p_perm']:.3f}")
        lines.append(f"| {c['arm']} - {c['vs']} | {cell(c['final_test_acc'], '+.3f')} | "
                     f"{shift(c['steps_to_target_shift'], c['steps_to_target_median'])} | "
                     f"{shift(c['steps_absorbed_shift'], c['steps_absorbed_median'])} |")
    return "\n".join(lines)
