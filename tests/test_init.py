"""Scaled initializers: base stds, sigma_w pairing, vmap == loop, no recompilation."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError
from jaxinit.init import (BASE_INITS, BIAS_STREAM, base_draw, base_std, fill_kernels, is_bias, is_kernel,
                          scale_kernels, scale_params, zero_drawn)
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
    stats = s1["batch_stats"]["bn_0"] if cfg.name == "mlp" else s1["batch_stats"]["stem"]["bn"]
    assert np.all(np.asarray(stats["mean"]) == 0) and np.all(np.asarray(stats["var"]) == 1)


# Entries of the pre-flax implementation (git 4a44220) at key(0), sigma_w = 1, input (8, 8, 1): the
# draws depend on every kernel's path and size (flatten order), so these pin the sub-module names.
PINNED = [
    (MLP, ("dense_0", "kernel"), (0, slice(0, 3)), [0.28684533, 0.3580196, -0.07664939]),
    (MLP, ("head", "kernel"), (0, slice(0, 3)), [0.94758666, 0.19430527, -0.65913445]),
    (RESNET, ("stage2_block0", "unit1", "conv", "kernel"), (0, 0, 0, slice(0, 3)), [-0.039639443, 0.3239274, -0.2106917]),
    (RESNET, ("stem", "conv", "kernel"), (0, 0, 0, slice(0, 3)), [-0.37190527, -0.3258914, -0.59436816]),
    (ModelConfig(name="resnet9", width_mult=0.125), ("res3b", "conv", "kernel"), (0, 0, 0, slice(0, 3)),
     [0.12803909, 0.109695144, -0.042785157]),
]


@pytest.mark.parametrize("cfg, path, index, expected", PINNED)
def test_base_draws_equal_the_pre_flax_implementation(cfg, path, index, expected):
    params, _ = jax.jit(make_model(cfg, (8, 8, 1), 10).init)(jax.random.key(0), 1.0)
    for name in path:
        params = params[name]
    np.testing.assert_allclose(np.asarray(params[index]), expected, rtol=1e-5)   # erf_inv rounding only


def test_kernels_are_sliced_from_one_draw_in_sorted_path_order():
    tree = {"b": {"kernel": jnp.zeros((4, 3))}, "a": {"kernel": jnp.zeros((2, 3)), "bias": jnp.zeros((3,))}}
    out = fill_kernels(jax.random.key(5), tree, "lecun_normal")
    z = jax.random.normal(jax.random.key(5), (18,), jnp.float32)
    np.testing.assert_allclose(out["a"]["kernel"], z[:6].reshape(2, 3) / math.sqrt(2), rtol=1e-6)
    np.testing.assert_allclose(out["b"]["kernel"], z[6:].reshape(4, 3) / math.sqrt(4), rtol=1e-6)


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


def test_bias_predicate_skips_normaliser_shifts():
    tree = {"dense": {"kernel": jnp.ones((2, 3)), "bias": jnp.ones((3,))}, "bn": {"scale": jnp.ones(3), "bias": jnp.ones(3)},
            "pos": {"bias": jnp.ones((4, 3))}}
    out = zero_drawn(tree)
    assert np.all(np.asarray(out["dense"]["kernel"]) == 0) and np.all(np.asarray(out["dense"]["bias"]) == 0)
    assert np.all(np.asarray(out["pos"]["bias"]) == 0)
    assert np.all(np.asarray(out["bn"]["bias"]) == 1) and np.all(np.asarray(out["bn"]["scale"]) == 1)
    assert is_bias((jax.tree_util.DictKey("bias"),), {"kernel", "bias"})
    assert not is_bias((jax.tree_util.DictKey("bias"),), {"scale", "bias"})


def test_normal_biases_are_an_independent_stream_and_leave_kernels_unchanged():
    tree = {"d": {"kernel": jnp.zeros((64, 256)), "bias": jnp.zeros((256,))}, "bn": {"scale": jnp.ones(4), "bias": jnp.zeros(4)}}
    zeros = base_draw(jax.random.key(2), tree, "he_normal", "zeros")
    normal = base_draw(jax.random.key(2), tree, "he_normal", "normal")
    np.testing.assert_array_equal(zeros["d"]["kernel"], normal["d"]["kernel"])   # same kernels either way
    np.testing.assert_array_equal(zeros["d"]["kernel"], fill_kernels(jax.random.key(2), tree, "he_normal")["d"]["kernel"])
    b = np.asarray(normal["d"]["bias"])
    assert np.all(np.asarray(zeros["d"]["bias"]) == 0) and 0.8 < b.std() < 1.2
    np.testing.assert_array_equal(b, jax.random.normal(jax.random.fold_in(jax.random.key(2), BIAS_STREAM), (256,)))
    assert np.all(np.asarray(normal["bn"]["bias"]) == 0)                         # a normaliser's shift stays
    scaled = scale_params(normal, 2.0, 0.5)
    np.testing.assert_allclose(scaled["d"]["bias"], 0.5 * b)
    np.testing.assert_allclose(scaled["d"]["kernel"], 2.0 * np.asarray(normal["d"]["kernel"]))
    np.testing.assert_array_equal(scaled["bn"]["scale"], normal["bn"]["scale"])
    with pytest.raises(ConfigError, match="bias_init"):
        base_draw(jax.random.key(2), tree, "he_normal", "uniform")


def test_fill_kernels_only_touches_kernels():
    tree = {"d": {"kernel": jnp.zeros((64, 32)), "bias": jnp.full((32,), 5.0)}}
    out = fill_kernels(jax.random.key(0), tree, "he_normal")
    assert float(jnp.std(out["d"]["kernel"])) > 0.1 and np.all(np.asarray(out["d"]["bias"]) == 5.0)


def test_unknown_base_init_is_config_error():
    with pytest.raises(ConfigError, match="base_init"):
        make_model(ModelConfig(name="mlp", base_init="orthogonal"), (8,), 2)
    assert set(BASE_INITS) == {"he_normal", "lecun_normal", "glorot_normal", "normal_fan_in"}
