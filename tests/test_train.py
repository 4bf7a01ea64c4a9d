"""Member-parallel training: strategies agree, nothing recompiles, divergence is contained, pairing."""
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.train import engine
from jaxinit.config import DataConfig, ModelConfig, OptConfig, SweepConfig, TrainConfig
from jaxinit.forgetting import ForgettingConfig
from jaxinit.train import evaluate as E
from jaxinit.forgetting import loop
from jaxinit.train import members as M

TINY = ForgettingConfig(
    data=DataConfig(name="gaussian", n_samples=600, dim=32, n_train=256, n_val=128),
    model=ModelConfig(name="mlp", width=16, depth=2, batchnorm=True),
    opt=OptConfig(setting_lr=("sgd=0.1", "adam=1e-2")),
    train=TrainConfig(batch_size=64, epochs=1, eval_batch_size=200),
    sweep=SweepConfig(sigma_w=(0.5, 1.5, 2.5), seeds=2, optimizers=("sgd", "adam")),
)


def _train(cfg, epochs=1):
    sweep = loop.build_sweep(cfg)
    states = engine.init_states(sweep)
    for epoch in range(1, epochs + 1):
        states, done = engine.train_epoch(sweep, states, epoch)
        assert done == sweep.steps_per_epoch
    return sweep, jax.device_get(M.stack(sweep.groups, states))


def _rows(sweep, stacked, batch, epoch):
    return E.evaluate_all(sweep.groups, M.unstack(sweep.groups, stacked), E.eval_splits(sweep.ds, batch), epoch)


def test_member_order_is_setting_seed_sigma():
    ms = M.make_members(("sgd", "adam"), (0.5, 2.0), 2)
    assert [(m.optimizer, m.seed, m.sigma_w) for m in ms[:4]] == [
        ("sgd", 0, 0.5), ("sgd", 0, 2.0), ("sgd", 1, 0.5), ("sgd", 1, 2.0)]
    assert [m.index for m in ms] == list(range(8))


@pytest.fixture(scope="module")
def vmap_reference():
    return _train(replace(TINY, train=replace(TINY.train, strategy="vmap")))


@pytest.mark.parametrize("strategy, chunk", [("sequential", 1), ("chunked", 4)])
def test_every_strategy_gives_the_same_numbers(strategy, chunk, vmap_reference):
    ref_sweep, ref = vmap_reference
    sweep, other = _train(replace(TINY, train=replace(TINY.train, strategy=strategy, chunk=chunk)))
    assert sweep.strategy == strategy
    assert [len(c.members) for c in sweep.groups["sgd"]] == ([1] * 6 if chunk == 1 else [4, 2])
    # Gaussian inputs on purpose: on digits, constant border pixels feed weights whose gradient BatchNorm
    # cancels exactly in exact arithmetic; Adam turns the ~1e-9 float residue there into lr-sized steps
    # that legitimately depend on the reduction order, so no strategy could match another there.
    for label in ("sgd", "adam"):
        for x, y in zip(jax.tree.leaves(ref[label].params), jax.tree.leaves(other[label].params)):
            np.testing.assert_allclose(x, y, rtol=1e-3, atol=5e-5)   # float32 reduction order only
        assert (ref[label].step == other[label].step).all() and (ref[label].step == 4).all()
    rows_ref = _rows(ref_sweep, ref, 500, 1)
    rows = _rows(sweep, other, 500, 1)
    for a, b in zip(rows_ref, rows):
        for key in ("train", "val", "test"):
            assert a[f"{key}_acc"] == b[f"{key}_acc"]
            assert a[f"{key}_loss"] == pytest.approx(b[f"{key}_loss"], rel=1e-4)


def test_no_recompilation_when_sigma_w_or_seed_change():
    cfg = replace(TINY, sweep=replace(TINY.sweep, optimizers=("sgd",)), train=replace(TINY.train, strategy="vmap"))
    sweep, _ = _train(cfg)
    fns, traces = sweep.groups["sgd"][0].fns, sweep.compiler.traces
    assert traces["init"] == 1 and traces["step"] == 1
    other = M.member_args([M.Member(i, "sgd", 0.2 + i, 7 + i) for i in range(6)], sweep.settings["sgd"], True)
    fns.init(other, sweep.x_calib)
    assert traces["init"] == 1                         # new scales and seeds: data, not a new program
    fewer = M.member_args([M.Member(i, "sgd", 0.2, 7 + i) for i in range(5)], sweep.settings["sgd"], True)
    fns.init(fewer, sweep.x_calib)
    assert traces["init"] == 2                         # the counter does see a new shape
    assert loop.build_sweep(cfg).compiler is not sweep.compiler   # each sweep owns its compiled functions


def test_settings_share_the_setting_free_compiled_functions():
    """eval, norms and the data order do not read the optimizer: one jitted function (one compile per shape)
    serves every setting, while init and step stay per setting."""
    cfg = replace(TINY, train=replace(TINY.train, strategy="vmap"))
    sweep = loop.build_sweep(cfg)
    sgd, adam = sweep.groups["sgd"][0].fns, sweep.groups["adam"][0].fns
    assert sgd.eval is adam.eval and sgd.norms is adam.norms and sgd.order is adam.order
    assert sgd.step is not adam.step and sgd.init is not adam.init
    states = engine.init_states(sweep)
    E.evaluate_all(sweep.groups, states, E.eval_splits(sweep.ds, 200), 0)
    before = sgd.eval._cache_size()
    E.evaluate_all(sweep.groups, states, E.eval_splits(sweep.ds, 200), 0)
    assert sgd.eval._cache_size() == before             # the second setting and the second pass compile nothing


def test_diverging_member_is_flagged_frozen_and_others_identical():
    base = replace(TINY, model=replace(TINY.model, batchnorm=False), train=replace(TINY.train, strategy="sequential"),
                   sweep=SweepConfig(sigma_w=(1.0, 1e25), seeds=1, optimizers=("sgd",)))
    sweep, st = _train(base, epochs=2)
    assert bool(st["sgd"].diverged[1]) and int(st["sgd"].diverged_step[1]) == 0 and int(st["sgd"].step[1]) == 0
    assert not bool(st["sgd"].diverged[0]) and int(st["sgd"].step[0]) == 8
    init = jax.device_get(M.stack(sweep.groups, engine.init_states(sweep)))
    for a, b in zip(jax.tree.leaves(st["sgd"].params), jax.tree.leaves(init["sgd"].params)):
        np.testing.assert_array_equal(a[1], b[1])             # frozen at its last finite state
    _, alone = _train(replace(base, sweep=replace(base.sweep, sigma_w=(1.0,))), epochs=2)
    for a, b in zip(jax.tree.leaves(st["sgd"].params), jax.tree.leaves(alone["sgd"].params)):
        np.testing.assert_array_equal(a[0], b[0])             # the healthy member did not notice
    rows = _rows(sweep, st, 500, 2)
    assert rows[1]["diverged"] is True and rows[1]["diverged_step"] == 0 and rows[0]["diverged"] is False


def test_members_are_paired_across_scales():
    cfg = replace(TINY, model=replace(TINY.model, batchnorm=False), sweep=replace(TINY.sweep, optimizers=("sgd",)))
    sweep = loop.build_sweep(cfg)
    st = jax.device_get(M.stack(sweep.groups, engine.init_states(sweep)))
    k = st["sgd"].params
    kernels = [x for path, x in jax.tree_util.tree_flatten_with_path(k)[0] if "kernel" in jax.tree_util.keystr(path)]
    assert kernels
    for w in kernels:   # members: (seed0: 0.5, 1.5, 2.5), (seed1: 0.5, 1.5, 2.5)
        np.testing.assert_allclose(w[1], 3.0 * w[0], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(w[2], 5.0 * w[0], rtol=1e-5, atol=1e-7)
        assert not np.allclose(w[3], w[0])              # another seed is another draw
    fns = sweep.groups["sgd"][0].fns
    perms = np.asarray(fns.order(jnp.asarray([0, 0, 1], jnp.uint32), jnp.int32(3), 256))
    assert (perms[0] == perms[1]).all() and not (perms[0] == perms[2]).all()
    assert sorted(perms[0].tolist()) == list(range(256))


def test_eval_rows_follow_the_schema(vmap_reference):
    sweep, st = vmap_reference
    rows = _rows(sweep, st, 100, 1)
    need = {"member", "optimizer", "sigma_w", "seed", "epoch", "step", "lr", "train_loss", "train_acc", "val_loss",
            "val_acc", "test_loss", "test_acc", "param_norm", "param_norm_layers", "diverged"}
    assert len(rows) == 12 and [r["member"] for r in rows] == list(range(12))
    for r in rows:
        assert need <= set(r) and 0.0 <= r["train_acc"] <= 1.0 and r["step"] == 4
        assert r["lr"] == pytest.approx(0.1 if r["optimizer"] == "sgd" else 1e-2)
        total = np.sqrt(sum(v ** 2 for v in r["param_norm_layers"].values()))
        assert r["param_norm"] == pytest.approx(total, rel=1e-5)


def test_eval_padding_counts_each_example_once(vmap_reference):
    sweep, st = vmap_reference
    a = _rows(sweep, st, 1000, 1)   # one batch
    b = _rows(sweep, st, 37, 1)     # ragged, padded
    for ra, rb in zip(a, b):
        assert ra["val_acc"] == rb["val_acc"] and ra["val_loss"] == pytest.approx(rb["val_loss"], rel=1e-5)


def test_pad_split_covers_every_example_once_in_one_batch_shape():
    x = jnp.arange(14.0).reshape(7, 2)
    y = jnp.arange(7, dtype=jnp.int32)
    split = E.pad_split(x, y, 3)
    assert split.x.shape == (9, 2) and split.n == 7 and split.batch == 3
    np.testing.assert_array_equal(np.asarray(split.y)[np.asarray(split.mask)], np.arange(7))
    assert E.pad_split(x, y, 50).batch == 7          # a batch never exceeds the split
