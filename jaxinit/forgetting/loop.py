"""The run loop: `fit(config, workdir=None, model=None) -> Result`, in memory or into a run directory.

    from jaxinit import forgetting
    res = forgetting.fit(forgetting.preset("smoke"))          # in memory: no file is written
    res.summary["spread"]["sgd"]["spread_pp"]                 # the summary.json dict
    res = forgetting.fit(cfg, model=MyFlaxModule())           # any flax module, swept over sigma_w

With a `workdir`, metrics rows go to `metrics.jsonl` (appended and fsync-ed per evaluation), the
member-stacked state to orbax checkpoints (`checkpoint_every` epochs, verified on restore), and the
summary to `summary.json` at the end; `resume=True` continues from the newest usable checkpoint,
regenerating or refusing damaged metrics rows (`records.py`); a finished run without checkpoints is
re-summarised from metrics.jsonl (its `Result.states` are then the initial states). The run's
fingerprint -- config, numeric environment and a user's ``model`` (`jaxinit.runinfo`) -- is recorded
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
writes checkpoints in the background (`jaxinit.checkpoint`), waited for before a stop, a resume point
and the end. The training path imports neither orbax (only with checkpoints) nor tqdm, matplotlib,
scipy or tyro.
"""
from __future__ import annotations

import functools
import hashlib
import json
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxinit import data as data_lib
from jaxinit import distributed, interrupt
from jaxinit.config import ConfigError, to_dict
from jaxinit.runinfo import comparable
from jaxinit.forgetting import memory
from jaxinit.forgetting.evaluate import eval_splits, evaluate_all, member_learning_rates
from jaxinit.forgetting.members import (Chunk, Member, chunk_args, chunk_size, default_strategy, init_chunk,
                                        make_members, member_mesh, shard_members, split_chunks, stack)
from jaxinit.forgetting.progress import EpochProgress
from jaxinit.forgetting.step import compiled_fns
from jaxinit.forgetting.timing import Clock
from jaxinit.optim import HEAVY_BALL_KINDS, OptSetting, resolve_setting


class Sweep(NamedTuple):
    """Everything static about a run: data, members and their compiled chunks per setting."""
    ds: Any
    members: list[Member]
    settings: dict[str, OptSetting]
    groups: dict[str, list[Chunk]]
    steps_per_epoch: int
    strategy: str
    x_calib: Any


class Result(NamedTuple):
    summary: dict | None        # the summary.json dict (None on processes other than 0)
    rows: list[dict] | None     # metrics rows, member-major within each evaluated epoch
    states: dict[str, Any]      # {setting: member-stacked final TrainState}
    sweep: Sweep
    timing: dict


# --------------------------------------------------------------------------- the sweep
@functools.lru_cache(maxsize=32)
def _registry_model(model_cfg, input_shape: tuple, n_classes: int):
    from jaxinit.models import make_model
    return make_model(model_cfg, input_shape, n_classes)


_USER_MODELS: dict[tuple[int, str], tuple[Any, Any]] = {}


def resolve_model(cfg, input_shape: tuple, n_classes: int, model=None) -> tuple[Any, Any]:
    """(cache key, `Model`): the registry's model of ``cfg.model``, or a user's flax module / `Model`."""
    from jaxinit.models import Model, from_flax
    if model is None:
        return (cfg.model, input_shape, n_classes), _registry_model(cfg.model, input_shape, n_classes)
    if isinstance(model, Model):
        return ("model", id(model)), model
    scope = cfg.model.sigma_w_scope
    if (id(model), scope) not in _USER_MODELS:   # keeps the module alive, so its id stays its own
        _USER_MODELS[id(model), scope] = (model, from_flax(model, input_shape, cfg.model.base_init,
                                                          sigma_w_scope=scope))
    return ("module", id(model), scope, input_shape), _USER_MODELS[id(model), scope][1]


def has_conv(model) -> bool:
    """Any kernel with a spatial window (ndim > 2 once stacked layer axes are set aside)."""
    from jaxinit.init import is_kernel, stacked_axes
    params, _ = jax.eval_shape(model.init, jax.random.key(0), 1.0)
    return any(is_kernel(p) and x.ndim - stacked_axes(p) > 2
               for p, x in jax.tree_util.tree_flatten_with_path(params)[0])


def build_sweep(cfg, model=None, ds=None, steps_per_epoch: int | None = None) -> Sweep:
    """Load data, resolve settings, model and strategy, and split each setting's members into chunks.

    ``ds`` replaces the data set of ``cfg.data`` and ``steps_per_epoch`` the epoch length (the benchmark
    times the training path on synthetic data this way)."""
    ds = distributed.replicate(data_lib.load_dataset(cfg.data) if ds is None else ds, member_mesh())
    n_train = int(ds.x_train.shape[0])
    _check_sizes(cfg, n_train)
    spe = steps_per_epoch or data_lib.steps_per_epoch(n_train, cfg.train.batch_size)
    key, mdl = resolve_model(cfg, tuple(ds.input_shape), int(ds.n_classes), model)
    strategy = cfg.train.strategy if cfg.train.strategy != "auto" else default_strategy(has_conv(mdl))
    settings = {label: resolve_setting(label, cfg.opt) for label in cfg.sweep.optimizers}
    members = make_members(cfg.sweep.optimizers, cfg.sweep.sigma_w, cfg.sweep.seeds)
    groups = {}
    for label, setting in settings.items():
        ms = [m for m in members if m.optimizer == label]
        make = functools.partial(compiled_fns, key, mdl, tuple(ds.input_shape), setting, spe, cfg.train.epochs,
                                 cfg.train.batch_size, cfg.data.augment, precision=cfg.train.precision)
        groups[label] = split_chunks(ms, chunk_size(strategy, len(ms), cfg.train.chunk), make)
    # BatchNorm calibration batch at init (step.calibrate_statistics): the first examples of the split.
    x_calib = ds.x_train[:min(n_train, 4 * cfg.train.batch_size)]
    return Sweep(ds, members, settings, groups, spe, strategy, x_calib)


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


def init_states(sweep: Sweep) -> dict[str, list]:
    mesh = member_mesh()
    return {label: [shard_members(c, init_chunk(c, sweep.x_calib), mesh) for c in chunks]
            for label, chunks in sweep.groups.items()}


def train_epoch(sweep: Sweep, states, epoch: int, first_step: int = 0) -> tuple[dict, int]:
    """Steps `first_step`.. of one epoch, step-major; stops early (returning the next step) on a signal."""
    perms = {}
    for label, chunks in sweep.groups.items():
        for j, c in enumerate(chunks):
            perms[label, j] = c.fns.perm(chunk_args(c)[1], np.int32(epoch), int(sweep.ds.x_train.shape[0]))
    states = {label: list(s) for label, s in states.items()}
    for i in range(first_step, sweep.steps_per_epoch):
        if interrupt.pending() is not None:
            return states, i
        for label, chunks in sweep.groups.items():
            for j, c in enumerate(chunks):
                states[label][j], _ = c.fns.step(states[label][j], sweep.ds.x_train, sweep.ds.y_train,
                                                 perms[label, j], np.int32(i), chunk_args(c)[1])
    return states, sweep.steps_per_epoch


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


def config_fingerprint(cfg) -> str:
    """SHA-256 of the config (fields added since, at their defaults, left out: `jaxinit.runinfo.comparable`)."""
    return hashlib.sha256(json.dumps(comparable(to_dict(cfg)), sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- fit
def fit(cfg, workdir: str | Path | None = None, model=None, *, resume: bool = False, progress: bool = True) -> Result:
    """Train every member of ``cfg.sweep``; see the module docstring. ``model``: a flax module (or a
    `jaxinit.models.Model`) replacing ``cfg.model``'s registry model. ``progress``: a bar on a terminal,
    one line per epoch on a stderr that is not one (`progress.EpochProgress`)."""
    clock = Clock()
    sweep = build_sweep(cfg, model)
    states = init_states(sweep)
    splits = eval_splits(sweep.ds, cfg.train.eval_batch_size, cfg.train.eval_train_subset)
    sink = _sink(cfg, workdir, model, sweep, resume, clock)
    try:
        with interrupt.deferred():   # training and its writes: a signal stops at the next step boundary
            rows, states = _train(cfg, sweep, states, splits, sink, clock, progress)
    except BaseException:
        if sink is not None:
            sink.wait(quiet=True)     # a pending asynchronous save still finishes; the first error wins
        raise
    interrupt.check()
    summary = summarize(cfg, sweep, rows) if distributed.is_writer() else None
    if sink is not None:
        with interrupt.deferred():
            sink.finish(summary)
        interrupt.check()         # a signal during the writes: stop before anything else starts
    timing = clock.report(sweep, cfg, sink.saves() if sink is not None else None, "finished")
    return Result(summary, rows if distributed.is_writer() else None, stack(sweep.groups, states), sweep, timing)


def _sink(cfg, workdir, model, sweep: Sweep, resume: bool, clock: Clock):
    """The run directory's files (None in memory), with the run's fingerprint checked or recorded."""
    if workdir is None:
        return None
    from jaxinit import rundir, runinfo
    from jaxinit.forgetting.sink import RunFiles
    mdl = resolve_model(cfg, tuple(sweep.ds.input_shape), int(sweep.ds.n_classes), model)[1]
    parts = {"config": comparable(to_dict(cfg)), "environment": rundir.numeric_environment(),
             "model": runinfo.describe_model(model, mdl)}
    return RunFiles(Path(workdir), cfg, sweep, config_fingerprint(cfg), resume, parts, clock=clock)


def _train(cfg, sweep: Sweep, states, splits, sink, clock: Clock, progress: bool):
    """Epochs after the start (fresh or resumed) up to ``cfg.train.epochs``; run.json after each (`_report`)."""
    if sink is not None:
        epoch, step, states, rows = sink.start(states, splits)
    else:
        with clock.evaluation():
            rows = evaluate_all(sweep.groups, states, splits, 0)
        epoch, step = 0, 0
    clock.setup_done()
    bar = EpochProgress(epoch + 1, cfg.train.epochs, progress)
    try:
        for e in range(epoch + 1, cfg.train.epochs + 1):
            t = time.perf_counter()
            first = step if e == epoch + 1 else 0
            states, done = train_epoch(sweep, states, e, first)
            if done < sweep.steps_per_epoch:        # a signal: keep this exact point, then stop
                if sink is not None:
                    sink.save(states, e - 1, done)
                    sink.wait()
                    _report(cfg, sweep, sink, clock, "stopped")
                interrupt.check()
            jax.block_until_ready(states)
            clock.epoch(e, time.perf_counter() - t, done - first)
            val_acc = None
            if e % cfg.train.eval_every == 0 or e == cfg.train.epochs:
                with clock.evaluation():
                    new = evaluate_all(sweep.groups, states, splits, e)
                rows += new
                if sink is not None:
                    sink.append(new)
                val_acc = float(np.mean([r["val_acc"] for r in new]))
            if sink is not None and cfg.train.checkpoint_every and (e % cfg.train.checkpoint_every == 0
                                                                    or e == cfg.train.epochs):
                sink.save(states, e, 0)
            _report(cfg, sweep, sink, clock, "training")
            bar.epoch(e, time.perf_counter() - t, val_acc)
    finally:
        bar.close()
    return rows, states


def _report(cfg, sweep: Sweep, sink, clock: Clock, status: str) -> None:
    """run.json rewritten (atomically, through the run's manifest) so that a run stopped or killed after
    any epoch leaves its timings; nothing in memory."""
    if sink is not None:
        sink.write_run_info(clock.report(sweep, cfg, sink.saves(), status))
