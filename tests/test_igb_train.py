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
from jaxinit.train import engine
from jaxinit.train.engine import Plan
from jaxinit.train.members import Member


def _data(n=64, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return {"x_train": jnp.asarray(rng.normal(size=(n, d)), jnp.float32), "y_train": jnp.asarray(rng.integers(0, 2, n)),
            "x_test": jnp.asarray(rng.normal(size=(16, d)), jnp.float32), "y_test": jnp.asarray(rng.integers(0, 2, 16))}


def _train(net, optimizer, sw2, sb2, seeds, lrs, data, steps, strategy="vmap"):
    """Members of one case trained on the engine: (arrays (evals, members[, classes]), sweep, final states)."""
    members = [Member(i, "case", float(np.sqrt(sw2[i])), int(seeds[i]), lr=float(lrs[i]), scale=(sw2[i], sb2[i]))
               for i in range(len(sw2))]
    sweep = train.build(data, [train.group("case", optimizer, net, members)], Plan(epochs=steps, eval_every=steps),
                        batch_size=16, data_seed=5, strategy=strategy)
    rows, states = engine.run(sweep, train.evaluator(sweep, train.eval_sets(data), {i: {} for i in range(len(sw2))}),
                              progress=False)
    return train.case_arrays(rows, list(range(len(sw2)))), sweep, states


def test_members_train_like_single_runs_and_diverged_members_freeze():
    net = nets.make_net(DeepMLP(2, 16, 3, "relu"), (8,))
    data = _data()
    # the third member overflows at init (sigma_w2 = 1e38): it must freeze without touching the others
    hist, _, _ = _train(net, "adam", [1.0, 2.0, 1e38], [0.1] * 3, [0, 0, 0], [1e-2] * 3, data, 5)
    alone, _, _ = _train(net, "adam", [2.0], [0.1], [0], [1e-2], data, 5)
    np.testing.assert_allclose(hist["train_loss"][:, 1], alone["train_loss"][:, 0], rtol=1e-4)
    assert hist["train_loss"][1, 1] < hist["train_loss"][0, 1]
    assert hist["alive"][-1].tolist() == [True, True, False]
    assert np.isfinite(hist["train_loss"][-1, :2]).all()
    assert hist["test_class_acc"].shape == (2, 3, 2) and hist["step"].tolist() == [0, 5]
    np.testing.assert_allclose(hist["test_fmax"], hist["test_class_freq"].max(axis=-1))


def test_sgd_step_is_lr_times_gradient_and_the_learning_rate_never_recompiles():
    net = nets.make_net(DeepMLP(2, 8, 2, "tanh"), (8,))
    data = _data()
    _, sweep, _ = _train(net, "sgd", [1.5, 1.5], [0.1, 0.1], [0, 0], [0.01, 0.02], data, 0)
    init = engine.init_states(sweep)["case"][0]
    before = jax.tree.map(jnp.copy, init.params)
    after = engine.train_epoch(sweep, {"case": [init]}, 1)[0]["case"][0]
    step = jax.tree.map(lambda a, b: a - b, after.params, before)
    np.testing.assert_allclose(step["head"]["kernel"][1], 2 * step["head"]["kernel"][0], rtol=2e-3, atol=1e-7)   # same gradient
    traces = dict(sweep.compiler.traces)
    chunk = sweep.groups["case"][0]
    other = chunk._replace(args=chunk.args._replace(hyper=chunk.args.hyper._replace(lr=jnp.array([0.3, 0.4], jnp.float32))))
    engine.train_epoch(sweep._replace(groups={"case": [other]}), {"case": [engine.init_states(sweep)["case"][0]]}, 2)
    assert dict(sweep.compiler.traces) == traces and traces["step"] == 1   # new rates: data, not a new program


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
def test_each_optimizer_trains(name):
    net = nets.make_net(DeepMLP(2, 16, 3, "tanh"), (8,))
    lr = {"sgd": 0.1, "momentum": 0.03, "adam": 1e-2}[name]
    hist, _, _ = _train(net, name, [1.5], [0.1], [0], [lr], _data(), 20)
    assert hist["train_loss"][-1, 0] < 0.9 * hist["train_loss"][0, 0]


def test_unknown_optimizer_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown optimizer 'lion'"):
        train.setting("lion", 0.1)


def test_backward_factor_at_init_is_chi1_to_the_depth():
    """Linear MLP: E|delta|^2 is multiplied by chi_1 = sigma_w2 per layer (THEORY.md section 2)."""
    from theory import meanfield as mf
    depth, sw2 = 8, 0.5
    net = nets.make_net(DeepMLP(2, 1024, depth, "linear"), (64,))
    params, _ = train.net_model(net).init(jax.random.key(2), (sw2, 0.0))
    x = jax.random.normal(jax.random.key(3), (64, 64))
    signal = train.init_signals(net, jax.tree.map(lambda a: a[None], params), x, jnp.arange(64) % 2)
    measured = summary_train.grad_factor(np.asarray(signal))[0]
    theory = float(mf.chi1(sw2, 0.0, "linear")) ** (depth - 1)
    assert theory == pytest.approx(0.5 ** 7)
    assert measured == pytest.approx(theory, rel=0.2)


def test_the_learning_rate_choice_is_the_best_validation_accuracy_and_disqualifies_divergence():
    val = np.array([[0.6, 0.7], [0.8, 0.9], [0.95, 0.99]])        # rates x seeds
    alive = np.array([[True, True], [True, True], [True, False]])  # the best rate diverged once
    assert study_train.choose_lr(val, alive) == 1
    assert study_train.choose_lr(np.array([[0.5], [0.5]]), np.ones((2, 1), bool)) == 0   # ties: the smaller rate


def test_sweep_lrs_trains_each_rate_on_sweep_seeds_and_a_single_rate_is_taken_as_it_is():
    cfg = replace(config_train.SMOKE, opt=config_train.LrGridConfig(sgd_lr=(0.01, 0.2), adam_lr=(1e-3,),
                                                                    lr_sweep_steps=2, lr_sweep_seeds=2))
    data, n_classes, shape = study_train.load_data(cfg)
    nets_ = {f"tanh__d{d}": nets.make_net(DeepMLP(n_classes, 16, d, "tanh"), shape) for d in (3, 5)}
    chosen = study_train.sweep_lrs(cfg, data, nets_, progress=False)
    assert set(chosen) == {"tanh__d3__sgd", "tanh__d5__sgd", "tanh__d3__adam", "tanh__d5__adam"}
    assert chosen["tanh__d3__adam"] == (1e-3, {})
    lr, arrays = chosen["tanh__d3__sgd"]
    assert lr in (0.01, 0.2) and arrays["sweep_val_acc"].shape == (2, 2) and arrays["sweep_alive"].dtype == bool


def test_members_are_phase_points_then_grid_for_the_first_optimizer_only():
    cfg = config_train.SMOKE
    m = study_train.case_members("tanh", 3, "sgd", 0.05, cfg)
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
    assert study_train.case_members("tanh", 5, "sgd", 0.05, cfg)["role"].tolist()[-1] == "neutrality"   # no grid at 5
    assert "grid" not in study_train.case_members("tanh", 3, "adam", 1e-3, cfg)["role"].tolist()


def test_summary_statistics_have_known_values():
    lo, hi = t_interval([1.0, 2.0, 3.0])
    assert (lo + hi) / 2 == pytest.approx(2.0) and (hi - lo) / 2 == pytest.approx(4.302653 / np.sqrt(3), rel=1e-5)
    assert t_interval([0.5]) is None
    assert summary_train.censored_median(np.array([10.0, np.nan, 30.0])) == 30.0
    assert summary_train.censored_median(np.array([10.0, np.nan, np.nan])) is None
    assert [e for e in range(11) if Plan(epochs=10, eval_every=4, dense_until=2).evaluated(e)] == [0, 1, 2, 4, 8, 10]
