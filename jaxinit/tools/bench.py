"""Member-strategy benchmark, the measuring core: the machine, compile time, FLOPs, timed variants, rows.

`experiments.benchmark` is the command line (presets, validation, files); this module measures. For each
model, conv implementation and member count K, every member strategy of `jaxinit.train.members`
runs the forgetting study's own training path over a synthetic on-device dataset of the model's input
shape: the model of `loop.resolve_model`, chunks split as `loop.build_sweep` splits them, each with the
jitted functions of `compiled.Compiler.fns`, `TrainState`s from `engine.init_states` and epochs of
`engine.train_epoch`. The variants of one (model, K) are timed interleaved so that their ratios share the
machine's load. Row fields: see the docstring of `experiments.benchmark` and docs/design.md.
"""
from __future__ import annotations

import contextlib
import json
import sys
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxinit import interrupt
from jaxinit.config import SweepConfig, TrainConfig
from jaxinit.data import Dataset
from jaxinit.forgetting import loop
from jaxinit.forgetting.config import ForgettingConfig
from jaxinit.train import engine, timing
from jaxinit.train.members import default_strategy, has_conv
from jaxinit.train.step import StepData
from jaxinit.tools.bench_config import (STRATEGIES, BenchmarkConfig, BenchSection, batch_size, input_shape,
                                        model_config, steps, width_mult)

N_CLASSES = 10
SIGMA_RANGE = (0.5, 2.0)           # members: K distinct sigma_w, one seed (one compiled step per setting)


# --------------------------------------------------------------------------- the machine
class CompileClock:
    """Seconds JAX spends tracing, lowering and compiling inside `measure()` (jax's compile events, heard
    through `jaxinit.train.timing.listen` while the clock is entered: ``with CompileClock() as clock:``)."""

    EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
              "/jax/core/compile/backend_compile_duration")

    def __init__(self):
        self.seconds = 0.0
        self._active = False

    def __enter__(self) -> "CompileClock":
        timing.listen(self._listen)
        return self

    def __exit__(self, *exc) -> None:
        timing.unlisten(self._listen)

    def _listen(self, event: str, duration: float | None, program: str | None = None) -> None:
        if self._active and event in self.EVENTS:
            self.seconds += duration

    @contextlib.contextmanager
    def measure(self):
        start, self._active = self.seconds, True
        box = {}
        try:
            yield box
        finally:
            self._active = False
            box["seconds"] = self.seconds - start


# --------------------------------------------------------------------------- one variant
class Variant(NamedTuple):
    conv_impl: str | None
    strategy: str

def synthetic_dataset(shape: tuple, n: int, seed: int = 0) -> Dataset:
    """Gaussian inputs and uniform labels on the device, in the `jaxinit.data.Dataset` form training uses."""
    kx, ky = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (n, *shape), jnp.float32)
    y = jax.random.randint(ky, (n,), 0, N_CLASSES, jnp.int32)
    return Dataset(x, y, x[:1], y[:1], x[:1], y[:1], N_CLASSES, tuple(shape), "synthetic")


def forgetting_config(b: BenchSection, name: str, variant: Variant, k: int) -> ForgettingConfig:
    """The forgetting-study config of a K-member run of `variant` (one epoch of `steps` batches)."""
    return ForgettingConfig(
        model=model_config(b, name, variant.conv_impl),
        train=TrainConfig(batch_size=batch_size(b, name), epochs=1, strategy=variant.strategy, chunk=b.chunk),
        sweep=SweepConfig(sigma_w=tuple(_linspace(*SIGMA_RANGE, k)), seeds=1, optimizers=(b.optimizer,)))


def make_sweep(b: BenchSection, name: str, variant: Variant, k: int, ds: Dataset) -> engine.Sweep:
    """The `engine.Sweep` that `loop.build_sweep` makes for `forgetting_config`, on `ds` instead of a loaded set.

    Same model, chunks and compiled functions (`compiled.Compiler.fns`), so every
    variant times the training step a forgetting run of that strategy executes.
    """
    cfg = forgetting_config(b, name, variant, k)
    return loop.build_sweep(cfg, ds=ds, steps_per_epoch=steps(b, name))


def is_conv(b: BenchSection, name: str) -> bool:
    """Whether the model has a spatial kernel (`engine.has_conv`, the input of `default_strategy`)."""
    cfg = ForgettingConfig(model=model_config(b, name, "lax"))
    return has_conv(loop.resolve_model(cfg, input_shape(b, name), N_CLASSES)[1])


def _linspace(lo: float, hi: float, k: int) -> list[float]:
    return [lo] if k == 1 else [lo + (hi - lo) * i / (k - 1) for i in range(k)]


def run_epoch(sweep: engine.Sweep, states, epoch: int):
    """One timed epoch (`sweep.steps_per_epoch` steps of every chunk) through `engine.train_epoch`."""
    t = time.perf_counter()
    states, done = engine.train_epoch(sweep, states, epoch)
    if done < sweep.steps_per_epoch:        # SIGINT / SIGTERM at a step boundary: stop the benchmark
        interrupt.check()
    jax.block_until_ready(states)
    return states, time.perf_counter() - t


def chunk_shapes(sweep) -> list[int]:
    """Members per compiled call of each chunk; 0 for an unbatched (single-member) step."""
    return [len(c.members) if c.batched else 0 for chunks in sweep.groups.values() for c in chunks]


def step_flops(sweep, states) -> float | None:
    """FLOPs of one step of every member, counted from each distinct step's traced program
    (`jaxinit.tools.flops`: the same count on every backend; nothing is compiled)."""
    from jaxinit.tools.flops import function_flops
    total, seen = 0.0, {}
    for label, chunks in sweep.groups.items():
        for chunk, state in zip(chunks, states[label]):
            shape = len(chunk.members) if chunk.batched else 0
            if shape not in seen:
                perm = chunk.fns.order(chunk.args.seed, jnp.int32(0), int(sweep.ds.x_train.shape[0]))
                data = StepData(sweep.ds.x_train, sweep.ds.y_train, jnp.int32(0))
                seen[shape] = function_flops(chunk.fns.step, state, chunk.args, perm, data)["flops"] or None
            if seen[shape] is None:
                return None
            total += seen[shape]
    return total


# --------------------------------------------------------------------------- one (model, K) group
def group_variants(b: BenchSection, name: str, k: int) -> list[Variant]:
    """Distinct variants at K: at K = 1 every strategy is the single-member step; chunked == vmap when chunk >= K."""
    impls = [None] if name == "mlp" else list(b.conv_impls)
    out = []
    for impl in impls:
        for strategy in b.strategies:
            if k == 1 and strategy != "sequential":
                continue
            if strategy == "chunked" and b.chunk >= k:
                continue
            out.append(Variant(impl, strategy))
    return out


def measure_group(cfg: BenchmarkConfig, name: str, k: int, ds, clock: CompileClock, compiled: dict,
                  previous: dict, skipped: list) -> tuple[dict[Variant, dict], dict[str | None, float]]:
    """Every variant of one (model, K), timed interleaved with one single member per conv impl.

    Returns ({variant: step_s, step_s_min, compile_s, chunk, flops_per_step}, {conv_impl: one member's step_s}).
    """
    b = cfg.bench
    runs = {}                                   # (variant, members) -> [sweep, states, compile_s]
    for v in group_variants(b, name, k):
        guess = _predicted_epoch_s(previous, name, v, k, b)
        if guess is not None and guess > b.max_epoch_s and v.strategy != "sequential":
            skipped.append({"model": name, "conv_impl": v.conv_impl, "members": k, "strategy": v.strategy,
                            "predicted_epoch_s": round(guess, 3)})
            print(f"skipping {name} {v.conv_impl or ''} {v.strategy} K={k}: predicted epoch {guess:.0f} s "
                  f"> bench.max_epoch_s={b.max_epoch_s:g}", file=sys.stderr)
            continue
        runs[(v, k)] = _prepare(b, name, v, k, ds, clock, compiled)
    if k > 1:                                   # the K = 1 reference of throughput_vs_one, timed alongside
        for impl in {v.conv_impl for v, _ in runs}:
            runs[(Variant(impl, "sequential"), 1)] = _prepare(b, name, Variant(impl, "sequential"), 1, ds, clock,
                                                              compiled)
    times = _time_interleaved(runs, b.repeats)
    measured, ones = {}, {}
    for (v, members), (sweep, states, compile_s) in runs.items():
        if members == 1:
            ones[v.conv_impl] = _median(times[(v, members)])
        if members != k:
            continue
        measured[v] = {"step_s": _median(times[(v, k)]), "step_s_min": min(times[(v, k)]), "repeats": b.repeats,
                       "compile_s": compile_s, "chunk": max(chunk_shapes(sweep)) or 1,
                       "flops_per_step": step_flops(sweep, states)}
        previous[(name, v)] = (k, measured[v]["step_s"])
    return measured, ones


def _prepare(b: BenchSection, name: str, v: Variant, k: int, ds, clock: CompileClock, compiled: dict) -> list:
    """[sweep, warmed-up states, compile_s]; a variant's compile_s counts each executable it needs once."""
    sweep = make_sweep(b, name, v, k, ds)
    states = engine.init_states(sweep)
    with clock.measure() as took:           # warm-up epoch: compiles whatever this variant is the first to need
        states, _ = run_epoch(sweep, states, 0)
    shapes = sorted(set(chunk_shapes(sweep)))
    new = [s for s in shapes if (v.conv_impl, s) not in compiled]
    for s in new:                           # a warm-up that compiled several new shapes shares its time
        compiled[(v.conv_impl, s)] = took["seconds"] / len(new)
    return [sweep, states, sum(compiled[(v.conv_impl, s)] for s in shapes)]


def _time_interleaved(runs: dict, repeats: int) -> dict:
    """Per-step seconds of each run, `repeats` times; repeat r runs every one once, in an order rotated by r."""
    order = list(runs)
    times = {key: [] for key in order}
    for r in range(repeats):
        for key in order[r % len(order):] + order[:r % len(order)]:
            sweep = runs[key][0]
            runs[key][1], seconds = run_epoch(sweep, runs[key][1], r + 1)
            times[key].append(seconds / sweep.steps_per_epoch)
    return times


def _predicted_epoch_s(previous: dict, name: str, v: Variant, k: int, b: BenchSection) -> float | None:
    """Linear extrapolation in K of the variant's step time at a smaller K (chunked: vmap's, if its own is new)."""
    hit = previous.get((name, v))
    if hit is None and v.strategy == "chunked":
        hit = previous.get((name, Variant(v.conv_impl, "vmap")))
    return None if hit is None else hit[1] * k / hit[0] * steps(b, name)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


# --------------------------------------------------------------------------- JSON lines
def canonical(v: Variant, k: int, chunk: int) -> Variant:
    """The measured variant that runs the same code as `v` at K (K = 1: single step; chunk >= K: vmap)."""
    if k == 1:
        return Variant(v.conv_impl, "sequential")
    if v.strategy == "chunked" and chunk >= k:
        return Variant(v.conv_impl, "vmap")
    return v


def group_rows(cfg: BenchmarkConfig, info: dict, name: str, k: int, measured: dict, ones: dict) -> list[dict]:
    """One line per measured variant, with the ratios of the group (same model, same K).

    `ones`: {conv_impl: step seconds of one member}, timed in the same group (at K = 1 the line itself).
    """
    b = cfg.bench
    ref_impl = None if name == "mlp" else "lax"
    default = default_strategy(is_conv(b, name), info["platform"])
    ref = measured[Variant(ref_impl, "sequential")]["step_s"]
    dflt = measured.get(canonical(Variant(ref_impl, default), k, b.chunk))
    ratio_default = dflt["step_s"] / ref if dflt is not None else None
    rows = []
    for v, m in measured.items():
        per_s = k / m["step_s"]
        one = m["step_s"] if k == 1 else ones.get(v.conv_impl)
        achieved = m["flops_per_step"] / m["step_s"] if m["flops_per_step"] else None
        peak = info["peak_flops"]
        rows.append({
            "kind": "train_step", "platform": info["platform"], "device_kind": info["device_kind"],
            "model": name, "conv_impl": v.conv_impl, "members": k, "strategy": v.strategy, "chunk": m["chunk"],
            "batch_size": batch_size(b, name), "input_shape": list(input_shape(b, name)),
            "width_mult": None if name == "mlp" else width_mult(b, name), "optimizer": b.optimizer,
            "compile_s": m["compile_s"], "step_s": m["step_s"], "step_s_min": m["step_s_min"],
            "repeats": m["repeats"], "members_per_s": per_s,
            "default_strategy": default, "ratio_default_vs_sequential": ratio_default,
            "ratio_vs_sequential": m["step_s"] / ref,
            "throughput_vs_one": per_s * one if one else None,
            "flops_per_step": m["flops_per_step"], "achieved_flops": achieved, "peak_flops": peak,
            "flops_utilization": achieved / peak if achieved and peak else None,
        })
    return rows


# --------------------------------------------------------------------------- table
def _num(x: Any, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def markdown_table(rows: list[dict]) -> str:
    """Train-step lines as a markdown table (medians), then one line per phase-diagram timing."""
    head = ("| model | conv | K | strategy | compile s | step s | members/s | vs sequential | "
            "default / sequential | vs K=1 | GFLOP/s | % of peak |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    train_rows = [r for r in rows if r.get("kind") == "train_step"]
    model_order = {m: i for i, m in reversed(list(enumerate(r["model"] for r in train_rows)))}
    train_rows.sort(key=lambda r: (model_order[r["model"]], r["conv_impl"] == "im2col", r["members"],
                                   STRATEGIES.index(r["strategy"])))
    for r in train_rows:
        lines.append(
            f"| {r['model']} | {r['conv_impl'] or '-'} | {r['members']} | {r['strategy']} | {r['compile_s']:.1f} | "
            f"{r['step_s']:.4g} | {r['members_per_s']:.3g} | {r['ratio_vs_sequential']:.2f} | "
            f"{_num(r['ratio_default_vs_sequential'], '.2f')} | {_num(r['throughput_vs_one'], '.2f')} | "
            f"{_num(r['achieved_flops'] and r['achieved_flops'] / 1e9, '.3g')} | "
            f"{_num(r.get('flops_utilization') and 100 * r['flops_utilization'], '.1f')} |")
    lines += [phase_line(r) for r in rows if r.get("kind") == "phase_diagram"]
    return "\n".join(lines)


def phase_line(r: dict) -> str:
    try:
        return (f"\nphase diagram ({r['act']}, {r['n_grid']} x {r['n_grid']}, depth {r['depth']}): jax "
                f"{r['jax_first_s']:.2f} s first call (compile included), {r['jax_second_s']:.2f} s next call; "
                f"numpy/scipy {r['baseline_per_point_s']:.3g} s a point ({r['baseline_points']} points timed) "
                f"-> {r['baseline_extrapolated_s']:.0f} s for the grid; speedup {r['speedup_first_call']:.0f}x "
                f"/ {r['speedup_second_call']:.0f}x")
    except (KeyError, TypeError, ValueError):
        return "\nphase diagram: " + json.dumps(r, sort_keys=True)
