"""Summaries of the runs in training: per phase over seeds, per grid point, and metrics.jsonl's rows.

Conventions: accuracies and f_max are fractions in [0, 1]; a step count that was never reached is
None ("never"), and a median over seeds is None when more than half never reached it; intervals are
95 % Student-t intervals of the mean over seeds (None for one seed). The measured backward factor is
mean |delta_1|^2 / mean |delta_L|^2 at init (hidden layers 1 and L, all training inputs of the
signal batch), next to the mean-field chi_1^(L-1).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxinit.igb import stats
from jaxinit.igb.config_train import TrainLoopConfig
from jaxinit.intervals import t_interval
from jaxinit.jsonsafe import to_json

ROW_METRICS = ("train_acc", "train_loss", "train_fmax", "test_acc", "test_loss", "test_fmax", "val_acc")
CLASS_METRICS = ("test_class_acc", "test_class_freq", "test_class_loss")


def censored_median(steps) -> float | None:
    """Median of step counts where NaN means never (counted as later than any step)."""
    v = np.where(np.isfinite(steps), steps, np.inf)
    m = float(np.median(v)) if len(v) else np.inf
    return m if np.isfinite(m) else None


def grad_factor(init_signal_MLC: np.ndarray) -> np.ndarray:
    """Measured backward factor per member: mean |delta_1|^2 / mean |delta_L|^2 (hidden layers)."""
    s = np.asarray(init_signal_MLC).mean(axis=-1)          # mean over label classes
    return s[:, 0] / s[:, -2]


def _as_steps(v) -> list[int | None]:
    return [None if not np.isfinite(x) else int(x) for x in v]


def _phase_row(r: dict, idx: np.ndarray, reach, absorbed) -> dict[str, Any]:
    final = r["test_acc"][-1, idx]
    worst = np.nanmin(r["test_class_acc"][-1, idx], axis=-1)
    return {"phase": str(r["role"][idx[0]]), "sigma_w2": float(r["sigma_w2"][idx[0]]),
            "sigma_b2": float(r["sigma_b2"][idx[0]]), "theory_phase": str(r["theory_phase"][idx[0]]),
            "n_seeds": int(len(idx)), "fmax0": r["test_fmax"][0, idx].tolist(),
            "fmax0_mean": float(r["test_fmax"][0, idx].mean()),
            "steps_absorbed": _as_steps(absorbed[idx]), "steps_absorbed_median": censored_median(absorbed[idx]),
            "steps_to_target": _as_steps(reach[idx]), "steps_to_target_median": censored_median(reach[idx]),
            "final_test_acc": final.tolist(), "final_test_acc_mean": float(final.mean()),
            "final_test_acc_ci95": t_interval(final),
            "best_test_acc_mean": float(r["test_acc"][:, idx].max(axis=0).mean()),
            "final_test_fmax_mean": float(r["test_fmax"][-1, idx].mean()),
            "final_worst_class_acc_mean": float(worst.mean()),
            "grad_factor_measured": grad_factor(r["init_signal"][idx]).tolist(),
            # theory along the actual q_l (results saved before it existed: None); chi_1^(L-1) at q* beside it
            "grad_factor_theory": float(r["backward_product"][idx[0]]) if "backward_product" in r else None,
            "grad_factor_chi1_pow": float(r["chi1_pow"][idx[0]]),
            "diverged": int((~r["alive"][-1, idx]).sum())}


def _grid_rows(r: dict, idx: np.ndarray, reach) -> list[dict]:
    return [{"sigma_w2": float(r["sigma_w2"][j]), "sigma_b2": float(r["sigma_b2"][j]),
             "theory_phase": str(r["theory_phase"][j]), "seed": int(r["seed"][j]),
             "fmax0": float(r["test_fmax"][0, j]), "steps_to_target": _as_steps(reach[j:j + 1])[0],
             "final_test_acc": float(r["test_acc"][-1, j]), "diverged": not bool(r["alive"][-1, j])} for j in idx]


def _sweep(r: dict) -> list[dict]:
    if "sweep_lr" not in r:
        return []
    return [{"lr": float(lr), "val_acc_mean": float(r["sweep_val_acc"][i].mean()),
             "test_acc_mean": float(r["sweep_test_acc"][i].mean()), "diverged": int((~r["sweep_alive"][i]).sum())}
            for i, lr in enumerate(r["sweep_lr"])]


def summarize(r: dict, t: TrainLoopConfig) -> dict:
    """One run: the learning-rate sweep, per phase over seeds, per grid point."""
    reach = stats.steps_to_target(r["step"], r["test_acc"], t.target_acc)
    absorbed = stats.steps_absorbed(r["step"], r["test_fmax"], t.absorbed_fmax)
    rows, grid = [], []
    for role in dict.fromkeys(r["role"].tolist()):
        idx = np.flatnonzero(r["role"] == role)
        if role == "grid":
            grid += _grid_rows(r, idx, reach)
        else:
            rows.append(_phase_row(r, idx, reach, absorbed))
    return {"act": str(r["act"]), "depth": int(r["depth"]), "optimizer": str(r["optimizer"]), "width": int(r["width"]),
            "lr": float(r["lr"][0]), "lr_sweep": _sweep(r), "target_acc": t.target_acc,
            "absorbed_fmax": t.absorbed_fmax, "final_step": int(r["step"][-1]), "phases": rows, "grid": grid}


def summarize_all(results: dict[str, dict], t: TrainLoopConfig) -> dict:
    """summary.json: `summarize` per run name (NaN / inf as None)."""
    return to_json({"runs": {name: summarize(r, t) for name, r in results.items()}})


def metric_rows(results: dict[str, dict]) -> list[dict]:
    """metrics.jsonl: one row per evaluation per member of every run."""
    rows = []
    for r in results.values():
        head = {"act": str(r["act"]), "depth": int(r["depth"]), "optimizer": str(r["optimizer"]),
                "width": int(r["width"])}
        for e, step in enumerate(r["step"]):
            for j in range(len(r["role"])):
                row = {**head, "member": j, "role": str(r["role"][j]), "sigma_w2": float(r["sigma_w2"][j]),
                       "sigma_b2": float(r["sigma_b2"][j]), "seed": int(r["seed"][j]), "lr": float(r["lr"][j]),
                       "step": int(step), "diverged": not bool(r["alive"][e, j])}
                row.update({k: float(r[k][e, j]) for k in ROW_METRICS if k in r})
                row.update({k: r[k][e, j].tolist() for k in CLASS_METRICS})
                rows.append(row)
    return to_json(rows)
