"""The rescaling test (`jaxinit.igb.rescale`, `experiments.igb_rescale`): per-layer factors hit a measured
backward factor, the engine's init of an arm is the pretrained net times its factors, the smoke preset end to end,
bad input -> one line and exit 2, the paired statistics."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import igb_rescale
from jaxinit.run import cli
from jaxinit.data import Dataset
from jaxinit.igb import rescale
from jaxinit.igb import summary_rescale as summ
from jaxinit.igb.config_rescale import SMOKE
from jaxinit.shared import nets
from jaxinit.models import activations
from jaxinit.models.deep import DeepMLP
from jaxinit.train import engine
from jaxinit.train.engine import Plan
from jaxinit.train.step import member_streams

SW2, SB2 = 1.986073, 0.1      # tanh EOC at sigma_b2 = 0.1 (docs/theory.md section 4)


def _net(depth=6, width=32, n_classes=3, dim=20):
    return nets.make_net(DeepMLP(n_classes, width, depth, "tanh"), (dim,))


def _inputs(n=128, dim=20, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    x = x / np.sqrt((x ** 2).mean(axis=1, keepdims=True))          # |x|^2 / d = 1
    return jnp.asarray(x, jnp.float32), jnp.asarray(np.arange(n) % n_classes, jnp.int32)


def _params(net, seed=1):
    return nets.scale(nets.draw(net, jax.random.key(seed)), SW2, SB2)


def _measured(net, params, x, y):
    """|delta_1|^2 / |delta_L|^2 straight from nets.backprop_signals (classes are balanced here)."""
    s = np.asarray(nets.backprop_signals(net, params, x, y, n_out=3))
    return s[0].mean() / s[-2].mean()


@pytest.mark.parametrize("target", [0.1, 1.0, 10.0])
def test_per_layer_factors_hit_the_measured_backward_factor(target):
    net, (x, y) = _net(), _inputs()
    params = _params(net)
    c = rescale.calibrate(net, params, x, y, target, tol=0.03, max_iter=30)
    moved = rescale.rescale_params(params, c.factors)
    assert abs(np.log(_measured(net, moved, x, y) / target)) <= np.log1p(0.03) + 1e-4
    assert c.factors.shape == (5,) and np.ptp(c.factors) > 1e-3     # one factor per layer, not one for all
    # every layer's own gain a_l^2 |W_l|^2 / n mean psi'(h_{l-1})^2 is the common t, at the module's own forward
    _, hs, _ = nets.forward(net, moved, x)
    dpsi2 = jax.vmap(jax.grad(activations.get("tanh")))(hs[:-1].ravel()).reshape(hs[:-1].shape) ** 2
    w = moved["stacked_layers"]["dense"]["kernel"]
    gains = np.asarray(dpsi2.mean(axis=(1, 2)) * (w ** 2).sum(axis=(1, 2)) / w.shape[1])
    np.testing.assert_allclose(gains, c.chi, rtol=1e-4)


def test_calibration_orders_the_arms_and_an_unreachable_target_is_one_error_line():
    net, (x, y) = _net(), _inputs()
    params = _params(net)
    chis = [rescale.calibrate(net, params, x, y, t, 0.05, 30).chi for t in (0.1, 1.0, 10.0)]
    assert chis[0] < chis[1] < chis[2]
    with pytest.raises(rescale.ConfigError, match="rescale.targets=10: .* in 1 iterations"):
        rescale.calibrate(net, params, x, y, 10.0, 1e-6, 1)


def test_engine_init_of_an_arm_is_the_pretrained_net_times_its_factors():
    net, (x, y) = _net(depth=4), _inputs()
    base = _params(net, seed=7)
    factors = np.array([0.5, 1.25, 2.0], np.float32)
    model = rescale.transfer_model(net, base, SW2, SB2)
    arms = [rescale.Arm("B=1", 1.0, {3: rescale.arm_scale(factors)}, {}),
            rescale.Arm("fresh_eoc", None, {3: rescale.arm_scale(np.ones(3), fresh=True)}, {})]
    groups, _ = rescale._groups(arms, model, ("test", net), "sgd", [("B=1", 0.1, 3), ("fresh_eoc", 0.1, 3)], "t")
    ds = Dataset(x, y, x[:0], y[:0], x, y, 3, (20,), "toy")
    sweep = engine.build(ds, groups, Plan(epochs=1), **rescale.options(ds, 16, "sequential", 4))
    states = engine.init_states(sweep)
    got, fresh = states["B=1"][0].params, states["fresh_eoc"][0].params
    draw = nets.scale(nets.draw(net, member_streams(jnp.uint32(3))[0]), SW2, SB2)
    jax.tree.map(np.testing.assert_array_equal, rescale.readout(net, 3, SW2, SB2), draw["head"])
    assert not np.allclose(got["head"]["kernel"], base["head"]["kernel"])
    np.testing.assert_array_equal(got["stacked_layers"]["dense"]["kernel"],
                                  base["stacked_layers"]["dense"]["kernel"] * factors[:, None, None])
    jax.tree.map(np.testing.assert_array_equal, got["embed"], base["embed"])     # layer 1 kept
    np.testing.assert_array_equal(got["stacked_layers"]["dense"]["bias"], base["stacked_layers"]["dense"]["bias"])
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)   # jitted vs eager draw: 1 ulp
    jax.tree.map(close, got["head"], draw["head"])                                 # fresh readout, paired by seed
    jax.tree.map(close, fresh, draw)                                               # the fresh EOC arm: the draw


def test_paired_statistics_find_a_shift_and_not_a_null():
    a = np.array([0.80, 0.82, 0.79, 0.85, 0.81, 0.83, 0.80, 0.84])
    shifted = summ.paired(a + 0.05, a, summ.mean_diff)
    assert shifted["diff"] == pytest.approx(0.05) and shifted["ci95"][0] == pytest.approx(0.05)
    assert shifted["p_perm"] == pytest.approx(2 / 256)                      # exact: only the all-same signs
    null = summ.paired(a, a[::-1], summ.mean_diff)
    assert null["diff"] == pytest.approx(0.0, abs=1e-12) and null["p_perm"] == 1.0
    assert summ.median_steps(np.array([1.0, np.nan, np.nan])) == np.inf


def _run(argv):
    return cli.run(igb_rescale.EXPERIMENT, argv)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("igb_rescale")
    assert _run(["--preset", "smoke", "--out", str(out)]) == 0
    return out


def test_smoke_preset_writes_the_summary_of_every_arm(smoke_run):
    s = json.loads((smoke_run / "summary.json").read_text())
    cfg = SMOKE
    assert [a["arm"] for a in s["arms"]] == ["B=0.3", "B=3", "trained", "fresh_eoc"]
    assert s["task"]["readout"] == "fresh" and s["task"]["labels"] == "digit index"
    assert s["target_acc"] == pytest.approx(cfg.finetune.target_fraction * s["baseline"]["test_acc"])
    f = cfg.finetune
    n_rates, changed = len(cfg.opt.lrs), s["selection"]["changed_at_short"]
    assert s["selection"] == {"criterion": "val_loss", "horizon_steps": 4, "short_steps": 1, "seeds": f.select_seeds,
                              "rates": n_rates, "points": 4, "changed_at_short": changed}
    assert 4 >= f.steps / 2 and f.select_seeds >= 2                       # half the fine-tuning at the least
    for a in s["arms"]:      # each arm its own rate: the lowest mean validation loss at the horizon
        assert a["lr"] in cfg.opt.lrs and [r["lr"] for r in a["lr_curve"]] == list(cfg.opt.lrs)
        best = min(a["lr_curve"], key=lambda r: (r["disqualified"] > 0, r["val_loss_mean"], r["lr"]))
        assert a["lr"] == best["lr"] and a["lr_short"] in cfg.opt.lrs
        assert a["n_seeds"] == cfg.finetune.seeds == len(a["final_test_acc"]) == len(a["backward_factor_init"])
        assert {"steps_to_target_median", "steps_to_target_ci95", "steps_absorbed_median", "final_test_acc_mean",
                "final_test_acc_ci95", "backward_factor_init", "factors_median"} <= set(a)
    for a, t in zip(s["arms"][:2], cfg.rescale.targets):     # measured again at the engine model's init
        assert np.all(np.abs(np.log(np.array(a["backward_factor_init"]) / t)) <= np.log1p(cfg.rescale.tol) + 1e-4)
        assert len(a["factors_median"]) == cfg.model.depth - 1
    assert s["arms"][2]["factors_median"] is None and s["arms"][3]["chi_per_layer"] is None
    assert {(c["arm"], c["vs"]) for c in s["comparisons"]} >= {("B=0.3", "trained"), ("trained", "fresh_eoc")}
    assert {"diff", "ci95", "p_perm", "n"} == set(s["comparisons"][0]["final_test_acc"])
    rows = [json.loads(line) for line in (smoke_run / "metrics.jsonl").read_text().splitlines()]
    assert {r["seed"] for r in rows} == set(range(cfg.finetune.seeds))          # selection seeds are not reported
    assert sorted({r["step"] for r in rows}) == [0, 1, 2, 4, 8]
    assert all({"arm", "lr", "val_acc", "test_acc", "test_fmax"} <= set(r) for r in rows)
    assert (smoke_run / "results" / "rescale.npz").is_file() and (smoke_run / "run.json").is_file()


def test_an_existing_run_is_not_overwritten_without_the_flag(smoke_run, capsys):
    before = (smoke_run / "summary.json").read_bytes()
    assert _run(["--preset", "smoke", "--out", str(smoke_run), "--finetune.steps=9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a run of another config" in err and "--overwrite" in err
    assert (smoke_run / "summary.json").read_bytes() == before


@pytest.mark.parametrize("argv, expected", [
    (["--opt.lrs="], "opt.lrs"),
    (["--rescale.targets=steep"], "rescale.targets"),
    (["--rescale.targets=0.1,-1"], "rescale.targets"),
    (["--rescale.controls=pretrained"], "rescale.controls"),
    (["--finetune.digits=4,5,6,7,8"], "must not share a digit"),
    (["--model.depth=1"], "depth >= 2"),
])
def test_bad_input_is_one_line_and_exit_2(argv, expected, tmp_path, capsys):
    assert _run(["--preset", "smoke", "--out", str(tmp_path / "run"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "run" / "summary.json").exists()


# --------------------------------------------------------------------------- intervals honest under ties
def test_tied_median_steps_get_the_grids_resolution_not_a_zero_width_interval():
    grid = np.arange(0, 201, 10)
    assert summ.median_interval(np.full(8, 40.0), grid) == [30.0, 40.0]
    assert summ.median_interval(np.array([40.0] * 7 + [np.nan]), grid) == [30.0, float("inf")]
    assert summ.median_interval(np.full(5, 40.0), grid) is None            # 5 seeds: no 95 % order statistic
    dense = np.arange(0, 201)
    assert summ.median_interval(np.full(8, 40.0), dense) == [39.0, 40.0]


def test_median_and_signed_rank_intervals_cover_at_their_level():
    rng = np.random.default_rng(0)
    grid = np.arange(0, 10_000)
    cover_median = cover_shift = 0
    for _ in range(400):
        b = np.round(rng.normal(1000, 100, 8))
        a = b + np.round(rng.normal(30, 40, 8))
        lo, hi = summ.median_interval(b, grid)
        cover_median += lo <= 1000 <= hi
        sh = summ.hodges_lehmann(a, b, grid)["ci95"]
        cover_shift += sh[0] <= 30 <= sh[1]
    assert cover_median / 400 >= 0.95 and cover_shift / 400 >= 0.93


def test_hodges_lehmann_finds_a_planted_shift_and_not_a_null_one():
    grid = np.arange(0, 201, 10)
    b = np.array([40, 50, 40, 60, 50, 40, 70, 50], float)
    got = summ.hodges_lehmann(b + 30, b, grid)
    assert got["estimate"] == 30 and got["ci95"][0] > 0 and got["resolution"] == 10
    null = summ.hodges_lehmann(np.array([50, 40, 40, 60, 40, 50, 60, 50], float), b, grid)
    assert null["ci95"][0] < 0 < null["ci95"][1] and null["n_zero"] >= 1


def test_the_signed_rank_distribution_is_exact():
    import itertools
    n = 5
    sums = [sum(r for r, s in zip(range(1, n + 1), signs) if s) for signs in itertools.product((0, 1), repeat=n)]
    expected = np.cumsum(np.bincount(sums, minlength=n * (n + 1) // 2 + 1)) / 2 ** n
    np.testing.assert_allclose(summ._signed_rank_cdf(n), expected)
