"""The member-parallel trainer across phases: pairing, divergence, optimizers, the learning-rate sweep, summaries."""
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.config import ConfigError
from jaxinit.igb import config_train, nets, study_train, summary_train, train
from jaxinit.intervals import t_interval
from jaxinit.models.deep import DeepMLP


def _data(n=64, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return {"x_train": jnp.asarray(rng.normal(size=(n, d)), jnp.float32), "y_train": jnp.asarray(rng.integers(0, 2, n)),
            "x_test": jnp.asarray(rng.normal(size=(16, d)), jnp.float32), "y_test": jnp.asarray(rng.integers(0, 2, 16))}


def _members(sw, sb, seed, lr):
    return train.Members(jnp.asarray(sw, jnp.float32), jnp.asarray(sb, jnp.float32), jnp.asarray(seed, jnp.int32),
                         jnp.asarray(lr, jnp.float32))


def test_members_train_like_single_runs_and_diverged_members_freeze():
    net = nets.make_net(DeepMLP(2, 16, 3, "relu"), (8,))
    data = _data()
    # the third member overflows at init (sigma_w2 = 1e38): it must freeze without touching the others
    members = _members([1.0, 2.0, 1e38], [0.1, 0.1, 0.1], [0, 0, 0], [1e-2] * 3)
    hist = train.train_members(net, "adam", members, data, 5, 16, [0, 5], jax.random.key(5))
    alone = train.train_members(net, "adam", train.Members(*(a[1:2] for a in members)), data, 5, 16, [0, 5],
                                jax.random.key(5))
    np.testing.assert_allclose(hist["train_loss"][:, 1], alone["train_loss"][:, 0], rtol=1e-4)
    assert hist["train_loss"][1, 1] < hist["train_loss"][0, 1]
    assert hist["alive"][-1].tolist() == [True, True, False]
    assert np.isfinite(hist["train_loss"][-1, :2]).all()
    assert hist["test_class_acc"].shape == (2, 3, 2) and hist["step"].tolist() == [0, 5]
    np.testing.assert_allclose(hist["test_fmax"], hist["test_class_freq"].max(axis=-1))


def test_sgd_step_is_lr_times_gradient_and_the_learning_rate_never_recompiles():
    net = nets.make_net(DeepMLP(2, 8, 2, "tanh"), (8,))
    data, key = _data(), jax.random.key(0)
    members = _members([1.5, 1.5], [0.1, 0.1], [0, 0], [0.01, 0.02])
    p0, s0 = train.init_members(net, "sgd", key, members)
    before = jax.tree.map(jnp.copy, p0)
    alive = jnp.ones(2, bool)
    p1, _, _ = train.train_step(p0, s0, alive, members.lr, 0, key, data["x_train"], data["y_train"], net=net,
                                optimizer="sgd", batch_size=16)
    size = train.train_step._cache_size()
    step = jax.tree.map(lambda a, b: a - b, p1, before)
    np.testing.assert_allclose(step["head"]["kernel"][1], 2 * step["head"]["kernel"][0], rtol=2e-3, atol=1e-7)   # same gradient
    p2, s2 = train.init_members(net, "sgd", key, _members([1.5, 1.5], [0.1, 0.1], [0, 0], [0.3, 0.4]))
    train.train_step(p2, s2, alive, jnp.array([0.3, 0.4]), 1, key, data["x_train"], data["y_train"], net=net,
                     optimizer="sgd", batch_size=16)
    assert train.train_step._cache_size() == size


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
def test_each_optimizer_trains(name):
    net = nets.make_net(DeepMLP(2, 16, 3, "tanh"), (8,))
    lr = {"sgd": 0.1, "momentum": 0.03, "adam": 1e-2}[name]
    hist = train.train_members(net, name, _members([1.5], [0.1], [0], [lr]), _data(), 20, 32, [0, 20],
                               jax.random.key(1))
    assert hist["train_loss"][-1, 0] < 0.9 * hist["train_loss"][0, 0]


def test_unknown_optimizer_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown optimizer 'lion'"):
        train.make_optimizer("lion", 0.1)


def test_backward_factor_at_init_is_chi1_to_the_depth():
    """Linear MLP: E|delta|^2 is multiplied by chi_1 = sigma_w2 per layer (THEORY.md section 2)."""
    from theory import meanfield as mf
    depth, sw2 = 8, 0.5
    net = nets.make_net(DeepMLP(2, 1024, depth, "linear"), (64,))
    members = _members([sw2], [0.0], [0], [0.1])
    params, _ = train.init_members(net, "sgd", jax.random.key(2), members)
    x = jax.random.normal(jax.random.key(3), (64, 64))
    signal = train.init_signals(params, x, jnp.arange(64) % 2, net)
    measured = summary_train.grad_factor(np.asarray(signal))[0]
    theory = float(mf.chi1(sw2, 0.0, "linear")) ** (depth - 1)
    assert theory == pytest.approx(0.5 ** 7)
    assert measured == pytest.approx(theory, rel=0.2)


def test_sweep_lr_picks_the_best_validation_accuracy_and_disqualifies_divergence(monkeypatch):
    cfg = config_train.SMOKE
    lrs = (0.01, 0.03, 0.1)
    cfg = replace(cfg, opt=config_train.LrGridConfig(sgd_lr=lrs, lr_sweep_steps=5, lr_sweep_seeds=2))
    val = np.array([[0.6, 0.7, 0.8, 0.9, 0.95, 0.99]])     # members: lr-major, seeds minor
    alive = np.array([[True, True, True, True, True, False]])   # the best rate (0.1) diverged once

    def fake(net, optimizer, members, data, n, batch, steps, key, **kw):
        assert np.allclose(members.lr, np.repeat(lrs, 2)) and set(np.asarray(members.seed)) == {1000, 1001}
        return {"val_acc": np.concatenate([val * 0, val]), "test_acc": np.concatenate([val * 0, val]),
                "alive": np.concatenate([alive, alive])}
    monkeypatch.setattr(train, "train_members", fake)
    lr, sweep = study_train.sweep_lr(None, "sgd", "tanh", cfg, {}, jax.random.key(0))
    assert lr == 0.03 and sweep["sweep_val_acc"].shape == (3, 2)
    single = replace(cfg, opt=config_train.LrGridConfig(sgd_lr=(0.2,)))
    assert study_train.sweep_lr(None, "sgd", "tanh", single, {}, jax.random.key(0)) == (0.2, {})


def test_members_are_phase_points_then_grid_for_the_first_optimizer_only():
    cfg = config_train.SMOKE
    m = study_train.build_members("tanh", 3, "sgd", 0.05, cfg)
    assert m["role"].tolist() == ["ordered-deep", "EOC", "prejudice", "neutrality", "grid", "grid"]
    assert m["theory_phase"][:4].tolist() == ["ordered deep prejudice", "transient deep prejudice (EOC)", "prejudice",
                                              "neutrality"]
    assert m["sigma_w2"][1] == pytest.approx(1.986073, rel=1e-5)      # THEORY.md oracle at sigma_b2 = 0.1
    np.testing.assert_allclose(m["chi1_pow"][1], 1.0, atol=1e-6)     # the EOC: chi_1 = 1
    # the theory a measured factor is compared with follows q_1 = sigma_w2 + sigma_b2 down to q*: below chi_1^2
    from theory import meanfield as mf
    np.testing.assert_allclose(m["backward_product"], mf.backward_product(m["sigma_w2"], m["sigma_b2"], "tanh", 3),
                               rtol=1e-12)
    assert m["backward_product"][1] < 0.95
    assert (m["lr"] == 0.05).all()
    assert study_train.build_members("tanh", 5, "sgd", 0.05, cfg)["role"].tolist()[-1] == "neutrality"   # no grid at 5
    assert "grid" not in study_train.build_members("tanh", 3, "adam", 1e-3, cfg)["role"].tolist()


def test_summary_statistics_have_known_values():
    lo, hi = t_interval([1.0, 2.0, 3.0])
    assert (lo + hi) / 2 == pytest.approx(2.0) and (hi - lo) / 2 == pytest.approx(4.302653 / np.sqrt(3), rel=1e-5)
    assert t_interval([0.5]) is None
    assert summary_train.censored_median(np.array([10.0, np.nan, 30.0])) == 30.0
    assert summary_train.censored_median(np.array([10.0, np.nan, np.nan])) is None
    assert train.eval_steps(10, 4, 2) == [0, 1, 2, 4, 8, 10]
