"""summary.json of the joined study: one record per member, statistics per case, point and line (pure numbers).

Per member (`member_record`), from its evaluation rows: the selected step (the first evaluation with the lowest
validation loss, the forgetting study's rule), the plateau check (`jaxinit.memory.line.plateau`) and at init, at
the selected step and at the end: test / train accuracy, test and off-distribution f_max, the off-distribution
class frequencies and favoured class, the per-class test-accuracy spread, c and gamma of h_L, the kernel norm; the
clocks of the steps taken (`jaxinit.memory.line.run_clocks`: the member's rate, batch, steps and lambda).

Per case (`case_summary`): the line's rate and clocks (one rate for every point, `jaxinit.memory.line`); per point
the seed means with t intervals (`jaxinit.intervals`), ``trained`` (mean test accuracy at the selected step >=
`TRAINED_ACC` x chance), its plateau count, its theory at init (L / xi_c included) and the continuous identity
statistic at the selected step and at the end (`jaxinit.memory.identity.test`, permuted within the point); over
the case the same statistic pooled over the points; along the line the forgetting study's memory statistics with
their null (`jaxinit.shared.nulls.memory_statistics`: spread and slope over ln sigma_w2, labels permuted within a
seed) of the selected-step test accuracy and off-distribution f_max (x 100: pp, pp per e-fold); the norm coupling
(`jaxinit.shared.seed_stats.loglog_slopes`); the trajectory over training (`trajectory`).
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from jaxinit import intervals
from jaxinit.jsonsafe import finite_or_none, to_json
from jaxinit.memory import identity, line, measures
from jaxinit.shared import history, nulls, seed_stats as fstats, selection

THEORY_KEYS = ("theory_phase", "c_star", "c_L", "gamma_L", "fmax_theory", "chi1_pow", "backward_product", "xi_c",
               "depth_over_xi_c")
AT = ("init", "best", "final")
TRAINED_ACC = 2.0     # a point "trains" when its mean test accuracy at the selected step is >= 2 x chance (1 / C)


def _num(v) -> float:
    return math.nan if v is None else float(v)


def _vec(v) -> np.ndarray:
    return np.array([_num(x) for x in v], float)


def member_record(rows: list[dict], batch_size: int, l2: float, plateau: tuple[float, float]) -> dict:
    """One member's measures (module docstring) from its rows; ``plateau`` = (frac, tol) of `line.plateau`."""
    rows = history.by_epoch(rows)
    best = history.best_epoch(rows)
    at = dict(zip(AT, (rows[0], next((r for r in rows if r["epoch"] == best), rows[-1]), rows[-1])))
    first = rows[0]
    rec = {k: first[k] for k in ("member", "case", "act", "depth", "optimizer", "role", "point", "sigma_w2",
                                 "sigma_b2", "seed", "lr")}
    rec.update(best_step=at["best"]["step"], steps=rows[-1]["step"], tau_interp=history.tau_interp(rows),
               diverged=bool(rows[-1]["diverged"]))
    for name, r in at.items():
        rec.update({f"test_acc_{name}": r["test_acc"], f"train_acc_{name}": r["train_acc"],
                    f"val_loss_{name}": r["val_loss"], f"test_fmax_{name}": r["test_fmax"],
                    f"off_fmax_{name}": r["off_fmax"], f"off_class_freq_{name}": r["off_class_freq"],
                    f"favoured_{name}": int(measures.favoured(_vec(r["off_class_freq"]))),
                    f"class_spread_{name}": finite_or_none(measures.class_spread(_vec(r["test_class_acc"]))),
                    f"c_test_{name}": r["test_c"], f"gamma_test_{name}": r["test_gamma"], f"c_off_{name}": r["off_c"],
                    f"gamma_off_{name}": r["off_gamma"], f"kernel_norm_{name}": r["test_kernel_norm"]})
    plat = line.plateau(rows, *plateau)
    rec.update(plateau_reached=plat["reached"], plateau_gain_last=plat["gain_last"], plateau_gain_all=plat["gain_all"])
    l2_m = l2 if rec["optimizer"] == "sgd_l2" else 0.0
    rec["clocks_at_best"] = line.run_clocks(rec["lr"], int(rec["best_step"]), batch_size, l2_m)
    rec["clocks"] = line.run_clocks(rec["lr"], int(rec["steps"]), batch_size, l2_m)
    return rec


def records(rows: list[dict], batch_size: int, l2: float, plateau: tuple[float, float]) -> list[dict]:
    """`member_record` of every member, in member-index order."""
    return [member_record(rs, batch_size, l2, plateau) for rs in history.rows_by_member(rows).values()]


def trajectory(rows: list[dict], n_points: int, batch_size: int, l2: float) -> dict:
    """Over training, per evaluated step t: the line's clocks (one rate), the mean over seeds of each point's test
    accuracy and off-distribution f_max at t, the line's test-accuracy spread under the horizon rule (each member
    stopped at t and selected at its lowest validation loss up to t: pp, per-seed max - min over the points, mean
    over seeds) and the pooled identity r of init against t (`identity.correlation`)."""
    by = {m: history.by_epoch(rs) for m, rs in history.rows_by_member(rows).items()}
    steps = sorted({int(r["epoch"]) for r in rows})
    first = next(iter(by.values()))[0]
    lr, l2_m = float(first["lr"]), l2 if first["optimizer"] == "sgd_l2" else 0.0
    acc, fmax = np.full((len(steps), n_points), np.nan), np.full((len(steps), n_points), np.nan)
    spread, ident = [], []
    for e, step in enumerate(steps):
        values, f0, f1, strata = defaultdict(dict), [], [], []
        for rs in by.values():
            upto = [r for r in rs if int(r["epoch"]) <= step]
            sel = history.row_at(upto, history.best_epoch(upto)) or upto[-1]
            values[rs[0]["seed"]][rs[0]["sigma_w2"]] = _num(sel["test_acc"])
            f0.append(_vec(rs[0]["off_class_freq"]))
            f1.append(_vec(upto[-1]["off_class_freq"]))
            strata.append(rs[0]["point"])
        for p in range(n_points):
            mine = [next(r for r in rs if int(r["epoch"]) == step) for rs in by.values() if rs[0]["point"] == p]
            acc[e, p] = np.nanmean([_num(r["test_acc"]) for r in mine])
            fmax[e, p] = np.nanmean([_num(r["off_fmax"]) for r in mine])
        grid = fstats.common_grid({s: set(v) for s, v in values.items()})
        spread.append(fstats.seed_statistics(fstats.per_seed_spreads(values, grid))[0])
        ident.append(identity.correlation(*identity.split(f0, f1, strata)))
    clocks = {k: [line.run_clocks(lr, s, batch_size, l2_m)[k] for s in steps] for k in history.CLOCKS}
    return {"step": steps, "test_acc": acc, "off_fmax": fmax, "spread_pp": spread, "identity_r": ident,
            "clocks": clocks}


def _mean_ci(values) -> dict:
    v = np.array([_num(x) for x in values], float)
    v = v[np.isfinite(v)]
    return {"mean": float(v.mean()) if v.size else None, "ci95": intervals.t_interval(v), "n": int(v.size)}


def point_summary(recs: list[dict], theory: dict, n_classes: int) -> dict:
    """One point's seeds: means with intervals, trained, plateau, identity at the selected step and the end."""
    out = {"role": recs[0]["role"], "sigma_w2": recs[0]["sigma_w2"], "sigma_b2": recs[0]["sigma_b2"],
           "lr": recs[0]["lr"], "n_seeds": len(recs), "n_diverged": sum(r["diverged"] for r in recs),
           "plateau_reached": sum(bool(r["plateau_reached"]) for r in recs), **theory}
    for key in ("test_acc_best", "test_acc_final", "train_acc_best", "off_fmax_init", "off_fmax_best",
                "off_fmax_final", "test_fmax_init", "test_fmax_best", "class_spread_init", "class_spread_best",
                "c_off_init", "gamma_off_init", "c_off_best", "c_test_init", "c_test_best", "best_step"):
        out[key] = _mean_ci(r[key] for r in recs)
    acc = out["test_acc_best"]["mean"]
    out["trained"] = acc is not None and acc >= TRAINED_ACC / n_classes
    out["identity_best"] = identity.identity_of(recs, "best")
    out["identity_final"] = identity.identity_of(recs, "final")
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


def case_clocks(recs: list[dict]) -> dict:
    """The clocks the case's runs took: at the end (every member runs the same steps at the line's rate) and at
    the median selected step, with the rate, batch, steps and lambda they come from."""
    med = lambda k: float(np.median([r["clocks_at_best"][k] for r in recs]))      # noqa: E731
    return {"end": dict(recs[0]["clocks"]), "at_best_median": {k: med(k) for k in history.CLOCKS},
            "best_step_median": float(np.median([r["best_step"] for r in recs])), "steps": recs[0]["steps"]}


def case_summary(recs: list[dict], rows: list[dict], case, batch_size: int, l2: float, n_classes: int) -> dict:
    """Points, the pooled identity statistic, the line's clocks and memory statistics, the plateau count."""
    n_points = len(case.points["role"])
    theory = [{k: case.points[k][p].item() for k in THEORY_KEYS if k in case.points} for p in range(n_points)]
    points = [point_summary([r for r in recs if r["point"] == p], theory[p], n_classes) for p in range(n_points)]
    return {"act": case.act, "depth": case.depth, "optimizer": case.optimizer, "batch_size": batch_size,
            "l2": l2 if case.optimizer == "sgd_l2" else 0.0, "clocks": case_clocks(recs), "points": points,
            "plateau": {"reached": sum(bool(r["plateau_reached"]) for r in recs), "n": len(recs),
                        "not_reached": [r["member"] for r in recs if not r["plateau_reached"]]},
            "trajectory": trajectory(rows, n_points, batch_size, l2),
            "identity_best": identity.identity_of(recs, "best"), "identity_final": identity.identity_of(recs, "final"),
            "line_test_acc": line_statistics(recs, "test_acc_best"),
            "line_off_fmax": line_statistics(recs, "off_fmax_best"),
            "norm_coupling_best": norm_coupling(recs, "best"), "norm_coupling_final": norm_coupling(recs, "final")}


def summarize(rows: list[dict], cases: dict, chosen: dict, *, batch_size: int, l2: float, n_classes: int,
              plateau: tuple[float, float]) -> tuple[dict, dict]:
    """(summary.json dict: ``members``, ``cases`` and the ``hypotheses``' decisions, per case its member arrays
    for notebooks and figures)."""
    from jaxinit.memory import hypotheses
    recs = records(rows, batch_size, l2, plateau)
    out, arrays = {}, {}
    for name, case in cases.items():
        mine = [r for r in recs if r["case"] == name]
        out[name] = case_summary(mine, [r for r in rows if r["case"] == name], case, batch_size, l2, n_classes)
        out[name].update(selection=selection.report(chosen[name]), line=line.report(chosen[name]))
        for p, point in enumerate(out[name]["points"]):
            point.update(selection.point_report(chosen[name], p))
        scalar = [k for k, v in mine[0].items() if isinstance(v, (int, float, bool)) or v is None]
        arrays[name] = {k: np.array([_num(r[k]) for r in mine]) for k in scalar}
    verdicts = hypotheses.decide(out, recs)
    return to_json({"n_classes": n_classes, "members": recs, "cases": out, "hypotheses": verdicts}), arrays
