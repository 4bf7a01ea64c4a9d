"""Staged accelerator check: what the paper table will cost on this machine, in one command under 6 minutes.

    python -m experiments.accel_check --out DIR              # an accelerator (GPU/TPU): deadline 300 s
    python -m experiments.accel_check --out DIR --tiny       # any CPU: every stage at 1/16 width, seconds
    make accel-check ACCEL_PY=python3 RUNS=DIR               # the same, DIR/accel_check/accel.json

Stages (`jaxinit.tools.accel_stages`), each in its own guard (an error is recorded in one line and the
next stage runs; one that cannot start before the deadline is recorded as skipped): preflight (versions,
devices, memory, optional packages), train (the `paper` preset's 24 ResNet-9 members of one setting at
b = 128 with crop + flip, vmapped: compile, step time over 20 steps, memory; at each precision), strategy
(sequential, vmap + im2col, lax.map over members; the fastest library strategy is chosen), optimizers
(adam, muon), eval (CIFAR-10 and MNIST stand-ins loaded; one evaluation pass), checkpoint (one setting's
save to a temporary folder), benchmark (experiments.benchmark's accel cases while time remains) and
projection (the paper table's hours from the measured rates, printed last).

Writes DIR/accel.json only, rewritten after every stage and measurement; one printed line per
measurement. Needs jax, flax, optax, orbax-checkpoint and numpy: no tyro, matplotlib, tqdm or scipy.
Exit status 0 whatever the stages did (their status is in accel.json); 2 for bad input or a full-size
check on a CPU-only jax; 3 when the watchdog (--hard-limit) stopped a stage that ran far past the deadline.
Runtime: --tiny ~110 s with a cold compilation cache and 30-40 s with a warm one (jax's persistent cache,
as the tests set it) on the project's shared 2-core VM under a load of ~5; compiles are nearly all of it.
The full check has not run on an accelerator yet: its deadline budget is a guess until it has.
"""
from __future__ import annotations

import time

_T0 = time.perf_counter()      # the deadline counts from here: jax's import and device set-up included

import argparse
import os
import sys
import threading
from pathlib import Path


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):       # one line, exit 2 (the project's convention), not argparse's usage
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a number of seconds, got {text!r}") from None
    if not (value > 0 and value < 1e7):
        raise argparse.ArgumentTypeError(f"needs a number of seconds > 0, got {text!r}")
    return value


def _stages(text: str) -> tuple[str, ...]:
    from jaxinit.tools.accel import STAGES
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in names if s not in STAGES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"needs stage names from {','.join(STAGES)}, got {text!r}")
    return names


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m experiments.accel_check", description=__doc__, allow_abbrev=False,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("runs/accel_check"), metavar="DIR",
                   help="DIR/accel.json is written (default runs/accel_check)")
    p.add_argument("--tiny", action="store_true",
                   help="a narrow ResNet-8, 4 members, 2 steps: every stage on a CPU")
    p.add_argument("--deadline", type=_seconds, default=None, metavar="SECONDS",
                   help="no stage or measurement starts after this (default 300)")
    p.add_argument("--hard-limit", type=_seconds, default=None, metavar="SECONDS",
                   help="watchdog: write accel.json and exit 3 if still running (default deadline + 180)")
    p.add_argument("--stages", type=_stages, default=None, metavar="LIST",
                   help="comma-separated stages to run (default all; projection always runs)")
    p.add_argument("--allow-cpu", action="store_true", help="run the full-size check on a CPU-only jax (hours)")
    return p


def tiny_benchmark():
    """The benchmark stage's cases under --tiny: a narrow MLP, K = 1, 2 (seconds on a CPU)."""
    from jaxinit.tools.bench_config import BenchmarkConfig, BenchSection, PhaseSection
    return BenchmarkConfig(bench=BenchSection(models=("mlp",), members=(1, 2), strategies=("sequential", "vmap"),
                                              batch_size=16, mlp_width=16, mlp_depth=1, chunk=2, steps=1, repeats=1,
                                              max_epoch_s=10.0),
                           phase=PhaseSection(enabled=False))


def accel_benchmark():
    """`experiments.benchmark`'s accel preset (imported when the stage runs: an import error is its error)."""
    from experiments.benchmark import ACCEL
    return ACCEL


def start_watchdog(check, seconds: float) -> threading.Timer:
    """After ``seconds``: record the running stage as interrupted, write accel.json, exit 3 at once."""
    def fire():
        why = f"watchdog: still running after the hard limit of {seconds:g} s"
        try:
            check.abort(why)
        finally:
            print(f"accel_check: {why}; wrote {check.report.path}", flush=True)
            os._exit(3)
    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


LAST_CHECK = None      # the check `main` ran (its compile threads may outlive it: see below)


def main(argv: list[str] | None = None, t0: float | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser().parse_args(argv)
    except _UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from jaxinit.tools.accel import FULL, STAGES, TINY, Check
    from jaxinit.tools.accel_stages import projection_lines
    from jaxinit.tools.timing import Deadline
    plan = TINY if args.tiny else FULL
    deadline = Deadline(args.deadline or plan.deadline_s, t0=time.perf_counter() if t0 is None else t0)
    import jax
    if not args.tiny and jax.default_backend() == "cpu" and not args.allow_cpu:
        print("error: the full-size check needs a GPU/TPU and jax sees only the CPU: run it with a Python whose jax "
              "has the accelerator plugin (make accel-check ACCEL_PY=...), or pass --tiny", file=sys.stderr)
        return 2
    out = args.out.expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        print(f"error: {out}: cannot write there ({err.strerror or err})", file=sys.stderr)
        return 2
    global LAST_CHECK
    check = LAST_CHECK = Check(plan, out, deadline, bench_cfg=tiny_benchmark if args.tiny else accel_benchmark,
                               stages=args.stages or STAGES, argv=argv)
    timer = start_watchdog(check, args.hard_limit or deadline.seconds + 180.0)
    try:
        report = check.run()
    finally:
        timer.cancel()
    print(f"wrote {check.report.path}")
    for line in projection_lines(report):
        print(line)
    return 0


if __name__ == "__main__":
    code = main(t0=_T0)
    if LAST_CHECK is not None and LAST_CHECK.background_busy():
        # a compile the deadline cut is still running in a worker thread, and the interpreter would join it
        # at exit (minutes, past the machine's limit): accel.json is written, so leave now
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)
