"""Test-session settings: the suite is dominated by XLA compiling small programs, not by running them.

- `--xla_backend_optimization_level=0`: LLVM spends less time on each compile (the suite runs ~25 % faster
  here); the programs and their floating-point semantics are the same (XLA:CPU does not enable fast-math),
  only the machine code is less optimised, which these tiny shapes do not notice. Experiments and the
  benchmark run at the default level.
- A persistent compilation cache shared by the two xdist workers (`.pytest_cache/jax`, git-ignored), so a
  program that several test files build (the smoke MLP's step, the theory kernels) compiles once.
- `JAXINIT_PROGRESS=0`: no progress bars or lines on stderr (`jaxinit.progress`; checks count stderr lines,
  the progress tests turn them back on).
Subprocesses started by tests inherit these through the environment; tests that force a device count append
their flag to `XLA_FLAGS` rather than replace it, so every process of a comparison compiles alike.
"""
import os
from pathlib import Path

_FLAG = "--xla_backend_optimization_level=0"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "jax"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
os.environ.setdefault("JAXINIT_PROGRESS", "0")
