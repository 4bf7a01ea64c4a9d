"""The reported stage of the IGB training study (`jaxinit.igb.study_train`): every point's seeds 0, 1, ... at
the point's own rate (`jaxinit.shared.selection`), evaluated per member on the test and training splits (validation
served the selection), summarised per case against the linear baseline (`jaxinit.igb.baseline`).
"""
from __future__ import annotations

from jaxinit.run import runinfo
from jaxinit.igb import baseline as baseline_lib
from jaxinit.igb import summary_train
from jaxinit.igb import results as results_schema
from jaxinit.shared import case_train
from jaxinit.train import engine
from jaxinit.train.engine import Plan

SIGNAL_INPUTS = 256      # training inputs the signals at init are measured on (`case_train.init_signals`)


def reported_study(cfg, data: dict, nets_: dict, cases: dict, chosen: dict,
                   checkpoints: bool) -> engine.Study:
    """The reported stage as the engine runs it (an `jaxinit.igb.config_train.IGBTrainConfig` ``cfg``, the cases of
    `jaxinit.igb.study_train.study_cases`, each case's ``chosen`` rates from `jaxinit.igb.study_train.choose_rates`):
    every point's seeds at its chosen rate (`jaxinit.shared.case_train.reported_members`),
    the run's fingerprint (`jaxinit.run.runinfo.fingerprint`: config and numeric environment) and the summary: per
    case the arrays of `jaxinit.igb.results` (`results.case_results`: with the members' signals at init, measured
    in the evaluation of epoch 0, the selection and the linear baseline) and summary.json (`summary_train.summarize_all`)."""
    tables = {name: case_train.reported_members(c.points, chosen[name]["point_lr"]) for name, c in cases.items()}
    t = cfg.train
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
                            parts=parts, signals=SIGNAL_INPUTS)
