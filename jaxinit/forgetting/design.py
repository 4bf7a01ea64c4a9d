"""The verdicts of a design: the points of a clock sweep, each run on several data splits, read together.

Every point (one setting at one lr, decay, batch size and epoch budget; `clocks.points`) is trained on
`design.splits` data splits with `sweep.seeds` seeds each; a replicate is a (split, seed) pair, shared by
every point (same data, init draw and data order), so points compare paired. Each point is summarised
at its horizons (`clock_test.horizons`, plus `design.horizons`), every horizon a *cell*: the test
accuracies of the replicates at each sigma_w under four predictors (`RULES`): the trajectory's at the
horizon (`final`), the paper's first lowest validation loss so far (`best_val`), the same among
interpolating epochs (`best_val_interpolated`) and matched progress (`matched`: on reaching 99.5 % train
accuracy). `design_stats.cell` gives each its spread and slope with intervals over splits, noise floor and
randomization p-values.

- `clock_test`: per group of families (`clock_test.COLLAPSE_GROUPS` and their `CANDIDATES`), which
  candidate clock puts the points' spread curves on one curve (`horizon.clock_collapse`, two-level
  bootstrap of replicates shared by every point), over the *trained* cells only: every member's train
  accuracy at the predictor of `design.rule` >= `design.trained`.
- `settled`: the paper's rule once its selected epoch has stopped moving (the selected epoch of the last
  horizon is the same as at the previous grid horizon in every split), one point per run against the
  clocks at the selected epoch; the same collapse test with a line (degree 1).
- `pairs` (`design.pairs`, "label=A@epoch/B@epoch"): B - A per replicate under every rule.
- `series` (`design.batch_series`, "label=A@epoch,B@epoch,..."): the per-replicate least-squares slope of
  the spread against log2 of the points' batch sizes, with its interval.
- `tuned` (`design.tune`): per family, the lr of the best mean validation accuracy at the selected epochs
  of its last horizon (each family its own rate from the same grid), and that point's memory.

Pure numpy on the horizon entries of the points (`clock_run`); `design_report` formats the result.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from jaxinit.forgetting import design_stats, horizon
from jaxinit.forgetting.horizon import MATCHED
from jaxinit.jsonsafe import to_json

RULES = ("final", "best_val", "best_val_interpolated", MATCHED)
_RULE_TRAIN = {"final": "train_acc_final_min", "best_val": "train_acc_at_best_min",
               "best_val_interpolated": None, MATCHED: None}
# Candidate clocks of each group's clock test: the paper's, sum eta (T_adapt), the effective clocks of the
# BatchNorm-invariant kernels at the slowest member, optimizer steps and epochs (the clock the paper rejects).
CANDIDATES = {"sgd": ("T_SGD", "T_adapt", "T_SGD_eff_slowest", "T_adapt_eff_slowest", "steps", "epochs"),
              "sgd_l2": ("T_L2", "T_adapt", "T_SGD", "T_adapt_eff_slowest", "steps", "epochs"),
              "adaptive": ("T_adapt", "T_update", "T_update2", "T_adapt_eff_slowest", "steps", "epochs")}
GROUP_OF = {"sgd": "sgd", "momentum": "sgd", "sgd_l2": "sgd_l2", "adam": "adaptive", "adamw": "adaptive",
            "muon": "adaptive"}
# Candidates added after a design's run suggested them (not part of its stated test): the clock test is run again
# with them and reported apart (`clock_test_exploratory`), to be confirmed by a design made for them.
# sum eta / b: the summed per-step ratio of step size to batch size.
EXPLORATORY = {"sgd": ("T_adapt_over_b",)}


# --------------------------------------------------------------------------- cells
def merge(by_split: Mapping[int, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One point's horizon entries of every split (`horizon.spreads_over_time`) -> its cells, one per horizon
    every split has: {"epoch", "replicates", "sigma_w": {rule: grid}, "acc": {rule: (R, K) or None},
    "train_acc_final_min", "train_acc_at_best_min" (min over splits), "best_epoch_median" [per split],
    "val_acc_at_best_mean" (mean over splits), "clocks", "clocks_at_best" (median over splits)}."""
    splits = sorted(by_split)
    epochs = sorted(set.intersection(*[{int(e["epoch"]) for e in by_split[k]} for k in splits])) if splits else []
    out = []
    for t in epochs:
        es = {k: next(e for e in by_split[k] if int(e["epoch"]) == t) for k in splits}
        cellv: dict[str, Any] = {"epoch": t, "setting": es[splits[0]]["setting"], "acc": {}, "sigma_w": {},
                                 "replicates": {}}
        for rule in RULES:
            mats = [es[k]["matrices"][rule] for k in splits]
            grids = {tuple(m["sigma_w"]) for m in mats}
            if any(m["acc"] is None for m in mats) or len(grids) != 1:
                cellv["acc"][rule] = None
                continue
            cellv["acc"][rule] = [row for m in mats for row in m["acc"]]
            cellv["sigma_w"][rule] = list(mats[0]["sigma_w"])
            cellv["replicates"][rule] = [[k, int(sd)] for k, m in zip(splits, mats) for sd in m["seeds"]]
        for key, fn in (("train_acc_final_min", min), ("train_acc_at_best_min", min)):
            vals = [es[k].get(key) for k in splits]
            cellv[key] = None if any(v is None for v in vals) else fn(vals)
        vals = [es[k].get("val_acc_at_best_mean") for k in splits if es[k].get("val_acc_at_best_mean") is not None]
        cellv["val_acc_at_best_mean"] = float(np.mean(vals)) if vals else None
        cellv["best_epoch_median"] = [es[k].get("best_epoch_median") for k in splits]
        for field in ("clocks", "clocks_at_best"):
            names = {c for k in splits for c in (es[k].get(field) or {})}
            cellv[field] = {c: _median([(es[k].get(field) or {}).get(c) for k in splits]) for c in sorted(names)}
        out.append(cellv)
    return out


def _median(xs: Sequence[Any]) -> float | None:
    vals = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    return float(np.median(vals)) if vals else None


def stats_of(c: Mapping[str, Any], rule: str) -> dict[str, Any] | None:
    """`design_stats.cell` of a cell under `rule`, None where a replicate has no predictor under it."""
    if c["acc"].get(rule) is None:
        return None
    reps = [tuple(r) for r in c["replicates"][rule]]
    return design_stats.cell(np.asarray(c["acc"][rule]), reps, c["sigma_w"][rule])


def per_replicate(c: Mapping[str, Any], rule: str, stat: str = "spread") -> dict[tuple, float] | None:
    """{(split, seed): the replicate's spread (or slope) in pp} of a cell under `rule`."""
    if c["acc"].get(rule) is None:
        return None
    a = np.asarray(c["acc"][rule], np.float64)
    if stat == "spread":
        v = 100.0 * (a.max(axis=1) - a.min(axis=1))
    else:
        x = np.log(np.asarray(c["sigma_w"][rule], np.float64))
        xc = x - x.mean()
        v = 100.0 * (a @ xc) / float(xc @ xc)
    return {tuple(r): float(x) for r, x in zip(c["replicates"][rule], v)}


def trained(c: Mapping[str, Any], rule: str, threshold: float) -> bool:
    """Every member's train accuracy at the rule's predictor is >= threshold (interpolated and matched
    predictors are trained by construction)."""
    key = _RULE_TRAIN[rule]
    if c["acc"].get(rule) is None:
        return False
    return key is None or (c.get(key) is not None and c[key] >= threshold - 1e-6)


# --------------------------------------------------------------------------- verdicts
def _cell_at(cells: Mapping[str, list], ref: tuple[str, int]) -> Mapping[str, Any]:
    return next(c for c in cells[ref[0]] if c["epoch"] == ref[1])


def pair(cells: Mapping[str, list], a: tuple, b: tuple) -> dict[str, Any]:
    """B - A under every rule where both cells have a predictor: spread and slope differences per replicate."""
    out = {}
    for rule in RULES:
        xa, xb = per_replicate(_cell_at(cells, a), rule), per_replicate(_cell_at(cells, b), rule)
        if xa is None or xb is None:
            continue
        sa, sb = (per_replicate(_cell_at(cells, r), rule, "slope") for r in (a, b))
        out[rule] = {"spread_diff": design_stats.paired(xa, xb), "slope_diff": design_stats.paired(sa, sb)}
    return out


def series_trend(cells: Mapping[str, list], refs: Sequence[tuple], batch: Mapping[str, int]) -> dict[str, Any]:
    """Per rule: the per-replicate least-squares slope of the spread against log2 b over the cells of `refs`
    (pp per doubling of the batch size), with its mixed interval; replicates every cell has."""
    out = {}
    x = np.log2([batch[n] for n, _ in refs])
    for rule in RULES:
        per = [per_replicate(_cell_at(cells, r), rule) for r in refs]
        if any(p is None for p in per):
            continue
        common = sorted(set.intersection(*[set(p) for p in per]))
        slopes = [float(np.polyfit(x, [p[r] for p in per], 1)[0]) for r in common]
        out[rule] = {**design_stats.mixed_interval(slopes, [r[0] for r in common]),
                     "per_replicate": slopes, "p": _sign_flip(slopes)}
    return out


def _sign_flip(d: Sequence[float]) -> float | None:
    from jaxinit.forgetting.compare import sign_flip_p
    return sign_flip_p(d)


def collapse(cells: Mapping[str, list], names: Sequence[str], clocks: Sequence[str], rule: str, keep,
             clock_field: str = "clocks", degree: int = 2, n_boot: int = 1000) -> dict[str, Any] | None:
    """`horizon.clock_collapse` of the points `names` over their cells that `keep(cell)`, the spread of
    `rule` per replicate, replicates resampled jointly over the points by `design_stats.resample`."""
    runs, reps = [], None
    for n in names:
        mine = [c for c in cells[n] if keep(c)]
        if not mine:
            continue
        per = [per_replicate(c, rule) for c in mine]
        reps = reps or sorted(set.intersection(*[set(p) for p in per]))
        if any(not set(reps) <= set(p) for p in per):
            continue
        runs.append({"name": n, "clocks": {k: [c[clock_field].get(k) for c in mine] for k in clocks},
                     "per_seed": np.array([[p[r] for p in per] for r in reps]), "epochs": [c["epoch"] for c in mine]})
    if len(runs) < 2 or reps is None:
        return None
    res = horizon.clock_collapse(runs, clocks, degree=degree, n_boot=n_boot,
                                 draw=lambda rng: design_stats.resample(reps, rng))
    return {**res, "points": [r["name"] for r in runs], "cells": {r["name"]: r["epochs"] for r in runs},
            "rule": rule, "clock_field": clock_field, "runs": runs}


def settled(c_all: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The last cell of a point if its paper's-rule selection has settled: every split's median selected epoch
    is the same at the last two cells (the selected epoch stopped moving before the run ended)."""
    ok = [c for c in c_all if c["acc"].get("best_val") is not None]
    if len(ok) < 2 or ok[-1]["best_epoch_median"] != ok[-2]["best_epoch_median"]:
        return None
    return ok[-1]


def tuned(cells: Mapping[str, list], points: Sequence[Any]) -> dict[str, Any]:
    """Per family with >= 2 points: its lr with the highest `val_acc_at_best_mean` at the last cell."""
    out = {}
    for fam in dict.fromkeys(p.family for p in points):
        mine = [p for p in points if p.family == fam]
        if len(mine) < 2:
            continue
        val = {p.name: cells[p.name][-1]["val_acc_at_best_mean"] for p in mine}
        known = {n: v for n, v in val.items() if v is not None}
        if not known:
            continue
        best = max(known, key=known.get)
        out[fam] = {"point": best, "lr": next(p.lr for p in mine if p.name == best), "val_acc": val}
    return out


def cells_of(pts: Sequence[Any], entries: Mapping[str, Mapping[int, Sequence]]) -> dict[str, list]:
    """{point name: its cells (`merge`)}, the clocks with sum eta / b added (`EXPLORATORY`)."""
    cells = {p.name: merge(entries[p.name]) for p in pts}
    for p in pts:
        for c in cells[p.name]:
            for field in ("clocks", "clocks_at_best"):
                s = c[field].get("T_adapt")
                c[field]["T_adapt_over_b"] = None if s is None else s / p.batch_size
    return cells


def analyse(cfg, pts: Sequence[Any], entries: Mapping[str, Mapping[int, Sequence]]) -> dict[str, Any]:
    """The design's verdicts (module docstring) from {point name: {split: horizon entries}}."""
    cells = cells_of(pts, entries)
    d = cfg.design
    from jaxinit.forgetting.clocks import parse_pairs
    pairs, series = parse_pairs(cfg)
    batch = {p.name: p.batch_size for p in pts}
    out: dict[str, Any] = {"splits": d.splits, "seeds": cfg.sweep.seeds, "rule": d.rule, "trained": d.trained,
                           "points": {}, "clock_test": {}, "clock_test_exploratory": {}, "settled": {}, "pairs": {},
                           "series": {}, "tuned": {}}
    for p in pts:
        rows = []
        for c in cells[p.name]:
            rows.append({"epoch": c["epoch"], "clocks": c["clocks"], "clocks_at_best": c["clocks_at_best"],
                         "train_acc_final_min": c["train_acc_final_min"],
                         "train_acc_at_best_min": c["train_acc_at_best_min"],
                         "best_epoch_median": c["best_epoch_median"], "val_acc_at_best_mean": c["val_acc_at_best_mean"],
                         "trained": trained(c, d.rule, d.trained),
                         **{rule: stats_of(c, rule) for rule in RULES}})
        out["points"][p.name] = {"family": p.family, "lr": p.lr, "weight_decay": p.weight_decay,
                                 "batch_size": p.batch_size, "epochs": p.epochs, "cells": rows}
    groups: dict[str, list[str]] = {}
    for p in pts:
        groups.setdefault(GROUP_OF.get(p.family, p.family), []).append(p.name)
    for g, names in groups.items():
        clocks = CANDIDATES.get(g, ("T_adapt", "steps", "epochs"))
        res = collapse(cells, names, clocks, d.rule, lambda c: trained(c, d.rule, d.trained))
        if res is not None:
            out["clock_test"][g] = {k: v for k, v in res.items() if k != "runs"}
        if g in EXPLORATORY:
            res = collapse(cells, names, clocks + EXPLORATORY[g], d.rule, lambda c: trained(c, d.rule, d.trained))
            if res is not None:
                out["clock_test_exploratory"][g] = {k: v for k, v in res.items() if k != "runs"}
        done = {n: settled(cells[n]) for n in names}
        done = {n: c for n, c in done.items() if c is not None}
        fake = {n: [c] for n, c in done.items()}
        if len(done) >= 4:
            res = collapse(fake, list(done), clocks, "best_val", lambda c: True, "clocks_at_best", degree=1)
            if res is not None:
                out["settled"][g] = {k: v for k, v in res.items() if k != "runs"}
    for label, a, b in pairs:
        out["pairs"][label] = {"a": list(a), "b": list(b), **pair(cells, a, b)}
    for label, refs in series:
        out["series"][label] = {"cells": [list(r) for r in refs], "batch_sizes": [batch[n] for n, _ in refs],
                                **series_trend(cells, refs, batch)}
    if d.tune:
        out["tuned"] = tuned(cells, pts)
    return to_json(out)
