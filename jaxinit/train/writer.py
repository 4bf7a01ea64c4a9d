"""What the engine hands a run's results to: a `Writer`, in memory (`Memory`) unless the caller gives another.

The engine (`jaxinit.train.engine`) writes no file and imports no file code. A study that runs into a
directory hands `engine.fit` its writer (`jaxinit.run.sink.RunFiles`: metrics.jsonl, checkpoints, run.json's
timings, summary.json, resume); a run in memory (a notebook, ``workdir=None``) gets `Memory`. The calls, in
the order the engine makes them:

    writer.open(shape)                       # once, before anything is trained: the run's shape
    epoch, step, states, rows = writer.start(states, evaluate)   # fresh (epoch-0 rows) or resumed
    writer.append(rows)                      # after every evaluation: its rows
    writer.save(states, epoch, step)         # a checkpoint of that point (a no-op without checkpoints)
    writer.timing(report)                    # run.json's timings, after every epoch and on a stop
    writer.wait(quiet)                       # a pending asynchronous save finished (its error raised unless quiet)
    writer.finish(summary)                   # the end: checkpoints closed, the summary written
    writer.saves                             # per finished checkpoint save: step, seconds, bytes (the timings)

``evaluate(states, epoch) -> rows`` evaluates the engine's states (one dict per member, with "member" and
"epoch"); ``states`` are the engine's (per group, per chunk), and `Shape.to_tree` / `Shape.from_tree` turn them
into the one member-stacked tree a checkpoint holds and back, so a checkpoint does not depend on the strategy.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, runtime_checkable

Evaluate = Callable[[Any, int], list[dict]]


class Shape(NamedTuple):
    """What a writer learns of a run when the engine opens it."""
    plan: Any                       # `jaxinit.train.engine.Plan`: epochs, evaluations (`Plan.evaluated`), checkpoints
    n_members: int
    steps_per_epoch: int
    to_tree: Callable[[Any], Any]   # the engine's states -> the member-stacked tree a checkpoint holds
    from_tree: Callable[[Any], Any]
    fingerprint: str | None = None  # the run's identity as its study states it (`engine.Study`): the engine
    parts: dict | None = None       # only hands it on


class Begun(NamedTuple):
    """Where training begins: completed epochs, steps already taken in the next one, states, rows so far."""
    epoch: int
    step: int
    states: Any
    rows: list[dict]


@runtime_checkable
class Writer(Protocol):
    """The calls of the module docstring."""
    saves: list[dict]

    def open(self, shape: Shape) -> None: ...

    def start(self, states: Any, evaluate: Evaluate) -> Begun: ...

    def append(self, rows: list[dict]) -> None: ...

    def save(self, states: Any, epoch: int, step_in_epoch: int) -> None: ...

    def timing(self, report: dict) -> None: ...

    def wait(self, quiet: bool = False) -> None: ...

    def finish(self, summary: dict | None) -> None: ...


class Memory:
    """The writer of a run in memory: it starts every run afresh (the rows of epoch 0) and keeps nothing."""

    def __init__(self):
        self.saves: list[dict] = []

    def open(self, shape: Shape) -> None:
        pass

    def start(self, states: Any, evaluate: Evaluate) -> Begun:
        return Begun(0, 0, states, evaluate(states, 0))

    def append(self, rows: list[dict]) -> None:
        pass

    def save(self, states: Any, epoch: int, step_in_epoch: int) -> None:
        pass

    def timing(self, report: dict) -> None:
        pass

    def wait(self, quiet: bool = False) -> None:
        pass

    def finish(self, summary: dict | None) -> None:
        pass
