"""The reported stage of the IGB training study (`jaxinit.igb.study_train`): every point's seeds 0, 1, ... at
the point's own rate (`jaxinit.shared.selection`), evaluated per member on the test and training splits (validation
served the selection), summarised per case against the linear baseline (`jaxinit.igb.baseline`).
"""
from __future__ import annotations

import numpy as np

from jaxinit.run import runinfo
from jaxinit.igb import baseline as baseline_lib
from jaxinit.igb import summary_train
from jaxinit.igb import results as results_schema
from jaxinit.shared import case_train
from jaxinit.train import engine
from jaxinit.train.engine import Plan

SIGNAL_INPUTS = 256      # training inputs the signals at init are measured on (`case_train.init_signals`)


def members(points: dict, chosen: dict, short_arm: bool) -> dict:
    """A case's reported members: each point's seeds at its chosen rate (``arm`` 0), then, with ``short_arm``, the
    seeds of every point whose short-horizon choice differs at that rate (``arm`` 1)."""
    main = case_train.reported_members(points, chosen["point_lr"])
    main["arm"] = np.zeros(len(main["role"]), np.int32)
    short = chosen.get("point_lr_short")
    if not short_arm or short is None or np.all(short == chosen["point_lr"]):
        return main
    changed = {**points, "seeds": np.where(short != chosen["point_lr"], points["seeds"], 0)}
    extra = case_train.reported_members(changed, short)
    extra["arm"] = np.ones(len(extra["role"]), np.int32)
    return {k: np.concatenate([main[k], extra[k]]) for k in main}


def reported_study(cfg, data: dict, nets_: dict, cases: dict, chosen: dict,
                   checkpoints: bool, model_of=None) -> engine.Study:
    """The reported stage as the engine runs it (an `jaxinit.igb.config_train.IGBTrainConfig` ``cfg``, the cases of
    `jaxinit.igb.study_train.study_cases`, each case's ``chosen`` rates from `jaxinit.igb.study_train.choose_rates`):
    every point's seeds at its chosen rate and, where the short horizon chose another, at that one too (`members`),
    the run's fingerprint (`jaxinit.run.runinfo.fingerprint`: config and numeric environment) and the summary: per
    case the arrays of `jaxinit.igb.results` (`results.case_results`: with the members' signals at init, measured
    in the evaluation of epoch 0, the selection and the linear baseline) and summary.json (`summary_train.summarize_all`)."""
    t = cfg.train
    tables = {name: members(c.points, chosen[name], t.short_arm) for name, c in cases.items()}
    plan = Plan(epochs=t.steps, eval_every=t.eval_every, dense_until=t.dense_until, dense_every=t.dense_every,
                checkpoint_every=t.checkpoint_every if checkpoints else 0)
    baseline = baseline_lib.linear_baseline(data["x_train"], data["y_train"], data["x_val"], data["y_val"],
                                          data["x_test"], data["y_test"])

    def summarize(sweep, rows):
        arrays = {name: case_train.case_arrays(rows, case_train.members_of(sweep, name)) for name in cases}
        results = {name: results_schema.case_results(c, tables[name], arrays[name], chosen[name], baseline, t.target)
                   for name, c in cases.items()}
        return summary_train.summarize_all(results, t), results
    digest, parts = runinfo.fingerprint(cfg)
    reported_sets = {k: v for k, v in data.items() if k not in ("x_val", "y_val")}   # validation served selection
    opts = case_train.options(batch_size=t.batch_size, data_seed=t.seed, strategy=t.strategy, chunk=t.chunk)
    return case_train.study(reported_sets, tables, cases, nets_, plan, opts, summarize=summarize, fingerprint=digest,
                            parts=parts, signals=SIGNAL_INPUTS, model_of=model_of)
