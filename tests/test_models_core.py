"""from_flax: a user's own flax module swept over sigma_w, with and without BatchNorm."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.errors import ConfigError
from jaxinit.models import from_flax
from jaxinit.models.core import template_variables


class Tiny(nn.Module):
    """The issue's example: Dense(16) -> relu -> Dense(10)."""
    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.relu(nn.Dense(16)(x.reshape(x.shape[0], -1)))
        return nn.Dense(10)(x)


class TinyBN(nn.Module):
    """Dense -> BatchNorm -> relu -> Dense, plus an offset table that is neither kernel nor bias."""
    @nn.compact
    def __call__(self, x, train: bool = False):
        h = nn.Dense(8, use_bias=False)(x) + self.param("offset", nn.initializers.normal(1.0), (8,))
        h = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(h))
        return nn.Dense(3)(h)


class Widths(nn.Module):
    widths: list     # unhashable field: the template is built without the cache

    @nn.compact
    def __call__(self, x, train: bool = False):
        for w in self.widths:
            x = nn.Dense(w)(x)
        return x


def _x(batch=6, dim=5, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal((batch, dim)), jnp.float32)


def test_user_module_kernels_scale_with_sigma_w_biases_stay_zero():
    model = from_flax(Tiny(), (5,))
    (p1, s1), (p3, s3) = (model.init(jax.random.key(0), s) for s in (1.0, 3.0))
    assert s1 == {} and s3 == {} and set(p1) == {"Dense_0", "Dense_1"}
    for layer in p1:
        np.testing.assert_allclose(p3[layer]["kernel"], 3.0 * np.asarray(p1[layer]["kernel"]), rtol=1e-6)
        assert np.all(np.asarray(p3[layer]["bias"]) == 0) and np.all(np.asarray(p1[layer]["bias"]) == 0)
    w = np.asarray(p1["Dense_0"]["kernel"])                # he_normal: std sqrt(2 / fan_in) = sqrt(2 / 5)
    assert w.shape == (5, 16) and 0.4 < w.std() / np.sqrt(2 / 5) < 1.6
    logits, state = model.apply(p3, s3, _x(), train=True)
    assert logits.shape == (6, 10) and state == {}
    np.testing.assert_allclose(logits, 9.0 * model.apply(p1, s1, _x(), train=False)[0], rtol=1e-5, atol=1e-6)


def test_user_module_vmaps_over_sigma_w_without_recompiling():
    model = from_flax(Tiny(), (5,))
    traces = []

    @jax.jit
    def logits(keys, sigmas):
        traces.append(1)
        def one(key, sigma):
            params, state = model.init(key, sigma)
            return model.apply(params, state, _x(), train=False)[0]
        return jax.vmap(one)(keys, sigmas)

    keys = jnp.stack([jax.random.key(1)] * 3)
    out = logits(keys, jnp.asarray([0.5, 1.0, 2.0], jnp.float32))
    np.testing.assert_allclose(out[2], 4.0 * out[1], rtol=1e-5, atol=1e-6)   # relu net: homogeneous of degree 2
    np.testing.assert_allclose(out[0], 0.25 * out[1], rtol=1e-5, atol=1e-6)
    logits(keys, jnp.asarray([0.1, 0.2, 0.3], jnp.float32))
    assert len(traces) == 1
    single = model.init(jax.random.key(1), 2.0)[0]
    stacked = jax.vmap(model.init)(keys, jnp.asarray([0.5, 1.0, 2.0], jnp.float32))[0]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a[2], b, rtol=1e-6), stacked, single)


def test_batchnorm_module_updates_batch_stats_in_train_only():
    model = from_flax(TinyBN(), (5,))
    params, state = model.init(jax.random.key(0), 1.0)
    assert set(state) == {"batch_stats"} and set(state["batch_stats"]["BatchNorm_0"]) == {"mean", "var"}
    x = _x() * 2.0 + 1.0
    _, trained = jax.jit(lambda p, s: model.apply(p, s, x, train=True))(params, state)
    assert jax.tree.structure(trained) == jax.tree.structure(state)
    assert all(not np.allclose(a, b) for a, b in zip(jax.tree.leaves(trained), jax.tree.leaves(state)))
    _, evaluated = model.apply(params, trained, x, train=False)
    jax.tree.map(np.testing.assert_array_equal, evaluated, trained)
    # BatchNorm gains and the offset table keep the module's own (template) values, unscaled, per member
    other, _ = model.init(jax.random.key(9), 4.0)
    np.testing.assert_array_equal(other["offset"], params["offset"])
    assert float(np.std(params["offset"])) > 0.1
    np.testing.assert_array_equal(other["BatchNorm_0"]["scale"], np.ones(8))
    assert not np.allclose(other["Dense_0"]["kernel"], 4.0 * np.asarray(params["Dense_0"]["kernel"]))


def test_batchnorm_module_trains_with_state_as_aux():
    model = from_flax(TinyBN(), (5,))
    params, state = model.init(jax.random.key(0), 1.0)

    def loss(p, s):
        logits, s = model.apply(p, s, _x(), train=True)
        return jnp.mean(jnp.square(logits - 1.0)), s

    (value, new_state), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params, state)
    assert np.isfinite(float(value)) and jax.tree.structure(new_state) == jax.tree.structure(state)
    assert float(jnp.abs(grads["Dense_0"]["kernel"]).max()) > 0


def test_template_is_built_once_per_module_and_shape():
    assert template_variables(Tiny(), (5,)) is template_variables(Tiny(), (5,))
    assert template_variables(Tiny(), (7,)) is not template_variables(Tiny(), (5,))
    model = from_flax(Widths([4, 2]), (3,))                       # unhashable: built, not cached
    params, _ = model.init(jax.random.key(0), 1.0)
    assert params["Dense_1"]["kernel"].shape == (4, 2)


def test_bad_base_or_bias_init_is_config_error():
    with pytest.raises(ConfigError, match="base_init"):
        from_flax(Tiny(), (5,), base_init="orthogonal")
    with pytest.raises(ConfigError, match="bias_init"):
        from_flax(Tiny(), (5,), bias_init="uniform")
