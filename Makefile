# Two set-up commands (README): `make demo` and `make test`. Both build .venv from the package index.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test venv bench-accel figures clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

venv: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'

# Main job on embedded data: the initialization-memory study, cpu preset (< 5 min on 2 cores).
demo: venv
	$(BIN)/python -m experiments.forgetting --out runs/forgetting_cpu

test: venv
	$(BIN)/python -m pytest -q -m "not slow"

# One prepared command for an accelerator machine: benchmark JSON in < 5 minutes.
bench-accel: venv
	mkdir -p $(or $(OUT),runs)
	$(BIN)/python -m experiments.benchmark --out $(or $(OUT),runs)/bench_accel | tee $(or $(OUT),runs)/bench_accel.jsonl

clean:
	rm -rf runs .pytest_cache
