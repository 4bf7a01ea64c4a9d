"""Both IGB entry points: smoke presets end to end, saved results, re-plotting, bad input -> exit 2."""
import json

import numpy as np
import pytest

from experiments import igb_init, igb_train
from jaxinit import cli


def _run(module, argv):
    return cli.run_experiment(f"experiments.{module.__name__}", module.__doc__, type(module.CPU), module.PRESETS,
                              "cpu", module.main, "unused", module.validate, argv=argv)


@pytest.fixture(scope="module")
def init_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("igb_init")
    assert _run(igb_init, ["--preset", "smoke", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def train_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("igb_train")
    assert _run(igb_train, ["--preset", "smoke", "--out", str(out)]) == 0
    return out


def test_igb_init_smoke_writes_results_and_figures(init_run):
    summary = json.loads((init_run / "summary.json").read_text())
    cfg = igb_init.SMOKE
    n_grid = len(cfg.grid.sigma_w2) * len(cfg.grid.sigma_b2)
    assert set(summary["cases"]) >= {"gaussian/mlp_tanh", "digits/mlp_tanh", "gaussian/resmlp_tanh", "digits/vit",
                                     "gaussian/cnn_max"}
    for rows in summary["cases"].values():
        assert len(rows) == n_grid
        assert all(0.5 <= r["fmax2"] <= 1.0 and 0.1 <= r["fmaxall"] <= 1.0 for r in rows)
        assert all(0.5 <= r["fmax2_gp"] <= 1.0 and 0.5 <= r["fmax2_theory_rho"] <= 1.0 for r in rows)
    res = dict(np.load(init_run / "results" / "digits__mlp_tanh.npz"))
    assert res["c"].shape == (cfg.probe.n_draws, n_grid, cfg.net.mlp_depth)
    assert res["c_theory"].shape == (n_grid, cfg.net.mlp_depth + 1)
    assert res["grad_quantiles"].shape == (cfg.probe.n_draws, n_grid, cfg.net.mlp_depth + 1, 3, 5)
    assert 0.3 < float(res["c0_mean"]) < 0.9          # digits on the sphere overlap a lot: c0 is not 0
    assert abs(float(dict(np.load(init_run / "results" / "gaussian__mlp_tanh.npz"))["c0_mean"])) < 0.05
    assert "grad_quantiles" not in dict(np.load(init_run / "results" / "digits__vit.npz"))
    # layer 1 is linear: c1 follows from the data's overlaps exactly, up to finite width
    np.testing.assert_allclose(res["c"][:, :, 0].mean(0), res["c_theory"][:, 0], atol=0.08)


def test_igb_init_replots_from_saved_results(init_run):
    for p in (init_run / "figures").glob("*.png"):
        p.unlink()
    paths = igb_init.plot_all(init_run)
    assert {p.name for p in paths} >= {"c_layers_digits.png", "fmax_gaussian.png", "grads_digits.png"}
    assert all(p.stat().st_size > 1000 for p in paths)


def test_igb_train_smoke_writes_results_and_figures(train_run):
    summary = json.loads((train_run / "summary.json").read_text())
    assert set(summary) == {"tanh"}
    phases = summary["tanh"]["phases"]
    assert [r["phase"] for r in phases] == ["ordered-deep", "EOC", "prejudice", "neutrality"]
    assert phases[1]["sigma_w2"] == pytest.approx(1.986073, rel=1e-3)       # THEORY.md oracle at sigma_b2 = 0.1
    assert [r["theory_phase"] for r in phases] == ["ordered deep prejudice", "transient deep prejudice (EOC)",
                                                   "prejudice", "neutrality"]
    assert len(summary["tanh"]["grid"]) == 2
    rows = [json.loads(line) for line in (train_run / "metrics.jsonl").read_text().splitlines()]
    steps = sorted({r["step"] for r in rows})
    assert steps == [0, 1, 2, 3, 6]          # every step up to dense_until = 2, then every 3, and the last
    assert all(0.0 <= r["test_acc"] <= 1.0 and 0.5 <= r["test_fmax"] <= 1.0 for r in rows)
    paths = igb_train.plot_all(train_run)
    assert {p.name for p in paths} == {"curves_tanh.png", "overlay_tanh.png"}


def test_relu_phase_points_come_from_the_theory():
    """Unbounded ReLU: no neutrality line, so the third point is chaotic-deep at chaotic_factor x EOC = 2."""
    points = dict(igb_train.phase_points("relu", igb_train.PhaseConfig()))
    assert list(points) == ["ordered-deep", "EOC", "chaotic-deep"]
    assert points["EOC"] == pytest.approx(2.0, rel=1e-6) and points["chaotic-deep"] == pytest.approx(3.0, rel=1e-6)
    assert igb_train.theory_phase_names("relu", np.array([1.5, 3.0]), np.array([0.1, 0.1]), 30) == [
        "ordered deep prejudice", "chaotic deep prejudice"]


@pytest.mark.parametrize("module,argv", [
    (igb_init, ["--grid.sigma_w2=-1"]),
    (igb_init, ["--net.models=mlp,transformer9000"]),
    (igb_init, ["--probe.n_draws=lots"]),
    (igb_train, ["--train.lr=0"]),
    (igb_train, ["--net.acts=sigmoid"]),
    (igb_train, ["--phases.ordered_factor=1.2"]),
])
def test_bad_input_is_one_line_and_exit_2(module, argv, tmp_path, capsys):
    assert _run(module, ["--preset", "smoke", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
