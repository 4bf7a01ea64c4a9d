"""Device check: the member-parallel ResNet-9 step on this machine, every variant in a process of its own.

    python3 -m experiments.accel_check --out DIR                 # a GPU: whole check <= --deadline (290 s)
    python3 -m experiments.accel_check --out DIR --tiny          # any CPU: every path at 1/16 width
    make accel-check ACCEL_PY=python3 RUNS=DIR                   # the same as the first, into DIR/accel_check

Variants, one at a time in order of promise (`jaxinit.tools.accel_plan`): preflight (versions, devices, the
measured bf16 / tf32 / float32 matrix-product rates), the batched step (gradient of the summed member
losses) with lax convolutions in bf16, with im2col convolutions, the sequential loop of the single-member
step, PyTorch's ResNet-9 at one member's batch and at all members' batch (where torch imports), tf32 and
float32 of the fastest bf16 variant, and the vmap of the single-member gradient last. Each runs in its
own process under its own limit (killed with its process group at the limit; the next one runs); the
parent imports no jax. Each measurement is one JSON line in DIR/accel.jsonl, written as it arrives:
compile seconds, the lowered program's weight-gradient convolutions (batch- or feature-grouped) and
dtypes, the compiled program's cuDNN / cuBLAS calls, median and minimum of >= 20 single timed steps,
program and device memory, FLOPs from the model (`jaxinit.tools.flops`), TFLOP/s against the nominal and
the measured peak of the variant's precision. At the end: the table (also DIR/table.md), PyTorch's
ratios and the paper table's projected hours. DIR/accel.log keeps the variants' own output;
DIR/xla_autotune.textproto (GPU) XLA's autotuning results, loaded by each later variant.

``--tiny`` adds two injected variants, one that hangs (killed at its 3 s limit) and one that aborts,
to show the others still record. Exit status 0 whatever the variants did; 2 for bad input or a full check
where no accelerator is visible (neither `nvidia-smi` nor a TPU's /dev/accel0; `--allow-cpu` runs it anyway).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from jaxinit.errors import ConfigError

_T0 = time.monotonic()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise ValueError(message)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a number of seconds, got {text!r}") from None
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"needs a number of seconds > 0 and < 1000000, got {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m experiments.accel_check", description=__doc__, allow_abbrev=False,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("runs/accel_check"), metavar="DIR",
                   help="accel.jsonl, accel.log, table.md (and xla_autotune.textproto) go here")
    p.add_argument("--tiny", action="store_true", help="ResNet-9 at 1/16 width, 3 members, 16 x 16: a CPU, seconds")
    p.add_argument("--deadline", type=_seconds, default=None, metavar="SECONDS",
                   help="no variant runs past this (default 290; --tiny 600)")
    p.add_argument("--only", default="", metavar="NAMES",
                   help="comma-separated variant names or kinds to run (preflight, jax, torch, ...)")
    p.add_argument("--allow-cpu", action="store_true", help="run the full-size check without an accelerator")
    return p


def accelerator_visible() -> bool:
    """Whether this machine shows a GPU or TPU, asked without jax: nvidia-smi, or a TPU's device file."""
    return shutil.which("nvidia-smi") is not None or Path("/dev/accel0").exists()


OUTPUTS = ("accel.jsonl", "accel.log", "table.md", "xla_autotune.textproto")


def check_out(out: Path) -> None:
    """``--out`` is no run directory and inside no run's own folders (`jaxinit.run.rundir.check_outside_runs`),
    and none of the check's files there is a directory (a ConfigError naming it)."""
    from jaxinit.run.rundir import check_outside_runs
    check_outside_runs(out, "the device check's output")
    for name in OUTPUTS:
        if (out / name).exists() and not (out / name).is_file():
            raise ConfigError(f"--out {out}: {name} there is not a file; choose another --out")


def main(argv: list[str] | None = None, t0: float | None = None) -> int:
    from jaxinit.tools.accel_plan import FULL, TINY
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser().parse_args(argv)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not args.tiny and not args.allow_cpu and not accelerator_visible():
        print("error: the full-size check needs a GPU or TPU and none is visible (no nvidia-smi, no /dev/accel0); "
              "pass --tiny for the CPU version, or --allow-cpu where jax sees an accelerator all the same",
              file=sys.stderr)
        return 2
    plan = TINY if args.tiny else FULL
    out = args.out.expanduser()
    try:
        check_out(out)
        out.mkdir(parents=True, exist_ok=True)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {out}: cannot write there ({err.strerror or err})", file=sys.stderr)
        return 2
    from jaxinit.tools import accel_report
    from jaxinit.tools.accel_runner import Check
    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    check = Check(plan, out, args.deadline or plan.deadline_s, _T0 if t0 is None else t0, only=only)
    records = check.run()
    text = accel_report.summary(records)
    (out / "table.md").write_text(text + "\n")
    print(text)
    print(f"wrote {out}/accel.jsonl, table.md, accel.log in {time.monotonic() - check.t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
