"""Member-strategy benchmark: members per second of the library's own train step, strategies side by side.

For each model (MLP, CIFAR ResNet-20, ResNet-9), conv implementation (`lax`, `im2col`) and member count
K, every member strategy of `jaxinit.train.members` (sequential, vmap, chunked vmap) runs the study's
own training path (`jaxinit.tools.bench`): the chunks `loop.build_sweep` makes, each with the jitted step
of `compiled.Compiler.fns`, `TrainState`s from `engine.init_states`, and `engine.train_epoch`, over a synthetic
on-device dataset of the model's input shape. Variants of one (model, K) are timed interleaved (repeat r
runs every variant once, in a rotated order), so their ratios share the machine's load; step times are
medians over `bench.repeats`.

    python -m experiments.benchmark --quick      # tiny widths: the pipeline in minutes (compiles dominate)
    python -m experiments.benchmark              # preset `cpu` on a CPU, `accel` on a GPU/TPU
    make bench-accel RUNS=runs                   # accel: ResNet-9 full width, K = 1..16; budgeted for < 5 min;
                                                 # the machine's python3 (ACCEL_PY), refuses a CPU-only jax

Writes DIR/benchmark.jsonl (one JSON line per case, also printed), DIR/table.md and DIR/run.json
(machine, total time, skipped cases). Fields of a `train_step` line: `platform`, `device_kind`, `model`,
`conv_impl` (null for the MLP), `members` (K), `strategy`, `chunk` (members per compiled call),
`batch_size`, `width_mult`, `compile_s` (trace + lower + XLA compile of the executables the variant
needs, from jax.monitoring, counted when first built; with jax's persistent cache on, a program compiled
by an earlier run is a load: `JAXINIT_COMPILE_CACHE=off` to measure compiles), `step_s` (median seconds
of one step of all K members), `members_per_s` = K / step_s, `ratio_default_vs_sequential` (step time of
`members.default_strategy` with the default `lax` conv / step time of K sequential single-member
steps, same K), `ratio_vs_sequential` (this line's step time / the same denominator),
`throughput_vs_one` (members_per_s / that of K = 1, same conv), `flops_per_step` (counted from the
traced steps, `jaxinit.tools.flops`: the same on every backend), `achieved_flops`, `peak_flops`
(nominal: datasheet TF32 for GPUs, estimated from clock and vector-unit flags for CPUs, see
`jaxinit.tools.machine.cpu_nominal_peak_flops`; null when unknown), `flops_utilization`. A
`phase_diagram` line times the vmapped theory phase diagram against the per-point numpy/scipy baseline.

Runtimes, the measured tables and the CPU defaults they chose: docs/accelerators.md ("Member strategies
on a CPU").
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import jax

from jaxinit.run import cli, files
from jaxinit.run.manifest import Manifest
from jaxinit.run.runinfo import write_run_info
from jaxinit.tools.machine import machine_info
from jaxinit.config import OptConfig, Preset, Presets
from jaxinit.errors import ConfigError
from jaxinit.models import BUILDERS
from jaxinit.models.layers import CONV_IMPLS
from jaxinit.optim import resolve_setting
from jaxinit.tools.bench import (CompileClock, group_rows, markdown_table, measure_group,
                                 synthetic_dataset)
from jaxinit.tools.bench_config import STRATEGIES, BenchmarkConfig, BenchSection, PhaseSection, batch_size, input_shape, model_width_mults, steps

# Full set for this 2-core CPU: reduced conv widths and batch (full-width ResNet-9 costs ~3 s a step here and
# 16 GB under vmap), so that the whole run stays under 10 minutes: ResNet-20 4-8-16, ResNet-9 8-16-32-64, b = 32.
CPU = BenchmarkConfig(bench=BenchSection(conv_batch_size=32, width_mult=0.25, model_width_mult=("resnet9=0.125",),
                                         steps=5, conv_steps=1, repeats=3, max_epoch_s=30.0))
QUICK = BenchmarkConfig(
    bench=BenchSection(members=(1, 2, 4), batch_size=32, conv_batch_size=8, mlp_width=32, mlp_depth=2,
                       width_mult=0.0625, image_size=8, chunk=2, steps=2, conv_steps=1, repeats=3,
                       max_epoch_s=10.0),
    phase=PhaseSection(n_grid=20, depth=20, baseline_points=4, repeats=1))
# An H100/H200-class accelerator: ResNet-9 at full width, CIFAR shape and batch, K = 1..16 (< 5 min on an H200).
ACCEL = BenchmarkConfig(
    bench=BenchSection(models=("resnet9",), members=(1, 16, 8, 4, 2), batch_size=128, conv_batch_size=128,
                       width_mult=1.0, steps=5, conv_steps=5, repeats=5, max_epoch_s=60.0, budget_s=200.0,
                       require_accelerator=True),
    phase=PhaseSection(n_grid=200, depth=100, baseline_points=20))

PRESETS = Presets({
    "cpu": Preset(CPU, "the project's 2-core CPU: MLP, ResNet-20 x0.25, ResNet-9 x0.125 (b = 32), K = 1..16; "
                       "~4.5 min (default on a CPU)"),
    "quick": Preset(QUICK, "tiny widths, K = 1, 2, 4 and a 20 x 20 phase diagram: the pipeline in ~4 min (--quick)"),
    "accel": Preset(ACCEL, "a GPU/TPU: ResNet-9 at full width, b = 128, K = 1..16, budgeted for < 5 min "
                           "(default on an accelerator)"),
})


# --------------------------------------------------------------------------- validation
def validate(cfg: BenchmarkConfig) -> None:
    from jaxinit.config import check_values
    check_values(cfg)   # finite floats, int32-sized ints, also for a config built in code
    b = cfg.bench
    _distinct_nonempty("bench.models", b.models, BUILDERS)
    _distinct_nonempty("bench.strategies", b.strategies, STRATEGIES)
    if b.enabled and b.require_accelerator and jax.default_backend() == "cpu":
        raise ConfigError("this preset needs a GPU/TPU and jax sees only the CPU: run it with a Python whose jax "
                          "has the accelerator plugin (make bench-accel ACCEL_PY=...), or set "
                          "--bench.require_accelerator=false")
    _distinct_nonempty("bench.conv_impls", b.conv_impls, CONV_IMPLS)
    if "sequential" not in b.strategies:
        raise ConfigError("--bench.strategies must include sequential (the reference of every ratio)")
    if "lax" not in b.conv_impls:
        raise ConfigError("--bench.conv_impls must include lax (the default conv, reference of every ratio)")
    if not b.members or any(k < 1 for k in b.members) or len(set(b.members)) != len(b.members):
        raise ConfigError(f"--bench.members must be distinct positive member counts, got {b.members}")
    for key in ("chunk", "batch_size", "conv_batch_size", "mlp_width", "mlp_input", "image_size", "steps", "conv_steps",
                "repeats"):
        if getattr(b, key) < 1:
            raise ConfigError(f"--bench.{key} must be >= 1, got {getattr(b, key)}")
    if b.mlp_depth < 0:
        raise ConfigError(f"--bench.mlp_depth must be >= 0, got {b.mlp_depth}")
    if not b.budget_s >= 0:
        raise ConfigError(f"--bench.budget_s must be >= 0 (0 = no limit), got {b.budget_s}")
    for key in ("width_mult", "max_epoch_s"):
        if not (getattr(b, key) > 0 and math.isfinite(getattr(b, key))):
            raise ConfigError(f"--bench.{key} must be finite and > 0, got {getattr(b, key)}")
    for name, value in model_width_mults(b).items():
        if name not in BUILDERS or name == "mlp" or not (value > 0 and math.isfinite(value)):
            raise ConfigError(f"--bench.model_width_mult: {name}={value} needs a conv net and a finite value > 0")
    for key in ("n_grid", "depth", "baseline_points", "repeats"):
        if getattr(cfg.phase, key) < 1:
            raise ConfigError(f"--phase.{key} must be >= 1, got {getattr(cfg.phase, key)}")
    resolve_setting(b.optimizer, OptConfig())


def _distinct_nonempty(key: str, values: tuple, allowed) -> None:
    bad = [v for v in values if v not in allowed]
    if not values or bad or len(set(values)) != len(values):
        raise ConfigError(f"--{key} must list distinct values from {'|'.join(allowed)}, got {','.join(values)}")


# --------------------------------------------------------------------------- phase diagram
def phase_rows(cfg: BenchmarkConfig, info: dict) -> list[dict]:
    """The vmapped theory phase diagram against the per-point numpy/scipy baseline (`jaxinit.igb.phase_diagram`)."""
    from jaxinit.igb.phase_diagram import time_phase_diagram   # matplotlib behind it: loaded only when asked
    p = cfg.phase
    t = time_phase_diagram(n_grid=p.n_grid, depth=p.depth, baseline_points=p.baseline_points, repeats=p.repeats)
    return [{**t, "kind": "phase_diagram", "platform": info["platform"], "device_kind": info["device_kind"],
             "model": "phase_diagram"}]


# --------------------------------------------------------------------------- entry point
def main(cfg: BenchmarkConfig, out: Path, resume: bool) -> None:
    if resume:
        raise ConfigError("--resume: a benchmark is measured in one run; run it again without --resume")
    t0 = time.perf_counter()
    info = machine_info()
    b = cfg.bench
    jsonl = out / "benchmark.jsonl"
    Manifest(out).write_text(jsonl, "", digest=False)    # appended row by row below: no digest
    rows, skipped = [], []
    with CompileClock() as clock:
        for name in b.models if b.enabled else ():
            ds = synthetic_dataset(input_shape(b, name), batch_size(b, name) * steps(b, name))
            compiled, previous = {}, {}
            for k in b.members:            # in the given order: a budget cuts the last ones
                if b.budget_s and time.perf_counter() - t0 > b.budget_s:
                    skipped.append({"model": name, "members": k, "reason": f"bench.budget_s={b.budget_s:g} spent"})
                    print(f"skipping {name} K={k}: bench.budget_s={b.budget_s:g} spent", file=sys.stderr)
                    continue
                measured, ones = measure_group(cfg, name, k, ds, clock, compiled, previous, skipped)
                _emit(jsonl, rows, group_rows(cfg, info, name, k, measured, ones))
    if cfg.phase.enabled:
        _emit(jsonl, rows, phase_rows(cfg, info))
    table = markdown_table(rows)
    Manifest(out).write_text(out / "table.md", table + "\n")
    write_run_info(out, {**info, "total_s": time.perf_counter() - t0, "skipped": skipped})
    print(table)


def _emit(path: Path, rows: list[dict], new: list[dict]) -> None:
    files.check_inside(path.parent, path)    # never appended through a link out of the run
    with open(path, "a") as f:
        for r in new:
            line = json.dumps(r, sort_keys=False)
            f.write(line + "\n")
            print(line, flush=True)
    rows.extend(new)


def platform_preset() -> str:
    """`cpu` on a CPU, `accel` on a GPU/TPU (so `make bench-accel` needs no flag)."""
    return "cpu" if jax.default_backend() == "cpu" else "accel"


EXPERIMENT = cli.Experiment(name="benchmark", doc=__doc__, presets=PRESETS, default=platform_preset,
                            main=main, validate=validate, preset_flags={"quick": "quick"})


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
