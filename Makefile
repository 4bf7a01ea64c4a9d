# Two set-up commands (README): `make demo` and `make test`. Both build .venv from the package index.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow venv bench-accel accel-check clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

venv: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'

# Main job on embedded data: the initialization-memory study, cpu preset (~3 min on the AVX-512 2-core machine, ~5 on the AVX2 one).
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

# One prepared command for an accelerator machine (< 5 minutes): JSON lines in $(OUT)/bench_accel/benchmark.jsonl.
# It runs with that machine's own Python (ACCEL_PY), whose jax carries the CUDA/TPU plugin: the .venv above
# installs jax from the package index, CPU-only, and accelerator machines often have no index to reach.
# Needs jax, flax, optax, orbax-checkpoint, numpy, scipy there; on a CPU-only jax it stops with one line.
OUT ?= runs
ACCEL_PY ?= python3
bench-accel:
	$(ACCEL_PY) -m experiments.benchmark --preset accel --out $(OUT)/bench_accel

# A device session's one call: the benchmark above, then the first epoch of the forgetting `paper` preset
# (ResNet-9, b = 128, 8 sigma_w x 3 seeds per setting) on a random CIFAR-10 stand-in in the real format
# (the machine cannot download CIFAR-10): its run.json gives seconds per epoch, hence the full run's cost.
PAPER_SETTINGS ?= sgd,adam,muon
accel-check: bench-accel
	$(ACCEL_PY) -m jaxinit.tools.standin cifar10 $(OUT)/cifar10_standin
	$(ACCEL_PY) -m experiments.forgetting --preset paper --data.dir=$(OUT)/cifar10_standin \
		--sweep.optimizers=$(PAPER_SETTINGS) --train.epochs=1 --train.checkpoint_every=0 --out $(OUT)/paper_first_epoch

clean:
	rm -rf runs .pytest_cache
