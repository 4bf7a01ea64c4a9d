"""`fit(cfg, workdir=None) -> Result`: plain MLPs from the phases of the theory, every point of a line at the line's
learning rate, trained with low-LR SGD, Adam and SGD + L2 on the one engine, with both instruments on every member.

A *case* is (activation, depth, optimizer) (`jaxinit.shared.phases.Case`); its points are the phase points and
the ``phases.line`` points (`jaxinit.shared.phases.phase_rows`, `case_points`), labelled by the theory at init
(`init_theory`). Stages: (1) the fair protocol's selection for the line as a whole (`choose_rates`: the selection
runs and arrays of `jaxinit.shared.selection`, the line's rule of `jaxinit.memory.line`); (2) reported runs, each
point's seeds 0, 1, ... at the line's rate (`jaxinit.shared.case_train.reported_members`), evaluated every ``train.eval_every`` steps on test, validation
(selects the step), a training subset and the off-distribution inputs (`jaxinit.memory.measures`). Batches are
shared by every member (`jaxinit.shared.case_train.options`); members of one seed share their base draw: points
are paired. The summary is `jaxinit.memory.summary`.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import jax
import numpy as np

from jaxinit import budget, swept
from jaxinit.run import runinfo
from jaxinit.memory import line, measures, summary as summary_lib
from jaxinit.memory.config import MemoryPhasesConfig
from jaxinit.optim import OptSetting
from jaxinit.shared import case_train, nets, phases, selection
from jaxinit.train import engine
from jaxinit.train.engine import Plan, Study
from jaxinit.result import Result
from jaxinit.run.sink import writer_for

OFF_STREAM = 0x0ff      # fold_in tag of the off-distribution inputs' key


def load_data(cfg: MemoryPhasesConfig) -> tuple[dict, int, tuple]:
    """`jaxinit.shared.case_train.load_splits` (validation required: rates and the selected step are chosen on it)
    plus ``x_off``: Gaussian inputs at the training inputs' mean |x|^2 / d."""
    data, n_classes, shape = case_train.load_splits(cfg.data, cfg.train.eval_train_n)
    key = jax.random.fold_in(jax.random.key(cfg.train.seed), OFF_STREAM)
    data["x_off"] = measures.off_distribution_inputs(key, data["x_train"], cfg.train.n_off)
    data["y_off"] = np.zeros(data["x_off"].shape[0], np.int32)    # no labels: f_max, frequencies, c and gamma only
    return data, n_classes, shape

def check_setup(cfg: MemoryPhasesConfig) -> None:
    """Every error the set-up would find, before anything is written or trained: the sizes the evaluation needs, the
    data (`load_data`), the batch, every point as trained (float32: `jaxinit.swept`) and the members' memory."""
    t = cfg.train
    budget.check_gram({"train.n_off": t.n_off, "train.eval_train_n": t.eval_train_n}, 1)   # before they are drawn
    data, n_classes, shape = load_data(cfg)
    budget.check_batch(t.batch_size, int(data["x_train"].shape[0]))
    with warnings.catch_warnings():     # the theory of a point beyond float32 overflows: said below, in one line
        warnings.simplefilter("ignore", RuntimeWarning)
        cases = study_cases(cfg, n_classes)
    swept.check_cases(cases, "phases.line")
    budget.check_cases(cases, n_in=shape[0], n_classes=n_classes, rates=cfg.opt.lrs, select_seeds=cfg.opt.select_seeds)
    splits = {"train.n_off": t.n_off, **{f"the {k[2:]} split": int(data[k].shape[0]) for k in ("x_test", "x_val",
                                                                                            "x_train_eval")}}
    for c in cases.values():
        budget.check_gram(splits, budget.members_at_once(t.strategy, t.chunk, int(sum(c.points["seeds"]))))


def init_theory(act: str, depth: int, sigma_w2, sigma_b2, n_classes: int) -> dict[str, np.ndarray]:
    """Per point, the theory at init for inputs with q0 = 1, c0 = 0 (the off-distribution inputs): ``c_star``
    (`theory.meanfield.fixed_point`), ``c_L`` (`propagate`, layer L), ``gamma_L`` = c_L / (1 - c_L) and
    ``fmax_theory`` = E f_max(gamma_L, n_classes) (`theory.igb.fmax_mean`)."""
    from theory import igb, meanfield as mf
    sw, sb = np.asarray(sigma_w2, float), np.asarray(sigma_b2, float)
    c_L = np.asarray(mf.propagate(sw, sb, act, depth)[1], float)[..., -1]
    gamma = np.asarray(igb.gamma_from_c(c_L), float)
    return {"c_star": np.asarray(mf.fixed_point(sw, sb, act)[1], float), "c_L": c_L, "gamma_L": gamma,
            "fmax_theory": np.asarray(igb.fmax_mean(gamma, n_classes), float)}


def study_cases(cfg: MemoryPhasesConfig, n_classes: int) -> dict[str, phases.Case]:
    """Every case in result order (activations, depths, optimizers), its points with their theory at init."""
    p, out = cfg.phases, {}
    for act in cfg.model.acts:
        for depth in cfg.model.depths:
            points = phases.case_points(act, depth, phases.phase_rows(
                act, p.sigma_b2, p.seeds, p.names, p.ordered_factor, p.chaotic_factor, p.neutral_factor, p.line))
            points.update(init_theory(act, depth, points["sigma_w2"], points["sigma_b2"], n_classes))
            for optimizer in cfg.sweep.optimizers:
                out[f"{act}__d{depth}__{optimizer}"] = phases.Case(act, depth, optimizer, cfg.model.width, points, {})
    return out


def setting(optimizer: str, lr: float, l2: float) -> OptSetting:
    """The registry's setting at ``lr`` (`jaxinit.shared.case_train.setting`); sgd_l2 with coupled L2 ``l2``."""
    return case_train.setting(optimizer, lr, l2 if optimizer == "sgd_l2" else None)


def make_study(cfg: MemoryPhasesConfig, data: dict, tables: dict, cases: dict, nets_: dict, plan: Plan,
               splits: tuple[str, ...], summarize=None, fingerprint: str | None = None,
               parts: dict | None = None) -> Study:
    """The engine's `Study` of ``tables`` (`jaxinit.shared.case_train.study`): this study's optimizers (`setting`),
    batches shared by every member, `measures.eval_memory` as the evaluation, rows on ``splits`` (of test, val,
    train, off)."""
    t = cfg.train
    opts = case_train.options(batch_size=t.batch_size, data_seed=t.seed, strategy=t.strategy, chunk=t.chunk,
                              eval_fn=measures.eval_memory, eval_key="memory_phases")
    return case_train.study(data, tables, cases, nets_, plan, opts, splits=splits,
                            setting_of=lambda optimizer, lr: setting(optimizer, lr, cfg.opt.l2), summarize=summarize,
                            fingerprint=fingerprint, parts=parts)


def choose_rates(cfg: MemoryPhasesConfig, data: dict, nets_: dict, cases: dict, progress: bool = True) -> dict:
    """Per case the line's rate for every point (`jaxinit.memory.line.line_choice` of
    `jaxinit.shared.selection.chosen`): the selection runs of every case whose grid has several rates
    (`jaxinit.shared.selection.tables`, seeds 1000, ...), trained in memory for ceil(``opt.select_horizon`` x
    ``train.steps``) steps, evaluated on test and val at it and at the short horizon."""
    o = cfg.opt
    grids, h = selection.grids(cases, o.lrs), selection.horizons(cfg.train.steps, o.select_horizon, o.select_short)
    selected = {}
    if grids:
        tables, plan = selection.tables(cases, grids, o.select_seeds), case_train.selection_plan(h)
        spec = make_study(cfg, data, tables, cases, nets_, plan, ("test", "val"), lambda sweep, rows: (
            None, case_train.selection_arrays(sweep, rows, cases, grids, o.select_seeds, h)))
        selected = engine.fit(spec, stage="selection", progress=progress).arrays
    return {name: line.line_choice(a) for name, a in selection.chosen(cases, o.lrs, selected).items()}


def reported_study(cfg: MemoryPhasesConfig, data: dict, nets_: dict, cases: dict, chosen: dict, n_classes: int,
                   checkpoints: bool) -> Study:
    """Every point's seeds at the line's rate, evaluated on test, val, train and off; summary `summary.summarize`."""
    tables = {name: case_train.reported_members(c.points, chosen[name]["point_lr"]) for name, c in cases.items()}
    t = cfg.train
    plan = Plan(epochs=t.steps, eval_every=t.eval_every, checkpoint_every=t.checkpoint_every if checkpoints else 0)

    def summarize(sweep, rows):
        return summary_lib.summarize(rows, cases, chosen, batch_size=t.batch_size, l2=cfg.opt.l2, n_classes=n_classes,
                                     plateau=(t.plateau_frac, t.plateau_tol))
    digest, parts = runinfo.fingerprint(cfg)
    return make_study(cfg, data, tables, cases, nets_, plan, ("test", "val", "train", "off"), summarize, digest, parts)


def fit(cfg: MemoryPhasesConfig, workdir: str | Path | None = None, *, resume: bool = False,
        progress: bool = True) -> Result:
    """The whole study of ``cfg`` (module docstring); files only with a ``workdir`` (in memory otherwise)."""
    from jaxinit.memory.config import validate
    validate(cfg)
    data, n_classes, shape = load_data(cfg)
    cases = study_cases(cfg, n_classes)
    nets_ = nets.case_nets(cases, n_classes, shape)
    chosen = choose_rates(cfg, data, nets_, cases, progress)
    spec = reported_study(cfg, data, nets_, cases, chosen, n_classes, checkpoints=workdir is not None)
    return engine.fit(spec, writer_for(workdir, resume=resume), stage="reported", progress=progress)
