"""Summaries of the runs in training: per point over seeds, per grid member, and metrics.jsonl's rows.

Conventions: accuracies and f_max are fractions in [0, 1]; a step count that was never reached is
None ("never"), and a median over seeds is None when more than half never reached it; accuracy intervals are
95 % Student-t intervals of the mean over seeds (None for one seed); "trains" (final test accuracy >= the
target, a fraction of the linear baseline's) is counted k of n with a Clopper-Pearson interval and a
two-sided Fisher exact p against the case's EOC, at the rate chosen at the selection horizon and (``at_short``) at
the short horizon's. Absorption is sustained (`jaxinit.igb.absorption`: the earlier, accuracy-dependent rule) and,
on the accuracy-independent measure, per point under ``prejudice`` (`jaxinit.igb.summary_prejudice`). The
measured backward factor is mean |delta_1|^2 / mean |delta_L|^2 at init (hidden layers 1 and L, all training
inputs of the signal batch), next to the mean-field product along the actual q_l and chi_1^(L-1).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxinit.igb import absorption, summary_crossed, summary_prejudice
from jaxinit.igb.summary_prejudice import member_index
from jaxinit.igb.config_train import TrainLoopConfig
from jaxinit.intervals import binomial_interval, fisher_p, t_interval
from jaxinit.jsonsafe import to_json
from jaxinit.shared import igb_stats as stats, selection

ROW_METRICS = ("train_acc", "train_loss", "train_fmax", "test_acc", "test_loss", "test_fmax", "val_acc")
CLASS_METRICS = ("test_class_acc", "test_class_freq", "test_class_loss")


def censored_median(steps) -> float | None:
    """Median of step counts where NaN means never (counted as later than any step)."""
    v = np.where(np.isfinite(steps), steps, np.inf)
    m = float(np.median(v)) if len(v) else np.inf
    return m if np.isfinite(m) else None


def steps_text(steps: list) -> str:
    """'k/n (median m)' of per-seed steps (None: never), the median `censored_median` over every seed: 'median
    never' where more than half never reached it."""
    hit = [s for s in steps if s is not None]
    median = censored_median(np.array([np.nan if s is None else s for s in steps], float))
    return f"{len(hit)}/{len(steps)}" + (f" (median {median:g})" if median is not None else
                                         " (median never)" if hit else "")


def grad_factor(init_signal_MLC: np.ndarray) -> np.ndarray:
    """Measured backward factor per member: mean |delta_1|^2 / mean |delta_L|^2 (hidden layers)."""
    s = np.asarray(init_signal_MLC).mean(axis=-1)          # mean over label classes
    return s[:, 0] / s[:, -2]


def _as_steps(v) -> list[int | None]:
    return [None if not np.isfinite(x) else int(x) for x in v]


def _steps_summary(name: str, steps) -> dict[str, Any]:
    return {name: _as_steps(steps), f"{name}_median": censored_median(steps)}


def _verdict(r: dict, idx: np.ndarray, trains) -> dict[str, Any]:
    """trains k / n with its exact interval and the final test accuracy (mean, t interval) of members ``idx``."""
    final = r["test_acc"][-1, idx]
    k, n = int(trains[idx].sum()), int(len(idx))
    return {"lr": float(r["lr"][idx[0]]) if n else None, "trains": k, "n_seeds": n,
            "trains_ci95": binomial_interval(k, n), "final_test_acc_mean": float(final.mean()) if n else None,
            "final_test_acc_ci95": t_interval(final)}


def _short_row(r: dict, p: int, trains) -> dict[str, Any] | None:
    """The verdict at the short horizon's rate: its own members (arm 1) where that rate differs, else the same
    members as at the horizon (``same_rate``); None without a short horizon."""
    short = r.get("point_lr_short")
    if short is None:
        return None
    own = member_index(r, p, 1)
    same = float(short[p]) == float(r["point_lr"][p])
    if not same and not own.size:
        return {"lr": float(short[p]), "same_rate": False, "trained": False}
    return {**_verdict(r, member_index(r, p, 0) if same else own, trains), "same_rate": same, "trained": True}


def _point_row(r: dict, p: int, idx: np.ndarray, reach, absorbed, trains) -> dict[str, Any]:
    final = r["test_acc"][-1, idx]
    worst = np.nanmin(r["test_class_acc"][-1, idx], axis=-1)
    k, n = int(trains[idx].sum()), int(len(idx))
    return {"phase": str(r["point_role"][p]), "sigma_w2": float(r["point_sigma_w2"][p]),
            "sigma_b2": float(r["point_sigma_b2"][p]), "theory_phase": str(r["point_theory_phase"][p]),
            "xi_c": float(r["point_xi_c"][p]), "depth_over_xi_c": float(r["point_depth_over_xi_c"][p]),
            **selection.point_report(r, p),
            "n_seeds": n, "fmax0": r["test_fmax"][0, idx].tolist(), "fmax0_mean": float(r["test_fmax"][0, idx].mean()),
            **_steps_summary("steps_absorbed", absorbed[idx]), **_steps_summary("steps_to_target", reach[idx]),
            "trains": k, "trains_ci95": binomial_interval(k, n),
            "final_test_acc": final.tolist(), "final_test_acc_mean": float(final.mean()),
            "final_test_acc_ci95": t_interval(final),
            "best_test_acc_mean": float(r["test_acc"][:, idx].max(axis=0).mean()),
            "final_test_fmax_mean": float(r["test_fmax"][-1, idx].mean()),
            "final_worst_class_acc_mean": float(worst.mean()),
            "grad_factor_measured": grad_factor(r["init_signal"][idx]).tolist(),
            "grad_factor_theory": float(r["point_backward_product"][p]),   # along the actual q_l
            "grad_factor_chi1_pow": float(r["point_chi1_pow"][p]),         # chi_1^(L-1) at q*
            "diverged": int((~r["alive"][-1, idx]).sum())}


def _grid_rows(r: dict, idx: np.ndarray, reach, absorbed) -> list[dict]:
    return [{"sigma_w2": float(r["sigma_w2"][j]), "sigma_b2": float(r["sigma_b2"][j]), "lr": float(r["lr"][j]),
             "theory_phase": str(r["theory_phase"][j]), "seed": int(r["seed"][j]),
             "fmax0": float(r["test_fmax"][0, j]), "steps_to_target": _as_steps(reach[j:j + 1])[0],
             "steps_absorbed": _as_steps(absorbed[j:j + 1])[0],
             "final_test_acc": float(r["test_acc"][-1, j]), "diverged": not bool(r["alive"][-1, j])} for j in idx]


def member_measures(r: dict, margin: float, acc_margin: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per member: steps to the case's target, sustained absorption step (`jaxinit.igb.absorption` with these
    margins) and whether it trains (final test accuracy >= target)."""
    target, share = float(r["target_acc"]), float(r["majority_share"])
    reach = stats.steps_to_target(r["step"], r["test_acc"], target)
    absorbed = absorption.sustained_absorption(r["step"], r["test_fmax"], r["test_acc"], share, margin, acc_margin)
    return reach, absorbed, r["test_acc"][-1] >= target


def summarize(r: dict, t: TrainLoopConfig) -> dict:
    """One case: its selection (`jaxinit.shared.selection.report`), per point (its own rate beside the short
    horizon's, its selection curve, seeds' outcomes, "trains" k / n with an exact interval and Fisher's p against
    the EOC), per grid member, the linear baseline and the target."""
    reach, absorbed, trains = member_measures(r, t.absorb_margin, t.absorb_acc_margin)
    prej = iter(summary_prejudice.point_prejudice(r, t.prejudice_window))
    rows, grid = [], []
    for p, role in enumerate(r["point_role"].tolist()):
        idx = member_index(r, p)
        if role == "grid":
            grid += _grid_rows(r, idx, reach, absorbed)
        else:
            rows.append({**_point_row(r, p, idx, reach, absorbed, trains), "at_short": _short_row(r, p, trains),
                         "prejudice": {k: v for k, v in next(prej).items() if k != "phase"}})
    eoc = next((row for row in rows if row["phase"] == "EOC"), None)
    for row in rows:
        row["fisher_p_vs_eoc"] = (None if eoc is None or row is eoc else
                                  fisher_p(row["trains"], row["n_seeds"], eoc["trains"], eoc["n_seeds"]))
        short, eoc_short = row["at_short"], eoc and eoc["at_short"]
        if short and short.get("trained") and eoc_short and eoc_short.get("trained") and row is not eoc:
            short["fisher_p_vs_eoc"] = fisher_p(short["trains"], short["n_seeds"], eoc_short["trains"],
                                                eoc_short["n_seeds"])
    return {"act": str(r["act"]), "depth": int(r["depth"]), "optimizer": str(r["optimizer"]), "width": int(r["width"]),
            "target_acc": float(r["target_acc"]), "target_of_linear": t.target,
            "linear_test_acc": float(r["linear_test_acc"]), "ridge_test_acc": float(r["ridge_test_acc"]),
            "majority_share": float(r["majority_share"]), "absorb_margin": t.absorb_margin,
            "absorb_acc_margin": t.absorb_acc_margin, "final_step": int(r["step"][-1]),
            "selection": selection.report(r), "phases": rows, "grid": grid}


def summarize_all(results: dict[str, dict], t: TrainLoopConfig) -> dict:
    """summary.json: `summarize` per run name (NaN / inf as None)."""
    runs = {name: summarize(r, t) for name, r in results.items()}
    out = {"runs": runs}
    if any(summary_crossed.is_crossed(r) for r in results.values()):
        out["crossed"] = summary_crossed.analyse(results, t.target)
    return to_json(out)


def metric_rows(results: dict[str, dict]) -> list[dict]:
    """metrics.jsonl: one row per evaluation per member of every run."""
    rows = []
    for r in results.values():
        head = {"act": str(r["act"]), "depth": int(r["depth"]), "optimizer": str(r["optimizer"]),
                "width": int(r["width"])}
        for e, step in enumerate(r["step"]):
            for j in range(len(r["role"])):
                row = {**head, "member": j, "role": str(r["role"][j]), "point": int(r["point"][j]), "sigma_w2": float(r["sigma_w2"][j]),
                       "sigma_b2": float(r["sigma_b2"][j]), "seed": int(r["seed"][j]), "lr": float(r["lr"][j]),
                       "step": int(step), "diverged": not bool(r["alive"][e, j])}
                row.update({k: float(r[k][e, j]) for k in ROW_METRICS if k in r})
                row.update({k: r[k][e, j].tolist() for k in CLASS_METRICS})
                rows.append(row)
    return to_json(rows)


def summarize_saved(out) -> dict:
    """summary.json recomputed by this code from a finished run's ``results/*.npz`` and its config.json's ``train``
    section (what the docs quote where the summary code changed after the run)."""
    import dataclasses
    import json
    from pathlib import Path

    from jaxinit.run.runs import load_results
    results = load_results(out)
    saved = json.loads((Path(out) / "config.json").read_text())["train"]
    fields = {f.name for f in dataclasses.fields(TrainLoopConfig)}
    return summarize_all(results, TrainLoopConfig(**{k: v for k, v in saved.items() if k in fields}))
