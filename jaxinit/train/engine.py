"""The member-parallel training engine both studies run on: a study's sweep built, trained step-major, evaluated.

    result = engine.fit(engine.Study(ds, groups, plan, options, evaluator, summarize), workdir=None)

A *study* (`Study`) is what an experiment hands the engine in one object: its data, its groups, its plan,
`build`'s options, its fingerprint and two hooks, its evaluation and its summary. `fit` does the rest:
builds the sweep, opens the run directory's files, trains, summarises and writes the summary.

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

import functools
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from jaxinit import distributed, interrupt
from jaxinit.optim import OptSetting
from jaxinit.result import Result  # noqa: F401  (what `fit` returns; engine.Result as before)
from jaxinit.train.compiled import Compiled, Compiler
from jaxinit.train import members as members_lib
from jaxinit.train.members import Chunk, Group, Member, has_conv, member_mesh, split_groups, stack  # noqa: F401
from jaxinit.train.step import StepData, shared_order
from jaxinit.train.timing import Clock


class Plan(NamedTuple):
    """How a sweep runs: its length, evaluations, checkpoints and arithmetic."""
    epochs: int
    eval_every: int = 1              # evaluate every this many epochs ...
    dense_until: int = 0             # ... and at every dense_every-th epoch up to this one (the IGB study's early steps)
    checkpoint_every: int = 0        # epochs between checkpoints (0: never)
    async_checkpoint: bool = False
    precision: str = "float32"
    eval_train_subset: int = 0       # recorded in run.json: train-set metrics were on a subset
    dense_every: int = 1

    def evaluated(self, epoch: int) -> bool:
        dense = epoch <= self.dense_until and epoch % self.dense_every == 0
        return dense or epoch % self.eval_every == 0 or epoch == self.epochs

    def checkpointed(self, epoch: int) -> bool:
        return bool(self.checkpoint_every) and (epoch % self.checkpoint_every == 0 or epoch == self.epochs)


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


class Study(NamedTuple):
    """What a study hands `fit`: its data (``ds``: x_train, y_train, input_shape), groups and plan, `build`'s
    keyword ``options`` (batch_size, steps_per_epoch, strategy, ...), and its two hooks:
    ``evaluator(sweep)`` makes the run's ``evaluate(states, epoch) -> rows``; ``summarize(sweep, rows)`` gives
    (the summary.json dict, the arrays kept beside the rows), on every process (the rows are the same on each;
    only process 0 writes and returns the summary). ``fingerprint``, ``parts``: the run's config fingerprint
    and the parts fingerprint.json records (`jaxinit.runinfo.fingerprint`), needed only with a run directory."""
    ds: Any
    groups: list[Group]
    plan: Plan
    options: dict
    evaluator: Callable[[Sweep], Callable[[dict, int], list[dict]]]
    summarize: Callable[[Sweep, list[dict]], tuple[dict | None, dict | None]] | None = None
    fingerprint: str | None = None
    parts: dict | None = None


def build(ds, groups: list[Group], plan: Plan, *, batch_size: int, steps_per_epoch: int, strategy: str = "auto",
          chunk: int = 4, augment: bool = False, calib: int | None = None, order: Callable | None = None,
          order_key: Any = "epochs", eval_fn: Callable | None = None, eval_key: Any = "loss_acc",
          conv: bool | None = None, shared_batches: int | None = None) -> Sweep:
    """Split every group's members into chunks of the strategy (`members.split_groups`) and compile (lazily)
    their functions.

    ``ds`` is replicated over the member mesh; its first ``calib`` training examples are the BatchNorm
    calibration batch (`step.calibrate_statistics`; None: none); ``order``/``eval_fn`` replace the
    per-member permutation and the loss/accuracy evaluation (`compiled.Compiler.fns`); ``shared_batches``, a
    data seed, replaces that order by one that every member shares (`step.shared_order`: one step per
    "epoch"); ``conv`` (default: read from the first group's model) picks the CPU strategy."""
    if shared_batches is not None:
        order = shared_order(shared_batches, batch_size, int(ds.x_train.shape[0]))
        order_key = ("shared_draw", shared_batches, batch_size)
    ds = distributed.replicate(ds, member_mesh())
    compiler = Compiler()
    input_shape = tuple(ds.input_shape)

    def make(g: Group, batched: bool) -> Compiled:
        return compiler.fns(g.model_key, g.model, input_shape, g.setting, steps_per_epoch, plan.epochs, batch_size,
                            augment, batched, plan.precision, order=order, order_key=order_key, eval_fn=eval_fn,
                            eval_key=eval_key)
    strategy, chunks = split_groups(groups, strategy, chunk, make, conv)
    members = sorted((m for g in groups for m in g.members), key=lambda m: m.index)
    settings = {g.label: g.setting for g in groups}
    x_calib = None if calib is None else ds.x_train[:calib]
    return Sweep(ds, members, settings, chunks, steps_per_epoch, strategy, x_calib, plan, compiler)


def init_states(sweep: Sweep) -> dict[str, list]:
    """The sweep's initial states (`members.init_states`)."""
    return members_lib.init_states(sweep.groups, sweep.x_calib)


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
            if sink is not None:
                begun = sink.start(states, evaluate)
            else:
                with clock.evaluation():
                    begun = 0, 0, states, evaluate(states, 0)
            rows, states = _train(sweep, begun, evaluate, sink, clock, progress, Progress)
    except BaseException:
        if sink is not None:
            sink.wait(quiet=True)     # a pending asynchronous save still finishes; the first error wins
        raise
    interrupt.check()
    return rows, states


def _train(sweep: Sweep, begun: tuple, evaluate, sink, clock: Clock, progress: bool, progress_cls):
    """Epochs after the start (``begun``: completed epoch, step within the next, states, rows so far) up to
    ``plan.epochs``; run.json after each (`sink.RunFiles.write_timing`)."""
    plan = sweep.plan
    epoch, step, states, rows = begun
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
                    sink.write_timing("stopped")
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
            if sink is not None:
                sink.write_timing("training")
            bar.epoch(e, time.perf_counter() - t, val_acc)
    finally:
        bar.close()
    return rows, states


def fit(study: Study, workdir: str | Path | None = None, *, resume: bool = False, progress: bool = True,
        clock: Clock | None = None) -> Result:
    """A study's run from start to end: `build` its sweep; open its run directory's files (`sink.RunFiles`, the
    fingerprint checked on a resume or recorded; none in memory); `run` it (fresh, or resumed with ``resume``);
    summarise it (``study.summarize``); write the summary and return the `Result`. ``clock``: the run's
    `timing.Clock`, where it started before the study was made (default: started here)."""
    clock = clock or Clock()
    sweep = build(study.ds, study.groups, study.plan, **study.options)
    sink = None
    if workdir is not None:
        from jaxinit.train.sink import RunFiles
        layout = functools.partial(stack, sweep.groups), functools.partial(members_lib.unstack, sweep.groups)
        sink = RunFiles(Path(workdir), sweep, study.fingerprint, resume, study.parts, clock, layout)
    rows, states = run(sweep, study.evaluator(sweep), sink, clock, progress)
    summary, arrays = study.summarize(sweep, rows) if study.summarize is not None else (None, None)
    if sink is not None:
        with interrupt.deferred():
            sink.finish(summary)
        interrupt.check()         # a signal during the writes: stop before anything else starts
    timing = clock.report(sweep, sweep.plan, sink.saves() if sink is not None else None, "finished")
    writer = distributed.is_writer()
    return Result(summary if writer else None, rows if writer else None, timing, stack(sweep.groups, states), sweep,
                  arrays)
