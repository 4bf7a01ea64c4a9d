"""The member-parallel trainer across phases: pairing, divergence, optimizers, the learning-rate sweep, summaries."""
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.errors import ConfigError
from jaxinit.igb import config_train, study_train, summary_train
from jaxinit.intervals import t_interval
from jaxinit.models.deep import DeepMLP
from jaxinit.shared import case_train, nets, phases, selection
from jaxinit.train import engine
from jaxinit.train.engine import Plan
from jaxinit.train.members import Member, chunk_to_stacked
from theory import phase


def _data(n=64, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return {"x_train": jnp.asarray(rng.normal(size=(n, d)), jnp.float32), "y_train": jnp.asarray(rng.integers(0, 2, n)),
            "x_test": jnp.asarray(rng.normal(size=(16, d)), jnp.float32), "y_test": jnp.asarray(rng.integers(0, 2, 16))}


def _train(net, optimizer, sw2, sb2, seeds, lrs, data, steps, strategy="vmap"):
    """Members of one case trained on the engine: (arrays (evals, members[, classes]), sweep, final states)."""
    members = [Member(i, "case", float(np.sqrt(sw2[i])), int(seeds[i]), lr=float(lrs[i]), scale=(sw2[i], sb2[i]))
               for i in range(len(sw2))]
    sweep = case_train.build(data, [case_train.group("case", optimizer, net, members)],
                             Plan(epochs=steps, eval_every=steps), batch_size=16, data_seed=5, strategy=strategy)
    info = {i: {} for i in range(len(sw2))}
    rows, states = engine.run(sweep, case_train.evaluator(sweep, case_train.eval_sets(data), info), progress=False)
    return case_train.case_arrays(rows, list(range(len(sw2)))), sweep, states


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


@pytest.mark.parametrize("strategy", ["vmap", "sequential"])
def test_the_evaluation_of_step_0_measures_the_initial_signals(strategy):
    """``init_signal`` comes from the rows of step 0 (the initial states), equal to `init_signals` on the members'
    initial parameters, and only step 0 carries it."""
    net = nets.make_net(DeepMLP(2, 16, 4, "tanh"), (8,))
    data = _data()
    members = [Member(i, "case", 1.0, i % 2, lr=0.01, scale=(s, 0.1)) for i, s in enumerate([0.8, 1.0, 2.0])]
    sweep = case_train.build(data, [case_train.group("case", "sgd", net, members)], Plan(epochs=2, eval_every=1),
                             batch_size=16, data_seed=5, strategy=strategy)
    probe = case_train.SignalProbe({"case": net}, data["x_train"][:32], data["y_train"][:32])
    init = engine.init_states(sweep)
    evaluate = case_train.evaluator(sweep, case_train.eval_sets(data), {i: {} for i in range(3)}, probe)
    rows, _ = engine.run(sweep, evaluate, progress=False)
    assert [r["epoch"] for r in rows if "init_signal" in r] == [0, 0, 0]
    got = case_train.case_arrays(rows, [0, 1, 2])["init_signal"]
    x, y = data["x_train"][:32], data["y_train"][:32]
    expected = np.concatenate([case_train.init_signals(net, chunk_to_stacked(c, st).params, x, y)
                               for c, st in zip(sweep.groups["case"], init["case"])])
    assert got.shape == (3, 5, 2) and got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    assert got[2, 0].mean() > got[0, 0].mean()      # sigma_w2 = 2 backpropagates more signal to layer 1 than 0.8


def test_shared_batches_give_every_member_the_batch_of_the_step_from_the_data_seed():
    """The engine's ``shared_batches``: members of any seed draw the same batch, step s's from
    fold_in(fold_in(key(data_seed), 0xda7a), s) without replacement (the stream every IGB result was made with)."""
    net = nets.make_net(DeepMLP(2, 8, 2, "tanh"), (8,))
    members = [Member(i, "case", 1.0, seed, lr=0.01, scale=(1.0, 0.1)) for i, seed in enumerate([0, 3, 7])]
    sweep = case_train.build(_data(), [case_train.group("case", "sgd", net, members)], Plan(epochs=3),
                             batch_size=16, data_seed=5, strategy="vmap")
    c = sweep.groups["case"][0]
    key = jax.random.fold_in(jax.random.key(5), 0xda7a)
    for epoch in (1, 2, 3):
        orders = np.asarray(c.fns.order(c.args.seed, np.int32(epoch), 64))
        expected = np.asarray(jax.random.choice(jax.random.fold_in(key, epoch - 1), 64, (16,), replace=False))
        assert orders.shape == (3, 16) and (orders == expected).all() and len(set(expected.tolist())) == 16


def test_rows_of_step_0_without_init_signal_are_one_line():
    from jaxinit.igb import results
    case = phases.Case("tanh", 3, "sgd", 8, {"role": np.array(["EOC"])}, {})
    baseline = {"logistic": {"test_acc": 0.9}, "ridge": {"test_acc": 0.9}, "majority_share": 0.5}
    metrics = {"step": np.array([0]), "alive": np.ones((1, 1), bool)}
    with pytest.raises(ConfigError, match="tanh__d3__sgd: the rows of step 0 .* hold no init_signal"):
        results.case_results(case, {}, metrics, {}, baseline, 0.97)
    out = results.case_results(case, {}, {**metrics, "init_signal": np.ones((1, 4, 2), np.float32)}, {}, baseline, 0.97)
    assert out["target_acc"] == pytest.approx(0.873) and out["init_signal"].shape == (1, 4, 2)


def test_unknown_optimizer_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown optimizer 'lion'"):
        case_train.setting("lion", 0.1)


def test_backward_factor_at_init_is_chi1_to_the_depth():
    """Linear MLP: E|delta|^2 is multiplied by chi_1 = sigma_w2 per layer (docs/theory.md section 2)."""
    from theory import meanfield as mf
    depth, sw2 = 8, 0.5
    net = nets.make_net(DeepMLP(2, 1024, depth, "linear"), (64,))
    params, _ = net.model.init(jax.random.key(2), (sw2, 0.0))
    x = jax.random.normal(jax.random.key(3), (64, 64))
    signal = case_train.init_signals(net, jax.tree.map(lambda a: a[None], params), x, jnp.arange(64) % 2)
    measured = summary_train.grad_factor(np.asarray(signal))[0]
    theory = float(mf.chi1(sw2, 0.0, "linear")) ** (depth - 1)
    assert theory == pytest.approx(0.5 ** 7)
    assert measured == pytest.approx(theory, rel=0.2)


def test_selection_trains_every_point_at_every_rate_and_a_single_rate_is_taken_as_it_is():
    cfg = replace(config_train.SMOKE, model=config_train.MLPConfig(acts=("tanh",), width=8, depths=(3,)),
                  opt=config_train.LrGridConfig(sgd_lr=(0.01, 0.2), adam_lr=(1e-3,)))
    data, n_classes, shape = study_train.load_data(cfg)
    cases = study_train.study_cases(cfg)
    assert list(selection.grids(cases, cfg.opt.lrs)) == ["tanh__d3__sgd"]      # adam has one rate: nothing to select
    chosen = study_train.choose_rates(cfg, data, nets.case_nets(cases, n_classes, shape), cases, progress=False)
    out = chosen["tanh__d3__sgd"]
    n_points = len(cases["tanh__d3__sgd"].points["role"])                # 4 phases + 2 grid points
    # selected at ceil(0.5 x 6) = 3 steps on two seeds, the same run read at floor(0.2 x 6) = 1 step too
    assert out["select_horizons"].tolist() == [3, 1] and out["select_alive"].dtype == bool
    assert out["select_val_loss"].shape == out["select_val_loss_short"].shape == (n_points, 2, 2)
    assert not np.array_equal(out["select_val_loss"], out["select_val_loss_short"])      # two evaluations, not one
    for tag in ("", "_short"):
        picked = selection.choose(out[f"select_val_loss{tag}"], out[f"select_alive{tag}"])
        np.testing.assert_array_equal(out[f"point_lr{tag}"], out["select_lr"][picked])
    assert chosen["tanh__d3__adam"]["point_lr"].tolist() == [1e-3] * 4 and "select_lr" not in chosen["tanh__d3__adam"]
    again = study_train.choose_rates(cfg, data, nets.case_nets(cases, n_classes, shape), cases, progress=False)
    np.testing.assert_array_equal(again["tanh__d3__sgd"]["point_lr"], out["point_lr"])   # deterministic selection


def test_points_are_phase_points_then_grid_for_the_first_optimizer_only():
    cfg = config_train.SMOKE
    pts = {name: c.points for name, c in study_train.study_cases(cfg).items()}
    m = pts["tanh__d3__sgd"]
    assert m["role"].tolist() == ["ordered-deep", "EOC", "prejudice", "neutrality", "grid", "grid"]
    assert m["theory_phase"][:4].tolist() == ["ordered deep prejudice", "transient deep prejudice (EOC)", "prejudice",
                                              "neutrality"]
    assert m["sigma_w2"][1] == pytest.approx(1.986073, rel=1e-5)      # docs/theory.md oracle at sigma_b2 = 0.1
    np.testing.assert_allclose(m["chi1_pow"][1], 1.0, atol=1e-6)     # the EOC: chi_1 = 1
    # the theory a measured factor is compared with follows q_1 = sigma_w2 + sigma_b2 down to q*: below chi_1^2
    from theory import meanfield as mf
    np.testing.assert_allclose(m["backward_product"], mf.backward_product(m["sigma_w2"], m["sigma_b2"], "tanh", 3),
                               rtol=1e-12)
    assert m["backward_product"][1] < 0.95
    _, xi_c = mf.depth_scales(m["sigma_w2"][0], 0.1, "tanh")
    assert m["depth_over_xi_c"][0] == pytest.approx(3 / float(xi_c)) and m["depth_over_xi_c"][1] == 0.0   # EOC: xi_c inf
    assert pts["tanh__d5__sgd"]["role"].tolist()[-1] == "neutrality"          # no grid at depth 5
    assert "grid" not in pts["tanh__d3__adam"]["role"].tolist()


def test_phase_names_and_eoc_factors_choose_the_points_and_pooled_relu_has_two_edges():
    m = phases.case_points("tanh", 30, phases.phase_rows("tanh", 0.1, 3, ("EOC", "neutrality"), eoc_factors=(0.7, 1.5)))
    assert m["role"].tolist() == ["EOC", "neutrality", "0.7xEOC", "1.5xEOC"]
    np.testing.assert_allclose(m["sigma_w2"][2:], np.array([0.7, 1.5]) * m["sigma_w2"][0])
    pooled = dict(phases.phase_points("relu+maxpool", 0.0, chaotic_factor=1.25))
    assert pooled["EOC"] == pytest.approx(4 * np.pi / (3 * np.pi + 2), rel=1e-6)          # forward criterion
    assert pooled["gradient EOC"] == pytest.approx(4 / 3, rel=1e-6)
    assert pooled["between"] == pytest.approx(np.sqrt(pooled["EOC"] * 4 / 3), rel=1e-9)
    assert pooled["chaotic-deep"] == pytest.approx(1.25 * 4 / 3, rel=1e-6)
    labels = phase.point_theory("relu+maxpool", 30, [pooled["between"]], [0.0])["theory_phase"].tolist()
    assert labels == ["vanishing-gradient deep prejudice (chi1~ >= 1 > chi1)"]
    with pytest.raises(ConfigError, match="none of --phases.names"):
        phases.phase_rows("relu", 0.1, 3, names=("neutrality",))


def test_summary_statistics_have_known_values():
    lo, hi = t_interval([1.0, 2.0, 3.0])
    assert (lo + hi) / 2 == pytest.approx(2.0) and (hi - lo) / 2 == pytest.approx(4.302653 / np.sqrt(3), rel=1e-5)
    assert t_interval([0.5]) is None
    assert summary_train.censored_median(np.array([10.0, np.nan, 30.0])) == 30.0
    assert summary_train.censored_median(np.array([10.0, np.nan, np.nan])) is None
    assert [e for e in range(11) if Plan(epochs=10, eval_every=4, dense_until=2).evaluated(e)] == [0, 1, 2, 4, 8, 10]


def test_dense_evaluations_take_a_stride():
    plan = Plan(epochs=12, eval_every=5, dense_until=6, dense_every=2)
    assert [e for e in range(13) if plan.evaluated(e)] == [0, 2, 4, 5, 6, 10, 12]


def _case(final_acc_by_point: dict[str, list[float]], steps=(0, 2, 4)) -> dict:
    """A hand-made case: per point its seeds' final test accuracies (f_max follows: absorbed where trained)."""
    roles = list(final_acc_by_point)
    point = np.concatenate([[p] * len(v) for p, v in enumerate(final_acc_by_point.values())])
    final = np.concatenate(list(final_acc_by_point.values()))
    m, e = len(point), len(steps)
    acc = np.stack([np.full(m, 0.5), (0.5 + final) / 2, final])
    fmax = np.where(acc > 0.8, 0.53, 1.0)
    n_p = len(roles)
    return {"act": np.array("tanh"), "depth": np.array(100), "optimizer": np.array("sgd"), "width": np.array(256),
            "step": np.array(steps), "point": point, "role": np.array(roles)[point], "sigma_w2": np.ones(m),
            "sigma_b2": np.full(m, 0.1), "seed": np.arange(m), "lr": np.full(m, 0.01), "alive": np.ones((e, m), bool),
            "test_acc": acc, "test_fmax": fmax, "test_class_acc": np.stack([acc, acc], -1),
            "init_signal": np.ones((m, 4, 2)), "target_acc": np.array(0.9), "majority_share": np.array(0.535),
            "linear_test_acc": np.array(0.93), "ridge_test_acc": np.array(0.92), "point_role": np.array(roles),
            "point_sigma_w2": np.linspace(1, 3, n_p), "point_sigma_b2": np.full(n_p, 0.1),
            "point_theory_phase": np.array(["x"] * n_p), "point_xi_c": np.full(n_p, 20.0),
            "point_depth_over_xi_c": np.full(n_p, 5.0), "point_lr": np.full(n_p, 0.01),
            "point_rates_alive": np.full(n_p, 6), "point_backward_product": np.ones(n_p), "point_chi1_pow": np.ones(n_p)}


def test_trains_is_counted_with_an_exact_interval_and_compared_with_the_eoc_by_fisher():
    r = _case({"EOC": [0.95] * 8, "prejudice": [0.95] * 3 + [0.6] * 5, "ordered-deep": [0.55] * 8})
    out = summary_train.summarize(r, config_train.TrainLoopConfig())
    rows = {row["phase"]: row for row in out["phases"]}
    assert [rows[p]["trains"] for p in ("EOC", "prejudice", "ordered-deep")] == [8, 3, 0]
    assert rows["EOC"]["fisher_p_vs_eoc"] is None
    assert rows["ordered-deep"]["fisher_p_vs_eoc"] == pytest.approx(1.554e-4, rel=1e-3)     # 8/8 vs 0/8, two-sided
    assert rows["prejudice"]["fisher_p_vs_eoc"] == pytest.approx(0.02564, rel=1e-3)         # 8/8 vs 3/8
    lo, hi = rows["ordered-deep"]["trains_ci95"]
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 8), rel=1e-9)                 # Clopper-Pearson at k = 0
    assert rows["EOC"]["steps_absorbed"] == [4] * 8 and rows["ordered-deep"]["steps_absorbed_median"] is None
    assert rows["EOC"]["steps_to_target"] == [4] * 8


def test_steps_text_gives_the_censored_median_over_every_seed():
    from jaxinit.igb.summary_train import steps_text
    assert steps_text([40, 52, None, 46, 49, 30, None, None]) == "5/8 (median 50.5)"   # never counts as latest
    assert steps_text([10, 20, 30, 40]) == "4/4 (median 25)"      # the middle two averaged, not the upper one
    assert steps_text([None, None, 3]) == "1/3 (median never)"   # more than half never: no median step
    assert steps_text([None]) == "0/1"
