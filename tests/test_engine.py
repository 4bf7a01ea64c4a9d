"""The member-parallel engine (`jaxinit.train`): traced hyperparameters compile once, a swept learning rate
equals the same rate run alone, and the forgetting study's smoke run is unchanged by the move onto it."""
import hashlib
import json
import os
import platform
from dataclasses import replace
from pathlib import Path

import jax
import numpy as np
import pytest

from nested import assert_close
from jaxinit import forgetting
from jaxinit.config import DataConfig, ModelConfig, OptConfig, SweepConfig, TrainConfig
from jaxinit.errors import ConfigError
from jaxinit.forgetting import ForgettingConfig, loop

GOLDEN = Path(__file__).parent / "golden" / "forgetting_smoke"

TINY = ForgettingConfig(
    data=DataConfig(name="gaussian", n_samples=600, dim=32, n_train=256, n_val=128),
    model=ModelConfig(name="mlp", width=16, depth=2, batchnorm=True),
    opt=OptConfig(setting_lr=("sgd=0.1",)),
    train=TrainConfig(batch_size=64, epochs=2, eval_batch_size=200, strategy="chunked", chunk=2, checkpoint_every=0),
    sweep=SweepConfig(sigma_w=(0.5, 2.0), seeds=1, optimizers=("sgd",)),
)
LRS = (0.01, 0.03, 0.1, 0.3)


@pytest.fixture(scope="module")
def lr_sweep():
    return forgetting.fit(replace(TINY, sweep=replace(TINY.sweep, lr=LRS)), progress=False)


def test_a_sweep_over_four_learning_rates_compiles_the_step_once(lr_sweep):
    sweep = lr_sweep.sweep
    assert list(sweep.groups) == [f"sgd@{lr:g}" for lr in LRS]
    assert sweep.compiler.traces["step"] == 1 and sweep.compiler.traces["init"] == 1
    steps = {c.fns.step for chunks in sweep.groups.values() for c in chunks}
    assert len(steps) == 1                                   # one jitted function serves the four groups
    by_group = {}
    for r in lr_sweep.rows:
        if r["epoch"] == 2:
            by_group.setdefault(r["optimizer"], set()).add(r["lr"])
    assert by_group == {f"sgd@{lr:g}": {float(np.float32(lr))} for lr in LRS}   # each member at its own rate
    finals = [np.asarray(jax.tree.leaves(lr_sweep.states[g].params)[0]) for g in sweep.groups]
    assert all(not np.array_equal(a, b) for a, b in zip(finals, finals[1:]))
    assert set(lr_sweep.summary["spread"]) == set(sweep.groups)   # the analysis reads a group per rate


def test_a_swept_learning_rate_equals_that_rate_run_alone(lr_sweep):
    alone = forgetting.fit(replace(TINY, opt=OptConfig(setting_lr=("sgd=0.03",))), progress=False)
    swept = lr_sweep.states["sgd@0.03"]
    for a, b in zip(jax.tree.leaves(swept.params), jax.tree.leaves(alone.states["sgd"].params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))   # traced or constant: the same float code
    rows = {(r["epoch"], r["sigma_w"]): r["val_loss"] for r in lr_sweep.rows if r["optimizer"] == "sgd@0.03"}
    assert rows == {(r["epoch"], r["sigma_w"]): r["val_loss"] for r in alone.rows}


@pytest.mark.parametrize("lrs, why", [((0.1, 0.1), "equal in float32"), ((0.1, -1.0), "finite and > 0")])
def test_a_bad_learning_rate_grid_is_one_line(lrs, why):
    with pytest.raises(ConfigError, match=why):
        loop.build_sweep(replace(TINY, sweep=replace(TINY.sweep, lr=lrs)))


def _machine() -> dict:
    """What decides XLA's float code for this test: the jax build, the CPU's vector extensions and the
    XLA flags that change code generation (the suite's ``--xla_backend_optimization_level=0``, conftest)."""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        flags = ""
    isa = sorted(f for f in flags.split() if f.startswith(("avx", "fma", "sse4")))
    xla = sorted(f for f in os.environ.get("XLA_FLAGS", "").split() if "optimization_level" in f or "cpu" in f)
    return {"jax": jax.__version__, "machine": platform.machine(), "backend": jax.default_backend(), "isa": isa,
            "xla_flags": xla}


def test_the_smoke_preset_writes_what_it_wrote_before_the_engine(tmp_path):
    """summary.json and metrics.jsonl of `--preset smoke` against those written by the code before the
    engine (commit d4a7362 through the command line, with this suite's XLA flags, on the machine recorded in
    machine.json): byte for byte on that kind of machine, and selections, epochs and counts exactly, floats
    to 1e-3, on another (training is float-order chaotic: the optimisation level alone moves the Adam
    member's spread by 0.3 pp)."""
    res = forgetting.fit(forgetting.preset("smoke"), tmp_path / "smoke", progress=False)
    assert res.summary is not None
    recorded = json.loads((GOLDEN / "machine.json").read_text())
    for name in ("summary.json", "metrics.jsonl"):
        new, old = (tmp_path / "smoke" / name).read_bytes(), (GOLDEN / name).read_bytes()
        if recorded == _machine():
            assert hashlib.sha256(new).hexdigest() == hashlib.sha256(old).hexdigest(), name
        else:
            lines = lambda b: [json.loads(x) for x in b.decode().splitlines() if x.strip()]
            assert_close(lines(new), lines(old), name, rel=1e-3, abs_=1e-4)
