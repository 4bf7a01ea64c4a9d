"""The member-parallel training engine both studies run on: a study's sweep built, trained step-major, evaluated.

    result = engine.fit(engine.Study(ds, groups, plan, options, evaluator, summarize))        # in memory
    result = engine.fit(study, jaxinit.run.sink.RunFiles(out, resume=True), stage="reported")  # into a run directory

A *study* (`Study`) is what an experiment hands the engine in one object: its data, its groups, its plan,
`build`'s options, its fingerprint and two hooks, its evaluation and its summary. `fit` does the rest:
builds the sweep, opens its writer, trains, summarises and hands the summary to the writer.

A *group* (`Group`) is a set of members that share a model and an optimizer structure: an optimizer
setting of the forgetting study, a (network, optimizer) case of the IGB study. Each group's members
are split into chunks by the strategy (`members.py`) and run the single-member step of `step.py`,
compiled once per structure by the sweep's own `compiled.Compiler` (swept values are traced). A
*plan* (`Plan`) says how long to train, when to evaluate and when to checkpoint; an "epoch" is
``steps_per_epoch`` steps over a batch order per member (`step.member_permutation`) or, for a study
that draws each batch afresh, one step (`step.shared_draw`, ``steps_per_epoch = 1``).

The clients supply what is theirs: the groups, an evaluation (``evaluate(states, epoch) -> rows``, one
dict per member with at least "member" and "epoch"), the analysis of the rows and, for a run into a
directory, the writer (`writer.Writer`: the rows, checkpoints, timings and summary go to it; without one,
`writer.Memory`). The engine owns the loop, the mesh over devices and hosts, the progress reporter
(`jaxinit.progress`: the study, the stage, epochs or steps as the study counts them, elapsed time and ETA,
validation accuracy per group) and the timing (`timing.Clock`); it writes no file itself. The loop is
step-major (every chunk takes step i before any takes step i + 1), so a SIGINT / SIGTERM
(`jaxinit.interrupt`) stops at a step boundary with a checkpoint of that exact point, and the resumed run is
bit-identical to an uninterrupted one.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from jaxinit import distributed, interrupt
from jaxinit.optim import OptSetting
from jaxinit.progress import Progress, val_note
from jaxinit.result import Result
from jaxinit.train import members as members_lib
from jaxinit.train.compiled import Compiled, Compiler
from jaxinit.train.members import Chunk, Group, Member, member_mesh, split_groups, stack
from jaxinit.train.step import StepData, shared_order
from jaxinit.train.timing import Clock
from jaxinit.train.writer import Begun, Memory, Shape, Writer


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
    """Everything static about a run: data, members and their compiled chunks per group. ``unit``: what an
    engine epoch is to the study ("epoch", or "step" where each batch is drawn afresh: `build`)."""
    ds: Any
    members: list[Member]
    settings: dict[str, OptSetting]
    groups: dict[str, list[Chunk]]
    steps_per_epoch: int
    strategy: str
    x_calib: Any
    plan: Plan
    compiler: Compiler
    unit: str = "epoch"


class Study(NamedTuple):
    """What a study hands `fit`: its data (``ds``: x_train, y_train, input_shape), groups and plan, `build`'s
    keyword ``options`` (batch_size, steps_per_epoch, strategy, ...), and its two hooks:
    ``evaluator(sweep)`` makes the run's ``evaluate(states, epoch) -> rows``; ``summarize(sweep, rows)`` gives
    (the summary.json dict, the arrays kept beside the rows), on every process (the rows are the same on each;
    only process 0 writes and returns the summary). ``fingerprint``, ``parts``: the run's identity, its config
    fingerprint and the parts fingerprint.json records (`jaxinit.run.runinfo.fingerprint`), which the engine
    hands its writer (`writer.Shape`) and reads no further."""
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
    "epoch"); ``conv`` (default: read from the first group's model) picks the CPU strategy. A study whose
    "epoch" is one freshly drawn batch (``steps_per_epoch`` 1 with its own ``order`` or shared batches)
    counts steps: `Sweep.unit`."""
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
    unit = "step" if steps_per_epoch == 1 and order is not None else "epoch"
    return Sweep(ds, members, settings, chunks, steps_per_epoch, strategy, x_calib, plan, compiler, unit)


def shape(sweep: Sweep, study: Study | None = None) -> Shape:
    """What the sweep's writer learns of it (`writer.Writer.open`); ``study`` adds the run's identity."""
    return Shape(sweep.plan, len(sweep.members), sweep.steps_per_epoch, functools.partial(stack, sweep.groups),
                 functools.partial(members_lib.unstack, sweep.groups), study.fingerprint if study else None,
                 study.parts if study else None)


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


def run(sweep: Sweep, evaluate: Callable[[dict, int], list[dict]], writer: Writer | None = None,
        clock: Clock | None = None, progress: bool = True, *, stage: str = "") -> tuple[list[dict], dict]:
    """Train ``sweep`` from its start (fresh, or resumed by ``writer``) to ``plan.epochs``: (rows, final states).
    ``writer``: an opened `writer.Writer` (None: `writer.Memory`); ``stage``: its name in the progress lines.
    Training and its writes are a `jaxinit.interrupt.deferred` section: a signal stops at the next step
    boundary, with a checkpoint of that point where the writer keeps them; the caller's `interrupt.check()`
    then raises."""
    clock = clock or Clock()
    writer = Memory() if writer is None else writer
    states = init_states(sweep)

    def timed(states, epoch: int) -> list[dict]:
        with clock.evaluation():
            return evaluate(states, epoch)
    try:
        with interrupt.deferred():
            begun = writer.start(states, timed)
            rows, states = _train(sweep, begun, timed, writer, clock, progress, stage)
    except BaseException:
        writer.wait(quiet=True)     # a pending asynchronous save still finishes; the first error wins
        raise
    interrupt.check()
    return rows, states


def _train(sweep: Sweep, begun: Begun, evaluate, writer: Writer, clock: Clock, progress: bool, stage: str):
    """Epochs after the start (``begun``) up to ``plan.epochs``; the writer's timings after each."""
    plan = sweep.plan
    epoch, step, states, rows = begun
    clock.setup_done()
    group_of = {m.index: label for label, chunks in sweep.groups.items() for c in chunks for m in c.members}
    todo = plan.epochs - epoch
    bar = Progress(todo, unit=sweep.unit, stage=stage, first=epoch + 1, enabled=progress,
                   lines=todo if sweep.unit == "epoch" else 10)
    try:
        for e in range(epoch + 1, plan.epochs + 1):
            t = time.perf_counter()
            first = step if e == epoch + 1 else 0
            states, done = train_epoch(sweep, states, e, first)
            if done < sweep.steps_per_epoch:        # a signal: keep this exact point, then stop
                writer.save(states, e - 1, done)
                writer.wait()
                writer.timing(clock.report(sweep, plan, writer.saves, "stopped"))
                interrupt.check()
            jax.block_until_ready(states)
            clock.epoch(e, time.perf_counter() - t, done - first)
            note = ""
            if plan.evaluated(e):
                new = evaluate(states, e)
                rows += new
                writer.append(new)
                note = val_note(new, group_of)
            if plan.checkpointed(e):
                writer.save(states, e, 0)
            writer.timing(clock.report(sweep, plan, writer.saves, "training"))
            bar.update(1, note)
    finally:
        bar.close()
    return rows, states


def fit(study: Study, writer: Writer | None = None, *, stage: str = "", progress: bool = True,
        clock: Clock | None = None) -> Result:
    """A study's run from start to end: `build` its sweep; open its ``writer`` (None: in memory, `writer.Memory`;
    a run directory's: `jaxinit.run.sink.RunFiles`, which checks or records the run's identity); `run` it (fresh,
    or resumed where the writer resumes); summarise it (``study.summarize``); hand the summary to the writer
    and return the `Result`. ``stage``: the stage's name in the progress lines; ``clock``: the run's
    `timing.Clock`, where it started before the study was made (default: started here)."""
    clock = clock or Clock()
    sweep = build(study.ds, study.groups, study.plan, **study.options)
    writer = Memory() if writer is None else writer
    writer.open(shape(sweep, study))
    rows, states = run(sweep, study.evaluator(sweep), writer, clock, progress, stage=stage)
    summary, arrays = study.summarize(sweep, rows) if study.summarize is not None else (None, None)
    with interrupt.deferred():
        writer.finish(summary)
        writer.timing(clock.report(sweep, sweep.plan, writer.saves, "finished"))   # run.json follows the run to its end
    interrupt.check()         # a signal during the writes: stop before anything else starts
    timing = clock.report(sweep, sweep.plan, writer.saves, "finished")
    keep = distributed.is_writer()
    return Result(summary if keep else None, rows if keep else None, timing, stack(sweep.groups, states), sweep, arrays)
