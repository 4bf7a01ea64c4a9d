"""Where a run's time goes, for run.json: set-up, compile, steady steps, evaluations, checkpoints.

Why each split: the first epoch of a process compiles every jitted function (seconds to minutes for a
ResNet on an accelerator), so a mean over epochs that includes it overstates the step time of short runs
and understates the cost of compiling; evaluation and checkpoint costs grow with the data set and the
state, not with the step count, and were invisible in a single epoch time. `Clock.report` is written
to run.json after every epoch and on a stop (`jaxinit.train.engine`), so a run killed after its first
epoch still says what it cost. Timings are never part of summary.json (docs/design.md: equal runs, equal
files).
"""
from __future__ import annotations

import contextlib
import time
from typing import Iterator

import jax
import numpy as np

from jaxinit import precision as precision_lib


def _median(xs: list[float]) -> float | None:
    return float(np.median(xs)) if xs else None


class Clock:
    """Seconds of one process's part of a run (a resumed run starts a new clock)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.setup_s: float | None = None
        self.epochs: list[tuple[int, float, int]] = []   # (epoch, seconds of training, steps taken)
        self.evals: list[float] = []                      # seconds per evaluation (every split, every member)

    def setup_done(self) -> None:
        self.setup_s = time.perf_counter() - self.t0

    def epoch(self, epoch: int, seconds: float, steps: int) -> None:
        self.epochs.append((epoch, seconds, steps))

    @contextlib.contextmanager
    def evaluation(self) -> Iterator[None]:
        t = time.perf_counter()
        yield
        self.evals.append(time.perf_counter() - t)

    def report(self, sweep, plan, saves: list[dict] | None = None, status: str = "training") -> dict:
        """run.json's timing fields (see the README's "run.json" for each)."""
        n = len(sweep.members)
        times = [s for _, s, _ in self.epochs]
        steady = [s / k for _, s, k in self.epochs[1:] if k > 0]   # the first epoch compiles
        step_s = _median(steady)
        first = self.epochs[0] if self.epochs else None
        compile_s = max(0.0, first[1] - first[2] * step_s) if first and step_s is not None else None
        total_steps = sum(k for _, _, k in self.epochs)
        out = {"platform": jax.default_backend(), "devices": jax.device_count(), "processes": jax.process_count(),
               "strategy": sweep.strategy, **precision_lib.record(plan.precision),
               "eval_train_subset": plan.eval_train_subset, "status": status,
               "setup_s": self.setup_s, "total_s": time.perf_counter() - self.t0,
               "epochs_run": len(self.epochs), "last_epoch": self.epochs[-1][0] if self.epochs else None,
               "first_epoch_s": first[1] if first else None, "compile_s": compile_s,
               "steady_step_s": step_s, "median_epoch_s": _median(times),
               "steady_epoch_s": _median(times[1:]),
               "member_steps_per_s": n / step_s if step_s else None,
               "member_steps_per_s_overall": n * total_steps / sum(times) if times and sum(times) > 0 else None,
               "evals": len(self.evals), "eval_first_s": self.evals[0] if self.evals else None,
               "eval_s_median": _median(self.evals[1:] or self.evals), "eval_s_total": float(sum(self.evals)),
               "eval_s": self.evals}
        return {**out, **_checkpoints(saves or [], plan.async_checkpoint)}


def _checkpoints(saves: list[dict], asynchronous: bool) -> dict:
    """Per save: seconds the training thread waited (``blocking_s``), seconds of the write itself
    (``write_s``; with ``async_checkpoint`` it overlaps training) and bytes on disk."""
    blocking, write = [s["blocking_s"] for s in saves], [s["write_s"] for s in saves]
    return {"checkpoint_async": bool(asynchronous), "checkpoints": len(saves),
            "checkpoint_blocking_s_median": _median(blocking), "checkpoint_blocking_s_total": float(sum(blocking)),
            "checkpoint_write_s_median": _median(write), "checkpoint_write_s_total": float(sum(write)),
            "checkpoint_bytes": saves[-1]["bytes"] if saves else None, "checkpoint_saves": saves}
