"""The staged accelerator check: what the paper table will cost on this machine, measured stage by stage.

`python -m experiments.accel_check --out DIR [--tiny] [--deadline S]` is the command line; `Check.run`
runs the stages of `jaxinit.tools.accel_stages` in order, each in its own guard: an exception is
recorded as the stage's one-line error (and where it was raised) and the next stage runs; a stage
that cannot start for lack of time is recorded as skipped, one the deadline cuts short as partial
(with what it measured). `DIR/accel.json` is rewritten atomically after every stage and every
measurement, and each measurement prints one line. Data stand-ins and checkpoints go to a temporary
folder that is deleted at the end, so DIR holds accel.json only.

Every measurement uses the library's training path on a synthetic on-device dataset of the paper's
shape: `loop.build_sweep` (members, chunks, `compiled.Compiler.fns`), `engine.init_states`, each chunk's
jitted step compiled ahead of time and timed (`jaxinit.tools.timing`). The variants of the train,
strategy and optimizers stages are compiled first, in `plan.compile_workers` threads at once (XLA
compiles in parallel; the full plan's ~9 ResNet-9 programs would not fit the deadline one by one), and
only then timed, so that no timing overlaps a compile or its autotuning. Only jax, flax, optax, orbax
and numpy are needed: no tyro, matplotlib, tqdm or scipy (the benchmark's phase-diagram timing runs
only where matplotlib and scipy are installed).

A test hook: stage names in the environment variable JAXINIT_ACCEL_CHECK_FAIL (comma-separated), or
`Check(fail=...)`, make those stages raise at their start, as a real error would.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable

# The plan, its stages and precisions live in their own module; importable from here.
from jaxinit.tools.accel_plan import FULL, SIGMA_GRID, STAGES, TINY, Mode, Plan, precision_modes  # noqa: F401
from jaxinit.tools.timing import Deadline, OutOfTime

FAIL_ENV = "JAXINIT_ACCEL_CHECK_FAIL"


class Skipped(Exception):
    """A stage with nothing to do (the message says why)."""


class InjectedFailure(RuntimeError):
    """The test hook's error (JAXINIT_ACCEL_CHECK_FAIL / Check(fail=...))."""


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300]}" if text else type(err).__name__


def where(err: BaseException) -> str | None:
    """file:line in function of the innermost frame outside installed packages (else the innermost one)."""
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if "site-packages" not in f.filename and "dist-packages" not in f.filename
            and not f.filename.startswith((sys.prefix + os.sep + "lib", sys.base_prefix + os.sep + "lib"))] or frames
    if not ours:
        return None
    f = ours[-1]
    return f"{Path(f.filename).name}:{f.lineno} in {f.name}"


def jsonable(x: Any) -> Any:
    """Floats JSON can hold (NaN / infinity -> None), numpy scalars as Python, tuples as lists."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (bool, int, str)) or x is None:
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        return jsonable(x.item())
    return str(x)


class Report:
    """accel.json: rewritten atomically (temporary file, fsync, rename) whenever `write` is called."""

    def __init__(self, path: Path, header: dict):
        self.path = Path(path)
        self.data = {**header, "stages": {name: {"status": "pending"} for name in STAGES}}
        self._lock = threading.Lock()

    def stage(self, name: str) -> dict:
        return self.data["stages"][name]

    def write(self) -> None:
        with self._lock:
            text = None
            for _ in range(3):     # the watchdog thread may write while the main thread edits a record
                try:
                    text = json.dumps(jsonable(self.data), indent=1, allow_nan=False) + "\n"
                    break
                except RuntimeError:
                    time.sleep(0.01)
            if text is None:
                return
            from jaxinit.run import files
            with files.atomic_path(self.path) as tmp:
                tmp.write_text(text)


class Check:
    """One run of the check; the stages (`jaxinit.tools.accel_stages`) read and fill its state."""

    def __init__(self, plan: Plan, out: Path, deadline: Deadline | None = None, bench_cfg: Any = None,
                 fail: tuple[str, ...] = (), stages: tuple[str, ...] = STAGES, argv: list[str] | None = None,
                 log: Callable[[str], None] | None = None):
        self.plan, self.out = plan, Path(out)
        self.deadline = deadline or Deadline(plan.deadline_s)
        self.bench_cfg = bench_cfg
        env = tuple(s.strip() for s in os.environ.get(FAIL_ENV, "").split(",") if s.strip())
        self.fail = set(fail) | set(env)
        self.selected = tuple(stages)
        self.log = log or (lambda line: print(line, flush=True))
        self.report = Report(self.out / "accel.json", {
            "check": "jaxinit accel_check", "schema": 1, "mode": plan.name, "argv": argv,
            "deadline_s": self.deadline.seconds, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "plan": asdict(plan), "selected_stages": list(self.selected), "injected_failures": sorted(self.fail),
            "chosen_strategy": None, "projection": None, "elapsed_s": None, "finished": False})
        self.modes = precision_modes()
        self.results: dict[tuple, dict] = {}     # (optimizer, strategy, conv_impl, mode label) -> measurement
        self.chosen: tuple[str, str] | None = None
        self.eval_rate: dict | None = None
        self.checkpoint_rate: dict | None = None
        self.standin_cifar = None                # the CIFAR-10 stand-in as loaded (eval stage)
        self.current: str | None = None
        self.precompiled = False
        self.compiled_specs: set[tuple] = set()     # (optimizer, strategy, conv_impl, mode label) compiled ahead
        self._futures: list = []
        self._ds = None
        self._tmp: Path | None = None

    # ----------------------------------------------------------------------- running
    def run(self) -> dict:
        from jaxinit.tools import accel_stages
        try:
            for name in STAGES:
                self.run_stage(name, getattr(accel_stages, f"stage_{name}"))
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self.report.data["scratch_removed"] = not self._tmp.exists()
            self.report.data.update(elapsed_s=self.deadline.elapsed(), finished=True)
            self.report.write()
        return self.report.data

    def run_stage(self, name: str, body: Callable[["Check", dict], None]) -> None:
        rec = self.report.stage(name)
        left = self.deadline.remaining()
        if name != "projection" and name not in self.selected:
            rec.update(status="skipped", reason="not selected (--stages)")
        elif name != "projection" and left <= self.plan.needs(name):
            rec.update(status="skipped", reason=f"{max(left, 0.0):.1f} s of the {self.deadline.seconds:g} s "
                                                f"deadline left, the stage needs {self.plan.needs(name):g} s to start")
        else:
            self._run_guarded(name, body, rec)
        self.report.data["elapsed_s"] = self.deadline.elapsed()
        self.report.write()
        self.log(f"[{name}] {rec['status']}" + (f" ({rec['seconds']:.1f} s)" if "seconds" in rec else "")
                 + "".join(f": {rec[k]}" for k in ("error", "reason") if rec.get(k)))

    def _run_guarded(self, name: str, body, rec: dict) -> None:
        rec.update(status="running", started_at_s=self.deadline.elapsed())
        self.current = name
        self.report.write()
        t = time.perf_counter()
        try:
            if name in self.fail:
                raise InjectedFailure(f"injected failure in stage {name} ({FAIL_ENV} or Check(fail=...))")
            body(self, rec)
            rec["status"] = "partial" if rec.get("cut") else "ok"
        except OutOfTime as why:
            rec.update(status="partial" if rec.get("measurements") else "skipped", reason=str(why))
        except Skipped as why:
            rec.update(status="skipped", reason=str(why))
        except Exception as err:       # the guard: one line, where it was raised, and the next stage runs
            rec.update(status="failed", error=one_line(err), where=where(err))
        finally:
            rec["seconds"] = time.perf_counter() - t
            self.current = None

    def abort(self, why: str) -> None:
        """Record the running stage as interrupted and write accel.json (the command line's watchdog)."""
        if self.current is not None:
            self.report.stage(self.current).update(status="interrupted", reason=why)
        self.report.data.update(elapsed_s=self.deadline.elapsed(), finished=False, aborted=why)
        self.report.write()

    # ----------------------------------------------------------------------- shared by stages
    def emit(self, rec: dict, measurement: dict, line: str) -> dict:
        """Keep a measurement in its stage's record, print its line and rewrite accel.json."""
        rec.setdefault("measurements", []).append(measurement)
        self.log(line)
        self.report.write()
        return measurement

    def optional_time(self) -> bool:
        return self.plan.optional and self.deadline.remaining() > self.plan.optional_reserve_s

    def tempdir(self, name: str) -> Path:
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="jaxinit_accel_check_"))
            self.report.data["scratch"] = str(self._tmp)      # stand-ins and checkpoints; deleted at the end
        path = self._tmp / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def dataset(self, rec: dict | None = None):
        """The synthetic on-device training set of the paper's shape (built once, seconds kept in rec)."""
        if self._ds is None:
            import jax
            from jaxinit.tools.bench import synthetic_dataset
            p = self.plan
            t = time.perf_counter()
            self._ds = jax.block_until_ready(synthetic_dataset((p.image_size, p.image_size, 3), p.n_train))
            if rec is not None:
                rec["dataset"] = {"examples": p.n_train, "shape": [p.image_size, p.image_size, 3],
                                  "seconds": time.perf_counter() - t}
        return self._ds

    def config(self, optimizer: str, strategy: str, conv_impl: str, mode: Mode):
        """The `paper` preset narrowed to one setting's members, the plan's sizes and a strategy."""
        from jaxinit.forgetting.config import PAPER
        p = self.plan
        train = replace(PAPER.train, batch_size=p.batch_size, chunk=p.chunk,
                        strategy="sequential" if strategy == "lax_map" else strategy)
        if mode.by_config:
            train = replace(train, precision=mode.label)
        if getattr(train, "eval_train_subset", 0) > p.n_train:     # the tiny plan's 16 examples
            train = replace(train, eval_train_subset=0)
        return replace(PAPER, model=replace(PAPER.model, name=p.model, width_mult=p.width_mult, conv_impl=conv_impl),
                       train=train,
                       sweep=replace(PAPER.sweep, sigma_w=tuple(p.sigma_w), seeds=p.seeds, optimizers=(optimizer,)))

    def build(self, optimizer: str, strategy: str, conv_impl: str, mode: Mode | None = None):
        """(sweep, states, seconds): `loop.build_sweep` on the synthetic set and `engine.init_states`."""
        import jax
        from jaxinit.forgetting import loop
        from jaxinit.train import engine
        t = time.perf_counter()
        cfg = self.config(optimizer, strategy, conv_impl, mode or self.modes[0])
        sweep = loop.build_sweep(cfg, ds=self.dataset(), steps_per_epoch=self.plan.steps_per_epoch)
        states = jax.block_until_ready(engine.init_states(sweep))
        return sweep, states, time.perf_counter() - t

    def specs(self) -> list[tuple[str, str, str, Mode]]:
        """The (optimizer, strategy, conv_impl, mode) the train, strategy and optimizers stages will time,
        in that order (adam and muon under the library's default strategy, the likely choice)."""
        from jaxinit.tools.accel_stages import strategy_variants
        main, out = self.modes[0], []
        if "train" in self.selected:
            out.append(("sgd", "vmap", "lax", main))
            out += [("sgd", "vmap", "lax", m) for m in self.modes[1:]
                    if self.plan.precisions and (self.plan.optional or not m.optional)]
        if "strategy" in self.selected:
            out += [("sgd", s, c, main) for s, c in strategy_variants(self.plan)
                    if s != "chunked" or self.plan.optional]
        if "optimizers" in self.selected:
            out += [(o, *self.strategy(), main) for o in ("adam", "muon")]
        return list(dict.fromkeys(out))

    def precompile(self, rec: dict) -> None:
        """Compile every variant of `specs` in `plan.compile_workers` threads, and wait for them (till the
        deadline leaves `plan.measure_s`): XLA compiles in parallel, and no timing overlaps a compile. Once
        per check, by the first of train / strategy / optimizers that runs; a failed compile is only noted
        here (the measurement compiles again and records the error)."""
        if self.precompiled or self.plan.compile_workers < 1:
            return
        self.precompiled = True
        from concurrent.futures import ThreadPoolExecutor, wait
        specs = self.specs()
        self.dataset(rec)
        self.deadline.require(self.plan.measure_s, "precompile")
        t = time.perf_counter()
        pool = ThreadPoolExecutor(max_workers=self.plan.compile_workers, thread_name_prefix="accel-compile")
        futures = {pool.submit(self._compile, spec): spec for spec in specs}
        self._futures = list(futures)
        done, pending = wait(futures, timeout=max(0.0, self.deadline.remaining() - self.plan.measure_s))
        pool.shutdown(wait=False, cancel_futures=True)
        out = []
        for future, (o, s, c, m) in futures.items():
            entry = {"variant": f"{o} {s}/{c} {m.label}"}
            if future in pending:
                entry["status"] = "not finished before the deadline"
            elif future.exception() is not None:
                entry["error"] = one_line(future.exception())
            else:
                entry.update(future.result())
                self.compiled_specs.add((o, s, c, m.label))
            out.append(entry)
        seconds = time.perf_counter() - t
        rec["precompile"] = {"workers": self.plan.compile_workers, "seconds": seconds, "variants": out}
        longest = max((e.get("seconds", 0.0) for e in out), default=0.0)
        workers = self.plan.compile_workers
        self.log(f"[{self.current}] compiled {len(done)} of {len(specs)} variants in {workers} "
                 f"thread{'s' if workers > 1 else ''}: {seconds:.1f} s (longest {longest:.1f} s)"
                 + "".join(f"; {e['variant']}: {e.get('error') or e.get('status')}" for e in out
                           if "error" in e or "status" in e))
        self.report.write()

    def background_busy(self) -> bool:
        """Whether a compile thread is still running (cut by the deadline): the process should not wait for it."""
        return any(not f.done() for f in self._futures)

    def measure_need(self, optimizer: str, strategy: str, conv_impl: str, mode: Mode) -> float:
        """Seconds a measurement needs left to start: a quarter of `plan.measure_s` once compiled ahead."""
        ahead = (optimizer, strategy, conv_impl, mode.label) in self.compiled_specs
        return self.plan.measure_s / 4 if ahead else self.plan.measure_s

    def _compile(self, spec: tuple[str, str, str, Mode]) -> dict:
        from jaxinit.forgetting import loop
        from jaxinit.tools.timing import precompile
        optimizer, strategy, conv_impl, mode = spec
        t = time.perf_counter()
        sweep = loop.build_sweep(self.config(optimizer, strategy, conv_impl, mode), ds=self.dataset(),
                                 steps_per_epoch=self.plan.steps_per_epoch)
        info = precompile(sweep, mode.context, lax_map=strategy == "lax_map")
        return {"seconds": time.perf_counter() - t, "compile_s": info["compile_s"]}

    def strategy(self) -> tuple[str, str]:
        """The measured choice, else the library's default on this platform with the lax convolution."""
        if self.chosen is not None:
            return self.chosen
        from jaxinit.train.members import default_strategy
        return default_strategy(True), "lax"
