"""Initialization-memory analysis: predictor selection, spread over sigma_w with seed intervals,
tau_interp, repair gap, kernel norms and forgetting clocks.

Definitions follow docs/theory.md §6 (after Das et al. 2026, arXiv 2605.29152, "forgetting-time"):

- *Initialization memory* is the dependence of the selected predictor on the init scale `sigma_w`.
  Its headline number is the **spread**: max - min over `sigma_w` of the test accuracy of the
  selected predictor, in percentage points, taken within a seed and averaged over seeds.
- Three **selection rules** (`SELECTION_RULES`), reported side by side: `best_val`, the paper's
  rule, the first epoch with the lowest validation loss (docs/design.md); `best_val_interpolated`, the
  lowest-validation-loss epoch among those with train accuracy >= 99.5 % (so the selected
  predictor interpolates, as the paper's claim presumes); `final`, the last epoch.
- `tau_interp` is the first epoch at which the training accuracy reaches 99.5 % (interpolation);
  the **repair gap** is what validation accuracy gains (or loses) after that point.
- **Kernel norm**: the Frobenius norm over conv and dense kernels (the head included; BatchNorm
  gains and biases and all biases excluded). With BatchNorm the gains dominate the total
  `param_norm` at small `sigma_w` and do not scale with it, so radial memory uses kernel norms.
- **Forgetting clocks** for step sizes `eta_k`, batch size `b`, L2 coefficient `lambda` and
  heavy-ball momentum `mu`: `T_SGD = (1/b) sum_k eta_eff_k^2`, `T_L2 = lambda sum_k eta_eff_k`,
  `T_adapt = sum_k eta_eff_k` with `eta_eff = eta / (1 - mu)` (see `clocks`).

- A spread is >= 0 even without memory, so it comes with a noise floor and a randomization p-value,
  beside the signed **memory slope** (pp of test accuracy per e-fold of sigma_w, null 0), the
  **norm coupling** (log-log slope of the kernel norms against their init) and the spread at
  **matched progress** (equal train accuracy); see `spread` and `nulls`.

Layout: per-member metrics from a member's rows in `history` (re-exported here), seed statistics
in `stats`, nulls and resampling in `nulls`, per-setting spreads and `summarize` here, the README
table in `tables` (`markdown_table`, re-exported here).

Pure python / numpy on the rows of `metrics.jsonl` (no jax), so that figures and summaries can be
recomputed from saved results. Everything returned by `summarize` is plain JSON: python floats,
ints, bools, None (NaN and infinities become None), with no timings, so equal runs give equal files.

Row fields used (one row per evaluation per member): `member`, `optimizer`, `sigma_w`, `seed`,
`epoch` (0 = evaluation at initialization), `step` (optimizer steps taken so far), `train_acc`,
`val_loss`, `val_acc`, `test_acc`, `param_norm`, `param_norm_layers`, `diverged`,
`diverged_step`. Losses of a diverged member may be NaN / None; they are ignored.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from jaxinit.config import ConfigError
from jaxinit.forgetting import nulls, stats
from jaxinit.forgetting.tables import markdown_table, narrow_table
from jaxinit.jsonsafe import to_json
from jaxinit.forgetting.history import (CLOCKS, INTERP_THRESHOLD, MEASURED_CLOCKS, PROGRESS_THRESHOLDS,
                                        after_divergence, as_float, at_train_acc, best_epoch,
                                        best_epoch_interpolated, by_epoch, clocks, clocks_at_step,
                                        diverged_step, kernel_norm, measured_clocks, member_summary,
                                        progress_key, read_metrics, repair_gap, row_at, rows_by_member,
                                        tau_interp)

__all__ = ["CLOCKS", "INTERP_THRESHOLD", "MEASURED_CLOCKS", "PROGRESS_THRESHOLDS", "SELECTION_RULES", "acc_curve",
           "after_divergence", "at_train_acc", "best_epoch", "best_epoch_interpolated", "by_epoch",
           "check_selection", "clocks", "clocks_at_step", "diverged_step", "drop_reason", "kernel_norm",
           "markdown_table", "measured_clocks", "narrow_table", "member_summary", "norm_coupling", "progress_key",
           "read_metrics", "repair_gap", "row_at", "rows_by_member", "selection_keys", "setting_labels",
           "spread", "spread_at_train_acc", "summarize", "tau_interp"]

# Selection rule -> the key of `summary["spread"][label]` that holds its spread.
SELECTION_RULES = {"best_val": "spread_pp", "best_val_interpolated": "spread_pp_interpolated",
                   "final": "spread_pp_final"}
# Per rule: the member's accuracy, selected epoch and clocks there; the setting's std, interval, seeds.
_RULE_KEYS = {
    "best_val": {"acc": "test_acc_at_best", "epoch": "best_epoch", "clocks": "clocks_at_best",
                 "std": "spread_pp_std", "ci": "spread_ci95", "per_seed": "spread_pp_per_seed"},
    "best_val_interpolated": {"acc": "test_acc_at_best_interpolated", "epoch": "best_epoch_interpolated",
                              "clocks": "clocks_at_best_interpolated", "std": "spread_pp_interpolated_std",
                              "ci": "spread_interpolated_ci95", "per_seed": "spread_pp_interpolated_per_seed"},
    "final": {"acc": "test_acc_final", "epoch": "final_epoch", "clocks": "clocks",
              "std": "spread_pp_final_std", "ci": "spread_final_ci95", "per_seed": "spread_pp_final_per_seed"},
}
# The signed slope and the nulls of each rule: docs/design.md's names for best_val, the rule's suffix otherwise.
for _rule, _sfx in (("best_val", ""), ("best_val_interpolated", "_interpolated"), ("final", "_final")):
    _RULE_KEYS[_rule].update({"slope": f"memory_slope{_sfx}", "slope_std": f"memory_slope{_sfx}_std",
                              "slope_ci": f"memory_slope{_sfx}_ci95", "slope_per_seed": f"memory_slope{_sfx}_per_seed",
                              "null": f"spread_null_pp{_sfx}", "spread_p": f"spread_p{_sfx}",
                              "slope_p": f"slope_p{_sfx}"})
# memory_statistics' generic (best_val) key -> the _RULE_KEYS entry naming it for each rule
_STAT_KEYS = {"spread_pp": "spread", "spread_pp_std": "std", "spread_ci95": "ci", "spread_pp_per_seed": "per_seed",
              "memory_slope": "slope", "memory_slope_std": "slope_std", "memory_slope_ci95": "slope_ci",
              "memory_slope_per_seed": "slope_per_seed", "spread_null_pp": "null", "spread_p": "spread_p",
              "slope_p": "slope_p"}
# Selected epoch -> the member's kernel norm there, for the norm coupling.
_NORM_KEYS = {"best": "kernel_norm_best", "best_interpolated": "kernel_norm_best_interpolated",
              "final": "kernel_norm_final"}


def check_selection(name: str) -> str:
    """The summary key of selection rule `name`; ConfigError (one line) for an unknown rule."""
    if name not in SELECTION_RULES:
        raise ConfigError(f"unknown selection rule {name!r}; known: {', '.join(SELECTION_RULES)}")
    return SELECTION_RULES[name]


def selection_keys(name: str) -> dict[str, str]:
    """Every key a rule reads: `spread`, `std`, `ci`, `per_seed`, `slope`, `slope_std`, `slope_ci`,
    `slope_per_seed`, `null`, `spread_p`, `slope_p` (setting level), `acc`, `epoch`, `clocks` (member)."""
    return {"spread": check_selection(name), **_RULE_KEYS[name]}


# --------------------------------------------------------------------------- per-member inputs
def _per_member(values: Any, i: int, default: Any = None) -> Any:
    """Member i's scalar (batch size, lambda, mu): from a mapping, a sequence / 1-D array, or one value for all."""
    if values is None:
        return default
    if isinstance(values, Mapping):
        return values.get(i, values.get(str(i), default))
    if isinstance(values, (list, tuple)) or (isinstance(values, np.ndarray) and values.ndim == 1):
        return values[i]
    return values


def _member_etas(etas: Any, i: int) -> Any:
    """Member i's step sizes: from a mapping, a list of sequences, a (members, steps) array, or
    one 1-D array shared by all members (members that train together take the same steps)."""
    if etas is None:
        return None
    if isinstance(etas, Mapping):
        return etas.get(i, etas.get(str(i)))
    if isinstance(etas, np.ndarray):
        return etas[i] if etas.ndim == 2 else etas
    return etas[i]


# --------------------------------------------------------------------------- per-setting spread
def _sigma_key(s: Any) -> float:
    # sigma_w values pass through JSON; rounding makes 0.30000000000000004 and 0.3 one grid point
    return round(float(s), 12)


def drop_reason(member: Mapping[str, Any]) -> str | None:
    """Why a member summary is left out of its setting's spreads, or None if it is usable.

    "no finite validation loss" (no best epoch, diverged or not); "diverged before its best epoch"
    (`diverged_before_best`: the selected predictor is the frozen state); "no finite test accuracy
    at its best epoch". A member that diverged after its best epoch keeps its predictor.
    """
    if member.get("best_epoch") is None:
        return "no finite validation loss"
    if member.get("diverged_before_best"):
        return "diverged before its best epoch"
    if math.isnan(as_float(member.get("test_acc_at_best"))):
        return "no finite test accuracy at its best epoch"
    return None


def acc_curve(members: Sequence[Mapping[str, Any]], label: str,
              key: str = "test_acc_at_best") -> dict[str, list]:
    """Seed statistics of `key` per sigma_w for one setting, usable members only (`drop_reason`).

    Returns lists aligned on sorted `sigma_w`: `mean`, `std` (ddof=1, NaN with one seed), `min`,
    `max` and `n` (number of seeds that contributed).
    """
    groups: dict[float, list[float]] = {}
    for m in members:
        if m.get("optimizer") != label or drop_reason(m) is not None:
            continue
        v = as_float(m.get(key))
        if not math.isnan(v):
            groups.setdefault(_sigma_key(m["sigma_w"]), []).append(v)
    sig = sorted(groups)
    vals = [np.asarray(groups[s]) for s in sig]
    return {"sigma_w": sig,
            "mean": [float(v.mean()) for v in vals],
            "std": [float(v.std(ddof=1)) if v.size >= 2 else math.nan for v in vals],
            "min": [float(v.min()) for v in vals],
            "max": [float(v.max()) for v in vals],
            "n": [int(v.size) for v in vals]}


def _seed_values(members: Sequence[Mapping[str, Any]], key: str) -> dict[int, dict[float, float]]:
    out: dict[int, dict[float, float]] = {}
    for m in members:
        out.setdefault(int(m["seed"]), {})[_sigma_key(m["sigma_w"])] = as_float(m.get(key))
    return out


def _median_clocks(members: Sequence[Mapping[str, Any]], key: str) -> dict[str, float | None]:
    out = {}
    for c in (*CLOCKS, *MEASURED_CLOCKS):
        xs = [as_float((m.get(key) or {}).get(c)) for m in members]
        xs = [x for x in xs if not math.isnan(x)]
        out[c] = float(np.median(xs)) if xs else None
    return out


def _radial(members: Sequence[Mapping[str, Any]], label: str, key: str) -> float | None:
    """Pearson r over sigma_w of the seed-averaged `key` against the seed-averaged kernel_norm_init."""
    init, other = acc_curve(members, label, "kernel_norm_init"), acc_curve(members, label, key)
    common = sorted(set(init["sigma_w"]) & set(other["sigma_w"]))
    return stats.pearson([init["mean"][init["sigma_w"].index(s)] for s in common],
                         [other["mean"][other["sigma_w"].index(s)] for s in common])


def norm_coupling(on_grid: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Log-log slope of the kernel norm at each selected epoch against the initial kernel norm.

    Per seed, over the common sigma_w grid, the least-squares slope of ln |W_sel| against ln |W_0|
    (`stats.loglog_slopes`); `<which>` is its mean over seeds, `<which>_std`, `<which>_ci95` (95 % t
    interval) and `<which>_per_seed`, for `which` in best (best_val epoch), best_interpolated, final.
    1: |W_sel| proportional to |W_0| (the radius fully remembers sigma_w); 0: one common norm whatever the
    init. Pearson r cannot tell these apart (|W_0| is proportional to sigma_w, so r only measures how
    linear |W_sel| is in it: 40 + 0.5 |W_0| gives r = 1 and a slope near 0); this slope can. None where a
    member on the grid lacks a positive finite norm.
    """
    out: dict[str, Any] = {}
    for which, key in _NORM_KEYS.items():
        pairs: dict[int, list] = {}
        for m in on_grid:
            pairs.setdefault(int(m["seed"]), []).append((as_float(m.get("kernel_norm_init")), as_float(m.get(key))))
        slopes = stats.loglog_slopes(pairs) if pairs else None
        mean, std, ci = stats.seed_statistics(slopes)
        out.update({which: mean, f"{which}_std": std, f"{which}_ci95": ci, f"{which}_per_seed": slopes or []})
    return out


def spread_at_train_acc(on_grid: Sequence[Mapping[str, Any]], grid: Sequence[float]) -> dict[str, Any]:
    """Memory at matched progress: per threshold (`PROGRESS_THRESHOLDS`, keys "0.8" ...), the
    `nulls.memory_statistics` of the test accuracy at the first epoch each member reaches that train
    accuracy (`history.at_train_acc`), plus `n_reached` (members on the grid that got there) and
    `epoch_median` (their median epoch). The statistics are None where a member never gets there.
    """
    out = {}
    for t in PROGRESS_THRESHOLDS:
        key = progress_key(t)
        values: dict[int, dict[float, float]] = {}
        epochs = []
        for m in on_grid:
            acc = as_float((m.get("test_acc_at_train_acc") or {}).get(key))
            values.setdefault(int(m["seed"]), {})[_sigma_key(m["sigma_w"])] = acc
            if not math.isnan(acc):
                epochs.append(as_float((m.get("epoch_at_train_acc") or {}).get(key)))
        res = nulls.memory_statistics(values, grid)
        known = [e for e in epochs if not math.isnan(e)]
        out[key] = {**res, "n_reached": len(epochs), "epoch_median": float(np.median(known)) if known else None}
    return out


def spread(members: Sequence[Mapping[str, Any]], label: str) -> dict[str, Any]:
    """Initialization memory of one setting (`optimizer == label`), docs/theory.md §6.

    Members: a member is *dropped* (listed in `dropped` as {member, sigma_w, seed, reason};
    `n_dropped` counts them) when `drop_reason` gives a reason; the others are *usable*. A seed
    counts if it has a usable member. Every seed's spread is taken over the same sigma_w grid,
    `sigma_w_used`: the values usable in every counted seed; the other values of the setting are
    listed in `sigma_w_excluded` (their members are outside the common grid, not dropped: one member
    dropped in one seed removes its sigma_w from every seed). With fewer than 2 common values all
    spreads and slopes are None (and `sigma_w_used` is empty).

    - `spread_pp` (selection `best_val`, the paper's rule): per seed 100 * (max - min over
      `sigma_w_used` of `test_acc_at_best`), listed in `spread_pp_per_seed` (seed order, seeds in
      `seeds`); the mean over seeds. Seeds are paired draws, so the spread is taken within a seed
      before averaging: a seed-averaged curve would shrink it by averaging noise away.
    - `spread_pp_interpolated` (`best_val_interpolated`): the same of `test_acc_at_best_interpolated`;
      None if any usable member never interpolates (before diverging).
    - `spread_pp_final` (`final`): the same of `test_acc_final`; None if a usable member has none.
    - For each: `_std` (ddof=1) and a 95 % Student-t interval over the per-seed spreads,
      mean -+ t_{0.975, n-1} s / sqrt(n) (`spread_ci95`, `spread_interpolated_ci95`,
      `spread_final_ci95`: [lo, hi]; None below 2 seeds). It treats seeds as iid draws and includes
      neither the choice of the sigma_w grid nor machine-to-machine (float-order) variation. A spread
      is >= 0 even with no sigma_w dependence; compare it with its noise floor, not with 0.
    - For each rule (suffix "", `_interpolated`, `_final`; `selection_keys`), from
      `nulls.memory_statistics`: `memory_slope` (mean over seeds of the least-squares slope of test
      accuracy in pp against ln sigma_w: pp per e-fold, signed, 0 without memory), `memory_slope_std`,
      `memory_slope_ci95`, `memory_slope_per_seed`; `spread_null_pp` (the noise floor: the spread
      expected with no sigma_w dependence, from the seed-to-seed variation at fixed sigma_w; needs 2
      seeds), `spread_p` (one-sided randomization p of the spread above that floor) and `slope_p`
      (two-sided, of |memory_slope|), sigma_w relabelled within each seed; `null_draws` and
      `null_exact` (all arrangements or random ones) of the best_val rule. See `nulls`.
    - `norm_coupling` (`norm_coupling`): {best, best_interpolated, final: log-log slope of the kernel
      norm at that epoch against the initial kernel norm, mean over seeds, with `_ci95` etc.}.
    - `spread_at_train_acc` (`spread_at_train_acc`): {"0.8", "0.9", "0.95", "0.995": the spread,
      slope and nulls of the test accuracy at the first epoch each member reaches that train accuracy}.
    - `train_acc_at_best_min`: the lowest train accuracy at the best_val epoch over usable members.
    - `min_test_acc`, `max_test_acc`: min and max over sigma_w of the *seed-averaged* test accuracy
      at best-val, usable members (so with several seeds `100*(max-min)` may be below `spread_pp`).
    - `all_interpolated`: every member of the setting, dropped ones included, has a `tau_interp`
      (a diverged member counts only if it got there before diverging). False for no members.
    - `repair_gap_median_pp`: median over usable members of 100 * `repair_gap` (None if none has one).
    - `radial_memory` (secondary; use `norm_coupling`): Pearson r across sigma_w of the seed-averaged
      final vs initial *kernel* norms of usable members; `radial_memory_best` at the best epoch. Since
      the initial norm is proportional to sigma_w, r near 1 says the later norms are nearly linear in
      sigma_w, not that they are coupled to it (an offset line with a small slope also gives r ~ 1).
      None below 3 sigma_w values or without variance.
    - `n_members`; `n_diverged`: members flagged diverged (usable or not).
    - `clocks`, `clocks_at_best`, `clocks_at_best_interpolated`: medians over usable members of each
      clock (`CLOCKS` and the measured `MEASURED_CLOCKS`) at the end of the run and at the selected
      epoch (None if no member has it).
    """
    mine = [m for m in members if m.get("optimizer") == label]
    reasons = [drop_reason(m) for m in mine]
    usable = [m for m, r in zip(mine, reasons) if r is None]
    dropped = [{"member": m.get("member"), "sigma_w": float(m["sigma_w"]), "seed": int(m["seed"]), "reason": r}
               for m, r in zip(mine, reasons) if r is not None]
    by_seed: dict[int, set] = {}
    for m in usable:
        by_seed.setdefault(int(m["seed"]), set()).add(_sigma_key(m["sigma_w"]))
    grid = stats.common_grid(by_seed)
    grid = grid if len(grid) >= 2 else []
    on_grid = [m for m in usable if _sigma_key(m["sigma_w"]) in grid]

    out: dict[str, Any] = {}
    for rule in SELECTION_RULES:
        k = selection_keys(rule)
        complete = all(not math.isnan(as_float(m.get(k["acc"]))) for m in usable)
        res = nulls.memory_statistics(_seed_values(on_grid, k["acc"]) if complete else {}, grid)
        out.update({k[role]: res[generic] for generic, role in _STAT_KEYS.items()})
        if rule == "best_val":
            out.update(null_draws=res["null_draws"], null_exact=res["null_exact"])
    curve = acc_curve(usable, label)
    train_at_best = [v for v in (as_float(m.get("train_acc_at_best")) for m in usable) if not math.isnan(v)]
    gaps = [100.0 * g for g in (as_float(m.get("repair_gap")) for m in usable) if not math.isnan(g)]
    out.update({
        "n_seeds": len(out["spread_pp_per_seed"]),
        "seeds": sorted(by_seed) if grid else [],
        "sigma_w_used": grid,
        "sigma_w_excluded": sorted({_sigma_key(m["sigma_w"]) for m in mine} - set(grid)),
        "train_acc_at_best_min": min(train_at_best) if train_at_best else None,
        "min_test_acc": min(curve["mean"]) if curve["mean"] else None,
        "max_test_acc": max(curve["mean"]) if curve["mean"] else None,
        "all_interpolated": bool(mine) and all(m.get("tau_interp") is not None for m in mine),
        "repair_gap_median_pp": float(np.median(gaps)) if gaps else None,
        "norm_coupling": norm_coupling(on_grid),
        "spread_at_train_acc": spread_at_train_acc(on_grid, grid),
        "radial_memory": _radial(usable, label, "kernel_norm_final"),
        "radial_memory_best": _radial(usable, label, "kernel_norm_best"),
        "n_members": len(mine),
        "n_diverged": sum(bool(m.get("diverged")) for m in mine),
        "n_dropped": len(dropped),
        "dropped": dropped,
        "clocks": _median_clocks(usable, "clocks"),
        "clocks_at_best": _median_clocks(usable, "clocks_at_best"),
        "clocks_at_best_interpolated": _median_clocks(usable, "clocks_at_best_interpolated"),
    })
    return to_json(out)


def setting_labels(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """Setting labels in order of first appearance (member-index order), for deterministic output."""
    seen: list[str] = []
    for m in members:
        if m["optimizer"] not in seen:
            seen.append(m["optimizer"])
    return seen


def summarize(rows: Sequence[Mapping[str, Any]], members_info: Sequence[Mapping[str, Any]] | None,
              etas_by_member: Any, batch_size: Any, l2_by_member: Any,
              momentum_by_member: Any = None) -> dict[str, Any]:
    """The whole `summary.json`: `{"members": [...], "spread": {label: {...}}}`.

    `members_info[i]` describes member i (`optimizer`, `sigma_w`, `seed`, optional `diverged`); if
    None it is read from each member's first row. `etas_by_member`: a mapping {member: etas}, a list
    of per-member sequences, a (members, steps) array, or one 1-D numpy array shared by all members.
    `batch_size`, `l2_by_member`, `momentum_by_member`: a mapping, a sequence indexed by member, or
    one value for all; lambda and mu default to 0 (mu: the heavy-ball momentum of momentum and
    Nesterov members, 0 for every other optimizer, see `clocks`). Members are listed in
    member-index order; the output is JSON-ready and deterministic.
    """
    by_member = rows_by_member(rows)
    if members_info is None:
        members_info = [{k: by_member[i][0][k] for k in ("optimizer", "sigma_w", "seed")} for i in by_member]
    members = []
    for i, info in enumerate(members_info):
        member = int(info.get("member", i))
        etas, batch = _member_etas(etas_by_member, member), _per_member(batch_size, member)
        l2, mu = _per_member(l2_by_member, member, 0.0), _per_member(momentum_by_member, member, 0.0) or 0.0
        members.append(member_summary(by_member.get(member, []), {**info, "member": member}, etas, batch, l2, mu))
    members.sort(key=lambda m: m["member"])
    return to_json({"members": members,
                        "spread": {lab: spread(members, lab) for lab in setting_labels(members)}})
