"""summary.json of the joined study: one record per member, statistics per case, point and line (pure numbers).

Per member (`member_record`), from its evaluation rows: the selected step (the first evaluation with the lowest
validation loss, the forgetting study's rule) and at it the forgetting instrument (test / train accuracy, kernel
norm, the clocks of `jaxinit.shared.history.clocks` for the steps taken); the IGB instrument at init, at the
selected step and at the end (test and off-distribution f_max, the favoured class on the off-distribution inputs,
the per-class test-accuracy spread, c and gamma of h_L on test and off-distribution inputs).

Per case (`case_summary`): per point the seed means with t intervals (`jaxinit.intervals`), the share of seeds whose
favoured class survives (Clopper-Pearson) and the theory at init; over the case, the favoured-class identity
statistic against its permutation null (`measures.identity_test`, permuted within points); along the line (every
point lies at one sigma_b2) the forgetting study's memory statistics with their null
(`jaxinit.shared.nulls.memory_statistics`: spread and slope over ln sigma_w2, sigma_w2 labels permuted within a
seed) of the test accuracy and of the residual off-distribution f_max at the selected step (both x 100:
spread in pp, slope in pp per e-fold of sigma_w2); the norm coupling
(`jaxinit.shared.seed_stats.loglog_slopes`); the case's rate selection (`jaxinit.shared.selection.report`) and
per point its rate beside the short horizon's, with the selection curve (`jaxinit.shared.selection.point_report`).
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from jaxinit import intervals
from jaxinit.jsonsafe import finite_or_none, to_json
from jaxinit.memory import measures
from jaxinit.shared import history, nulls, seed_stats as fstats, selection

THEORY_KEYS = ("theory_phase", "c_star", "c_L", "gamma_L", "fmax_theory", "chi1_pow", "backward_product", "xi_c",
               "depth_over_xi_c")
AT = ("init", "best", "final")


def _num(v) -> float:
    return math.nan if v is None else float(v)


def _vec(v) -> np.ndarray:
    return np.array([_num(x) for x in v], float)


def member_record(rows: list[dict], batch_size: int, l2: float) -> dict:
    """One member's measures (module docstring) from its rows (`jaxinit.shared.history`: the selected step is
    `best_epoch`, interpolation `tau_interp`)."""
    rows = history.by_epoch(rows)
    best = history.best_epoch(rows)
    at = dict(zip(AT, (rows[0], next((r for r in rows if r["epoch"] == best), rows[-1]), rows[-1])))
    first = rows[0]
    rec = {k: first[k] for k in ("member", "case", "act", "depth", "optimizer", "role", "point", "sigma_w2",
                                 "sigma_b2", "seed", "lr")}
    rec.update(best_step=at["best"]["step"], tau_interp=history.tau_interp(rows), diverged=bool(rows[-1]["diverged"]))
    for name, r in at.items():
        rec.update({f"test_acc_{name}": r["test_acc"], f"train_acc_{name}": r["train_acc"],
                    f"test_fmax_{name}": r["test_fmax"], f"off_fmax_{name}": r["off_fmax"],
                    f"favoured_{name}": int(measures.favoured(_vec(r["off_class_freq"]))),
                    f"class_spread_{name}": finite_or_none(measures.class_spread(_vec(r["test_class_acc"]))),
                    f"c_test_{name}": r["test_c"], f"gamma_test_{name}": r["test_gamma"], f"c_off_{name}": r["off_c"],
                    f"gamma_off_{name}": r["off_gamma"], f"kernel_norm_{name}": r["test_kernel_norm"]})
    rec["off_class_freq_init"] = first["off_class_freq"]
    rec["off_class_freq_best"] = at["best"]["off_class_freq"]
    rec["favoured_stays"] = rec["favoured_init"] == rec["favoured_best"]
    l2_m = l2 if rec["optimizer"] == "sgd_l2" else 0.0
    rec["clocks_at_best"] = history.clocks([rec["lr"]] * int(rec["best_step"]), batch_size, l2_m)
    rec["clocks"] = history.clocks([rec["lr"]] * int(rows[-1]["step"]), batch_size, l2_m)
    return rec


def records(rows: list[dict], batch_size: int, l2: float) -> list[dict]:
    """`member_record` of every member, in member-index order."""
    return [member_record(rs, batch_size, l2) for rs in history.rows_by_member(rows).values()]


def trajectory(rows: list[dict], n_points: int, batch_size: int, l2: float) -> dict:
    """The decay of each measure over training, per evaluated step (E) and point (P): mean over seeds of the test
    accuracy and off-distribution f_max per point, the line's test-accuracy spread (pp, mean per-seed max - min over
    points) and slope (pp per e-fold of sigma_w2), the share of members still favouring their class at init, and
    each point's clocks (T_SGD, T_L2, T_adapt) at each step (its own rate)."""
    by = history.rows_by_member(rows)
    steps = sorted({int(r["epoch"]) for r in rows})
    lr_p, l2_m = np.full(n_points, np.nan), l2 if rows[0]["optimizer"] == "sgd_l2" else 0.0
    acc, fmax = np.full((len(steps), n_points), np.nan), np.full((len(steps), n_points), np.nan)
    spread, slope, ident = [], [], []
    fav = lambda r: int(measures.favoured(_vec(r["off_class_freq"])))      # noqa: E731
    for e, step in enumerate(steps):
        at = {m: next(r for r in rs if int(r["epoch"]) == step) for m, rs in by.items()}
        values = defaultdict(dict)
        for m, r in at.items():
            values[r["seed"]][r["sigma_w2"]] = _num(r["test_acc"])
            lr_p[r["point"]] = r["lr"]
        for p in range(n_points):
            mine = [r for r in at.values() if r["point"] == p]
            acc[e, p] = np.nanmean([_num(r["test_acc"]) for r in mine])
            fmax[e, p] = np.nanmean([_num(r["off_fmax"]) for r in mine])
        grid = fstats.common_grid({s: set(v) for s, v in values.items()})
        spread.append(fstats.seed_statistics(fstats.per_seed_spreads(values, grid))[0])
        slope.append(fstats.seed_statistics(fstats.per_seed_slopes(values, grid))[0])
        ident.append(measures.identity_statistic([fav(rs[0]) for rs in by.values()], [fav(r) for r in at.values()]))
    clocks = {k: np.array([[history.clocks([lr] * s, batch_size, l2_m)[k] for lr in lr_p] for s in steps])
              for k in history.CLOCKS}
    return {"step": steps, "test_acc": acc, "off_fmax": fmax, "spread_pp": spread, "memory_slope": slope,
            "identity": ident, "clocks": clocks}


def _mean_ci(values) -> dict:
    v = np.array([_num(x) for x in values], float)
    v = v[np.isfinite(v)]
    return {"mean": float(v.mean()) if v.size else None, "ci95": intervals.t_interval(v), "n": int(v.size)}


def point_summary(recs: list[dict], theory: dict) -> dict:
    """One point's seeds: means with intervals, favoured-class survival k / n, its theory at init."""
    k = sum(r["favoured_stays"] for r in recs)
    out = {"role": recs[0]["role"], "sigma_w2": recs[0]["sigma_w2"], "sigma_b2": recs[0]["sigma_b2"],
           "lr": recs[0]["lr"], "n_seeds": len(recs), "n_diverged": sum(r["diverged"] for r in recs),
           "favoured_stays": k, "favoured_stays_ci95": intervals.binomial_interval(k, len(recs)), **theory}
    for key in ("test_acc_best", "train_acc_best", "off_fmax_init", "off_fmax_best", "off_fmax_final",
                "test_fmax_init", "test_fmax_best", "class_spread_init", "class_spread_best", "c_off_init",
                "gamma_off_init", "c_off_best", "c_test_init", "c_test_best", "best_step"):
        out[key] = _mean_ci(r[key] for r in recs)
    return out


def line_statistics(recs: list[dict], key: str) -> dict:
    """`jaxinit.shared.nulls.memory_statistics` of ``key`` over the case's line ({seed: {sigma_w2: value}})."""
    values = defaultdict(dict)
    for r in recs:
        if r[key] is not None and not r["diverged"]:
            values[r["seed"]][r["sigma_w2"]] = float(r[key])
    grid = fstats.common_grid({s: set(v) for s, v in values.items()})
    out = nulls.memory_statistics(dict(values), grid)
    return {**out, "grid_sigma_w2": grid, "n_seeds": len(values)}


def norm_coupling(recs: list[dict], at: str = "best") -> float | None:
    """Mean over seeds of the log-log slope of the kernel norm at ``at`` against its init (1: full memory)."""
    pairs = defaultdict(list)
    for r in recs:
        pairs[r["seed"]].append((_num(r["kernel_norm_init"]), _num(r[f"kernel_norm_{at}"])))
    slopes = fstats.loglog_slopes(pairs)
    return float(np.mean(slopes)) if slopes else None


def case_summary(recs: list[dict], rows: list[dict], case, batch_size: int, l2: float) -> dict:
    """Points, the favoured-class identity test (init vs selected step and vs end, within points) and the line."""
    n_points = len(case.points["role"])
    theory = [{k: case.points[k][p].item() for k in THEORY_KEYS if k in case.points} for p in range(n_points)]
    points = [point_summary([r for r in recs if r["point"] == p], theory[p]) for p in range(n_points)]
    fav = lambda at: [r[f"favoured_{at}"] for r in recs]
    strata = [r["point"] for r in recs]
    return {"act": case.act, "depth": case.depth, "optimizer": case.optimizer, "points": points,
            "trajectory": trajectory(rows, n_points, batch_size, l2),
            "identity_best": measures.identity_test(fav("init"), fav("best"), strata),
            "identity_final": measures.identity_test(fav("init"), fav("final"), strata),
            "line_test_acc": line_statistics(recs, "test_acc_best"),
            "line_off_fmax": line_statistics(recs, "off_fmax_best"),
            "norm_coupling_best": norm_coupling(recs, "best"), "norm_coupling_final": norm_coupling(recs, "final")}


def summarize(rows: list[dict], cases: dict, chosen: dict, *, batch_size: int, l2: float,
              n_classes: int) -> tuple[dict, dict]:
    """(summary.json dict: ``members`` and ``cases``, per case its member arrays for notebooks and figures)."""
    recs = records(rows, batch_size, l2)
    out, arrays = {}, {}
    for name, case in cases.items():
        mine = [r for r in recs if r["case"] == name]
        out[name] = case_summary(mine, [r for r in rows if r["case"] == name], case, batch_size, l2)
        out[name]["selection"] = selection.report(chosen[name])
        for p, point in enumerate(out[name]["points"]):
            point.update(selection.point_report(chosen[name], p))
        scalar = [k for k, v in mine[0].items() if isinstance(v, (int, float, bool)) or v is None]
        arrays[name] = {k: np.array([_num(r[k]) for r in mine]) for k in scalar}
    return to_json({"n_classes": n_classes, "members": recs, "cases": out}), arrays
