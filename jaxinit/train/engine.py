"""The member-parallel training engine both studies run on: build a sweep, train it step-major, evaluate.

    sweep = engine.build(ds, groups, plan, batch_size=128, strategy="auto")
    result = engine.run(sweep, evaluate, workdir=None)

A *group* (`Group`) is a set of members that share a model and an optimizer structure: an optimizer
setting of the forgetting study, a (network, optimizer) case of the IGB study. Each group's members
are split into chunks by the strategy (`members.py`) and run the single-member step of `step.py`,
compiled once per structure by the sweep's own `compiled.Compiler` (swept values are traced). A
*plan* (`Plan`) says how long to train, when to evaluate and when to checkpoint; an "epoch" is
``steps_per_epoch`` steps over a batch order per member (`step.member_permutation`) or, for a study
that draws each batch afresh, one step (`step.shared_draw`, ``steps_per_epoch = 1``).

The clients supply what is theirs: the groups, an evaluation (``evaluate(states, epoch) -> rows``, one
dict per member with at least "member" and "epoch") and the analysis of the rows. The engine owns the
loop, the run directory (`sink.RunFiles`: metrics.jsonl appended per evaluation, step-level orbax
checkpoints, byte-identical resume), the mesh over devices and hosts, the progress reporter and the
timing (`timing.Clock`). It writes files only when given a directory. The loop is step-major (every
chunk takes step i before any takes step i + 1), so a SIGINT / SIGTERM (`jaxinit.interrupt`) stops at a
step boundary with a checkpoint of that exact point, and the resumed run is bit-identical to an
uninterrupted one.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from jaxinit import distributed, interrupt
from jaxinit.optim import OptSetting
from jaxinit.train.compiled import Compiler
from jaxinit.train.members import (Chunk, Member, chunk_size, default_strategy, init_chunk, member_mesh, shard_members,
                                   split_chunks, stack)
from jaxinit.train.step import StepData
from jaxinit.train.timing import Clock


class Plan(NamedTuple):
    """How a sweep runs: its length, evaluations, checkpoints and arithmetic."""
    epochs: int
    eval_every: int = 1              # evaluate every this many epochs ...
    dense_until: int = 0             # ... and at every epoch up to this one (the IGB study's early steps)
    checkpoint_every: int = 0        # epochs between checkpoints (0: never)
    async_checkpoint: bool = False
    precision: str = "float32"
    eval_train_subset: int = 0       # recorded in run.json: train-set metrics were on a subset

    def evaluated(self, epoch: int) -> bool:
        return epoch <= self.dense_until or epoch % self.eval_every == 0 or epoch == self.epochs

    def checkpointed(self, epoch: int) -> bool:
        return bool(self.checkpoint_every) and (epoch % self.checkpoint_every == 0 or epoch == self.epochs)


class Group(NamedTuple):
    """Members that share a model and an optimizer structure (``setting``: its values are the defaults of
    the members' traced ones); ``model_key`` identifies the model's structure for the compile cache."""
    label: str
    setting: OptSetting
    members: list[Member]
    model_key: Any
    model: Any


class Sweep(NamedTuple):
    """Everything static about a run: data, members and their compiled chunks per group."""
    ds: Any
    members: list[Member]
    settings: dict[str, OptSetting]
    groups: dict[str, list[Chunk]]
    steps_per_epoch: int
    strategy: str
    x_calib: Any
    plan: Plan
    compiler: Compiler


class Result(NamedTuple):
    """What every experiment returns (in memory; with a directory the same is also on disk).

    ``summary``: the summary.json dict (None on processes other than 0); ``rows``: the metrics rows;
    ``timing``: run.json's timing; ``states``: {group: member-stacked final TrainState}; ``sweep``: the
    `Sweep` (None where the experiment trains several); ``arrays``: named numpy arrays a study keeps
    beside its rows (the IGB study's per-case results)."""
    summary: dict | None
    rows: list[dict] | None
    timing: dict
    states: dict[str, Any] | None = None
    sweep: Sweep | None = None
    arrays: dict[str, Any] | None = None


def has_conv(model) -> bool:
    """Any kernel with a spatial window (ndim > 2 once stacked layer axes are set aside)."""
    from jaxinit.init import is_kernel, stacked_axes
    params, _ = jax.eval_shape(model.init, jax.random.key(0), 1.0)
    return any(is_kernel(p) and x.ndim - stacked_axes(p) > 2
               for p, x in jax.tree_util.tree_flatten_with_path(params)[0])


def build(ds, groups: list[Group], plan: Plan, *, batch_size: int, steps_per_epoch: int, strategy: str = "auto",
          chunk: int = 4, augment: bool = False, x_calib=None, order: Callable | None = None,
          order_key: Any = "epochs", eval_fn: Callable | None = None, eval_key: Any = "loss_acc",
          conv: bool | None = None) -> Sweep:
    """Split every group's members into chunks of the strategy and compile (lazily) their functions.

    ``ds`` is replicated over the member mesh; ``x_calib`` is the BatchNorm calibration batch
    (`step.calibrate_statistics`); ``order``/``eval_fn`` replace the per-member permutation and the
    loss/accuracy evaluation (`compiled.Compiler.fns`); ``conv`` (default: read from the first group's
    model) picks the CPU strategy."""
    ds = distributed.replicate(ds, member_mesh())
    if strategy == "auto":
        strategy = default_strategy(has_conv(groups[0].model) if conv is None else conv)
    compiler = Compiler()
    members = sorted((m for g in groups for m in g.members), key=lambda m: m.index)
    chunks = {}
    input_shape = tuple(ds.input_shape)
    for g in groups:
        def make(batched: bool, g=g):
            return compiler.fns(g.model_key, g.model, input_shape, g.setting, steps_per_epoch, plan.epochs, batch_size,
                                augment, batched, plan.precision, order=order, order_key=order_key, eval_fn=eval_fn,
                                eval_key=eval_key)
        chunks[g.label] = split_chunks(g.members, chunk_size(strategy, len(g.members), chunk), g.setting, make)
    settings = {g.label: g.setting for g in groups}
    return Sweep(ds, members, settings, chunks, steps_per_epoch, strategy, x_calib, plan, compiler)


def init_states(sweep: Sweep) -> dict[str, list]:
    mesh = member_mesh()
    return {label: [shard_members(c, init_chunk(c, sweep.x_calib), mesh) for c in chunks]
            for label, chunks in sweep.groups.items()}


def train_epoch(sweep: Sweep, states, epoch: int, first_step: int = 0) -> tuple[dict, int]:
    """Steps `first_step`.. of one epoch, step-major; stops early (returning the next step) on a signal."""
    n = int(sweep.ds.x_train.shape[0])
    orders = {(label, j): c.fns.order(c.args.seed, np.int32(epoch), n)
              for label, chunks in sweep.groups.items() for j, c in enumerate(chunks)}
    states = {label: list(s) for label, s in states.items()}
    for i in range(first_step, sweep.steps_per_epoch):
        if interrupt.pending() is not None:
            return states, i
        data = StepData(sweep.ds.x_train, sweep.ds.y_train, np.int32(i))
        for label, chunks in sweep.groups.items():
            for j, c in enumerate(chunks):
                states[label][j], _ = c.fns.step(states[label][j], c.args, orders[label, j], data)
    return states, sweep.steps_per_epoch


def run(sweep: Sweep, evaluate: Callable[[dict, int], list[dict]], sink=None, clock: Clock | None = None,
        progress: bool = True) -> tuple[list[dict], dict]:
    """Train ``sweep`` from its start (fresh, or resumed through ``sink``) to ``plan.epochs``: (rows,
    final states). ``sink``: a `sink.RunFiles` (None: in memory). Training and its writes are a
    `jaxinit.interrupt.deferred` section: a signal stops at the next step boundary, with a checkpoint
    of that point where there is a sink; the caller's `interrupt.check()` then raises."""
    from jaxinit.progress import EpochProgress as Progress
    clock = clock or Clock()
    states = init_states(sweep)
    try:
        with interrupt.deferred():
            rows, states = _train(sweep, states, evaluate, sink, clock, progress, Progress)
    except BaseException:
        if sink is not None:
            sink.wait(quiet=True)     # a pending asynchronous save still finishes; the first error wins
        raise
    interrupt.check()
    return rows, states


def _train(sweep: Sweep, states, evaluate, sink, clock: Clock, progress: bool, progress_cls):
    """Epochs after the start (fresh or resumed) up to ``plan.epochs``; run.json after each (`report`)."""
    plan = sweep.plan
    if sink is not None:
        epoch, step, states, rows = sink.start(states, evaluate)
    else:
        with clock.evaluation():
            rows = evaluate(states, 0)
        epoch, step = 0, 0
    clock.setup_done()
    bar = progress_cls(epoch + 1, plan.epochs, progress)
    try:
        for e in range(epoch + 1, plan.epochs + 1):
            t = time.perf_counter()
            first = step if e == epoch + 1 else 0
            states, done = train_epoch(sweep, states, e, first)
            if done < sweep.steps_per_epoch:        # a signal: keep this exact point, then stop
                if sink is not None:
                    sink.save(states, e - 1, done)
                    sink.wait()
                    report(sweep, sink, clock, "stopped")
                interrupt.check()
            jax.block_until_ready(states)
            clock.epoch(e, time.perf_counter() - t, done - first)
            val_acc = None
            if plan.evaluated(e):
                with clock.evaluation():
                    new = evaluate(states, e)
                rows += new
                if sink is not None:
                    sink.append(new)
                accs = [r["val_acc"] for r in new if isinstance(r.get("val_acc"), float)]
                val_acc = float(np.mean(accs)) if accs else None
            if sink is not None and plan.checkpointed(e):
                sink.save(states, e, 0)
            report(sweep, sink, clock, "training")
            bar.epoch(e, time.perf_counter() - t, val_acc)
    finally:
        bar.close()
    return rows, states


def report(sweep: Sweep, sink, clock: Clock, status: str) -> None:
    """run.json rewritten (atomically, through the run's manifest) so that a run stopped or killed after
    any epoch leaves its timings; nothing in memory."""
    if sink is not None:
        sink.write_run_info(clock.report(sweep, sweep.plan, sink.saves(), status))


def finish(sweep: Sweep, states, rows: list[dict], summary: dict | None, sink, clock: Clock,
           arrays: dict | None = None) -> Result:
    """Write the summary (where there is a sink) and return the run's `Result`."""
    if sink is not None:
        with interrupt.deferred():
            sink.finish(summary)
        interrupt.check()         # a signal during the writes: stop before anything else starts
    timing = clock.report(sweep, sweep.plan, sink.saves() if sink is not None else None, "finished")
    writer = distributed.is_writer()
    return Result(summary if writer else None, rows if writer else None, timing, stack(sweep.groups, states), sweep,
                  arrays)


def open_sink(workdir: str | Path | None, sweep: Sweep, fingerprint: str, resume: bool, parts: dict,
              clock: Clock):
    """The run directory's files (None in memory), with the run's fingerprint checked or recorded."""
    if workdir is None:
        return None
    from jaxinit.train.sink import RunFiles
    return RunFiles(Path(workdir), sweep, fingerprint, resume, parts, clock=clock)
