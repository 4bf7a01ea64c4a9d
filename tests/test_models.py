"""Models: shapes on every input kind, BatchNorm state, jit == eager, im2col == lax, names, registry."""
import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxinit.models as models
from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError
from jaxinit.models import Model, from_flax, layers, make_model, make_module
from jaxinit.models.resnet import make_cifar_resnet

INPUTS = {"digits": (8, 8, 1), "mnist": (28, 28, 1), "cifar": (32, 32, 3), "mnist1d": (40, 1)}
TINY = {
    "mlp_bn": ModelConfig(name="mlp", width=16, depth=2, batchnorm=True),
    "mlp": ModelConfig(name="mlp", width=16, depth=2, batchnorm=False, activation="tanh"),
    "resnet9": ModelConfig(name="resnet9", width_mult=0.125),          # 8-16-32-64 channels
    "resnet20": ModelConfig(name="resnet20", width_mult=0.25),         # 4-8-16 channels
}
N_CLASSES = 10
B = 4


def _x(shape, batch=B, seed=1):
    # numpy, not jax.random: every new shape would compile another threefry kernel
    return jnp.asarray(np.random.default_rng(seed).standard_normal((batch, *shape)), jnp.float32)


def _resnet8(shape, **overrides):
    """ResNet-(6n+2) with n = 1: the ResNet-20 code path at a third of the compile time."""
    cfg = dataclasses.replace(TINY["resnet20"], **overrides)
    return from_flax(make_cifar_resnet(cfg, shape, N_CLASSES, depth=8), shape, cfg.base_init)


def _model(name, shape):
    return _resnet8(shape) if name == "resnet8" else make_model(TINY[name], shape, N_CLASSES)


def _train_then_eval(model: Model):
    """One jitted program: init, a train-mode pass, an eval pass with the updated state."""
    def run(key, sigma_w, x):
        params, state = model.init(key, sigma_w)
        logits_train, new_state = model.apply(params, state, x, train=True)
        logits_eval, eval_state = model.apply(params, new_state, x, train=False)
        return state, logits_train, new_state, logits_eval, eval_state
    return jax.jit(run)


@pytest.mark.parametrize("input_kind", INPUTS)
@pytest.mark.parametrize("model_name", ["mlp_bn", "mlp", "resnet9", "resnet8"])
def test_forward_every_model_every_input(model_name, input_kind):
    shape = INPUTS[input_kind]
    batchnorm = TINY["resnet20" if model_name == "resnet8" else model_name].batchnorm
    model = _model(model_name, shape)
    with jax.numpy_rank_promotion("raise"):
        state0, logits_train, new_state, logits_eval, eval_state = _train_then_eval(model)(
            jax.random.key(0), jnp.float32(1.0), _x(shape))
    for logits in (logits_train, logits_eval):
        assert logits.shape == (B, N_CLASSES) and bool(jnp.all(jnp.isfinite(logits)))
    assert float(jnp.std(logits_train)) > 0
    if batchnorm:
        assert set(state0) == {"batch_stats"}
        changed = jax.tree.map(lambda a, b: not np.allclose(a, b), state0, new_state)
        assert all(jax.tree.leaves(changed)), "train mode must update every running statistic"
        jax.tree.map(np.testing.assert_array_equal, new_state, eval_state)   # eval leaves it alone
    else:
        assert state0 == {} and new_state == {} and eval_state == {}


def test_parameter_and_state_names_are_the_pre_flax_ones():
    """The names fix the base draws (flatten order) and Muon's routing (`head`)."""
    mlp = jax.eval_shape(make_model(TINY["mlp_bn"], (8,), N_CLASSES).init, jax.random.key(0), 1.0)
    assert set(mlp[0]) == {"dense_0", "bn_0", "dense_1", "bn_1", "head"}
    assert set(mlp[1]["batch_stats"]) == {"bn_0", "bn_1"} and set(mlp[1]["batch_stats"]["bn_0"]) == {"mean", "var"}
    assert set(mlp[0]["bn_0"]) == {"scale", "bias"} and set(mlp[0]["dense_0"]) == {"kernel"}
    r9 = jax.eval_shape(make_model(TINY["resnet9"], (8, 8, 1), N_CLASSES).init, jax.random.key(0), 1.0)
    assert set(r9[0]) == {"prep", "layer1", "res1a", "res1b", "layer2", "layer3", "res3a", "res3b", "head"}
    assert set(r9[0]["res1a"]) == {"conv", "bn"} and set(r9[1]["batch_stats"]["res1a"]) == {"bn"}
    r20 = jax.eval_shape(make_model(TINY["resnet20"], (8, 8, 1), N_CLASSES).init, jax.random.key(0), 1.0)
    blocks = {f"stage{s}_block{b}" for s in (1, 2, 3) for b in range(3)}
    assert set(r20[0]) == blocks | {"stem", "head"} and set(r20[0]["stage2_block0"]) == {"unit1", "unit2"}


def test_resnet9_width_mult_channels():
    model = make_model(TINY["resnet9"], (32, 32, 3), N_CLASSES)
    shapes = jax.eval_shape(model.init, jax.random.key(0), 1.0)[0]
    out_channels = [shapes[u]["conv"]["kernel"].shape[-1] for u in ("prep", "layer1", "layer2", "layer3")]
    assert out_channels == [8, 16, 32, 64]
    assert shapes["head"]["kernel"].shape == (64, N_CLASSES) and "bias" not in shapes["head"]


@pytest.mark.parametrize("name", ["resnet9", "resnet20"])
def test_conv_nets_without_batchnorm_have_conv_biases_and_empty_state(name):
    model = make_model(ModelConfig(name=name, width_mult=0.125, batchnorm=False), (8, 8, 1), N_CLASSES)
    params, state = jax.eval_shape(model.init, jax.random.key(0), 1.0)
    assert state == {}
    first = params["prep"] if name == "resnet9" else params["stem"]
    assert "bn" not in first and first["conv"]["bias"].shape == first["conv"]["kernel"].shape[-1:]
    out, new_state = jax.eval_shape(lambda p, x: model.apply(p, {}, x, train=True), params, _x((8, 8, 1)))
    assert out.shape == (B, N_CLASSES) and new_state == {}


@pytest.mark.parametrize("depth", [8, 20, 32, 44, 56, 110])
def test_cifar_resnet_depths_by_shape(depth):
    cfg = ModelConfig(name=f"resnet{depth}", width_mult=0.25)
    model = make_model(cfg, (32, 32, 3), N_CLASSES)
    params, state = jax.eval_shape(model.init, jax.random.key(0), 1.0)
    out, _ = jax.eval_shape(lambda p, s, x: model.apply(p, s, x, train=True), params, state, _x((32, 32, 3)))
    convs = [p for p, _ in jax.tree_util.tree_flatten_with_path(params)[0] if "conv" in jax.tree_util.keystr(p)]
    assert len(convs) + 1 == depth            # 6n + 1 convs (no shortcut convs: option A) + the head
    assert out.shape == (B, N_CLASSES)
    assert params["stage3_block0"]["unit1"]["conv"]["kernel"].shape == (3, 3, 8, 16)


def test_conv_models_are_listed_for_the_run_loop():
    assert set(models.CONV_MODELS) == {"resnet8", "resnet9", "resnet20", "resnet32", "resnet44", "resnet56", "resnet110", "cnn"}
    assert set(models.CONV_MODELS) <= set(models.BUILDERS) and "mlp" not in models.CONV_MODELS


def test_batchnorm_eval_uses_running_statistics():
    model = make_model(TINY["mlp_bn"], (8, 8, 1), N_CLASSES)
    params, state = model.init(jax.random.key(0), 1.0)
    x = _x((8, 8, 1), batch=8) * 3.0 + 1.0
    _, new_state = model.apply(params, state, x, train=True)
    eval_fresh, _ = model.apply(params, state, x, train=False)
    eval_new, _ = model.apply(params, new_state, x, train=False)
    assert not np.allclose(eval_fresh, eval_new, atol=1e-3)         # eval reads the state
    half_eval, _ = model.apply(params, new_state, x[:4], train=False)
    np.testing.assert_allclose(half_eval, eval_new[:4], rtol=1e-5, atol=1e-6)  # per-example in eval
    half_train, _ = model.apply(params, state, x[:4], train=True)
    full_train, _ = model.apply(params, state, x, train=True)
    assert not np.allclose(half_train, full_train[:4], atol=1e-3)    # batch statistics in train
    # momentum 0.9 (PyTorch's 0.1), two-pass biased variance: the first layer's statistics by hand
    h = np.asarray(x.reshape(8, -1) @ params["dense_0"]["kernel"], np.float64)
    stats = new_state["batch_stats"]["bn_0"]
    np.testing.assert_allclose(stats["mean"], 0.1 * h.mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats["var"], 0.9 + 0.1 * h.var(0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model_name, input_kind", [("resnet8", "mnist1d"), ("mlp_bn", "digits")])
def test_jit_equals_eager(model_name, input_kind):
    model = _model(model_name, INPUTS[input_kind])
    params, state = model.init(jax.random.key(0), 1.3)
    x = _x(INPUTS[input_kind])
    for train in (True, False):
        eager = model.apply(params, state, x, train=train)
        jitted = jax.jit(lambda p, s, x: model.apply(p, s, x, train=train))(params, state, x)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), eager, jitted)


def test_module_is_plain_flax():
    """A notebook can use the module without `Model`: same logits as `Model.apply`."""
    module = make_module(TINY["resnet9"], (8, 8, 1), N_CLASSES)
    assert isinstance(module, nn.Module)
    model = from_flax(module, (8, 8, 1))
    params, state = model.init(jax.random.key(0), 0.8)
    x = _x((8, 8, 1))
    ours, _ = model.apply(params, state, x, train=False)
    np.testing.assert_array_equal(module.apply({"params": params, **state}, x), ours)


@pytest.mark.parametrize("x_shape, window, stride", [
    ((2, 7, 7, 3), (3, 3), 1), ((2, 8, 6, 2), (3, 3), 2), ((2, 9, 4), (3,), 1), ((2, 10, 4), (3,), 2),
    ((2, 5, 5, 4), (1, 1), 2)])
def test_im2col_conv_equals_lax_conv(x_shape, window, stride):
    kernel = _x((*window, x_shape[-1], 5), batch=1, seed=0)[0]
    x = _x(x_shape[1:], batch=x_shape[0])
    conv = jax.jit(layers.conv, static_argnames=("stride", "impl"))
    ref, out = (conv(x, kernel, stride=stride, impl=impl) for impl in ("lax", "im2col"))
    assert ref.shape == (x_shape[0], *(-(-n // stride) for n in x_shape[1:-1]), 5)   # 'SAME': ceil(n / s)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert float(jnp.abs(ref).max()) > 0.1


def test_im2col_model_equals_lax_model():
    shape, results = INPUTS["mnist1d"], []
    for impl in ("lax", "im2col"):
        model = _resnet8(shape, conv_impl=impl)
        assert model.module.conv_impl == impl
        results.append(_train_then_eval(model)(jax.random.key(0), jnp.float32(0.7), _x(shape))[1:])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), *results)


def test_mlp_pooled_activation_emits_k_pre_activations_per_unit():
    model = make_model(ModelConfig(name="mlp", width=8, depth=2, activation="relu+maxpool"), (6,), N_CLASSES)
    params, _ = jax.eval_shape(model.init, jax.random.key(0), 1.0)
    assert params["dense_0"]["kernel"].shape == (6, 16) and params["dense_1"]["kernel"].shape == (8, 16)
    assert params["head"]["kernel"].shape == (8, N_CLASSES)


@pytest.mark.parametrize("model_name", ["mlp_bn", "resnet8"])
def test_one_sgd_step_lowers_loss(model_name):
    shape = INPUTS["mnist1d"]
    model = _model(model_name, shape)
    x, y = _x(shape, batch=8), jnp.arange(8) % N_CLASSES

    def loss(params, state):
        logits, _ = model.apply(params, state, x, train=True)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    @jax.jit
    def before_after(key):
        params, state = model.init(key, 1.0)
        value, grads = jax.value_and_grad(loss)(params, state)
        stepped = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
        return value, loss(stepped, state), _global_norm(grads)

    before, after, grad_norm = before_after(jax.random.key(0))
    assert float(grad_norm) > 0
    assert float(after) < float(before) - 1e-4


def _global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(tree)))


@pytest.mark.parametrize("overrides, shape, match", [
    ({"name": "lenet"}, (8, 8, 1), "model.name"),
    ({"name": "resnet20", "conv_impl": "fft"}, (8, 8, 1), "conv_impl"),
    ({"name": "resnet9", "width_mult": 0.0}, (8, 8, 1), "width_mult"),
    ({"name": "resnet20"}, (64,), "spatial"),
    ({"name": "mlp", "activation": "swish2"}, (64,), "activation"),
    ({"name": "resnet9", "activation": "relu+maxpool"}, (8, 8, 1), "elementwise"),
    ({"name": "mlp", "depth": -1}, (64,), "depth"),
])
def test_bad_model_config_raises(overrides, shape, match):
    with pytest.raises(ConfigError, match=match) as err:
        make_model(ModelConfig(**overrides), shape, N_CLASSES)
    assert "\n" not in str(err.value)


def test_bad_cifar_depth_and_missing_builder_are_one_line_config_errors(monkeypatch):
    with pytest.raises(ConfigError, match="6n\\+2"):
        make_cifar_resnet(TINY["resnet20"], (8, 8, 1), N_CLASSES, depth=21)
    monkeypatch.setitem(models.BUILDERS, "future", "jaxinit.models.no_such_module:make_future")
    monkeypatch.setitem(models.BUILDERS, "half", "jaxinit.models.mlp:make_half")
    for name in ("future", "half"):
        with pytest.raises(ConfigError, match="not available") as err:
            make_module(ModelConfig(name=name), (8,), N_CLASSES)
        assert "\n" not in str(err.value)
