"""The stages of the accelerator check (`jaxinit.tools.accel`), in the order they run.

1. preflight: versions, devices, memory, optional packages, jax's matmul precision.
2. train: one setting's members (sgd, vmap, lax conv) at each precision: compile, step time, memory.
3. strategy: the same members sequentially, vmapped with im2col, and `lax.map` of the single-member step
   (chunked too while time remains); the fastest library strategy is chosen.
4. optimizers: adam and muon steps of the same members under the chosen strategy.
5. eval: CIFAR-10 and MNIST stand-ins written and loaded; one evaluation pass, seconds per example.
6. checkpoint: one setting's state saved twice with `jaxinit.checkpoint` to a temporary folder.
7. benchmark: the member-strategy benchmark's cases (`experiments.benchmark`'s accel preset) while time remains.
8. projection: the paper table's hours from the measured rates (`jaxinit.tools.projection`).
Each `stage_<name>(check, rec)` fills its record; a measurement is one dict in rec["measurements"].
Stages 5 and 6 live in `jaxinit.tools.accel_io` (importable from here).
"""
from __future__ import annotations

import importlib.util
import os
import platform
import time

from jaxinit.tools import timing
from jaxinit.tools.accel import Check, Mode, Skipped, one_line
from jaxinit.tools.accel_io import stage_checkpoint, stage_eval, standins  # noqa: F401  (stages 5 and 6)
from jaxinit.tools.timing import OutOfTime

OPTIONAL = {"orbax": "orbax.checkpoint", "matplotlib": "matplotlib", "tqdm": "tqdm", "scipy": "scipy", "tyro": "tyro",
            "tfds": "tensorflow_datasets", "mnist1d": "mnist1d", "pandas": "pandas"}
VERSIONS = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy")
GIB = 2 ** 30


def installed(module: str) -> bool:
    """Whether ``module`` can be found (`importlib.util.find_spec`: nothing of it is run)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f} GiB"


# --------------------------------------------------------------------------- 1. preflight
def stage_preflight(ck: Check, rec: dict) -> None:
    from importlib import metadata

    import jax

    from jaxinit.config import TrainConfig
    from jaxinit.tools.machine import machine_info
    versions = {"python": platform.python_version()}
    for name in VERSIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    devices = [{"id": d.id, "platform": d.platform, "kind": d.device_kind} for d in jax.devices()]
    info = machine_info()
    precision = jax.config.jax_default_matmul_precision
    train_fields = {f: f in TrainConfig.__dataclass_fields__ for f in ("precision", "eval_train_subset",
                                                                        "async_checkpoint")}
    rec.update(versions=versions, backend=jax.default_backend(), devices=devices, process_count=jax.process_count(),
               device_memory=timing.device_memory(), optional_packages={k: installed(v) for k, v in OPTIONAL.items()},
               default_matmul_precision=None if precision is None else str(precision),
               precision_modes=[m._asdict() for m in ck.modes], train_config_fields=train_fields,
               peak_flops=info["peak_flops"], peak_flops_note=info["peak_flops_note"], cpu=info["cpu"],
               cpu_count=info["cpu_count"], xla_flags=os.environ.get("XLA_FLAGS", ""),
               xla_env={k: v for k, v in os.environ.items() if k.startswith(("XLA_PYTHON_CLIENT", "JAX_"))})
    mem = rec["device_memory"] or {}
    ck.log(f"[preflight] python {versions['python']}, jax {versions['jax']} / jaxlib {versions['jaxlib']}, flax "
           f"{versions['flax']}, optax {versions['optax']}, orbax {versions['orbax-checkpoint']}, numpy "
           f"{versions['numpy']}; {len(devices)} x {devices[0]['kind']} ({rec['backend']}), memory limit "
           f"{_gib(mem.get('bytes_limit'))}; matmul precision {rec['default_matmul_precision'] or 'default'}; "
           f"optional: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in rec["optional_packages"].items()))


# --------------------------------------------------------------------------- measurements
def measure(ck: Check, rec: dict, optimizer: str, strategy: str, conv_impl: str, mode: Mode, stage: str) -> dict:
    """One setting's members, built by the library and timed: compile, steps, FLOPs, memory; one line."""
    from jaxinit.tools.machine import machine_info
    what = f"{optimizer} {strategy}/{conv_impl} {mode.label}"
    ck.deadline.require(ck.measure_need(optimizer, strategy, conv_impl, mode), f"{stage} {what}: compile and time")
    sweep, states, init_s = ck.build(optimizer, strategy, conv_impl, mode)
    lanes_of = timing.lax_map_lane if strategy == "lax_map" else timing.sweep_lanes
    lanes, comp = lanes_of(sweep, states, mode.context)
    del states
    timed = timing.time_steps(lanes, sweep.ds.x_train, sweep.ds.y_train, ck.plan.steps, ck.plan.block_steps,
                              sweep.steps_per_epoch, ck.deadline, f"{stage} {what}")
    del lanes
    n = len(sweep.members)
    achieved = comp["flops_per_step"] / timed["step_s"] if comp["flops_per_step"] else None
    peak = machine_info()["peak_flops"]
    m = {"optimizer": optimizer, "strategy": strategy, "conv_impl": conv_impl, "precision": mode.label,
         "matmul_precision": mode.context, "precision_by_config": mode.by_config, "members": n,
         "chunks": sum(len(c) for c in sweep.groups.values()), "batch_size": ck.plan.batch_size,
         "model": ck.plan.model, "width_mult": ck.plan.width_mult, "init_s": init_s, **comp, **timed,
         "member_steps_per_s": n / timed["step_s"], "achieved_flops": achieved, "peak_flops": peak,
         "flops_utilization": achieved / peak if achieved and peak else None, "device_memory": timing.device_memory()}
    if m["cut"]:
        rec["cut"] = m["cut"]
    ck.results[(optimizer, strategy, conv_impl, mode.label)] = m
    prog = (m["program_memory"] or {}).get("total_bytes")
    dev = (m["device_memory"] or {}).get("peak_bytes_in_use")
    flops = "" if achieved is None else f", {achieved / 1e12:.3g} TFLOP/s" + (
        f" ({100 * achieved / peak:.0f} % of peak)" if peak else "")
    ck.emit(rec, m, f"[{stage}] {what}: {n} members, compile {m['compile_s']:.1f} s (+ init {init_s:.1f} s)"
                    f"{' cached' if m['cached'] else ''}, step {1e3 * m['step_s']:.2f} ms ({m['steps']} steps), "
                    f"{m['member_steps_per_s']:.1f} member-steps/s{flops}, program {_gib(prog)}, "
                    f"device peak so far {_gib(dev)}")
    return m


def attempt(ck: Check, rec: dict, optimizer: str, strategy: str, conv_impl: str, mode: Mode, stage: str) -> dict | None:
    """`measure`, with an error other than the deadline kept in rec["errors"]: the stage goes on."""
    try:
        return measure(ck, rec, optimizer, strategy, conv_impl, mode, stage)
    except (OutOfTime, KeyboardInterrupt):
        raise
    except Exception as err:
        msg = f"{optimizer} {strategy}/{conv_impl} {mode.label}: {one_line(err)}"
        rec.setdefault("errors", []).append(msg)
        ck.log(f"[{stage}] failed: {msg}")
        return None


# --------------------------------------------------------------------------- 2. train
def stage_train(ck: Check, rec: dict) -> None:
    ck.dataset(rec)
    ck.precompile(rec)
    main, *others = ck.modes
    rec["precision_modes"] = [m.label for m in ck.modes]
    first = measure(ck, rec, "sgd", "vmap", "lax", main, "train")
    for mode in others:
        if not ck.plan.precisions:
            rec.setdefault("not_run", []).append(f"{mode.label}: the {ck.plan.name} plan times the main precision only")
            continue
        if mode.optional and not ck.optional_time():
            why = f"needs {ck.plan.optional_reserve_s:g} s left" if ck.plan.optional else f"the {ck.plan.name} plan"
            rec.setdefault("not_run", []).append(f"{mode.label}: optional ({why})")
            continue
        m = attempt(ck, rec, "sgd", "vmap", "lax", mode, "train")
        if m is not None:
            m["step_vs_main"] = m["step_s"] / first["step_s"]
            m["same_program_as_main"] = m["hlo_sha256"] == first["hlo_sha256"]


# --------------------------------------------------------------------------- 3. strategy
LIBRARY_STRATEGIES = ("vmap", "sequential", "chunked")


def strategy_variants(plan) -> list[tuple[str, str]]:
    """What the strategy stage times besides the train stage's vmap / lax (chunked is optional)."""
    variants = [("sequential", "lax"), ("vmap", "im2col"), ("lax_map", "lax")]
    return variants + ([("chunked", "lax")] if plan.members > plan.chunk else [])


def stage_strategy(ck: Check, rec: dict) -> None:
    from jaxinit.train.members import default_strategy
    ck.precompile(rec)
    main = ck.modes[0]
    for strategy, conv in strategy_variants(ck.plan):
        if strategy == "chunked" and not ck.optional_time():
            rec.setdefault("not_run", []).append(f"chunked/lax (chunks of {ck.plan.chunk}): optional")
            continue
        attempt(ck, rec, "sgd", strategy, conv, main, "strategy")
    timed = {(s, c): m for (o, s, c, p), m in ck.results.items() if o == "sgd" and p == main.label}
    if not timed:
        raise RuntimeError("no strategy could be measured: " + "; ".join(rec.get("errors", [])))
    library = {k: m for k, m in timed.items() if k[0] in LIBRARY_STRATEGIES}
    fastest = min(timed, key=lambda k: timed[k]["step_s"])
    ref = timed.get(("vmap", "lax"))
    rec["step_s"] = {f"{s}/{c}": m["step_s"] for (s, c), m in timed.items()}
    rec["vs_vmap_lax"] = {f"{s}/{c}": m["step_s"] / ref["step_s"] for (s, c), m in timed.items()} if ref else None
    rec["fastest_overall"] = "/".join(fastest)
    if library:
        chosen = min(library, key=lambda k: library[k]["step_s"])
        ck.chosen = chosen
        default = default_strategy(True)
        rec["chosen"] = {"strategy": chosen[0], "conv_impl": chosen[1], "step_s": library[chosen]["step_s"],
                         "library_default": default, "matches_library_default": chosen == (default, "lax")}
        ck.report.data["chosen_strategy"] = rec["chosen"]
        ck.log(f"[strategy] chosen {chosen[0]}/{chosen[1]} ({1e3 * library[chosen]['step_s']:.2f} ms a step); "
               f"fastest overall {rec['fastest_overall']}; library default {default}/lax")


# --------------------------------------------------------------------------- 4. optimizers
def stage_optimizers(ck: Check, rec: dict) -> None:
    ck.precompile(rec)
    strategy, conv = ck.strategy()
    main = ck.modes[0]
    rec["strategy"] = f"{strategy}/{conv}"
    sgd = ck.results.get(("sgd", strategy, conv, main.label))
    for optimizer in ("adam", "muon"):
        m = attempt(ck, rec, optimizer, strategy, conv, main, "optimizers")
        if m is not None and sgd is not None:
            m["step_vs_sgd"] = m["step_s"] / sgd["step_s"]
    if not rec.get("measurements"):
        raise RuntimeError("no optimizer could be measured: " + "; ".join(rec.get("errors", [])))


# --------------------------------------------------------------------------- 7. benchmark
def stage_benchmark(ck: Check, rec: dict) -> None:
    cfg = ck.bench_cfg() if callable(ck.bench_cfg) else ck.bench_cfg
    if cfg is None:
        raise Skipped("no benchmark config given")
    from jaxinit.tools import bench
    from jaxinit.tools.machine import machine_info
    info, b = machine_info(), cfg.bench
    per_variant_s, skipped = ck.plan.needs("benchmark") / 2, []
    rec["skipped_cases"] = skipped
    with bench.CompileClock() as clock:
        for name in b.models if b.enabled else ():
            ds = bench.synthetic_dataset(bench.input_shape(b, name), bench.batch_size(b, name) * bench.steps(b, name))
            compiled, previous = {}, {}
            for k in b.members:
                variants = len(bench.group_variants(b, name, k)) + (k > 1)
                ck.deadline.require(max(ck.plan.needs("benchmark"), 1.2 * per_variant_s * variants),
                                    f"benchmark {name} K={k} ({variants} variants)")
                t = time.perf_counter()
                measured, ones = bench.measure_group(cfg, name, k, ds, clock, compiled, previous, skipped)
                per_variant_s = (time.perf_counter() - t) / variants
                for r in bench.group_rows(cfg, info, name, k, measured, ones):
                    conv = f" {r['conv_impl']}" if r["conv_impl"] else ""
                    ck.emit(rec, r, f"[benchmark] {name}{conv} K={k} {r['strategy']}: step "
                                    f"{1e3 * r['step_s']:.2f} ms, {r['members_per_s']:.3g} members/s, vs sequential "
                                    f"{r['ratio_vs_sequential']:.2f}, compile {r['compile_s']:.1f} s")
    if cfg.phase.enabled:
        if not (installed("matplotlib") and installed("scipy")):
            rec["phase"] = "skipped: the phase-diagram timing needs matplotlib and scipy"
            return
        ck.deadline.require(ck.plan.needs("benchmark"), "benchmark phase diagram")
        from jaxinit.igb.phase_diagram import time_phase_diagram
        p = cfg.phase
        r = time_phase_diagram(n_grid=p.n_grid, depth=p.depth, baseline_points=p.baseline_points, repeats=p.repeats)
        ck.emit(rec, {**r, "kind": "phase_diagram"}, f"[benchmark] phase diagram {p.n_grid} x {p.n_grid}, depth "
                                                     f"{p.depth}: {bench.phase_line(r).strip()}")


# --------------------------------------------------------------------------- 8. projection
def rates(ck: Check) -> dict:
    """The measured rates the projection reads: the chosen strategy at the main precision."""
    strategy, conv = ck.strategy()
    main = ck.modes[0].label
    step_s, compile_s, flops = {}, {}, None
    for cls in ("sgd", "adam", "muon"):
        m = ck.results.get((cls, strategy, conv, main))
        if m is not None:
            step_s[cls], compile_s[cls] = m["step_s"], m["compile_s"] + m["init_s"]
            flops = m["achieved_flops"] if cls == "sgd" else flops
    return {"strategy": f"{strategy}/{conv}", "precision": main, "step_s": step_s, "compile_s": compile_s,
            "achieved_flops": flops, "eval_s_per_example": (ck.eval_rate or {}).get("s_per_example"),
            "checkpoint_s": (ck.checkpoint_rate or {}).get("seconds"),
            "checkpoint_asynchronous": (ck.checkpoint_rate or {}).get("asynchronous"),
            "checkpoint_bytes": (ck.checkpoint_rate or {}).get("bytes")}


def stage_projection(ck: Check, rec: dict) -> None:
    from jaxinit.tools.projection import paper_table, project
    measured = rates(ck)
    proj = project(paper_table(), measured)
    main = ck.results.get(("sgd", "vmap", "lax", ck.modes[0].label))
    if main is not None and proj.get("train_h") is not None:   # the train stage's precisions, as step-time ratios
        proj["train_h_by_precision"] = {
            m.label: proj["train_h"] * r["step_s"] / main["step_s"] for m in ck.modes
            if (r := ck.results.get(("sgd", "vmap", "lax", m.label))) is not None}
    proj.update(rates=measured, plan=ck.plan.name, members_measured=ck.plan.members,
                note=None if ck.plan.name == "full" else
                f"{ck.plan.name} plan: rates of a {ck.plan.model} at width x {ck.plan.width_mult:g} and b = "
                f"{ck.plan.batch_size}, not the paper's ResNet-9; the hours are no estimate")
    rec.update(proj)
    ck.report.data["projection"] = proj
    if proj["hours"] is None:
        raise Skipped(proj["reason"])


def projection_lines(report: dict) -> list[str]:
    """The projection as printed last by the command line."""
    p = report.get("projection") or {}
    if p.get("hours") is None:
        return [f"projection: none ({p.get('reason', 'the projection stage did not run')})"]
    t = p["table"]
    r = p["rates"]
    part = lambda k: "-" if p[k] is None else f"{p[k]:.2f} h"
    lines = [f"projection of the paper table ({len(t['settings'])} settings x {t['members']} members x {t['epochs']} "
             f"epochs x {t['steps_per_epoch']} steps, {t['evaluations']} evaluations of {t['eval_examples']:,} "
             f"examples, {t['checkpoint_saves']} checkpoint saves) at {r['strategy']}, {r['precision']}:",
             f"  train {part('train_h')} + eval {part('eval_h')} + checkpoints {part('checkpoint_h')} + compile "
             f"{part('compile_h')} = {p['hours']:.2f} h ({p['epoch_s']:.0f} s an epoch of all settings)"
             + ("" if p["complete"] else " [incomplete: " + "; ".join(p["assumed"] or ["a missing rate"]) + "]"),
             f"  FLOP model: {p['total_flop']:.3g} FLOP (train {p['train_flop']:.3g}, eval {p['eval_flop']:.3g})"
             + ("" if p["hours_at_train_flop_rate"] is None else
                f" -> {p['hours_at_train_flop_rate']:.2f} h at the measured training FLOP rate")]
    by = p.get("train_h_by_precision") or {}
    if len(by) > 1:
        lines.append("  train at each precision (step-time ratios of the train stage): "
                     + ", ".join(f"{k} {v:.2f} h" for k, v in by.items()))
    if p.get("note"):
        lines.append(f"  note: {p['note']}")
    return lines
