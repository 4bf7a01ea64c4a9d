"""The reported stage of the IGB training study (`jaxinit.igb.study_train`): every point's seeds 0, 1, ... at
the point's own rate (`jaxinit.igb.selection`), evaluated per member on the test and training splits (validation
served the selection), summarised per case against the linear baseline (`jaxinit.igb.baseline`).
"""
from __future__ import annotations

import numpy as np

from jaxinit.run import runinfo
from jaxinit.igb import baseline as baseline_lib
from jaxinit.igb import summary_train, train
from jaxinit.igb import results as results_schema
from jaxinit.train import engine
from jaxinit.train.engine import Plan

SIGNAL_INPUTS = 256      # training inputs the signals at init are measured on (`jaxinit.igb.train.init_signals`)


def members(points: dict[str, np.ndarray], point_lr) -> dict[str, np.ndarray]:
    """The reported members of one case: each point's ``seeds`` seeds (0, 1, ...) at the point's chosen rate,
    with the point's fields (theory included) repeated per member."""
    p = np.repeat(np.arange(len(points["role"])), points["seeds"])
    table = {k: v[p] for k, v in points.items() if k != "seeds"}
    return {**table, "point": p, "seed": np.concatenate([np.arange(n) for n in points["seeds"]]).astype(np.int32),
            "lr": np.asarray(point_lr, float)[p]}


def reported_study(cfg, data: dict, nets_: dict, cases: dict, chosen: dict,
                   checkpoints: bool) -> engine.Study:
    """The reported stage as the engine runs it (an `jaxinit.igb.config_train.IGBTrainConfig` ``cfg``, the cases of
    `jaxinit.igb.phases.study_cases`, each case's ``chosen`` rates from `jaxinit.igb.selection.choose_rates`): every point's seeds at its chosen rate (`members`),
    the run's fingerprint (`jaxinit.runinfo.fingerprint`: config and numeric environment) and the summary: per
    case the arrays of `jaxinit.igb.results` (`results.case_results`: with the members' signals at init, measured
    in the evaluation of epoch 0, the selection and the linear baseline) and summary.json (`summary_train.summarize_all`)."""
    tables = {name: members(c.points, chosen[name]["point_lr"]) for name, c in cases.items()}
    t = cfg.train
    plan = Plan(epochs=t.steps, eval_every=t.eval_every, dense_until=t.dense_until, dense_every=t.dense_every,
                checkpoint_every=t.checkpoint_every if checkpoints else 0)
    baseline = baseline_lib.linear_baseline(data["x_train"], data["y_train"], data["x_val"], data["y_val"],
                                          data["x_test"], data["y_test"])

    def summarize(sweep, rows):
        results = {name: results_schema.case_results(c, tables[name], train.case_arrays(rows, train.members_of(sweep, name)),
                                                     chosen[name], baseline, t.target) for name, c in cases.items()}
        return summary_train.summarize_all(results, t), results
    digest, parts = runinfo.fingerprint(cfg)
    reported_sets = {k: v for k, v in data.items() if k not in ("x_val", "y_val")}   # validation served selection
    return train.study(t, reported_sets, tables, cases, nets_, plan, summarize, digest, parts, signals=SIGNAL_INPUTS)
