"""One clock per line: the line's learning rate, the plateau check and the clocks a run took (pure).

**The line's rate** (`choose_line`). Every point of a case (activation, depth, optimizer) trains at one rate, so
the whole line runs on one clock (`jaxinit.shared.history.clocks`: T_SGD = steps x lr^2 / b, T_L2 = lambda x steps
x lr, T_adapt = steps x lr at a constant rate). The rate is chosen by the fair protocol of
`jaxinit.shared.selection` for the line as a whole: every rate R of the optimizer's grid trains every point P on
the selection seeds (S >= 2, disjoint from the reported ones) for H = ceil(select_horizon x steps) steps, and

    score(R) = mean over the points and seeds of the validation loss at step H;
    a rate with any (point, seed) diverged or non-finite by step H is disqualified;
    rate = argmin_R score(R), ties to the smaller rate

(every rate disqualified: the smallest). Each arm gets the same budget: the same number of rates, seeds and
steps. The same rule at the short horizon h (``line_lr_short``) and the per-point rule of
`jaxinit.shared.selection.choose` (``point_lr_own``) are reported beside it, never trained.

**Plateau** (`plateau`). A member has reached its plateau when the last ``frac`` of its run lowered its best
validation loss by at most ``tol`` x its total decrease since init:

    gain_last = max(0, min_{t <= (1 - frac) T} L_val(t) - min_{t > (1 - frac) T} L_val(t)),
    gain_all  = L_val(0) - min_t L_val(t),          reached  <=>  gain_last <= tol x gain_all,

so the validation-selected predictor would barely change if the run went on; a member that never improved on
its init (gain_all = 0) is on a plateau too (a stuck one: the study's ``trained`` flag tells the two apart).
"""
from __future__ import annotations

import math

import numpy as np

from jaxinit.shared import history, selection


def choose_line(loss_PRS, alive_PRS) -> int:
    """The index of the line's rate (module docstring) from the (points, rates, seeds) selection arrays."""
    loss, alive = np.asarray(loss_PRS, float), np.asarray(alive_PRS, bool)
    ok = selection.qualified(loss, alive).all(axis=0)                         # (R,): every point qualified
    score = np.where(ok, np.mean(np.where(np.isfinite(loss), loss, 0.0), axis=(0, 2)), np.inf)
    return int(np.argmin(score)) if ok.any() else 0


def line_scores(loss_PRS, alive_PRS) -> list[float | None]:
    """Per rate, the line's score (None where disqualified)."""
    loss, alive = np.asarray(loss_PRS, float), np.asarray(alive_PRS, bool)
    ok = selection.qualified(loss, alive).all(axis=0)
    mean = np.mean(np.where(np.isfinite(loss), loss, 0.0), axis=(0, 2))
    return [float(m) if k else None for m, k in zip(mean, ok)]


def line_choice(a: dict) -> dict:
    """A case's selection arrays (`jaxinit.shared.selection.arrays` or `unselected`) with every point at the
    line's rate: ``point_lr`` (trained), ``line_lr``, ``line_lr_short`` (None without h), ``line_scores`` (at H),
    and the per-point rule's ``point_lr_own`` / ``point_lr_own_short`` kept for the report."""
    out = dict(a)
    n_points = len(a["point_lr"])
    out["point_lr_own"] = np.asarray(a["point_lr"], float)
    if "select_lr" not in a:        # one rate: no selection
        out.update(line_lr=float(a["point_lr"][0]), line_lr_short=None, line_scores=None)
        return out
    lrs = np.asarray(a["select_lr"], float)
    k = choose_line(a["select_val_loss"], a["select_alive"])
    out.update(line_lr=float(lrs[k]), point_lr=np.full(n_points, lrs[k]),
               line_scores=line_scores(a["select_val_loss"], a["select_alive"]))
    if "select_val_loss_short" in a:
        out["point_lr_own_short"] = np.asarray(a["point_lr_short"], float)
        out["line_lr_short"] = float(lrs[choose_line(a["select_val_loss_short"], a["select_alive_short"])])
        out["point_lr_short"] = np.full(n_points, out["line_lr_short"])
    else:
        out["line_lr_short"] = None
    return out


def report(a: dict) -> dict:
    """The line's choice for summary.json: ``lr``, ``lr_short``, ``scores`` per rate (the grid ``rates``) and
    the rates each point would have chosen alone (``point_lr_own``, ``point_lr_own_short``)."""
    own_short = a.get("point_lr_own_short")
    return {"lr": a["line_lr"], "lr_short": a["line_lr_short"],
            "rates": None if "select_lr" not in a else [float(v) for v in a["select_lr"]],
            "scores": a["line_scores"], "point_lr_own": [float(v) for v in a["point_lr_own"]],
            "point_lr_own_short": None if own_short is None else [float(v) for v in own_short]}


def plateau(rows, frac: float, tol: float) -> dict:
    """``reached``, ``gain_last``, ``gain_all`` (nats) of one member's evaluation rows (module docstring); the
    window needs an evaluation on either side of (1 - frac) x the last step (else ``reached`` is None)."""
    rows = history.by_epoch(rows)
    steps = np.array([int(r["step"]) for r in rows])
    loss = np.array([history.as_float(r.get("val_loss")) for r in rows])
    cut = (1 - frac) * steps[-1]
    before, window = np.isfinite(loss) & (steps <= cut), np.isfinite(loss) & (steps > cut)
    if not before.any() or not window.any():
        return {"reached": None, "gain_last": None, "gain_all": None}
    gain_last = max(0.0, float(loss[before].min() - loss[window].min()))
    gain_all = max(0.0, float(loss[0] - np.nanmin(loss))) if math.isfinite(loss[0]) else math.nan
    return {"reached": bool(gain_last <= tol * gain_all), "gain_last": gain_last, "gain_all": gain_all}


def run_clocks(lr: float, steps: int, batch_size: int, l2: float) -> dict:
    """The clocks of ``steps`` steps at the constant rate ``lr`` (`jaxinit.shared.history.clocks`)."""
    return history.clocks(np.full(int(steps), float(lr)), batch_size, l2)


__all__ = ["choose_line", "line_scores", "line_choice", "report", "plateau", "run_clocks"]
