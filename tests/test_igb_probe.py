"""IGB statistics and the probes at init: estimators, class fractions, class-split gradients, GP f_max."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.igb import probe
from jaxinit.shared import igb_stats as stats, nets
from jaxinit.models.deep import DeepMLP


def _constructed(gamma, n_nodes=4000, n_inputs=20, seed=0):
    """h_ia = mu_i + y_ia with Var(mu) = gamma, Var(y) = 1: the IGB model with a known gamma."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, np.sqrt(gamma), (n_nodes, 1))
    return jnp.asarray(mu + rng.normal(0.0, 1.0, (n_nodes, n_inputs)), jnp.float32)


@pytest.mark.parametrize("gamma", [0.25, 1.0, 4.0])
def test_estimators_recover_a_known_gamma(gamma):
    n = 20
    s = jax.jit(stats.estimate)(_constructed(gamma, n_inputs=n))
    assert float(s["gamma_corr"]) == pytest.approx(gamma, rel=0.08)
    # the naive estimator is inflated by (1 + gamma) / (n - 1): visible at n = 20
    assert float(s["gamma"]) == pytest.approx(gamma + (1 + gamma) / (n - 1), rel=0.08)
    assert float(s["gamma"]) > float(s["gamma_corr"]) * (1 + 0.5 / n)
    assert float(s["c"]) == pytest.approx(float(s["gamma_corr"] / (1 + s["gamma_corr"])), rel=1e-5)


def test_traced_estimate_is_the_theory_estimate():
    from theory import igb as tigb
    h = _constructed(1.5, n_nodes=500, n_inputs=12, seed=3)
    ours, theirs = jax.jit(stats.estimate)(h), tigb.estimate(np.asarray(h, np.float64))
    for k in stats.MOMENT_KEYS:
        assert float(ours[k]) == pytest.approx(float(theirs[k]), rel=1e-4), k


def test_layer_moments_stacked_and_listed_agree():
    hs = jax.random.normal(jax.random.key(0), (3, 10, 40)) + jnp.arange(3.0)[:, None, None]
    stacked, listed = stats.layer_moments(hs), stats.layer_moments([hs[i] for i in range(3)])
    for k in stats.MOMENT_KEYS:
        np.testing.assert_allclose(stacked[k], listed[k], rtol=1e-5)


def test_class_fractions_f_max_and_per_class():
    logits = jnp.array([[2.0, 0.0, 1.0], [0.0, 3.0, 1.0], [5.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(stats.class_fractions(logits), [0.75, 0.25, 0.0])
    assert float(stats.f_max(logits)) == 0.75
    out = stats.per_class(logits, jnp.array([0, 0, 0, 2]))   # predictions 0, 1, 0, 0
    np.testing.assert_allclose(out["class_acc"], [2 / 3, np.nan, 0.0])
    np.testing.assert_allclose(out["class_freq"], [0.75, 0.25, 0.0])
    assert float(out["acc"]) == 0.5 and float(out["fmax"]) == 0.75
    loss = -jax.nn.log_softmax(logits)[jnp.arange(4), jnp.array([0, 0, 0, 2])]
    np.testing.assert_allclose(out["class_loss"], [loss[:3].mean(), np.nan, loss[3]], rtol=1e-6)


def test_class_split_uses_the_right_samples():
    values = jnp.arange(10.0)
    labels = jnp.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1])
    split = stats.class_split_quantiles(values, labels, jnp.array(1), (0.0, 0.5, 1.0))
    np.testing.assert_allclose(split["favoured"], np.quantile([0, 2, 3, 6, 8, 9], [0, 0.5, 1]))
    np.testing.assert_allclose(split["others"], np.quantile([1, 4, 5, 7], [0, 0.5, 1]))
    np.testing.assert_allclose(split["all"], [0, 4.5, 9])
    empty = stats.class_split_quantiles(values, labels, jnp.array(2), (0.5,))
    assert np.isnan(empty["favoured"]).all() and float(empty["others"][0]) == 4.5


def test_first_steps_to_target_and_absorption():
    steps = np.array([0, 1, 5, 10])
    acc = np.array([[0.5, 0.5], [0.9, 0.6], [0.95, 0.7], [0.95, 0.75]])
    np.testing.assert_array_equal(stats.steps_to_target(steps, acc, 0.9), [1, np.nan])
    np.testing.assert_array_equal(stats.steps_absorbed(steps, 1.5 - acc, 0.8), [1, 5])
    np.testing.assert_array_equal(stats.steps_absorbed(steps, 1.5 - acc, 0.7), [1, np.nan])


def _sphere(key, n, d):
    from jaxinit.data import normalize
    return jnp.asarray(normalize([np.asarray(jax.random.normal(key, (n, d)))], "sphere")[0])


def test_favoured_class_samples_get_small_gradients():
    """A net that predicts class 1 for everything: samples labelled 1 get ~0 signal, the rest do not."""
    net = nets.make_net(DeepMLP(10, 64, 3, "tanh"), (16,))
    params = nets.scale(nets.draw(net, jax.random.key(1)), 1.0, 0.05)
    params["head"]["bias"] = params["head"]["bias"].at[1].set(20.0)
    x = _sphere(jax.random.key(2), 40, 16)
    labels = jnp.arange(40) % 2
    signals = jax.jit(nets.backprop_signals, static_argnums=0)(net, params, x, labels)
    fav, other = signals[:, labels == 1], signals[:, labels == 0]
    assert float(fav.max()) < 1e-6 * float(other.min())
    split = jax.vmap(lambda v: stats.class_split_quantiles(v, labels, jnp.array(1), probe.QUANTILES))(signals)
    np.testing.assert_allclose(split["favoured"][:, 2], np.median(np.asarray(fav), axis=1), rtol=1e-5, atol=1e-30)


def test_probe_grid_is_paired_vmapped_and_never_recompiles():
    net = nets.make_net(DeepMLP(10, 16, 3, "tanh"), (8,))
    x, labels, key = _sphere(jax.random.key(3), 12, 8), jnp.arange(12) % 2, jax.random.key(4)
    grid = probe.probe_grid(net, key, jnp.array([1.0, 3.0]), jnp.array([0.1, 0.1]), x, labels, False)
    size = probe.probe_grid._cache_size()
    single = probe.probe_grid(net, key, jnp.array([5.0, 3.0]), jnp.array([0.2, 0.1]), x, labels, False)
    assert probe.probe_grid._cache_size() == size
    np.testing.assert_allclose(grid["c"][1], single["c"][1], rtol=1e-5)     # same draw at the same scale
    assert not np.allclose(grid["c"][0], single["c"][0])


def _equicorrelated_features(n: int, c: float) -> jnp.ndarray:
    """n inputs whose features have f_a.f_b / F = c for a != b and 1 on the diagonal (F = n + 1)."""
    f = jnp.concatenate([jnp.full((n, 1), np.sqrt(c)), np.sqrt(1 - c) * jnp.eye(n)], axis=1)
    return f * np.sqrt(n + 1)


def test_readout_rho_is_c_for_equal_norms_and_norm_free_otherwise():
    f = _equicorrelated_features(16, 0.3)
    np.testing.assert_allclose(probe.readout_rho(f, 1.0, 0.0), 0.3, rtol=1e-5)
    np.testing.assert_allclose(probe.readout_rho(f, 1.0, 0.0), probe.readout_c(f, 1.0, 0.0), rtol=1e-5)
    scaled = f * jnp.linspace(0.2, 3.0, 16)[:, None]
    np.testing.assert_allclose(probe.readout_rho(scaled, 1.0, 0.0), 0.3, rtol=1e-5)
    assert abs(float(probe.readout_c(scaled, 1.0, 0.0)) - 0.3) > 0.02
    g = jax.random.normal(jax.random.key(0), (9, 5))
    k = 2.0 * np.asarray(g) @ np.asarray(g).T / 5 + 0.1
    rho = k / np.sqrt(np.outer(np.diag(k), np.diag(k)))
    np.testing.assert_allclose(probe.readout_rho(g, 2.0, 0.1), (rho.sum() - 9) / 72, rtol=1e-5)


def test_fmax_gp_matches_igb_for_an_equicorrelated_kernel_and_is_1_for_identical_inputs():
    from theory import igb as tigb
    c = 0.5
    binary, every = probe.fmax_gp(jax.random.key(1), _equicorrelated_features(256, c), 1.0, 0.0, 10, 2000)
    gamma = float(tigb.gamma_from_c(c))
    # IGB is the n -> infinity limit; at n = 256 the finite count adds ~0.003 (binary), MC error ~0.004.
    assert float(binary) == pytest.approx(float(tigb.fmax_mean(gamma, 2)), abs=0.015)
    assert float(every) == pytest.approx(float(tigb.fmax_mean(gamma, 10)), abs=0.02)
    assert [float(v) for v in probe.fmax_gp(jax.random.key(2), jnp.ones((8, 4)), 1.0, 0.1, 10, 50)] == [1.0, 1.0]


def test_probe_network_adds_the_gp_and_rho_only_when_asked_and_they_are_the_networks_own():
    net = nets.make_net(DeepMLP(10, 16, 3, "tanh"), (8,))
    x, labels, key = _sphere(jax.random.key(3), 12, 8), jnp.arange(12) % 2, jax.random.key(4)
    sw, sb = jnp.array([1.0, 3.0]), jnp.array([0.1, 0.1])
    plain = probe.probe_grid(net, key, sw, sb, x, labels, False)
    gp = probe.probe_grid(net, key, sw, sb, x, labels, False, 64)
    assert "fmax_2_gp" not in plain and gp["fmax_2_gp"].shape == (2,)
    np.testing.assert_array_equal(plain["fmax_2"], gp["fmax_2"])        # the network draw is untouched
    params = nets.scale(nets.draw(net, key), 3.0, 0.1)                    # grid point 1, recomputed by hand
    _, _, features = nets.forward(net, params, x)
    np.testing.assert_allclose(gp["rho_readout"][1], probe.readout_rho(features, 3.0, 0.1), rtol=1e-5)
    expected = probe.fmax_gp(jax.random.fold_in(key, probe.GP_STREAM), features, 3.0, 0.1, 10, 64)
    np.testing.assert_allclose([gp["fmax_2_gp"][1], gp["fmax_all_gp"][1]], expected, rtol=1e-6)
    assert np.all(np.asarray(gp["fmax_2"]) * 12 == np.round(np.asarray(gp["fmax_2"]) * 12))   # counts of 12 inputs
