"""The fair protocol's learning-rate selection (pure): every trained point gets its own rate from the same budget.

Per case (activation, depth, optimizer) and per point P (a phase point, an ``<f>xEOC`` point, a grid point, a
rescaled arm) every rate R of the optimizer's grid trains on S >= 2 selection seeds (`SEED0`, `SEED0` + 1, ...:
disjoint from the reported seeds 0, 1, ...) for H steps, H = ceil(horizon x the reported run's steps) with
horizon >= 1/2 (`horizons`). The rule (`choose`):

    score(P, R) = mean over the seeds of the validation loss at step H;
    a rate with a seed diverged by step H (or a non-finite loss) is disqualified;
    rate(P) = argmin_R score(P, R), ties to the smaller rate.

A point whose every rate is disqualified gets the smallest rate and is reported by `survivors`. The same run is
also evaluated at a short horizon h = floor(short x steps) < H (`jaxinit.shared.case_train.selection_plan`), where
the same rule gives a second choice (``point_lr_short``): the horizon's effect, reported beside the choice
(`report`, `point_report`). Nothing here trains it; a study may (igb_train's ``train.short_arm`` trains the
points whose short choice differs, so the verdict is read at both horizons).

Why the loss over a long horizon: a deep net's initial prejudice is absorbed over the run, so a rate that is
ahead early need not be ahead late, and a short selection picks the fast starter; half the reported run at the
least keeps the choice on the part of the run the verdict reads. The loss is continuous, while accuracy on a
validation split of a few hundred inputs moves in steps of 1/n (rates tie or swap on one input), and it is what
the step minimises: confident errors on the classes a prejudiced net has not yet learnt count against a rate,
not only the share of inputs it already gets right.

A grid of one rate is no selection (`unselected`). Members are laid out point-major, then rate (ascending), then
seed, so a case's selection arrays reshape to (P, R, S).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from jaxinit.errors import ConfigError

SEED0 = 1000      # selection seeds: 1000, 1001, ... (reported runs use 0, 1, ...)
CRITERION = "val_loss"


class Horizons(NamedTuple):
    """The selection run's evaluated steps: ``steps`` = H, where the rate is chosen (the run's length), and
    ``short`` = h < H, the second horizon (0: none)."""
    steps: int
    short: int


def horizons(run_steps: int, horizon: float, short: float) -> Horizons:
    """H = ceil(horizon x run_steps) (at least 1) and h = floor(short x run_steps) (0: none) of a reported run of
    ``run_steps`` steps; h < H whenever short < horizon."""
    steps = max(1, math.ceil(round(horizon * run_steps, 9)))
    return Horizons(steps, math.floor(round(short * run_steps, 9)))


@dataclass(frozen=True)
class SelectionConfig:
    """The rule's fields, in the config section of each study that selects rates (``opt.*``, ``finetune.*``)."""
    select_horizon: float = 0.5
    """selection horizon, a fraction of the reported run's steps in [0.5, 1]: every point's rate is the one with the
    lowest mean validation loss at step ceil(select_horizon x steps) (a diverged seed disqualifies a rate; ties to
    the smaller)"""
    select_short: float = 0.2
    """a second, short horizon (fraction of the reported run's steps, floored; 0: none) evaluated in the same
    selection run: the rate the rule would choose there is reported beside the chosen one (summary.json); trained
    only where a study says so (igb_train's ``train.short_arm``)"""
    select_seeds: int = 2
    """selection seeds per (point, rate), >= 2: 1000, 1001, ..., disjoint from the reported seeds 0, 1, ..."""

    def check(self, section: str) -> None:
        """One-line `ConfigError` unless 0.5 <= select_horizon <= 1, 0 <= select_short < select_horizon and
        select_seeds >= 2 (named ``--<section>.*``)."""
        horizon, short = self.select_horizon, self.select_short
        if not (0.5 <= horizon <= 1 and 0 <= short < horizon):
            raise ConfigError(f"--{section}.select_horizon must lie in [0.5, 1] (a fraction of the reported run) and "
                              f"--{section}.select_short in [0, select_horizon), got {horizon} and {short}")
        if self.select_seeds < 2:
            raise ConfigError(f"--{section}.select_seeds must be >= 2 (seeds disjoint from the reported ones), got "
                              f"{self.select_seeds}")


def rates(lrs) -> np.ndarray:
    """The grid sorted ascending (ties in the choice go to the first, i.e. the smaller, rate)."""
    return np.sort(np.asarray(lrs, float))


def members(points: dict[str, np.ndarray], lrs, n_seeds: int) -> dict[str, np.ndarray]:
    """The selection members of one case: every point x rate x seed (point-major), with ``point`` the index of
    the member's point and ``role``, ``sigma_w2``, ``sigma_b2`` (and ``centre``, where the points have it) the
    point's."""
    lrs = rates(lrs)
    n_points, n_rates = len(points["role"]), len(lrs)
    p = np.repeat(np.arange(n_points), n_rates * n_seeds)
    extra = {"centre": points["centre"][p]} if "centre" in points else {}
    return {"point": p, "role": points["role"][p], "sigma_w2": points["sigma_w2"][p],
            "sigma_b2": points["sigma_b2"][p],
            "seed": np.tile(SEED0 + np.arange(n_seeds), n_points * n_rates).astype(np.int32),
            "lr": np.tile(np.repeat(lrs, n_seeds), n_points), **extra}


def qualified(loss_PRS, alive_PRS) -> np.ndarray:
    """(P, R): no seed of the rate diverged and every seed's loss is finite."""
    loss, alive = np.asarray(loss_PRS, float), np.asarray(alive_PRS, bool)
    return (alive & np.isfinite(loss)).all(axis=-1)


def choose(loss_PRS, alive_PRS) -> np.ndarray:
    """Per point, the index of the chosen rate: the lowest mean loss over seeds among the qualified rates, ties
    to the smaller rate (the first); a point with no qualified rate gets index 0."""
    ok = qualified(loss_PRS, alive_PRS)
    score = np.where(ok, np.mean(np.where(np.isfinite(loss_PRS), loss_PRS, 0.0), axis=-1), np.inf)
    return np.argmin(score, axis=-1)


def survivors(loss_PRS, alive_PRS) -> np.ndarray:
    """Per point: how many rates were qualified."""
    return qualified(loss_PRS, alive_PRS).sum(axis=-1)


def arrays(case: dict[str, np.ndarray], lrs, n_points: int, n_seeds: int, h: Horizons) -> dict[str, np.ndarray]:
    """A case's selection as (points, rates, seeds) arrays at H: ``select_val_loss``, ``select_val_acc``,
    ``select_alive`` (and ``select_test_acc`` where the run evaluated test), at h the same with ``_short``; the
    grid ``select_lr``, ``select_horizons`` (H, h), and per point the chosen ``point_lr``, ``point_rates_alive``
    and the choice at h ``point_lr_short``. ``case``: `jaxinit.shared.case_train.case_arrays` of the selection
    members (evaluated at least at H; at h too where h > 0)."""
    lrs, shape = rates(lrs), (n_points, len(rates(lrs)), n_seeds)
    index = {int(s): e for e, s in enumerate(case["step"])}
    out = {"select_lr": lrs, "select_horizons": np.array(h, np.int64)}
    for tag, step in (("", h.steps), ("_short", h.short)):
        if not step:
            continue
        at = {k: case[k][index[step]].reshape(shape) for k in ("val_loss", "val_acc", "alive", "test_acc") if k in case}
        out.update({f"select_{k}{tag}": v for k, v in at.items()})
        out[f"point_lr{tag}"] = lrs[choose(at["val_loss"], at["alive"])]
    out["point_rates_alive"] = survivors(out["select_val_loss"], out["select_alive"])
    return out


def unselected(lrs, n_points: int) -> dict[str, np.ndarray]:
    """A grid of one rate: every point at that rate, no selection arrays."""
    lr = float(np.asarray(lrs, float).reshape(-1)[0])
    return {"point_lr": np.full(n_points, lr), "point_rates_alive": np.full(n_points, -1)}


def grids(cases: dict, lrs_of) -> dict[str, np.ndarray]:
    """The cases that select (case name -> its grid, `rates`): those whose optimizer has more than one rate.
    ``lrs_of(optimizer)``: the study's grid of an optimizer; ``cases``: `jaxinit.shared.phases.Case` by name."""
    return {name: rates(lrs_of(c.optimizer)) for name, c in cases.items() if len(lrs_of(c.optimizer)) > 1}


def tables(cases: dict, grids_: dict, n_seeds: int) -> dict[str, dict[str, np.ndarray]]:
    """The selection members (`members`) of every case in ``grids_``: one engine group each."""
    return {name: members(cases[name].points, lrs, n_seeds) for name, lrs in grids_.items()}


def chosen(cases: dict, lrs_of, selected: dict[str, dict]) -> dict[str, dict]:
    """Per case: its selection ``arrays`` where it selected (``selected``: case name -> `arrays`), else
    `unselected` (its one rate)."""
    return {name: selected.get(name) or unselected(lrs_of(c.optimizer), len(c.points["role"]))
            for name, c in cases.items()}


def _mean(v) -> float | None:
    v = np.asarray(v, float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def curve(a: dict, p: int) -> list[dict]:
    """Point ``p``'s selection per rate (empty without one): mean validation loss and accuracy over the seeds with
    a finite value, the number of disqualified seeds, at H and (``_short``) at h; mean test accuracy at H where
    evaluated."""
    if "select_lr" not in a:
        return []
    tags = [t for t in ("", "_short") if f"select_val_loss{t}" in a]
    rows = []
    for i, lr in enumerate(a["select_lr"]):
        row = {"lr": float(lr)}
        for t in tags:
            loss, alive = a[f"select_val_loss{t}"][p, i], a[f"select_alive{t}"][p, i]
            row.update({f"val_loss_mean{t}": _mean(loss), f"val_acc_mean{t}": _mean(a[f"select_val_acc{t}"][p, i]),
                        f"disqualified{t}": int((~(alive & np.isfinite(loss))).sum())})
        if "select_test_acc" in a:
            row["test_acc_mean"] = _mean(a["select_test_acc"][p, i])
        rows.append(row)
    return rows


def point_report(a: dict, p: int) -> dict:
    """Point ``p``'s choice for summary.json: ``lr`` (at H), ``lr_short`` (at h; None without), ``rates_alive``
    (-1: no selection) and its `curve`."""
    short = a.get("point_lr_short")
    return {"lr": float(a["point_lr"][p]), "lr_short": None if short is None else float(short[p]),
            "rates_alive": int(a["point_rates_alive"][p]), "lr_curve": curve(a, p)}


def report(a: dict) -> dict | None:
    """A case's selection for summary.json (None without one): the criterion, H and h, the seeds and rates, and
    how many points choose another rate at h than at H (None without h)."""
    if "select_lr" not in a:
        return None
    steps, short = (int(s) for s in a["select_horizons"])
    n_points, n_rates, n_seeds = np.shape(a["select_val_loss"])
    changed = int(np.sum(a["point_lr_short"] != a["point_lr"])) if short else None
    return {"criterion": CRITERION, "horizon_steps": steps, "short_steps": short or None, "seeds": int(n_seeds),
            "rates": int(n_rates), "points": int(n_points), "changed_at_short": changed}
