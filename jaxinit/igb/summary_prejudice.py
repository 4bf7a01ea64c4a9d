"""The prejudice measure of a trained case, per point (`jaxinit.igb.prejudice`): recall gap and off-distribution
f_max over training, absorption on the recall gap against the null of the case's centred twins, and each point's
paired difference from its twin.

Per point (its arm-0 members; `member_index`): the mean over seeds (95 % t interval) of the recall gap at init, at
step ``early`` and over the last ``late`` steps (mean over those evaluations, per seed), of the off-distribution
f_max at init and at the end; where the case holds centred twins, absorption on the recall gap (first step of a
sustained window within the twins' informative null at matched balanced accuracy: `prejudice.absorption`), counted
k of n with a Clopper-Pearson interval and a two-sided Fisher p against the EOC, beside the share of the point's
evaluations at which that null is informative, and, for a point with a twin, the paired differences point - twin
(same seeds) of the recall gap over steps 1-``early`` and over the last ``late`` steps, the final off-distribution
f_max and the final test accuracy, each with a 95 % t interval.
"""
from __future__ import annotations

import numpy as np

from jaxinit.igb import centred, prejudice
from jaxinit.intervals import binomial_interval, fisher_p, t_interval

EARLY = 50        # the dense part of the evaluations
LATE = 100        # the late window: the last LATE steps of the run


def member_index(r: dict, p: int, arm: int = 0) -> np.ndarray:
    """Members of point ``p`` in ``arm`` (0: the rate chosen at the horizon; 1: at the short horizon), by seed."""
    arms = r.get("arm", np.zeros(len(r["point"]), int))
    idx = np.flatnonzero((r["point"] == p) & (arms == arm))
    return idx[np.argsort(r["seed"][idx], kind="stable")]


def gap(r: dict) -> np.ndarray:
    """Recall gap (evals, members) on the test split."""
    return prejudice.recall_gap(r["test_class_acc"])


def late_mean(r: dict, values_EM: np.ndarray, late: int = LATE) -> np.ndarray:
    """Per member, the mean of ``values`` over the evaluations in the last ``late`` steps."""
    steps = np.asarray(r["step"])
    sel = steps >= steps[-1] - late
    return np.nanmean(values_EM[sel], axis=0)


def _at(r: dict, step: int) -> int:
    """The last evaluation at or before ``step``."""
    return int(np.searchsorted(np.asarray(r["step"]), step, side="right") - 1)


def _mean_ci(v) -> dict:
    v = np.asarray(v, float)
    v = v[np.isfinite(v)]
    return {"mean": float(v.mean()) if v.size else None, "ci95": t_interval(v), "n": int(v.size)}


def twins(r: dict) -> dict[int, int]:
    """point -> its centred twin's point, for the points of the case that have one."""
    roles = [str(x) for x in r["point_role"]]
    return {p: roles.index(f"{role}{centred.TWIN}") for p, role in enumerate(roles)
            if not centred.is_twin(role) and f"{role}{centred.TWIN}" in roles}


def null_members(r: dict) -> np.ndarray:
    """The centred twins' arm-0 members: the null of the measure."""
    twin_points = [p for p, role in enumerate(r["point_role"].tolist()) if centred.is_twin(role)]
    return np.concatenate([member_index(r, p) for p in twin_points]) if twin_points else np.array([], int)


def balanced(r: dict) -> np.ndarray:
    """Balanced test accuracy (evals, members): the accuracy the recall gap is matched on."""
    return prejudice.balanced_accuracy(r["test_class_acc"])


def n_classes(r: dict) -> int:
    return int(np.shape(r["test_class_acc"])[-1])


def absorption(r: dict, window: int) -> np.ndarray:
    """Per member: `prejudice.absorption` of the recall gap against the twins' null at matched balanced accuracy
    (NaN: never; all NaN without twins)."""
    null = null_members(r)
    g, b = gap(r), balanced(r)
    if not null.size:
        return np.full(g.shape[1], np.nan)
    return prejudice.absorption(r["step"], g, b, b[:, null], g[:, null], window, n_classes=n_classes(r))


def informative_share(r: dict) -> np.ndarray:
    """Per member: the share of its evaluations at which the twins' null is informative (`prejudice.informative`)."""
    null = null_members(r)
    g, b = gap(r), balanced(r)
    thr = prejudice.null_threshold(b, b[:, null], g[:, null])
    return prejudice.informative(thr, b, n_classes(r)).mean(axis=0)


def window_mean(r: dict, values_EM: np.ndarray, first: int, last: int) -> np.ndarray:
    """Per member, the mean of ``values`` over the evaluations with step in [first, last]."""
    steps = np.asarray(r["step"])
    return np.nanmean(values_EM[(steps >= first) & (steps <= last)], axis=0)


def gauss_theory(r: dict, p: int) -> float | None:
    """E f_max at init on independent Gaussian inputs (c0 = 0, q0 = 1), docs/theory.md section 5: `theory.igb.fmax_mean`
    at gamma = c / (1 - c) of the readout's mean-field c (`theory.meanfield.propagate` through the L hidden layers
    and the readout); None where the activation has no such map."""
    from theory import igb, meanfield
    try:
        c = float(np.asarray(meanfield.propagate(float(r["point_sigma_w2"][p]), float(r["point_sigma_b2"][p]),
                                                 str(r["act"]), int(r["depth"]) + 1, q0=1.0, c0=0.0)[1])[-1])
        gamma = np.inf if c >= 1 else c / (1 - c)
        return float(igb.fmax_mean(gamma, int(np.shape(r["test_class_acc"])[-1])))
    except (KeyError, ValueError):
        return None


def point_prejudice(r: dict, window: int, absorbed: np.ndarray | None = None) -> list[dict]:
    """One dict per point (module docstring), in the case's order."""
    g = gap(r)
    gauss = r.get("gauss_fmax")
    has_null = null_members(r).size > 0
    absorbed = absorption(r, window) if absorbed is None else absorbed
    informative = informative_share(r) if has_null else None
    pairs = twins(r)
    early = _at(r, EARLY)
    rows = []
    for p, role in enumerate(r["point_role"].tolist()):
        if role == "grid":
            continue
        idx = member_index(r, p)
        row = {"phase": str(role), "recall_gap_init": _mean_ci(g[0, idx]),
               f"recall_gap_step{int(r['step'][early])}": _mean_ci(g[early, idx]),
               f"recall_gap_last{LATE}": _mean_ci(late_mean(r, g)[idx])}
        if gauss is not None:
            row.update(gauss_fmax_init=_mean_ci(gauss[0, idx]), gauss_fmax_final=_mean_ci(gauss[-1, idx]))
            if not centred.is_twin(role):
                row["gauss_fmax_init_theory"] = gauss_theory(r, p)
        if has_null:
            steps = absorbed[idx]
            k = int(np.isfinite(steps).sum())
            row["absorbed"] = {"steps": [None if not np.isfinite(s) else int(s) for s in steps], "k": k,
                               "n": int(idx.size), "ci95": binomial_interval(k, int(idx.size)),
                               "null_informative_share": _mean_ci(informative[idx])}
        if p in pairs:
            tw = member_index(r, pairs[p])
            m = min(idx.size, tw.size)
            diff = lambda v: _mean_ci(v[idx[:m]] - v[tw[:m]])
            row["minus_twin"] = {f"recall_gap_steps1to{EARLY}": diff(window_mean(r, g, 1, EARLY)),
                                 f"recall_gap_last{LATE}": diff(late_mean(r, g)),
                                 "final_test_acc": diff(r["test_acc"][-1])}
            if gauss is not None:
                row["minus_twin"]["gauss_fmax_final"] = diff(gauss[-1])
        rows.append(row)
    eoc = next((row for row in rows if row["phase"] == "EOC" and "absorbed" in row), None)
    for row in rows:
        if "absorbed" in row and eoc is not None and row is not eoc:
            a, e = row["absorbed"], eoc["absorbed"]
            row["absorbed"]["fisher_p_vs_eoc"] = fisher_p(a["k"], a["n"], e["k"], e["n"])
    return rows
