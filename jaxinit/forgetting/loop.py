"""The forgetting study on the engine: `fit(config, workdir=None, model=None) -> Result`, in memory or into a
run directory. This module turns a `ForgettingConfig` into one `jaxinit.train.engine.Study` (`study`: the
data, the groups and plan, the run's fingerprint, loss and accuracy per split from `jaxinit.train.evaluate`,
the summary of the rows from `memory.summarize`) and hands it to `engine.fit`; the loop, checkpoints,
resume, strategies and devices are the engine's.

    from jaxinit import forgetting
    res = forgetting.fit(forgetting.preset("smoke"))          # in memory: no file is written
    res.summary["spread"]["sgd"]["spread_pp"]                 # the summary.json dict
    res = forgetting.fit(cfg, model=MyFlaxModule())           # any flax module, swept over sigma_w

With a `workdir`, metrics rows go to `metrics.jsonl` (appended and fsync-ed per evaluation), the
member-stacked state to orbax checkpoints (`checkpoint_every` epochs, verified on restore), and the
summary to `summary.json` at the end; `resume=True` continues from the newest usable checkpoint,
regenerating or refusing damaged metrics rows (`jaxinit.run.sink`); a finished run without checkpoints is
re-summarised from metrics.jsonl (its `Result.states` are then the initial states). The run's
fingerprint -- config, numeric environment and a user's ``model`` (`jaxinit.run.runinfo`) -- is recorded
at the start and a resume under another one is refused in one line. The loop is step-major (every
chunk takes step i before any takes step i + 1), so a SIGINT / SIGTERM (`jaxinit.interrupt`) stops at a
step boundary with a checkpoint of that exact point; the resumed run is bit-identical to an
uninterrupted one. Training and its writes are a `jaxinit.interrupt.deferred` section; set-up and
the summary answer a signal at once where the caller asked for that (`interrupt.prompt`, the CLI).

For accelerator runs (issue "The first accelerator run yields numbers"): ``train.precision`` sets the
arithmetic (`jaxinit.precision`); run.json (`timing.Clock`: compile, steady step, evaluation and
checkpoint costs) is rewritten after every epoch and on a stop, so a run killed after its first epoch
says what it cost; progress is a bar on a terminal and a line per epoch otherwise (`progress`);
``train.eval_train_subset`` scores train-set metrics on a fixed subset and ``train.async_checkpoint``
writes checkpoints in the background (`jaxinit.run.checkpoint`), waited for before a stop, a resume point
and the end. The training path imports neither orbax (only with checkpoints) nor tqdm, matplotlib,
scipy or tyro.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from jaxinit import data as data_lib
from jaxinit.run import runinfo
from jaxinit.errors import ConfigError
from jaxinit.forgetting import memory
from jaxinit.optim import HEAVY_BALL_KINDS, resolve_setting
from jaxinit.train import engine, evaluate
from jaxinit.train.engine import Plan, Sweep
from jaxinit.result import Result
from jaxinit.run.sink import writer_for
from jaxinit.train.evaluate import member_learning_rates
from jaxinit.train.members import make_groups
from jaxinit.train.timing import Clock


# --------------------------------------------------------------------------- fit
def fit(cfg, workdir: str | Path | None = None, model=None, *, resume: bool = False, progress: bool = True) -> Result:
    """Train every member of ``cfg.sweep``; see the module docstring. ``model``: a flax module (or a
    `jaxinit.models.Model`) replacing ``cfg.model``'s registry model. ``progress``: a bar on a terminal,
    one line per epoch on a stderr that is not one."""
    clock = Clock()           # the run's set-up (run.json's setup_s) starts with loading the data
    spec = study(cfg, model)
    return engine.fit(spec, writer_for(workdir, resume=resume), progress=progress, clock=clock)


def study(cfg, model=None, ds=None, steps_per_epoch: int | None = None) -> engine.Study:
    """The study as the engine runs it: `sweep_parts`, the run's fingerprint (`jaxinit.run.runinfo.fingerprint`:
    config, numeric environment and a user's ``model``), loss and accuracy per split
    (`jaxinit.train.evaluate.evaluator`) and the summary (`summarize`)."""
    t = cfg.train
    ds, groups, plan, options = sweep_parts(cfg, model, ds, steps_per_epoch)
    digest, parts = runinfo.fingerprint(cfg, model, groups[0].model)
    return engine.Study(ds, groups, plan, options,
                        evaluator=lambda sweep: evaluate.evaluator(sweep, t.eval_batch_size, t.eval_train_subset),
                        summarize=lambda sweep, rows: (summarize(cfg, sweep, rows), None), fingerprint=digest,
                        parts=parts)


def build_sweep(cfg, model=None, ds=None, steps_per_epoch: int | None = None) -> Sweep:
    """The study's sweep (`engine.build` of `sweep_parts`), without training it: what the tools time."""
    ds, groups, plan, options = sweep_parts(cfg, model, ds, steps_per_epoch)
    return engine.build(ds, groups, plan, **options)


# --------------------------------------------------------------------------- the sweep
def sweep_parts(cfg, model=None, ds=None, steps_per_epoch: int | None = None) -> tuple[Any, list, Plan, dict]:
    """(data, groups, plan, `engine.build`'s options): the data loaded and checked, the model and the
    settings resolved, one group per setting (and swept learning rate).

    ``ds`` replaces the data set of ``cfg.data`` and ``steps_per_epoch`` the epoch length (the benchmark
    times the training path on synthetic data this way)."""
    t = cfg.train
    ds = data_lib.load_dataset(cfg.data) if ds is None else ds
    n_train = int(ds.x_train.shape[0])
    _check_sizes(cfg, n_train)
    lrs = _swept_lrs(cfg)
    plan = Plan(epochs=t.epochs, eval_every=t.eval_every, checkpoint_every=t.checkpoint_every,
                async_checkpoint=t.async_checkpoint, precision=t.precision, eval_train_subset=t.eval_train_subset)
    spe = steps_per_epoch or data_lib.steps_per_epoch(n_train, t.batch_size)
    # BatchNorm calibration batch at init (step.calibrate_statistics): the first examples of the split.
    options = dict(batch_size=t.batch_size, steps_per_epoch=spe, strategy=t.strategy, chunk=t.chunk,
                   augment=cfg.data.augment, calib=min(n_train, 4 * t.batch_size))
    key, mdl = resolve_model(cfg, tuple(ds.input_shape), int(ds.n_classes), model)
    settings = [resolve_setting(label, cfg.opt) for label in cfg.sweep.optimizers]
    return ds, make_groups(settings, cfg.sweep.sigma_w, cfg.sweep.seeds, lrs, key, mdl), plan, options


def resolve_model(cfg, input_shape: tuple, n_classes: int, model=None) -> tuple[Any, Any]:
    """(structure key, `Model`): the registry's model of ``cfg.model``, or a user's flax module / `Model`."""
    from jaxinit.models import Model, from_flax, make_model
    if model is None:
        return (cfg.model, input_shape, n_classes), make_model(cfg.model, input_shape, n_classes)
    if isinstance(model, Model):
        return ("model", id(model)), model
    scope = cfg.model.sigma_w_scope
    return ("module", id(model), scope, input_shape), from_flax(model, input_shape, cfg.model.base_init, sigma_w_scope=scope)


def _swept_lrs(cfg) -> tuple[float, ...]:
    lrs = tuple(getattr(cfg.sweep, "lr", ()))
    if any(not (math.isfinite(v) and 0 < v < 3.4e38) for v in lrs):
        raise ConfigError(f"--sweep.lr: learning rates must be finite and > 0 in float32, got {','.join(map(str, lrs))}")
    if len({float(np.float32(v)) for v in lrs}) < len(lrs):
        raise ConfigError(f"--sweep.lr: two learning rates are equal in float32: {','.join(map(str, lrs))}")
    return lrs


def _check_sizes(cfg, n_train: int) -> None:
    if cfg.train.batch_size > n_train:
        raise ConfigError(f"--train.batch_size={cfg.train.batch_size} is larger than the training split ({n_train})")
    if cfg.train.eval_train_subset > n_train:
        raise ConfigError(f"--train.eval_train_subset={cfg.train.eval_train_subset} is larger than the training "
                          f"split ({n_train}); give at most {n_train}, or 0 for the whole split")


def check_setup(cfg) -> None:
    """Every error `build_sweep` would find in the data (sizes, files) without building the sweep:
    what ``--overwrite`` checks before it deletes a finished run."""
    _check_sizes(cfg, int(data_lib.load_dataset(cfg.data).x_train.shape[0]))


# --------------------------------------------------------------------------- summary
def clock_inputs(sweep: Sweep) -> tuple[dict, dict]:
    """Per member (lambda of T_L2, heavy-ball mu of the effective step), from its setting."""
    l2, mu = {}, {}
    for m in sweep.members:
        s = sweep.settings[m.optimizer]
        l2[m.index] = float(s.l2) + float(s.weight_decay)
        mu[m.index] = float(s.momentum) if s.kind in HEAVY_BALL_KINDS else 0.0
    return l2, mu


def clock_args(sweep: Sweep, rows: list[dict]) -> tuple[dict, dict, dict]:
    """(step sizes, lambda, mu) per member: what `memory.summarize` and `horizon.spreads_over_time` take
    to count the clocks along the schedule actually run (its length: the newest rows' step)."""
    last = max(r["epoch"] for r in rows)
    etas = member_learning_rates(sweep.groups, [r for r in rows if r["epoch"] == last])
    return (etas, *clock_inputs(sweep))


def summarize(cfg, sweep: Sweep, rows: list[dict]) -> dict:
    etas, l2, mu = clock_args(sweep, rows)
    info = [{"member": m.index, "optimizer": m.optimizer, "sigma_w": m.sigma_w, "seed": m.seed} for m in sweep.members]
    return memory.summarize(rows, info, etas, cfg.train.batch_size, l2, mu)
