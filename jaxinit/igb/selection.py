"""The fair protocol's learning-rate selection: every trained point gets its own rate from the same budget.

Per case (activation, depth, optimizer) and per point P (a phase point, an ``<f>xEOC`` point or a grid point)
every rate R of the optimizer's grid trains on S selection seeds (1000, 1001, ...: disjoint from the
reported seeds 0, 1, ...) for ``opt.lr_sweep_steps`` steps. The point's rate is the one with the highest mean
validation accuracy over its seeds at the last selection step; a rate with a diverged seed is disqualified;
ties go to the smaller rate. Reported runs then train each point at its own rate: best against best. A grid
of one rate is no selection (that rate is taken as it is). Members are laid out point-major, then rate, then
seed, so a case's selection arrays reshape to (P, R, S).
"""
from __future__ import annotations

import numpy as np

from jaxinit.igb import train
from jaxinit.train.engine import Plan

SEED0 = 1000      # selection seeds: 1000, 1001, ... (reported runs use 0, 1, ...)


def rates(lrs) -> np.ndarray:
    """The grid sorted ascending (ties in the choice go to the first, i.e. the smaller, rate)."""
    return np.sort(np.asarray(lrs, float))


def members(points: dict[str, np.ndarray], lrs, n_seeds: int) -> dict[str, np.ndarray]:
    """The selection members of one case: every point x rate x seed (point-major), with ``point`` the index of
    the member's point and ``role``, ``sigma_w2``, ``sigma_b2`` the point's."""
    lrs = rates(lrs)
    n_points, n_rates = len(points["role"]), len(lrs)
    p = np.repeat(np.arange(n_points), n_rates * n_seeds)
    return {"point": p, "role": points["role"][p], "sigma_w2": points["sigma_w2"][p],
            "sigma_b2": points["sigma_b2"][p],
            "seed": np.tile(SEED0 + np.arange(n_seeds), n_points * n_rates).astype(np.int32),
            "lr": np.tile(np.repeat(lrs, n_seeds), n_points)}


def choose(val_acc_PRS, alive_PRS) -> np.ndarray:
    """Per point, the index of the chosen rate (module docstring); a point whose every rate diverged gets the
    smallest rate (index 0) and is reported by `survivors`."""
    val, alive = np.asarray(val_acc_PRS, float), np.asarray(alive_PRS, bool)
    score = np.where(alive.all(axis=-1), np.nanmean(val, axis=-1), -np.inf)
    return np.argmax(score, axis=-1)


def survivors(alive_PRS) -> np.ndarray:
    """Per point: how many rates had no diverged seed."""
    return np.asarray(alive_PRS, bool).all(axis=-1).sum(axis=-1)


def arrays(case: dict[str, np.ndarray], lrs, n_points: int, n_seeds: int) -> dict[str, np.ndarray]:
    """A case's selection at its last step as (points, rates, seeds) arrays: ``select_val_acc`` (validation;
    test where there is no validation split), ``select_test_acc``, ``select_alive``, the grid ``select_lr``,
    and per point the chosen ``point_lr`` and ``point_rates_alive``. ``case``: `jaxinit.igb.train.case_arrays`
    of the selection members."""
    lrs = rates(lrs)
    shape = (n_points, len(lrs), n_seeds)
    split = "val" if "val_acc" in case else "test"
    val, test = case[f"{split}_acc"][-1].reshape(shape), case["test_acc"][-1].reshape(shape)
    alive = case["alive"][-1].reshape(shape)
    return {"select_lr": lrs, "select_val_acc": val, "select_test_acc": test, "select_alive": alive,
            "point_lr": lrs[choose(val, alive)], "point_rates_alive": survivors(alive)}


def unselected(lrs, n_points: int) -> dict[str, np.ndarray]:
    """A grid of one rate: every point at that rate, no selection arrays."""
    lr = float(np.asarray(lrs, float).reshape(-1)[0])
    return {"point_lr": np.full(n_points, lr), "point_rates_alive": np.full(n_points, -1)}


def selection_study(cfg, data: dict, nets_: dict, cases: dict, make_study=None):
    """The selection stage of every case whose optimizer has more than one rate, as one engine study (an
    `jaxinit.igb.config_train.IGBTrainConfig` ``cfg``, `jaxinit.igb.phases.Case` ``cases``); its arrays are
    each such case's `arrays`. No groups where no case selects. ``make_study(tables, plan, summarize)``: a
    study's own engine study of the member tables (default `jaxinit.igb.train.study`)."""
    grids = {name: cfg.opt.lrs(c.optimizer) for name, c in cases.items() if len(cfg.opt.lrs(c.optimizer)) > 1}
    n_seeds, n = cfg.opt.lr_sweep_seeds, cfg.opt.lr_sweep_steps
    tables = {name: members(cases[name].points, lrs, n_seeds) for name, lrs in grids.items()}

    def summarize(sweep, rows):
        return None, {name: arrays(train.case_arrays(rows, train.members_of(sweep, name)), lrs,
                                   len(cases[name].points["role"]), n_seeds) for name, lrs in grids.items()}
    plan = Plan(epochs=n, eval_every=n)
    if make_study is not None:
        return make_study(tables, plan, summarize)
    return train.study(cfg.train, data, tables, cases, nets_, plan, summarize)


def choose_rates(cfg, data: dict, nets_: dict, cases: dict, progress: bool = True, make_study=None) -> dict[str, dict]:
    """Per case: its `arrays` from the selection stage (`selection_study`, trained on the engine in memory) where its
    grid has several rates, else `unselected` (its one rate)."""
    chosen = {name: unselected(cfg.opt.lrs(c.optimizer), len(c.points["role"])) for name, c in cases.items()}
    spec = selection_study(cfg, data, nets_, cases, make_study)
    if spec.groups:
        from jaxinit.train import engine
        chosen.update(engine.fit(spec, stage="selection", progress=progress).arrays)
    return chosen
