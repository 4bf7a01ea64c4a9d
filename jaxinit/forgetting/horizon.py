"""Initialization memory along a long run: the spread as if training had stopped at epoch T, the clocks
reached by then, and how well a clock collapses several runs onto one curve.

For each horizon T the rows with epoch <= T are summarised exactly as a run of T epochs would be
(`memory.summarize`: best-validation selection among the epochs seen so far, interpolated selection,
the spread at epoch T itself), so one 1,000-epoch run answers "does more time make SGD forget?"
at every checkpoint along the way. Given the step sizes, each horizon also carries the clocks reached
by then, T_SGD(T) = (1/b) sum_{k < steps(T)} eta_eff_k^2 and T_adapt(T) = sum_{k < steps(T)} eta_eff_k
(`history.clocks`), and the measured update clocks of the rows at T.

`clock_collapse` then asks which clock puts several runs (constant-lr runs at different lr, batch
size, epochs) on one curve. Pure numpy on metrics rows, like `memory`.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from jaxinit import intervals
from jaxinit.jsonsafe import to_json
from jaxinit.forgetting import effective, memory
from jaxinit.shared import nulls
from jaxinit.shared.history import INTERP_THRESHOLD, as_float, by_epoch, progress_key, rows_by_member

_RULE_FIELDS = ("spread", "ci", "per_seed", "slope", "slope_ci", "null", "spread_p", "slope_p")
MATCHED = "matched"   # the `matrices` entry of matched progress (test accuracy on reaching 99.5 % train accuracy)


def _mean(xs: Sequence[Any]) -> float | None:
    vals = [as_float(x) for x in xs]
    vals = [v for v in vals if math.isfinite(v)]
    return float(np.mean(vals)) if vals else None


def _etas_until(rows: Sequence[Mapping[str, Any]], etas: Any) -> dict[int, np.ndarray] | None:
    """Per member the step sizes of the steps taken by its last row in `rows` (its `step`)."""
    if etas is None:
        return None
    out = {}
    for i, mine in rows_by_member(rows).items():
        eta = memory._member_etas(etas, i)
        step = by_epoch(mine)[-1].get("step")
        if eta is not None and step is not None:
            out[i] = np.asarray(eta, np.float64).reshape(-1)[:int(step)]
    return out


def spreads_over_time(rows: Sequence[Mapping[str, Any]], horizons: Sequence[int], etas: Any = None,
                      batch_size: Any = 1, l2: Any = 0.0, momentum: Any = None,
                      batchnorm: bool | None = None) -> list[dict[str, Any]]:
    """One entry per (horizon, setting): `epoch`, `setting`, the spreads of the three rules with their
    intervals, per-seed values (`seeds`), slopes and nulls (the summary's own keys of each rule,
    `memory.selection_keys`), the lowest train accuracy at the selected epoch (`train_acc_at_best_min`) and
    at T itself (`train_acc_final_min`, the final rule's predictor), the median selected epoch,
    `clocks` / `clocks_at_best`: the medians over members of every clock at T and at the selected epoch
    (with `epochs`: T, and the median selected epoch), and `matrices`: per rule the test accuracies on the
    common grid, {"seeds", "sigma_w", "acc": (seeds, sigma_w)} (what a design pools over data splits).

    `etas`, `batch_size`, `l2`, `momentum`: as `memory.summarize` takes them (the schedule of the whole
    run; each horizon uses the steps taken by then). Without `etas` the eta clocks are None; the measured
    clocks (`T_update`, `T_update2`) come from the rows whenever they carry the update sums. `batchnorm`
    (the network has BatchNorm after its hidden layers) adds the effective clocks of `effective`
    (`T_SGD_eff`, `T_adapt_eff` and their `_slowest`) to both clock dicts; None leaves them out.
    """
    out = []
    evaluated = sorted({int(r["epoch"]) for r in rows})
    keys = {rule: memory.selection_keys(rule) for rule in memory.SELECTION_RULES}
    for t in horizons:
        if t > evaluated[-1]:
            continue
        seen = [r for r in rows if int(r["epoch"]) <= t]
        etas_t = _etas_until(seen, etas)
        summary = memory.summarize(seen, None, etas_t, batch_size, l2, momentum)
        eff = _effective(seen, summary["members"], etas_t, batch_size, batchnorm)
        for label, s in summary["spread"].items():
            mine = [m for m in summary["members"] if m["optimizer"] == label]
            best = sorted(m["best_epoch"] for m in mine if m["best_epoch"] is not None)
            median_best = best[len(best) // 2] if best else None
            entry = {"epoch": t, "setting": label, "train_acc_at_best_min": s["train_acc_at_best_min"],
                     "train_acc_final_min": _final_train_min(seen, mine),
                     "n_seeds": s["n_seeds"], "seeds": s["seeds"], "best_epoch_median": median_best,
                     "clocks": {**s["clocks"], "epochs": float(t), "steps": _steps(seen, mine),
                                **eff.get((label, "T"), {})},
                     "clocks_at_best": {**s["clocks_at_best"],
                                        "epochs": None if median_best is None else float(median_best),
                                        **eff.get((label, "best"), {})},
                     "val_acc_at_best_mean": _mean([m.get("val_acc_at_best") for m in mine
                                                    if memory.drop_reason(m) is None]),
                     "matrices": {**{rule: _matrix(mine, s, k["acc"]) for rule, k in keys.items()},
                                  MATCHED: _matrix(mine, s, MATCHED)}}
            for k in keys.values():
                entry.update({k[f]: s[k[f]] for f in _RULE_FIELDS})
            out.append(entry)
    return out


def _steps(rows: Sequence[Mapping[str, Any]], members: Sequence[Mapping[str, Any]]) -> float | None:
    """The median over a setting's members of the optimizer steps taken by their last row."""
    ids = {m["member"] for m in members}
    last: dict[int, float] = {}
    for r in rows:
        if int(r["member"]) in ids:
            last[int(r["member"])] = max(last.get(int(r["member"]), -1.0), as_float(r.get("step")))
    vals = [v for v in last.values() if math.isfinite(v)]
    return float(np.median(vals)) if vals else None


def _final_train_min(rows: Sequence[Mapping[str, Any]], members: Sequence[Mapping[str, Any]]) -> float | None:
    """The lowest train accuracy over a setting's usable members at their last row (the final predictor)."""
    last = {}
    for r in rows:
        i = int(r["member"])
        if i not in last or int(r["epoch"]) >= int(last[i]["epoch"]):
            last[i] = r
    vals = [as_float(last[m["member"]].get("train_acc")) for m in members
            if memory.drop_reason(m) is None and m.get("member") in last]
    vals = [v for v in vals if math.isfinite(v)]
    return min(vals) if vals else None


def _matrix(members: Sequence[Mapping[str, Any]], s: Mapping[str, Any], acc_key: str) -> dict[str, Any]:
    """{"seeds", "sigma_w", "acc"}: test accuracy (a fraction) of `acc_key` per seed (row) and grid value
    (column) over the setting's common grid; `acc` None where a member on the grid has none."""
    seeds, grid = list(s.get("seeds") or []), list(s.get("sigma_w_used") or [])
    def acc(m):
        if acc_key == MATCHED:   # test accuracy at the first epoch the member reaches 99.5 % train accuracy
            return as_float((m.get("test_acc_at_train_acc") or {}).get(progress_key(INTERP_THRESHOLD)))
        return as_float(m.get(acc_key))
    table = {(int(m["seed"]), round(float(m["sigma_w"]), 12)): acc(m) for m in members
             if memory.drop_reason(m) is None}
    acc = [[table.get((sd, round(float(g), 12)), math.nan) for g in grid] for sd in seeds]
    ok = bool(acc) and all(math.isfinite(v) for row in acc for v in row)
    return {"seeds": seeds, "sigma_w": grid, "acc": acc if ok else None}


def _effective(rows: Sequence[Mapping[str, Any]], members: Sequence[Mapping[str, Any]], etas: Any,
               batch_size: Any, batchnorm: bool | None) -> dict[tuple[str, str], dict[str, Any]]:
    """{(setting, "T" or "best"): `effective.run_clocks` of its usable members at the horizon and at their
    selected epochs}; empty when `batchnorm` is None or the step sizes are unknown."""
    if batchnorm is None or etas is None:
        return {}
    by_member = rows_by_member(rows)
    acc: dict[tuple[str, str], list[dict]] = {}
    for m in members:
        i = m["member"]
        if memory.drop_reason(m) is not None or i not in by_member or i not in etas:
            continue
        b = memory._per_member(batch_size, i)
        base = {"seed": m["seed"], "sigma_w": m["sigma_w"]}
        mine = by_member[i]
        at_best = [r for r in mine if int(r["epoch"]) <= int(m["best_epoch"])]
        acc.setdefault((m["optimizer"], "T"), []).append(
            {**base, **effective.member_clocks(mine, etas[i], m["sigma_w"], b, batchnorm)})
        acc.setdefault((m["optimizer"], "best"), []).append(
            {**base, **effective.member_clocks(at_best, etas[i], m["sigma_w"], b, batchnorm)})
    return {k: effective.run_clocks(v) for k, v in acc.items()}


# --------------------------------------------------------------------------- clock collapse
def collapse_curve(entries: Sequence[Mapping[str, Any]], setting: str, clocks: Sequence[str] = ("T_SGD", "T_adapt"),
                   rule: str = "best_val", clock_field: str = "clocks") -> dict[str, Any]:
    """One run's curve for `clock_collapse` from its `spreads_over_time` entries of `setting`.

    Returns {"clocks": {clock: [value at each horizon]}, "per_seed": (seeds, horizons) array of the
    rule's per-seed spreads (NaN where a seed has none)}; `clock_field` "clocks" takes the clocks at
    the horizon T, "clocks_at_best" those at the selected epoch.
    """
    mine = sorted((e for e in entries if e["setting"] == setting), key=lambda e: e["epoch"])
    key = memory.selection_keys(rule)["per_seed"]
    seeds = sorted({s for e in mine for s in e["seeds"]})
    per_seed = np.full((len(seeds), len(mine)), np.nan)
    for j, e in enumerate(mine):
        for s, v in zip(e["seeds"], e[key] or []):
            per_seed[seeds.index(s), j] = v
    return {"clocks": {c: [(e.get(clock_field) or {}).get(c) for e in mine] for c in clocks}, "per_seed": per_seed}


def collapse_fit(x: np.ndarray, y: np.ndarray, degree: int) -> tuple[np.ndarray, float] | None:
    """Least-squares polynomial of `degree` in ln x through the points with x > 0 and y finite:
    (coefficients for `np.polyval` on ln x, residual variance in pp^2 with N - degree - 1 dof);
    None with too few points or one clock value."""
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0)
    lx, yy = np.log(x[ok]), y[ok]
    if lx.size <= degree + 1 or np.ptp(lx) == 0:
        return None
    coef = np.polyfit(lx, yy, degree)
    resid = yy - np.polyval(coef, lx)
    return coef, float(resid @ resid) / (lx.size - degree - 1)


def _residual_var(x: np.ndarray, y: np.ndarray, degree: int) -> float:
    fit = collapse_fit(x, y, degree)
    return math.nan if fit is None else fit[1]


def pooled_points(runs: Sequence[Mapping[str, Any]], clock: str,
                  means: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(clock values, seed-mean spreads) of every run's points, concatenated in run order (NaN: missing)."""
    means = [_run_means(np.asarray(r["per_seed"], np.float64)) for r in runs] if means is None else means
    x = np.concatenate([np.asarray([np.nan if v is None else v for v in r["clocks"][clock]], np.float64) for r in runs])
    return x, np.concatenate(means)


def _run_means(per_seed: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    p = per_seed if rows is None else per_seed[rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # a horizon no seed has stays NaN
        return np.nanmean(p, axis=0)


def clock_collapse(runs: Sequence[Mapping[str, Any]], clocks: Sequence[str] = ("T_SGD", "T_adapt"), degree: int = 2,
                   n_boot: int = nulls.N_BOOT, seed: int = nulls.SEED, level: float = intervals.LEVEL,
                   draw: Any = None) -> dict[str, Any]:
    """Which clock collapses the runs' spread curves onto one curve, with an interval from resampling seeds.

    `runs`: one dict per run (`collapse_curve`): {"clocks": {clock: values along the run}, "per_seed":
    (seeds, points) per-seed spreads}. For a clock c, every run's seed-mean spread y_t at clock value
    x_t is pooled over runs and fitted by one polynomial of `degree` in ln x; the collapse residual is

        V_c = sum_t (y_t - p_c(ln x_t))^2 / (N - degree - 1)      (pp^2, N pooled points),

    the scatter no single curve of that clock can explain. The same y enter for every clock, so V_c
    differ only through how the clock places the runs against each other: the lower, the better the
    clock collapses them. Interval: `n_boot` resamples (Generator seeded `seed`) of each run's seeds with
    replacement (a seed's whole curve at once, which keeps its correlation over time), refitting every
    clock on the same resample (`draw`, given: one function rng -> row indices applied to every run, for
    runs whose rows are the same replicates, e.g. `design_stats.resample`'s two-level draw over data splits
    and seeds); bias-corrected percentile intervals of V_c and of V_other - V_best (the
    percentiles shifted by V - mean of the resampled V: a resample repeats seeds, so its seed means
    are noisier and every resampled V_c sits higher by about the noise variance of a mean; the shift
    cancels in the difference, which decides).

    Returns {"clocks": {c: {"residual_var_pp2", "ci95", "unexplained"}}} (`unexplained`: V_c over the
    variance of the pooled y), `better` (lowest V_c), `difference_pp2` / `difference_ci95` {other clock:
    V_other - V_best}, `decisive` (every difference interval above 0), `n_runs`, `n_points`, `degree`,
    `n_boot`, and `pairwise` {"a - b": {"difference_pp2", "ci95"}} for every two clocks with a value (in the order
    of `clocks`). Values are None where too few points (<= degree + 1) carry a positive clock and a spread.
    """
    means = [_run_means(np.asarray(r["per_seed"], np.float64)) for r in runs]
    point = {c: _residual_var(*pooled_points(runs, c, means), degree) for c in clocks}
    rng = np.random.default_rng(seed)
    boot = {c: np.empty(n_boot) for c in clocks}
    for b in range(n_boot):
        shared = draw(rng) if draw is not None else None
        resampled = [_run_means(np.asarray(r["per_seed"], np.float64),
                                shared if shared is not None else rng.integers(0, len(r["per_seed"]), len(r["per_seed"])))
                     for r in runs]
        for c in clocks:
            boot[c][b] = _residual_var(*pooled_points(runs, c, resampled), degree)
    def interval(samples: np.ndarray, estimate: float) -> list | None:
        samples = samples[np.isfinite(samples)]
        ci = nulls.percentile_interval(samples, level) if math.isfinite(estimate) else None
        return None if ci is None else [b - (float(samples.mean()) - estimate) for b in ci]

    y = np.concatenate(means)
    var_y = float(np.nanvar(y, ddof=1)) if np.isfinite(y).sum() >= 2 else math.nan
    finite = {c: v for c, v in point.items() if math.isfinite(v)}
    best = min(finite, key=finite.get) if finite else None
    diff = {c: finite[c] - finite[best] for c in finite if c != best} if best else {}
    diff_ci = {c: interval(boot[c] - boot[best], diff[c]) for c in diff}
    pairwise = {f"{a} - {b}": {"difference_pp2": finite[a] - finite[b],
                               "ci95": interval(boot[a] - boot[b], finite[a] - finite[b])}
                for i, a in enumerate(finite) for b in list(finite)[i + 1:]}
    return to_json({
        "clocks": {c: {"residual_var_pp2": point[c],
                       "ci95": interval(boot[c], point[c]),
                       "unexplained": point[c] / var_y if var_y else None} for c in clocks},
        "better": best, "difference_pp2": diff, "difference_ci95": diff_ci, "pairwise": pairwise,
        "decisive": bool(diff_ci) and all(ci is not None and ci[0] > 0 for ci in diff_ci.values()),
        "n_runs": len(runs), "n_points": int(np.isfinite(y).sum()), "degree": degree, "n_boot": n_boot})
