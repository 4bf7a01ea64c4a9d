"""IGB estimators, class fractions, class-split gradient statistics and the member-parallel trainer."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxinit import bias, metrics
from jaxinit.models import deep


def _constructed(gamma, n_nodes=4000, n_inputs=20, seed=0):
    """h_ia = mu_i + y_ia with Var(mu) = gamma, Var(y) = 1: the IGB model with a known gamma."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, np.sqrt(gamma), (n_nodes, 1))
    return jnp.asarray(mu + rng.normal(0.0, 1.0, (n_nodes, n_inputs)))


@pytest.mark.parametrize("gamma", [0.25, 1.0, 4.0])
def test_estimators_recover_a_known_gamma(gamma):
    n = 20
    s = metrics.igb_stats(_constructed(gamma, n_inputs=n))
    assert float(s["gamma_corr"]) == pytest.approx(gamma, rel=0.08)
    # the naive estimator is inflated by (1 + gamma) / (n - 1): visible at n = 20
    assert float(s["gamma"]) == pytest.approx(gamma + (1 + gamma) / (n - 1), rel=0.08)
    assert float(s["gamma"]) > float(s["gamma_corr"]) * (1 + 0.5 / n)
    assert float(s["c"]) == pytest.approx(float(s["gamma_corr"] / (1 + s["gamma_corr"])), rel=1e-5)


def test_gram_moments_match_the_explicit_gram_matrix():
    h = jax.random.normal(jax.random.key(0), (30, 7)) + 0.3
    g = h.T @ h / 30
    q, p = metrics.gram_moments(h)
    assert float(q) == pytest.approx(float(jnp.trace(g) / 7), rel=1e-5)
    assert float(p) == pytest.approx(float((g.sum() - jnp.trace(g)) / 42), rel=1e-5)


def test_igb_stats_agree_with_theory_estimate():
    tigb = pytest.importorskip("theory.igb")
    h = _constructed(1.5, n_nodes=500, n_inputs=12, seed=3)
    ours, theirs = metrics.igb_stats(h), tigb.estimate(h)
    for k in ("gamma_corr", "sigma_y2"):
        assert float(ours[k]) == pytest.approx(float(theirs[k]), rel=1e-3), k
    # sigma_mu2 and the naive gamma may centre mu over nodes (Var_i): agree up to O(1/N)
    assert float(ours["gamma"]) == pytest.approx(float(theirs["gamma"]), rel=0.02)


def test_class_fractions_and_f_max():
    logits = jnp.array([[2.0, 0.0, 1.0], [0.0, 3.0, 1.0], [5.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(metrics.class_fractions(logits), [0.75, 0.25, 0.0])
    assert float(metrics.f_max(logits)) == 0.75


def test_class_split_uses_the_right_samples():
    values = jnp.arange(10.0)
    labels = jnp.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1])
    split = metrics.class_split_quantiles(values, labels, jnp.array(1), (0.0, 0.5, 1.0))
    np.testing.assert_allclose(split["favoured"], np.quantile([0, 2, 3, 6, 8, 9], [0, 0.5, 1]))
    np.testing.assert_allclose(split["others"], np.quantile([1, 4, 5, 7], [0, 0.5, 1]))
    np.testing.assert_allclose(split["all"], [0, 4.5, 9])
    empty = metrics.class_split_quantiles(values, labels, jnp.array(2), (0.5,))
    assert np.isnan(empty["favoured"]).all() and float(empty["others"][0]) == 4.5


def test_favoured_class_samples_get_small_gradients():
    """A net that predicts class 1 for everything: samples labelled 1 get ~0 signal, the rest do not."""
    spec = deep.DeepSpec(d_in=16, width=64, depth=3, n_out=10, act="tanh")
    params, _ = deep.init(jax.random.key(1), 1.0, 0.05, spec)
    params["b_out"] = params["b_out"].at[1].set(20.0)
    x = bias.to_sphere(jax.random.normal(jax.random.key(2), (40, 16)))
    labels = jnp.arange(40) % 2
    signals = jax.jit(bias.backprop_signals, static_argnames="spec")(params, x, labels, spec)
    fav, other = signals[:, labels == 1], signals[:, labels == 0]
    assert float(fav.max()) < 1e-6 * float(other.min())
    split = jax.vmap(lambda v: metrics.class_split_quantiles(v, labels, jnp.array(1), bias.QUANTILES))(signals)
    np.testing.assert_allclose(split["favoured"][:, 2], np.median(np.asarray(fav), axis=1), rtol=1e-5, atol=1e-30)


def test_probe_grid_is_paired_vmapped_and_never_recompiles():
    spec = deep.DeepSpec(d_in=8, width=16, depth=3, n_out=10, act="tanh")
    x = bias.to_sphere(jax.random.normal(jax.random.key(3), (12, 8)))
    labels = jnp.arange(12) % 2
    key = jax.random.key(4)
    grid = bias.probe_grid(key, jnp.array([1.0, 3.0]), jnp.array([0.1, 0.1]), x, labels, spec, False)
    size = bias.probe_grid._cache_size()
    single = bias.probe_grid(key, jnp.array([5.0, 3.0]), jnp.array([0.2, 0.1]), x, labels, spec, False)
    assert bias.probe_grid._cache_size() == size
    np.testing.assert_allclose(grid["c"][1], single["c"][1], rtol=1e-5)     # same draw at the same scale
    assert not np.allclose(grid["c"][0], single["c"][0])


def _equicorrelated_features(n: int, c: float) -> jnp.ndarray:
    """n inputs whose features have f_a.f_b / F = c for a != b and 1 on the diagonal (F = n + 1)."""
    f = jnp.concatenate([jnp.full((n, 1), np.sqrt(c)), np.sqrt(1 - c) * jnp.eye(n)], axis=1)
    return f * np.sqrt(n + 1)


def test_readout_rho_is_c_for_equal_norms_and_norm_free_otherwise():
    f = _equicorrelated_features(16, 0.3)
    np.testing.assert_allclose(bias.readout_rho(f, 1.0, 0.0), 0.3, rtol=1e-5)
    np.testing.assert_allclose(bias.readout_rho(f, 1.0, 0.0), bias.readout_c(f, 1.0, 0.0), rtol=1e-5)
    # Rescaling inputs leaves every correlation, hence rho, unchanged; c = P/Q (a ratio of means) moves.
    scaled = f * jnp.linspace(0.2, 3.0, 16)[:, None]
    np.testing.assert_allclose(bias.readout_rho(scaled, 1.0, 0.0), 0.3, rtol=1e-5)
    assert abs(float(bias.readout_c(scaled, 1.0, 0.0)) - 0.3) > 0.02
    # Against the explicit kernel, with a bias term and random features.
    g = jax.random.normal(jax.random.key(0), (9, 5))
    k = 2.0 * np.asarray(g) @ np.asarray(g).T / 5 + 0.1
    rho = k / np.sqrt(np.outer(np.diag(k), np.diag(k)))
    np.testing.assert_allclose(bias.readout_rho(g, 2.0, 0.1), (rho.sum() - 9) / 72, rtol=1e-5)


def test_fmax_gp_matches_igb_for_an_equicorrelated_kernel_and_is_1_for_identical_inputs():
    from theory import igb as tigb
    c = 0.5
    f = _equicorrelated_features(256, c)
    binary, every = bias.fmax_gp(jax.random.key(1), f, 1.0, 0.0, 10, 2000)
    gamma = float(tigb.gamma_from_c(c))
    # IGB is the n -> infinity limit; at n = 256 the finite count adds ~0.003 (binary), MC error ~0.004.
    assert float(binary) == pytest.approx(float(tigb.fmax_mean(gamma, 2)), abs=0.015)
    assert float(every) == pytest.approx(float(tigb.fmax_mean(gamma, 10)), abs=0.02)
    same = jnp.ones((8, 4))
    assert [float(v) for v in bias.fmax_gp(jax.random.key(2), same, 1.0, 0.1, 10, 50)] == [1.0, 1.0]


def test_probe_network_adds_the_gp_and_rho_only_when_asked():
    spec = deep.DeepSpec(d_in=8, width=16, depth=3, n_out=10, act="tanh")
    x = bias.to_sphere(jax.random.normal(jax.random.key(3), (12, 8)))
    labels = jnp.arange(12) % 2
    plain = bias.probe_grid(jax.random.key(4), jnp.array([1.0, 3.0]), jnp.array([0.1, 0.1]), x, labels, spec, False)
    gp = bias.probe_grid(jax.random.key(4), jnp.array([1.0, 3.0]), jnp.array([0.1, 0.1]), x, labels, spec, False, 64)
    assert "fmax_2_gp" not in plain and gp["fmax_2_gp"].shape == gp["fmax_all_gp"].shape == (2,)
    np.testing.assert_array_equal(plain["fmax_2"], gp["fmax_2"])        # the network draw is untouched
    assert np.all((gp["rho_readout"] > -1) & (gp["rho_readout"] <= 1) & (gp["readout_norm_cv"] >= 0))
    assert np.all((gp["fmax_all_gp"] >= 0.1) & (gp["fmax_all_gp"] <= 1.0) & (gp["fmax_2_gp"] >= 0.5))


def test_steps_to_target():
    steps = np.array([0, 1, 5, 10])
    acc = np.array([[0.5, 0.5], [0.9, 0.6], [0.95, 0.7], [0.95, 0.75]])
    np.testing.assert_array_equal(bias.steps_to_target(steps, acc, 0.9), [1, np.nan])
    assert bias.eval_steps(10, 4, 2) == [0, 1, 2, 4, 8, 10]


def test_members_train_like_single_runs_and_diverged_members_freeze():
    spec = deep.DeepSpec(d_in=8, width=16, depth=3, n_out=2, act="relu")
    rng = np.random.default_rng(0)
    data = {"x_train": jnp.asarray(rng.normal(size=(64, 8)), jnp.float32), "y_train": jnp.asarray(rng.integers(0, 2, 64)),
            "x_test": jnp.asarray(rng.normal(size=(16, 8)), jnp.float32), "y_test": jnp.asarray(rng.integers(0, 2, 16))}
    opt = optax.adam(1e-2)
    # the third member overflows at init (sigma_w2 = 1e38): it must freeze without touching the others
    members = bias.Members(jnp.array([1.0, 2.0, 1e38]), jnp.array([0.1, 0.1, 0.1]), jnp.array([0, 0, 0]))
    hist = bias.train_members(jax.random.key(5), members, spec, opt, data, 5, 16, [0, 5])
    alone = bias.train_members(jax.random.key(5), bias.Members(*(a[1:2] for a in members)), spec, opt, data, 5, 16, [0, 5])
    np.testing.assert_allclose(hist["train_loss"][:, 1], alone["train_loss"][:, 0], rtol=1e-4)
    assert hist["train_loss"][1, 1] < hist["train_loss"][0, 1]
    assert hist["alive"][-1].tolist() == [True, True, False]
    assert np.isfinite(hist["train_loss"][-1, :2]).all()
