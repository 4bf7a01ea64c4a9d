"""Scaled initializers: base stds, sigma_w pairing, vmap == loop, no recompilation."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.config import ConfigError, ModelConfig
from jaxinit.init import BASE_INITS, base_std, fill_kernels, is_kernel, scale_kernels
from jaxinit.models import make_model

MLP = ModelConfig(name="mlp", width=16, depth=2, batchnorm=True)
RESNET = ModelConfig(name="resnet20", width_mult=0.25)


def _kernels(params):
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {jax.tree_util.keystr(p): leaf for p, leaf in flat if is_kernel(p)}


def _others(params):
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {jax.tree_util.keystr(p): leaf for p, leaf in flat if not is_kernel(p)}


@pytest.mark.parametrize("base, expected_var", [
    ("he_normal", lambda fi, fo: 2 / fi), ("lecun_normal", lambda fi, fo: 1 / fi),
    ("glorot_normal", lambda fi, fo: 2 / (fi + fo)), ("normal_fan_in", lambda fi, fo: 1 / fi)])
def test_base_std_formula(base, expected_var):
    assert math.isclose(base_std(base, (300, 100)), math.sqrt(expected_var(300, 100)))
    # conv: fan = receptive field x channels
    assert math.isclose(base_std(base, (3, 3, 8, 16)), math.sqrt(expected_var(72, 144)))


def test_he_normal_kernel_std_scales_with_sigma_w():
    model = make_model(ModelConfig(name="mlp", width=512, depth=1, batchnorm=False), (256,), 10)
    for sigma_w in (0.5, 2.0):
        params, _ = model.init(jax.random.key(3), sigma_w)
        w = np.asarray(params["dense_0"]["kernel"])      # 131k entries: std known to ~0.2 %
        assert abs(w.std() / (sigma_w * math.sqrt(2 / 256)) - 1) < 0.02
        assert abs(w.mean()) < 0.01 * w.std()
        assert np.all(np.asarray(params["dense_0"]["bias"]) == 0)


def test_conv_kernel_std_uses_receptive_field():
    model = make_model(ModelConfig(name="resnet9", width_mult=0.25, base_init="normal_fan_in"), (8, 8, 3), 10)
    params, _ = jax.jit(model.init)(jax.random.key(0), 1.5)
    w = np.asarray(params["res3a"]["conv"]["kernel"])     # (3, 3, 128, 128): fan_in 1152
    assert w.shape == (3, 3, 128, 128)
    assert abs(w.std() / (1.5 / math.sqrt(9 * 128)) - 1) < 0.02


def test_kernels_are_independent_draws():
    init = jax.jit(make_model(RESNET, (8, 8, 1), 10).init)
    params, _ = init(jax.random.key(0), 1.0)
    a = params["stage1_block0"]["unit1"]["conv"]["kernel"]
    b = params["stage1_block0"]["unit2"]["conv"]["kernel"]
    assert a.shape == b.shape and abs(np.corrcoef(np.ravel(a), np.ravel(b))[0, 1]) < 0.2
    other, _ = init(jax.random.key(1), 1.0)
    assert not np.allclose(a, other["stage1_block0"]["unit1"]["conv"]["kernel"])


@pytest.mark.parametrize("cfg", [MLP, RESNET], ids=["mlp", "resnet20"])
def test_pairing_kernels_proportional_others_equal(cfg):
    model = make_model(cfg, (8, 8, 1), 10)
    p1, s1 = model.init(jax.random.key(0), 1.0)
    p2, s2 = model.init(jax.random.key(0), 2.0)
    k1, k2 = _kernels(p1), _kernels(p2)
    assert k1 and set(k1) == set(k2)
    for name in k1:
        np.testing.assert_array_equal(np.asarray(k2[name]), 2 * np.asarray(k1[name]))
    o1, o2 = _others(p1), _others(p2)
    assert o1, "BN scales/biases expected"
    for name in o1:
        np.testing.assert_array_equal(o1[name], o2[name])
    jax.tree.map(np.testing.assert_array_equal, s1, s2)
    bn = p1["bn_0"] if cfg.name == "mlp" else p1["stem"]["bn"]
    assert np.all(np.asarray(bn["scale"]) == 1) and np.all(np.asarray(bn["bias"]) == 0)


def test_vmap_init_over_keys_and_sigma_equals_loop():
    model = make_model(RESNET, (8, 8, 1), 10)
    keys = jax.random.split(jax.random.key(7), 3)
    sigmas = jnp.array([0.5, 1.0, 2.5])
    stacked, stacked_state = jax.jit(jax.vmap(model.init))(keys, sigmas)
    init = jax.jit(model.init)
    for i in range(3):
        params, state = init(keys[i], sigmas[i])
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a[i], b, rtol=1e-6, atol=0), stacked, params)
        jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[i], b), stacked_state, state)


def test_changing_sigma_w_never_recompiles():
    model = make_model(RESNET, (8, 8, 1), 10)
    traces = []
    x = jnp.asarray(np.random.default_rng(1).standard_normal((2, 8, 8, 1)), jnp.float32)

    @jax.jit
    def init_apply(key, sigma_w):
        traces.append(1)   # Python side effect: runs once per trace
        params, state = model.init(key, sigma_w)
        return model.apply(params, state, x, train=True)[0]

    # Swept values arrive as float32 arrays (a Python float is a different, weak type: one more trace).
    outs = [init_apply(jax.random.key(0), jnp.float32(s)) for s in (0.1, 1.0, 2.5, 0.3)]
    assert len(traces) == 1
    # BN after every conv divides sigma_w out; only the (scaled, un-normalised) head keeps it
    np.testing.assert_allclose(outs[2], 2.5 * outs[1], rtol=1e-3, atol=1e-4)
    assert not np.allclose(outs[0], outs[1])


def test_scale_kernels_on_stacked_tree_and_predicate():
    tree = {"a": {"kernel": jnp.ones((3, 4, 5)), "bias": jnp.ones((3, 5))}, "bn": {"scale": jnp.ones((3, 5))}}
    out = scale_kernels(tree, 3.0)
    assert float(out["a"]["kernel"][0, 0, 0]) == 3.0
    assert float(out["a"]["bias"][0, 0]) == 1.0 and float(out["bn"]["scale"][0, 0]) == 1.0
    assert not is_kernel(())


def test_fill_kernels_only_touches_kernels():
    tree = {"d": {"kernel": jnp.zeros((64, 32)), "bias": jnp.full((32,), 5.0)}}
    out = fill_kernels(jax.random.key(0), tree, "he_normal")
    assert float(jnp.std(out["d"]["kernel"])) > 0.1 and np.all(np.asarray(out["d"]["bias"]) == 5.0)


def test_unknown_base_init_is_config_error():
    with pytest.raises(ConfigError, match="base_init"):
        make_model(ModelConfig(name="mlp", base_init="orthogonal"), (8,), 2)
    assert set(BASE_INITS) == {"he_normal", "lecun_normal", "glorot_normal", "normal_fan_in"}
