"""The joined study (issue 22): the new measures on constructed networks, the favoured-class identity statistic and
its null, and `python -m experiments.memory_phases` end to end (smoke), bad input, --help."""
import itertools
import json
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import memory_phases
from jaxinit import memory
from jaxinit.run import cli
from jaxinit.memory import measures, study
from jaxinit.models.deep import DeepMLP
from jaxinit.shared import nets

N_CLASSES = 10


def _run(argv):
    return cli.run(memory_phases.EXPERIMENT, argv)


def _off(n=512, d=40, q0=1.0):
    return measures.off_distribution_inputs(jax.random.key(7), jnp.sqrt(q0) * jnp.ones((4, d)), n)


def _measure(net, params, x):
    return measures.measure(net.module, params, x, jnp.zeros(x.shape[0], jnp.int32))


def test_off_distribution_inputs_have_the_data_norm_and_no_overlap():
    x = _off(n=2000, q0=2.5)
    assert x.shape == (2000, 40)
    np.testing.assert_allclose(float(jnp.mean(jnp.sum(x ** 2, 1)) / 40), 2.5, rtol=0.03)
    gram = np.asarray(x @ x.T) / 40 / 2.5
    assert abs(gram[np.triu_indices(2000, 1)].mean()) < 0.01        # c0 = 0: independent directions


def test_a_network_biased_by_construction_favours_its_class_and_a_neutral_one_does_not():
    net = nets.make_net(DeepMLP(N_CLASSES, 256, 3, "tanh"), (40,))
    x = _off()
    neutral = nets.scaled_draw(net, jax.random.key(0), 4.0, 0.0)      # chaotic, sigma_b2 = 0: c_L ~ 0
    biased = jax.tree.map(lambda a: a, neutral)
    biased["head"]["bias"] = biased["head"]["bias"].at[3].set(50.0)   # a huge readout bias on class 3
    out_b, out_n = _measure(net, biased, x), _measure(net, neutral, x)
    assert float(out_b["fmax"]) > 0.99 and int(measures.favoured(np.asarray(out_b["class_freq"]))) == 3
    assert float(out_n["fmax"]) < 0.3
    assert float(out_n["c"]) < 0.1 and float(out_n["gamma"]) < 0.15
    assert float(out_b["c"]) == pytest.approx(float(out_n["c"]))        # the readout bias leaves h_L alone


def test_measured_c_at_the_last_hidden_layer_follows_the_theory_at_init():
    """Off-distribution inputs are the theory's (q0 = 1, c0 = 0): measured c of h_L == propagate's c_L."""
    depth, net, x = 3, nets.make_net(DeepMLP(N_CLASSES, 512, 3, "tanh"), (40,)), _off()
    sw2, sb2 = np.array([1.0, 1.5, 4.0]), np.array([2.0, 0.1, 0.0])
    theory = study.init_theory("tanh", depth, sw2, sb2, N_CLASSES)
    measured = [float(_measure(net, nets.scaled_draw(net, jax.random.key(1), a, b), x)["c"]) for a, b in zip(sw2, sb2)]
    np.testing.assert_allclose(measured, theory["c_L"], atol=0.05)
    assert theory["c_L"][0] > 0.8 and theory["c_L"][2] < 0.05          # a prejudiced and a neutral point
    assert theory["fmax_theory"][0] > 0.5 > 0.2 > theory["fmax_theory"][2] >= 0.1


def test_kernel_norm_counts_kernels_only():
    params = {"a": {"kernel": jnp.full((2, 2), 1.0), "bias": jnp.full((2,), 100.0)},
              "head": {"kernel": jnp.full((1, 5), 2.0)}}
    assert float(measures.kernel_norm(params)) == pytest.approx(np.sqrt(4 + 20))


def test_identity_statistic_sits_at_chance_under_shuffled_labels_and_at_one_when_identities_match():
    rng = np.random.default_rng(3)
    a = rng.integers(0, N_CLASSES, 1000)
    shuffled = measures.identity_test(a, rng.permutation(a), n_draws=2000)
    assert shuffled["chance"] == pytest.approx(0.1, abs=0.01)
    assert abs(shuffled["match"] - shuffled["chance"]) < 0.03 and shuffled["p"] > 0.01
    same = measures.identity_test(a, a, n_draws=2000)
    assert same["match"] == 1.0 and same["p"] == pytest.approx(1 / 2001)
    assert measures.identity_test(a, (a + 1) % N_CLASSES, n_draws=2000)["match"] == 0.0


def test_chance_level_is_the_exact_mean_of_the_permutation_null_within_strata():
    a, b, strata = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 1, 1, 2, 0]), np.array([0, 0, 0, 0, 1, 1])
    null = []
    for p0 in itertools.permutations(range(4)):
        for p1 in itertools.permutations(range(2)):
            null.append(measures.identity_statistic(a, np.concatenate([b[:4][list(p0)], b[4:][list(p1)]])))
    assert measures.chance_level(a, b, strata) == pytest.approx(np.mean(null))
    assert measures.chance_level(a, b, strata) != pytest.approx(measures.chance_level(a, b))   # strata matter


def test_favoured_class_and_spread_of_undefined_members():
    freq = np.array([[0.1, 0.7, 0.2], [np.nan, 0.5, 0.5]])
    assert measures.favoured(freq).tolist() == [1, -1]
    out = measures.identity_test([1, -1, 2], [1, 0, 2], n_draws=10)
    assert out["n"] == 2 and out["match"] == 1.0
    np.testing.assert_allclose(measures.class_spread([[0.2, np.nan, 0.9]]), [0.7])


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("memory_phases")
    assert _run(["--preset", "smoke", "--out", str(out)]) == 0
    return out


def test_smoke_preset_runs_end_to_end(smoke_run):
    summary = json.loads((smoke_run / "summary.json").read_text())
    cfg = memory.preset("smoke")
    assert set(summary["cases"]) == {f"tanh__d3__{o}" for o in cfg.sweep.optimizers}
    assert len(summary["members"]) == 3 * 3 * cfg.phases.seeds
    for m in summary["members"]:
        assert 0 <= m["favoured_init"] < N_CLASSES and 0.1 <= m["off_fmax_init"] <= 1
        assert m["best_step"] in (0, 3, 6) and m["clocks_at_best"]["T_adapt"] == pytest.approx(m["lr"] * m["best_step"])
        assert m["favoured_stays"] == (m["favoured_init"] == m["favoured_best"])
    case = summary["cases"]["tanh__d3__sgd_l2"]
    assert [p["role"] for p in case["points"]] == ["ordered-deep", "EOC", "neutrality"]
    assert case["identity_best"]["n"] == 6 and 0 < case["identity_best"]["chance"] <= 1
    assert case["line_test_acc"]["grid_sigma_w2"] == sorted(p["sigma_w2"] for p in case["points"])
    assert case["line_test_acc"]["slope_p"] is not None
    traj = case["trajectory"]
    assert traj["step"] == [0, 3, 6] and traj["identity"][0] == 1.0 and len(traj["test_acc"][0]) == 3
    lrs = [p["lr"] for p in case["points"]]
    np.testing.assert_allclose(traj["clocks"]["T_adapt"][2], [6 * lr for lr in lrs])
    np.testing.assert_allclose(traj["clocks"]["T_L2"][1], [0.02 * 3 * lr for lr in lrs])
    assert sorted(p.name for p in (smoke_run / "figures").iterdir()) == [
        "decay_vs_clock.png", "overlay_tanh__d3.png", "residual_vs_predicted.png"]
    sgd_l2 = [m for m in summary["members"] if m["optimizer"] == "sgd_l2"]
    assert all(m["clocks"]["T_L2"] == pytest.approx(0.02 * m["lr"] * 6) for m in sgd_l2)
    assert case["selection"] is None and all(p["lr_short"] is None for p in case["points"])    # one rate: none
    sgd = summary["cases"]["tanh__d3__sgd"]      # two rates x two seeds, chosen at half the run (step 3 of 6)
    assert sgd["selection"] == {"criterion": "val_loss", "horizon_steps": 3, "short_steps": 1, "seeds": 2, "rates": 2,
                                "points": 3, "changed_at_short": sgd["selection"]["changed_at_short"]}
    for p in sgd["points"]:
        best = min(p["lr_curve"], key=lambda r: (r["disqualified"] > 0, r["val_loss_mean"], r["lr"]))
        assert p["lr"] == best["lr"] and p["lr_short"] in (0.05, 0.2)


@pytest.mark.parametrize("argv,message", [
    (["--train.steps=0"], "error: --phases.seeds, --train.steps, batch_size, eval_every, n_off and phase_res must be "
                          ">= 1"),
    (["--opt.select_horizon=0.3"], "error: --opt.select_horizon must lie in [0.5, 1] (a fraction of the reported run) "
                                   "and --opt.select_short in [0, select_horizon), got 0.3 and 0.2"),
    (["--opt.select_seeds=1"], "error: --opt.select_seeds must be >= 2 (seeds disjoint from the reported ones), got 1"),
    (["--phases.line=1.0"], "error: --phases.line: distinct factors > 0 other than 1 (the EOC is a phase point), "
                            "got (1.0,)"),
    (["--sweep.optimizers=sgd,lion"], "error: Error parsing --sweep.optimizers: expected one of sgd|adam|sgd_l2, "
                                      "got 'lion'"),
    (["--net.width=8"], "error: Unrecognized options: --net.width=8"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, capsys):
    assert _run(["--preset", "smoke", "--out", str(tmp_path / "run"), *argv]) == 2
    assert capsys.readouterr().err == message + "\n"


def test_help_lists_every_preset_and_field(capsys):
    assert _run(["--help"]) == 0
    out = capsys.readouterr().out
    for name in memory.PRESETS:
        assert f"  {name}" in out
    for key in ("phases.line", "train.n_off", "opt.sgd_l2_lr", "opt.l2", "sweep.optimizers", "data.name"):
        assert key in out


def test_replot_redraws_the_figures_from_the_saved_run(smoke_run, capsys):
    (smoke_run / "figures" / "decay_vs_clock.png").unlink()
    assert _run(["--replot", str(smoke_run)]) == 0
    assert (smoke_run / "figures" / "decay_vs_clock.png").is_file()


def test_fit_in_memory_writes_no_file_and_returns_the_summary(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = memory.preset("smoke")
    cfg = replace(cfg, sweep=replace(cfg.sweep, optimizers=("adam",)), train=replace(cfg.train, steps=2, eval_every=2))
    result = memory.fit(cfg, progress=False)
    assert list(tmp_path.iterdir()) == []
    assert set(result.summary["cases"]) == {"tanh__d3__adam"} and len(result.summary["members"]) == 6
    assert result.arrays["tanh__d3__adam"]["off_fmax_init"].shape == (6,)
