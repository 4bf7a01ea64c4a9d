"""The forgetting run loop as a library: in memory, a user's flax module, calibrated init, resume repair."""
import json
import os
from dataclasses import replace
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.train import engine
from jaxinit import forgetting, interrupt
from jaxinit.config import DataConfig, ModelConfig, OptConfig, SweepConfig, TrainConfig
from jaxinit.errors import ConfigError
from jaxinit.forgetting import loop
from jaxinit.train import members as M
from stops import interrupt_after

SMOKE = forgetting.preset("smoke")
TINY = replace(SMOKE, data=DataConfig(name="gaussian", n_samples=600, dim=16, n_train=256, n_val=128),
               model=ModelConfig(name="mlp", width=16, depth=1), train=TrainConfig(batch_size=64, epochs=3),
               opt=OptConfig(setting_lr=("sgd=0.05", "momentum=0.005")),
               sweep=SweepConfig(sigma_w=(0.5, 2.0), seeds=1, optimizers=("sgd", "momentum")))


class Tiny(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.relu(nn.Dense(16)(x.reshape(x.shape[0], -1)))
        return nn.Dense(10)(x)


def test_fit_in_memory_writes_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = forgetting.fit(SMOKE)
    assert list(tmp_path.iterdir()) == []
    assert set(res.summary["spread"]) == {"sgd", "adam"}
    assert isinstance(res.summary["spread"]["sgd"]["spread_pp"], float)
    assert len(res.rows) == 4 * 3 and res.states["sgd"].step.shape == (2,)


def test_a_users_flax_module_is_swept_over_sigma_w(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = replace(SMOKE, sweep=replace(SMOKE.sweep, optimizers=("sgd",)))
    sweep = loop.build_sweep(cfg, model=Tiny())
    init = jax.device_get(M.stack(sweep.groups, engine.init_states(sweep)))["sgd"].params
    np.testing.assert_allclose(init["Dense_0"]["kernel"][1], 4.0 * init["Dense_0"]["kernel"][0], rtol=1e-6)
    assert np.all(init["Dense_0"]["bias"] == 0)
    res = forgetting.fit(cfg, model=Tiny())
    assert [m["sigma_w"] for m in res.summary["members"]] == [0.5, 2.0]
    assert "Dense_1/kernel" in res.rows[0]["param_norm_layers"] and list(tmp_path.iterdir()) == []


def test_epoch0_evaluates_the_network_training_starts_from():
    cfg = replace(SMOKE, sweep=SweepConfig(sigma_w=(2.5,), seeds=1, optimizers=("sgd",)),
                  model=ModelConfig(name="mlp", width=64, depth=3), data=replace(SMOKE.data, name="mnist1d", n_train=0))
    sweep = loop.build_sweep(cfg)
    state = engine.init_states(sweep)["sgd"][0]
    model = loop.resolve_model(cfg, tuple(sweep.ds.input_shape), 10)[1]
    params, raw_state = model.init(jax.random.split(jax.random.key(0), 3)[0], jnp.float32(2.5))
    x, y = sweep.ds.x_val, sweep.ds.y_val

    def loss(model_state, train):
        logits, _ = model.apply(state.params, model_state, x, train=train)
        return float(jnp.mean(jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, y[:, None], 1)[:, 0]))
    batch_stats = loss(state.model_state, train=True)      # what a training step sees
    calibrated, uncalibrated = loss(state.model_state, False), loss(raw_state, False)
    assert calibrated == pytest.approx(batch_stats, rel=0.3)
    assert uncalibrated > 5 * calibrated                     # mean 0 / var 1 running stats: another network
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7), state.params, params)


def test_a_signal_mid_epoch_checkpoints_that_step_and_resume_is_bit_identical(tmp_path, monkeypatch):
    ref = forgetting.fit(TINY, tmp_path / "ref")
    out = tmp_path / "cut"
    interrupt_after(monkeypatch, 6)                       # 4 steps an epoch: stop in epoch 2, step 2
    with pytest.raises(interrupt.Interrupted):
        forgetting.fit(TINY, out)
    monkeypatch.undo()
    assert sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())[-1] == 6
    assert not (out / "summary.json").exists()
    res = forgetting.fit(TINY, out, resume=True)
    assert (out / "metrics.jsonl").read_bytes() == (tmp_path / "ref" / "metrics.jsonl").read_bytes()
    assert res.summary == ref.summary and (out / "summary.json").read_text() == (tmp_path / "ref" / "summary.json").read_text()


def _finished(tmp_path, name="run"):
    out = tmp_path / name
    res = forgetting.fit(TINY, out)
    return out, res, (out / "metrics.jsonl").read_bytes()


def test_truncated_last_line_is_regenerated(tmp_path):
    out, res, metrics = _finished(tmp_path)
    (out / "metrics.jsonl").write_bytes(metrics[:-40])
    again = forgetting.fit(TINY, out, resume=True)
    assert (out / "metrics.jsonl").read_bytes() == metrics and again.summary == res.summary


def test_damaged_middle_line_falls_back_to_an_older_checkpoint(tmp_path, capsys):
    out, res, metrics = _finished(tmp_path)
    lines = metrics.decode().splitlines(keepends=True)
    epoch1 = next(i for i, line in enumerate(lines) if json.loads(line)["epoch"] == 1)
    lines[epoch1] = '{"member": 0, "epoch": 1, "tra\n'
    (out / "metrics.jsonl").write_text("".join(lines))
    again = forgetting.fit(TINY, out, resume=True)
    err = capsys.readouterr().err
    assert "unreadable" in err and "resuming from checkpoint" in err
    assert (out / "metrics.jsonl").read_bytes() == metrics and again.summary == res.summary


def test_missing_metrics_file_is_an_error(tmp_path):
    out, _, _ = _finished(tmp_path)
    (out / "metrics.jsonl").unlink()
    with pytest.raises(ConfigError, match="metrics.jsonl is missing"):
        forgetting.fit(TINY, out, resume=True)


def _data_files(step_dir: Path):
    """The state's array data (orbax's OCDBT data files under .../d/), smallest first: the tree metadata
    (_METADATA) can be larger than any one data file and a flipped bit there need not touch the arrays."""
    return sorted((p for p in step_dir.rglob("*") if p.is_file() and p.stat().st_size > 64 and "state" in str(p)
                   and p.parent.name == "d"), key=lambda p: p.stat().st_size)


def test_a_flipped_bit_in_the_newest_checkpoint_falls_back_to_an_intact_one(tmp_path, capsys):
    out, res, metrics = _finished(tmp_path)
    newest = max((p for p in (out / "checkpoints").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    data = _data_files(newest)[-1]
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0x10
    data.write_bytes(bytes(blob))
    again = forgetting.fit(TINY, out, resume=True)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"checkpoint {newest.name}" in err[0] and "resuming from checkpoint" in err[0]
    assert (out / "metrics.jsonl").read_bytes() == metrics and again.summary == res.summary


def test_checkpoints_of_another_config_are_refused(tmp_path):
    out, _, _ = _finished(tmp_path)
    other = replace(TINY, sweep=replace(TINY.sweep, sigma_w=(0.5, 3.0)))
    with pytest.raises(ConfigError, match="belong to another config"):
        forgetting.fit(other, out, resume=True)


def test_a_fresh_fit_refuses_a_directory_with_results(tmp_path):
    out, _, _ = _finished(tmp_path)
    with pytest.raises(ConfigError, match="already holds"):
        forgetting.fit(TINY, out)


def test_momentum_members_sit_on_the_effective_step_clock():
    res = forgetting.fit(TINY)
    by = {(m["optimizer"], m["sigma_w"]): m for m in res.summary["members"]}
    sgd, mom = by["sgd", 0.5]["clocks"], by["momentum", 0.5]["clocks"]
    # momentum runs at lr 0.005 = (1 - 0.9) x sgd's 0.05: the same effective step, the same clocks
    assert mom["T_SGD"] == pytest.approx(sgd["T_SGD"], rel=1e-6) and mom["T_adapt"] == pytest.approx(sgd["T_adapt"], rel=1e-6)
    assert sgd["T_adapt"] == pytest.approx(0.05 * 12, rel=1e-6)          # 4 steps x 3 epochs at eta 0.05
    assert os.environ.get("JAX_ENABLE_X64") in (None, "0", "false")


def test_a_full_disk_while_checkpointing_is_one_line(tmp_path, monkeypatch):
    import errno
    import orbax.checkpoint as ocp

    def no_space(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(ocp.CheckpointManager, "save", no_space)
    with pytest.raises(ConfigError, match="no space left on the device") as err:
        forgetting.fit(TINY, tmp_path / "full")
    assert "\n" not in str(err.value)
