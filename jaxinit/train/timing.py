"""Where a run's time goes, for run.json: set-up, compile, steady steps, evaluations, checkpoints.

Each compiled program is listed with its lower and compile seconds and whether jax's persistent
cache served it (`Compiles`, from jax's compile events), beside the compile time inferred from the first
epoch. Why each split: the first epoch of a process compiles every jitted function (seconds to minutes for a
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
import weakref
from typing import Callable, Iterator

import jax
import jax.monitoring
import numpy as np

from jaxinit import compile_cache
from jaxinit import precision as precision_lib

# jax's compile events (jax.monitoring), each with the program's name, and the field each one fills.
COMPILE_EVENTS = {"/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
                  "/jax/core/compile/backend_compile_duration": "compile_s"}
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
_LISTENERS: list[Callable[[], Callable | None]] = []     # weak references: a dropped listener stops hearing
_INSTALLED: list[bool] = []


def _forward(event: str, duration: float | None = None, **kwargs) -> None:
    for ref in tuple(_LISTENERS):
        callback = ref()
        if callback is None:
            _LISTENERS.remove(ref)
        else:
            callback(event, duration, kwargs.get("fun_name"))


def listen(callback: Callable[[str, float | None, str | None], None]) -> None:
    """Call ``callback(event, seconds, program)`` on each of jax's compile events and persistent-cache hits
    (seconds None), until the callback (a bound method: until its object) is garbage or `unlisten`ed."""
    if not _INSTALLED:
        jax.monitoring.register_event_duration_secs_listener(_forward)
        jax.monitoring.register_event_listener(lambda event, **kw: _forward(event, None, **kw))
        _INSTALLED.append(True)
    _LISTENERS.append(weakref.WeakMethod(callback) if hasattr(callback, "__self__") else (lambda: callback))


def unlisten(callback) -> None:
    for ref in tuple(_LISTENERS):
        if ref() == callback:
            _LISTENERS.remove(ref)


class Compiles:
    """The programs jax lowered and compiled while this record listened: one entry per compile."""

    def __init__(self):
        self.programs: list[dict] = []
        self.cache_hits = 0
        self._open: dict[str, dict] = {}
        self._hit = False
        listen(self._on_event)

    def _on_event(self, event: str, seconds: float | None, program: str | None) -> None:
        if event == CACHE_HIT_EVENT:
            self.cache_hits += 1
            self._hit = True          # the compile event that follows is a load from the cache
            return
        field = COMPILE_EVENTS.get(event)
        if field is None:
            return
        entry = self._open.setdefault(program or "?", {"program": program or "?"})
        entry[field] = round(entry.get(field, 0.0) + seconds, 4)
        if field == "compile_s":          # the last of a program's events
            done = self._open.pop(program or "?")
            done["cache_hit"], self._hit = self._hit, False
            self.programs.append(done)

    def stop(self) -> None:
        unlisten(self._on_event)

    def report(self, least_s: float = 0.05) -> dict:
        """Programs that took at least ``least_s`` to compile (or load) one by one, the rest counted."""
        big = [dict(p) for p in self.programs if p.get("compile_s", 0.0) >= least_s]
        small = [p for p in self.programs if p.get("compile_s", 0.0) < least_s]
        return {"compiles": big,
                "compiles_small": {"programs": len(small), "compile_s": float(sum(p.get("compile_s", 0.0) for p in small)),
                                   "names": sorted({p["program"] for p in small})},
                "compile_s_total": float(sum(p.get("compile_s", 0.0) for p in self.programs)),
                "persistent_cache_hits": self.cache_hits, "compile_cache": compile_cache.in_use()}


def _median(xs: list[float]) -> float | None:
    return float(np.median(xs)) if xs else None


class Clock:
    """Seconds of one process's part of a run (a resumed run starts a new clock)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.setup_s: float | None = None
        self.epochs: list[tuple[int, float, int]] = []   # (epoch, seconds of training, steps taken)
        self.evals: list[float] = []                      # seconds per evaluation (every split, every member)
        self.compiles = Compiles()                         # per program: trace, lower and compile seconds

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
        if status != "training":
            self.compiles.stop()
        return {**out, **self.compiles.report(), **_checkpoints(saves or [], plan.async_checkpoint)}


def _checkpoints(saves: list[dict], asynchronous: bool) -> dict:
    """Per save: seconds the training thread waited (``blocking_s``), seconds of the write itself
    (``write_s``; with ``async_checkpoint`` it overlaps training) and bytes on disk."""
    blocking, write = [s["blocking_s"] for s in saves], [s["write_s"] for s in saves]
    return {"checkpoint_async": bool(asynchronous), "checkpoints": len(saves),
            "checkpoint_blocking_s_median": _median(blocking), "checkpoint_blocking_s_total": float(sum(blocking)),
            "checkpoint_write_s_median": _median(write), "checkpoint_write_s_total": float(sum(write)),
            "checkpoint_bytes": saves[-1]["bytes"] if saves else None, "checkpoint_saves": saves}
