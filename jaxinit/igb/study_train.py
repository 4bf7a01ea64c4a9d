"""`train_phases(cfg, workdir=None) -> Result`: deep MLPs trained from every phase of the theory, on the engine,
under the fair protocol (each point at its own learning rate).

For every activation, depth and optimizer (a *case*, `study_cases`): (1) the case's points
(`jaxinit.shared.phases.case_points`: one per phase, the optional ``<f>xEOC`` sweep, and for the first optimizer at
``grid.depths`` a (sigma_w2, sigma_b2) grid), labelled by the theory; (2) selection (`choose_rates`, the rule of
`jaxinit.shared.selection`): every point x every rate of ``cfg.opt.<optimizer>_lr`` x ``opt.select_seeds``
selection seeds (1000, ...) for ceil(``opt.select_horizon`` x ``train.steps``) steps, each point's rate the lowest
mean validation loss there (a diverged seed disqualifies a rate; ties to the smaller rate), the choice at the
short horizon ``opt.select_short`` reported beside it; (3) reported runs: each point's
seeds 0, 1, ... at its own rate. Both stages are one engine sweep (`jaxinit.train.engine`), a case one group of
traced members (one compile per case whatever its rates), every case on the same batches. The selection runs in
memory (short and deterministic: a resumed run repeats it exactly); the reported stage, given a ``workdir``,
writes metrics.jsonl per evaluation and step-level checkpoints, so a run killed anywhere resumes to the same
bytes. The target accuracy is ``train.target`` x the linear baseline's test accuracy on the same split
(`jaxinit.igb.baseline`). The result's ``arrays`` hold one dict of arrays per case
(``"<act>__d<depth>__<optimizer>"``), the schema of `jaxinit.igb.results` that the summary and the figures read.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from jaxinit import budget, swept
from jaxinit.igb import centred, crossed, prejudice, reported
from jaxinit.igb.config_train import IGBTrainConfig
from jaxinit.shared import case_train, nets, phases, selection
from jaxinit.shared.phases import Case
from jaxinit.train import engine
from jaxinit.result import Result
from jaxinit.run.sink import writer_for


def load_data(cfg: IGBTrainConfig) -> tuple[dict, int, tuple]:
    """`jaxinit.shared.case_train.load_splits` of ``data`` with ``train.eval_train_n`` training inputs evaluated and
    ``train.gauss_n`` Gaussian inputs on the sphere (`jaxinit.igb.prejudice.gaussian_inputs`; split ``gauss``,
    labels 0: only its predicted class frequencies mean anything)."""
    data, n_classes, shape = case_train.load_splits(cfg.data, cfg.train.eval_train_n)
    if cfg.train.gauss_n:
        data["x_gauss"] = prejudice.gaussian_inputs(cfg.train.gauss_n, shape[0])
        data["y_gauss"] = np.zeros(cfg.train.gauss_n, data["y_test"].dtype)
    return data, n_classes, shape


def model_of(cfg: IGBTrainConfig, data: dict):
    """The engine model of a case's net: the centred-twin model (`jaxinit.igb.centred.model_of`, on the first
    `centred.REFERENCE_INPUTS` training inputs) when ``phases.centred``, else None (the net's own)."""
    return centred.model_of(data["x_train"][:centred.REFERENCE_INPUTS]) if cfg.phases.centred else None


def check_setup(cfg: IGBTrainConfig) -> None:
    """Every error the set-up would find (data sizes, files, the batch, every point as trained -- float32:
    `jaxinit.swept` --, the members' memory) before anything is written or trained."""
    data, n_classes, shape = load_data(cfg)
    budget.check_batch(cfg.train.batch_size, int(data["x_train"].shape[0]))
    with warnings.catch_warnings():     # the theory of a point beyond float32 overflows: said below, in one line
        warnings.simplefilter("ignore", RuntimeWarning)
        cases = study_cases(cfg)
    swept.check_cases(cases, "phases.eoc_factors")
    budget.check_cases(cases, n_in=shape[0], n_classes=n_classes, rates=cfg.opt.lrs, select_seeds=cfg.opt.select_seeds)


def study_cases(cfg: IGBTrainConfig) -> dict[str, Case]:
    """Every case in the order of the results: activations, then depths, then optimizers; the phase points of
    ``phases.*`` (`jaxinit.shared.phases.phase_rows`), then, for the first optimizer at ``grid.depths`` only, the
    grid's (sigma_w2, sigma_b2) points with ``grid.seeds`` each and its diagram (`theory.phase.diagram_around`)."""
    from theory import phase
    p, g, out = cfg.phases, cfg.grid, {}
    for act in cfg.model.acts:
        for depth in cfg.model.depths:
            for optimizer in cfg.sweep.optimizers:
                gridded = optimizer == cfg.sweep.optimizers[0] and depth in g.depths and g.seeds > 0
                if p.xi_targets:
                    rows = crossed.crossed_rows(act, depth, p.sigma_b2, p.xi_targets, p.seeds, p.xi_max_sigma_w2)
                else:
                    rows = phases.phase_rows(act, p.sigma_b2, p.seeds, p.names, p.ordered_factor, p.chaotic_factor,
                                             p.neutral_factor, p.eoc_factors)
                rows = centred.twin_rows(rows) if p.centred else rows
                rows += [("grid", sw, sb, g.seeds) for sb in g.sigma_b2 for sw in g.sigma_w2] if gridded else []
                points = phases.case_points(act, depth, rows)
                if p.centred:
                    points["centre"] = np.array([float(centred.is_twin(r)) for r in points["role"]], np.float32)
                diagram = (phase.diagram_around(act, depth, points["sigma_w2"], points["sigma_b2"], cfg.train.phase_res)
                           if gridded else {})
                out[f"{act}__d{depth}__{optimizer}"] = Case(act, depth, optimizer, cfg.model.width, points, diagram)
    return out


def choose_rates(cfg: IGBTrainConfig, data: dict, nets_: dict, cases: dict, progress: bool = True) -> dict[str, dict]:
    """Per case its chosen rates (`jaxinit.shared.selection.chosen`): the selection runs of every case whose grid has
    several rates (`jaxinit.shared.selection.tables`), trained in memory on the engine and evaluated on every split."""
    o, t = cfg.opt, cfg.train
    grids, h = selection.grids(cases, o.lrs), selection.horizons(t.steps, o.select_horizon, o.select_short)
    selected = {}
    if grids:
        opts = case_train.options(batch_size=t.batch_size, data_seed=t.seed, strategy=t.strategy, chunk=t.chunk)
        tables, plan = selection.tables(cases, grids, o.select_seeds), case_train.selection_plan(h)
        spec = case_train.study(data, tables, cases, nets_, plan, opts, model_of=model_of(cfg, data),
                                summarize=lambda sweep, rows: (
                                    None, case_train.selection_arrays(sweep, rows, cases, grids, o.select_seeds, h)))
        selected = engine.fit(spec, stage="selection", progress=progress).arrays
    return selection.chosen(cases, o.lrs, selected)


def train_phases(cfg: IGBTrainConfig, workdir: str | Path | None = None, *, resume: bool = False,
                 progress: bool = True) -> Result:
    """Every case of ``cfg`` (see the module docstring); files only with a ``workdir``."""
    data, n_classes, shape = load_data(cfg)
    cases = study_cases(cfg)
    nets_ = nets.case_nets(cases, n_classes, shape)
    chosen = choose_rates(cfg, data, nets_, cases, progress)
    spec = reported.reported_study(cfg, data, nets_, cases, chosen, checkpoints=workdir is not None,
                                   model_of=model_of(cfg, data))
    return engine.fit(spec, writer_for(workdir, resume=resume), stage="reported", progress=progress)
