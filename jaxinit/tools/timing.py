"""Timed training steps of a forgetting sweep under a deadline: compile, step time, FLOPs, memory.

The staged accelerator check (`jaxinit.tools.accel`) times the library's own compiled functions: each
chunk's jitted step (`compiled.Compiler.fns`, the one `engine.train_epoch` calls) is lowered and compiled
ahead of time here, so the compile time is measured directly (trace + lower, then XLA), XLA's cost and
memory analyses come with the executable, and the timed steps call that very executable. A `Lane` is one
compiled call per step (a vmapped chunk, or one member of a sequential sweep); `time_steps` runs every
lane once per step, blocks on the result every `block` steps and asks the `Deadline` before each block,
so a measurement stops between blocks rather than run past the check's deadline.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import time
from typing import Any, Callable

import jax
import numpy as np


class OutOfTime(Exception):
    """What could not start before the deadline (the message says how much time was left)."""


class Deadline:
    """Seconds left of a budget that started at ``t0`` (a `time.perf_counter` value; ``now`` for tests)."""

    def __init__(self, seconds: float, t0: float | None = None, now: Callable[[], float] = time.perf_counter):
        self.seconds, self._now = float(seconds), now
        self.t0 = now() if t0 is None else t0

    def elapsed(self) -> float:
        return self._now() - self.t0

    def remaining(self) -> float:
        return self.seconds - self.elapsed()

    def require(self, seconds: float, what: str) -> None:
        """`OutOfTime` unless more than ``seconds`` remain (0: unless any time remains)."""
        left = self.remaining()
        if left <= seconds:
            raise OutOfTime(f"{what}: {max(left, 0.0):.1f} s of the {self.seconds:g} s deadline left, "
                            f"needs {seconds:.1f} s")


# --------------------------------------------------------------------------- ahead-of-time compile
_AOT: dict[tuple, tuple[Any, dict]] = {}   # in-process cache: a second check in one process compiles nothing


def _avals(args: Any) -> tuple:
    leaves, tree = jax.tree_util.tree_flatten(args)
    return str(tree), tuple((tuple(np.shape(x)), str(getattr(x, "dtype", type(x).__name__)),
                             bool(getattr(x, "weak_type", False))) for x in leaves)


def precision_context(precision: str | None):
    """`jax.default_matmul_precision(precision)`, or nothing for None (jax's own default)."""
    return jax.default_matmul_precision(precision) if precision else contextlib.nullcontext()


def compile_ahead(fn: Any, args: tuple, precision: str | None = None) -> tuple[Any, dict]:
    """(executable, info) of jitted ``fn`` at ``args``; ``precision`` is a matmul precision in force while
    tracing (None: as configured). info: lower_s, compile_s, flops (XLA cost analysis), memory (XLA memory
    analysis of the executable, bytes), hlo_sha256 (of the lowered text: equal programs, equal digests),
    cached (True when this process compiled it before; the seconds are then those of that compile)."""
    key = (fn, _avals(args), precision)
    hit = _AOT.get(key)
    if hit is not None:
        return hit[0], {**hit[1], "cached": True}
    with precision_context(precision):
        t = time.perf_counter()
        lowered = fn.lower(*args)
        lower_s = time.perf_counter() - t
        t = time.perf_counter()
        compiled = lowered.compile()
        compile_s = time.perf_counter() - t
    info = {"lower_s": lower_s, "compile_s": compile_s, "flops": flops_of(compiled),
            "memory": memory_analysis(compiled), "hlo_sha256": _text_digest(lowered), "cached": False}
    _AOT[key] = (compiled, info)
    return compiled, info


def flops_of(compiled: Any) -> float | None:
    """FLOPs of one call from XLA's cost analysis (a dict, or a one-element list in older jax); None if absent."""
    try:
        analysis = compiled.cost_analysis()
    except Exception:                     # not every backend implements it
        return None
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    value = (analysis or {}).get("flops")
    return float(value) if value is not None and value > 0 else None


def memory_analysis(compiled: Any) -> dict | None:
    """Bytes the executable needs (arguments, outputs, aliased, temporaries) and their sum net of aliasing."""
    try:
        stats = compiled.memory_analysis()
    except Exception:
        return None
    if stats is None:
        return None
    names = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
             "generated_code_size_in_bytes")
    out = {n.replace("_size_in_bytes", "_bytes"): int(getattr(stats, n, 0) or 0) for n in names}
    out["total_bytes"] = out["argument_bytes"] + out["output_bytes"] - out["alias_bytes"] + out["temp_bytes"]
    return out


def _text_digest(lowered: Any) -> str | None:
    try:
        return hashlib.sha256(lowered.as_text().encode()).hexdigest()[:16]
    except Exception:
        return None


def device_memory(device: Any = None) -> dict | None:
    """The device's allocator statistics (bytes in use, peak, limit) where the backend keeps them (GPU/TPU)."""
    device = device or jax.devices()[0]
    try:
        stats = device.memory_stats()
    except Exception:
        return None
    if not stats:
        return None
    keep = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "bytes_reserved", "largest_alloc_size")
    return {k: int(stats[k]) for k in keep if k in stats}


# --------------------------------------------------------------------------- lanes and timed steps
class Lane:
    """One compiled call per training step and its arguments (the state is replaced after each call)."""

    def __init__(self, compiled: Any, state: Any, perm: Any, args: Any):
        self.compiled, self.state, self.perm, self.args = compiled, state, perm, args


def run_steps(lanes: list[Lane], x: Any, y: Any, first: int, n: int, steps_per_epoch: int) -> None:
    """Steps first .. first + n - 1 of every lane (step-major, as `engine.train_epoch`); not blocked on."""
    from jaxinit.train.step import StepData
    for i in range(first, first + n):
        data = StepData(x, y, np.int32(i % steps_per_epoch))
        for lane in lanes:
            lane.state, _ = lane.compiled(lane.state, lane.args, lane.perm, data)


def block(lanes: list[Lane]) -> None:
    jax.block_until_ready([lane.state for lane in lanes])


def time_steps(lanes: list[Lane], x: Any, y: Any, steps: int, block_steps: int, steps_per_epoch: int,
               deadline: Deadline, what: str) -> dict:
    """Seconds per step of all lanes: one untimed warm-up step, then ``steps`` steps in blocks of
    ``block_steps`` (`jax.block_until_ready` after each block). The deadline is asked before every block
    (with 1.5 x the last block's time): a measurement it cuts keeps the blocks done (``cut``: True); one
    that cannot time a single block raises `OutOfTime`."""
    t = time.perf_counter()
    run_steps(lanes, x, y, 0, 1, steps_per_epoch)
    block(lanes)
    first_step_s = time.perf_counter() - t
    per_step, done, cut, guess = [], 0, None, first_step_s * block_steps
    while done < steps:
        n = min(block_steps, steps - done)
        try:
            deadline.require(1.5 * guess * n / block_steps, f"{what}: timed steps {done + 1}-{done + n}")
        except OutOfTime as why:
            if not per_step:
                raise
            cut = str(why)
            break
        t = time.perf_counter()
        run_steps(lanes, x, y, 1 + done, n, steps_per_epoch)
        block(lanes)
        seconds = time.perf_counter() - t
        per_step.append(seconds / n)
        guess = seconds * block_steps / n
        done += n
    return {"steps": done, "steps_asked": steps, "block_steps": block_steps, "first_step_s": first_step_s,
            "step_s": _median(per_step), "step_s_min": min(per_step), "step_s_mean": sum(per_step) / len(per_step),
            "cut": cut}


# --------------------------------------------------------------------------- compile before timing
def precompile(sweep: Any, precision: str | None = None, lax_map: bool = False) -> dict:
    """Compile what timing ``sweep`` will call -- each distinct chunk's init and step -- from abstract states
    (`jax.eval_shape`), without running anything big: safe in a worker thread, so the check compiles several
    variants at once. The init goes through jax's in-memory cache (a later call of the same jitted function
    at the same shapes reuses it); the step lands in `compile_ahead`'s cache, keyed as `sweep_lanes` and
    `lax_map_lane` look it up."""
    from jaxinit.train.step import StepData
    n, seen, infos = int(sweep.ds.x_train.shape[0]), set(), []
    for chunks in sweep.groups.values():
        for chunk in chunks:
            args = chunk.args
            key = (id(chunk.fns), args.seed.shape)
            if key in seen:
                continue
            seen.add(key)
            chunk.fns.init.lower(args, sweep.x_calib).compile()
            state = jax.eval_shape(chunk.fns.init, args, sweep.x_calib)
            perm = chunk.fns.order(args.seed, np.int32(0), n)
            if lax_map:
                k = len(chunks)
                grow = lambda x: jax.ShapeDtypeStruct((k, *x.shape), x.dtype, weak_type=getattr(x, "weak_type", False))
                state, perm, args = jax.tree.map(grow, state), grow(perm), jax.tree.map(grow, args)
                fn = mapped_step(chunk.fns.step)
            else:
                fn = chunk.fns.step
            data = StepData(sweep.ds.x_train, sweep.ds.y_train, np.int32(0))
            infos.append(compile_ahead(fn, (state, args, perm, data), precision))
            if lax_map:
                return summarize_compiles(infos)
    return summarize_compiles(infos)


# --------------------------------------------------------------------------- lanes of a sweep
def sweep_lanes(sweep: Any, states: dict, precision: str | None = None) -> tuple[list[Lane], dict]:
    """One lane per chunk of an `engine.Sweep` (its jitted step compiled ahead of time) and what compiling
    took: seconds and FLOPs over the lanes (FLOPs of one step of every member), the executables' memory."""
    from jaxinit.train.step import StepData
    n = int(sweep.ds.x_train.shape[0])
    lanes, infos = [], []
    data = StepData(sweep.ds.x_train, sweep.ds.y_train, np.int32(0))
    for label, chunks in sweep.groups.items():
        for chunk, state in zip(chunks, states[label]):
            perm = chunk.fns.order(chunk.args.seed, np.int32(0), n)
            compiled, info = compile_ahead(chunk.fns.step, (state, chunk.args, perm, data), precision)
            lanes.append(Lane(compiled, state, perm, chunk.args))
            infos.append((compiled, info))
    return lanes, summarize_compiles(infos)


def summarize_compiles(infos: list[tuple[Any, dict]]) -> dict:
    """Compile seconds of the distinct executables, FLOPs of one call of every lane, the largest program."""
    first: dict[int, dict] = {}
    for c, info in infos:                     # the first lane's info: later lanes of a shared executable hit the cache
        first.setdefault(id(c), info)
    distinct = first.values()
    flops = [info["flops"] for _, info in infos]
    memories = [info["memory"] for info in distinct if info["memory"]]
    return {"executables": len(distinct), "lower_s": sum(i["lower_s"] for i in distinct),
            "compile_s": sum(i["compile_s"] for i in distinct), "cached": all(i["cached"] for i in distinct),
            "flops_per_step": sum(flops) if flops and all(flops) else None,
            "program_memory": max(memories, key=lambda m: m["total_bytes"]) if memories else None,
            "hlo_sha256": sorted({i["hlo_sha256"] or "" for i in distinct})}


_MAPPED: dict[Any, Any] = {}


def mapped_step(single_step: Any) -> Any:
    """The single-member step run over stacked members by `jax.lax.map` inside one jit: a loop on the
    device, one dense convolution per member (no grouped convolution, no Python loop per member)."""
    hit = _MAPPED.get(single_step)
    if hit is None:
        def step(states, args, perms, data):
            return jax.lax.map(lambda a: single_step(a[0], a[1], a[2], data), (states, args, perms))
        hit = _MAPPED[single_step] = jax.jit(step, donate_argnums=0)
    return hit


def lax_map_lane(sweep: Any, states: dict, precision: str | None = None) -> tuple[list[Lane], dict]:
    """One lane running every member of a sequential sweep (one setting) through `mapped_step`."""
    from jaxinit.train.members import stack
    from jaxinit.train.step import StepData
    (label, chunks), = sweep.groups.items()
    if any(c.batched for c in chunks):
        raise ValueError("lax_map_lane needs a sweep of single-member chunks (strategy sequential)")
    n = int(sweep.ds.x_train.shape[0])
    args = jax.tree.map(lambda *xs: jax.numpy.stack(xs), *[c.args for c in chunks])
    perms = jax.numpy.stack([c.fns.order(c.args.seed, np.int32(0), n) for c in chunks])
    stacked = stack(sweep.groups, states)[label]
    step = mapped_step(chunks[0].fns.step)
    data = StepData(sweep.ds.x_train, sweep.ds.y_train, np.int32(0))
    compiled, info = compile_ahead(step, (stacked, args, perms, data), precision)
    return [Lane(compiled, stacked, perms, args)], summarize_compiles([(compiled, info)])


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
