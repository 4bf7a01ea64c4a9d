"""Both IGB entry points: smoke presets end to end, saved results, re-plotting, resume, bad input -> exit 2,
and the notebook API (in memory, no file)."""
import json
import os

import numpy as np
import pytest

from experiments import igb_init, igb_train
from jaxinit import igb
from jaxinit.run import cli, files
from jaxinit.igb import config_init, config_train


def _run(module, argv):
    return cli.run(module.EXPERIMENT, argv)


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


def test_igb_init_smoke_writes_results_consistent_with_the_theory(init_run):
    from theory import igb as tigb
    summary = json.loads((init_run / "summary.json").read_text())
    cfg = config_init.SMOKE
    n_grid = len(cfg.grid.sigma_w2) * len(cfg.grid.sigma_b2)
    assert set(summary["cases"]) == {f"{i}/{c}" for i in ("gaussian", "digits")
                                     for c in ("mlp_tanh", "resmlp_tanh", "vit", "cnn_max")}
    res = dict(np.load(init_run / "results" / "digits__mlp_tanh.npz"))
    assert res["c"].shape == (cfg.probe.n_draws, n_grid, cfg.model.mlp_depth)
    assert res["c_theory"].shape == (n_grid, cfg.model.mlp_depth + 1)
    assert res["grad_quantiles"].shape == (cfg.probe.n_draws, n_grid, cfg.model.mlp_depth + 1, 3, 5)
    # f_max is a count over n_inputs; the readout prediction is the IGB formula at each draw's readout c
    n = cfg.probe.n_inputs
    np.testing.assert_allclose(res["fmax_2"] * n, np.round(res["fmax_2"] * n), atol=1e-4)
    gamma = res["c_readout"] / (1 - res["c_readout"])
    np.testing.assert_allclose(res["fmax2_theory_readout"], np.mean(0.5 + np.arctan(np.sqrt(gamma)) / np.pi, 0), rtol=1e-5)
    np.testing.assert_allclose(res["fmax2_theory_mf"], tigb.fmax_mean(res["gamma_theory_out"], 2), rtol=1e-9)
    assert 0.3 < float(res["c0_mean"]) < 0.9          # digits on the sphere overlap a lot: c0 is not 0
    assert abs(float(dict(np.load(init_run / "results" / "gaussian__mlp_tanh.npz"))["c0_mean"])) < 0.05
    assert "grad_quantiles" not in dict(np.load(init_run / "results" / "digits__vit.npz"))
    # layer 1 is linear: c1 follows from the data's overlaps exactly, up to finite width
    np.testing.assert_allclose(res["c"][:, :, 0].mean(0), res["c_theory"][:, 0], atol=0.08)
    widths = summary["width"]
    assert [(r["phase"], r["width"]) for r in widths] == [("EOC", 16), ("EOC", 32), ("neutrality", 16), ("neutrality", 32)]


def test_igb_init_replots_from_saved_results(init_run, capsys):
    for p in (init_run / "figures").glob("*.png"):
        p.unlink()
    assert _run(igb_init, ["--replot", str(init_run)]) == 0
    names = {p.name for p in (init_run / "figures").glob("*.png")}
    assert names >= {"c_layers_digits.png", "fmax_gaussian.png", "grads_digits.png", "width.png"}


def test_igb_train_smoke_runs_optimizers_and_depths_with_per_class_fields(train_run):
    summary = json.loads((train_run / "summary.json").read_text())["runs"]
    assert set(summary) == {f"tanh__d{d}__{o}" for d in (3, 5) for o in ("sgd", "adam")}
    run = summary["tanh__d3__sgd"]
    assert [r["phase"] for r in run["phases"]] == ["ordered-deep", "EOC", "prejudice", "neutrality"]
    assert run["phases"][1]["sigma_w2"] == pytest.approx(1.986073, rel=1e-3)       # docs/theory.md oracle at sigma_b2 = 0.1
    for row in run["phases"]:      # each point its own rate: the lowest validation loss of its selection curve
        assert row["lr"] in (0.05, 0.2) and [r["lr"] for r in row["lr_curve"]] == [0.05, 0.2]
        best = min(row["lr_curve"], key=lambda r: (r["disqualified"] > 0, r["val_loss_mean"], r["lr"]))
        short = min(row["lr_curve"], key=lambda r: (r["disqualified_short"] > 0, r["val_loss_mean_short"], r["lr"]))
        assert (row["lr"], row["lr_short"]) == (best["lr"], short["lr"])
    # selected at half the reported run (6 steps) on two seeds; the choice at floor(0.2 x 6) = 1 step beside it
    assert run["selection"] == {"criterion": "val_loss", "horizon_steps": 3, "short_steps": 1, "seeds": 2, "rates": 2,
                                "points": 6, "changed_at_short": run["selection"]["changed_at_short"]}
    adam = summary["tanh__d3__adam"]
    assert {r["lr"] for r in adam["phases"]} == {1e-3} and all(r["lr_curve"] == [] for r in adam["phases"])
    assert adam["selection"] is None and all(r["lr_short"] is None for r in adam["phases"])
    assert run["target_acc"] == pytest.approx(run["target_of_linear"] * run["linear_test_acc"])
    assert len(run["grid"]) == 2 and summary["tanh__d5__sgd"]["grid"] == []
    assert json.loads((train_run / "run.json").read_text())["status"] == "finished"   # not the last epoch's
    rows = [json.loads(line) for line in (train_run / "metrics.jsonl").read_text().splitlines()]
    assert {(r["optimizer"], r["depth"]) for r in rows} == {(o, d) for o in ("sgd", "adam") for d in (3, 5)}
    assert sorted({r["step"] for r in rows}) == [0, 1, 2, 3, 6]   # every step up to dense_until = 2, every 3, the last
    n_test = config_train.SMOKE.data.n_test
    for r in rows:
        assert len(r["test_class_acc"]) == len(r["test_class_freq"]) == len(r["test_class_loss"]) == 2
        assert r["test_fmax"] == max(r["test_class_freq"]) and sum(r["test_class_freq"]) == pytest.approx(1.0)
        assert r["test_fmax"] * n_test == pytest.approx(round(r["test_fmax"] * n_test), abs=1e-4)
    res = dict(np.load(train_run / "results" / "tanh__d5__sgd.npz"))
    counts = np.bincount(_test_labels(), minlength=2)
    np.testing.assert_allclose(res["test_acc"], (res["test_class_acc"] * counts).sum(-1) / counts.sum(), rtol=1e-5)
    assert res["init_signal"].shape == (len(res["role"]), 6, 2)
    assert {p.name for p in (train_run / "figures").glob("*.png")} >= {
        "fmax_sgd.png", "fmax_adam.png", "verdict.png", "lr_selection.png", "depth_over_xi.png", "overlay_tanh__d3__sgd.png", "curves_tanh__d5__adam.png"}


def _test_labels():
    from jaxinit.data import load_dataset
    return np.asarray(load_dataset(config_train.SMOKE.data).y_test)


def test_relu_phase_points_come_from_the_theory():
    """Unbounded ReLU: no neutrality line, so the third point is chaotic-deep at chaotic_factor x EOC = 3."""
    from jaxinit.shared import phases
    points = dict(phases.phase_points("relu", 0.1))
    assert list(points) == ["ordered-deep", "EOC", "chaotic-deep"]
    assert points["EOC"] == pytest.approx(2.0, rel=1e-6) and points["chaotic-deep"] == pytest.approx(3.0, rel=1e-6)
    assert phases.theory_phase_names("relu", np.array([1.5, 3.0]), np.array([0.1, 0.1]), 30) == [
        "ordered deep prejudice", "chaotic deep prejudice"]


@pytest.mark.parametrize("module,argv,message", [
    (igb_init, ["--grid.sigma_w2=-1"], "error: --grid: sigma_w2 must be > 0 and sigma_b2 >= 0, got (-1.0,) / (0.1,)"),
    (igb_init, ["--model.names=mlp,transformer9000"], "error: Error parsing --model.names: expected one of "
     "mlp|resmlp|vit|vit_nores|cnn_max|cnn_avg, got 'transformer9000'"),
    (igb_init, ["--width.widths=0"], "error: --width: widths, depth, n_draws >= 1 and n_inputs >= 4, got (0,), 3, 2, 16"),
    (igb_train, ["--sweep.optimizers=sgd,lion"],
     "error: Error parsing --sweep.optimizers: expected one of sgd|momentum|adam, got 'lion'"),
    (igb_train, ["--sweep.optimizers=sgd,sgd"],
     "error: --sweep.optimizers (at least one) and --model.depths must not repeat a value"),
    (igb_train, ["--model.depths=3,0"], "error: --model: width and every depth must be >= 1, got width=16, depths=(3, 0)"),
    (igb_train, ["--model.width=0"], "error: --model: width and every depth must be >= 1, got width=0, depths=(3, 5)"),
    (igb_train, ["--model.acts=sigmoid"], "error: Error parsing --model.acts: expected one of tanh|relu|relu+maxpool|relu+avgpool, got 'sigmoid'"),
    (igb_train, ["--net.width=8"], "error: Unrecognized options: --net.width=8"),
    (igb_train, ["--phases.ordered_factor=1.2"],
     "error: --phases: ordered_factor in (0, 1), chaotic_factor and neutral_factor > 1"),
    (igb_train, ["--opt.sgd_lr="], "error: Error parsing --opt.sgd_lr: expected a comma-separated list, got ''"),
    (igb_train, ["--phases.names=sideways"], "error: Error parsing --phases.names: expected one of ordered-deep|EOC|"
     "between|gradient EOC|prejudice|neutrality|chaotic-deep, got 'sideways'"),
    (igb_train, ["--phases.names=neutrality", "--model.acts=relu"], "error: relu: none of --phases.names=['neutrality'] "
     "is a phase of this activation (ordered-deep, EOC, chaotic-deep)"),
    (igb_train, ["--opt.sgd_lr=0"], "error: --opt.sgd_lr: learning rates must be finite and > 0, got (0.0,)"),
])
def test_bad_input_is_one_exact_line_and_exit_2(module, argv, message, tmp_path, capsys):
    assert _run(module, ["--preset", "smoke", "--out", str(tmp_path / "run"), *argv]) == 2
    assert capsys.readouterr().err == message + "\n"
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_unparsable_value_names_the_key(tmp_path, capsys):
    assert _run(igb_init, ["--preset", "smoke", "--out", str(tmp_path), "--probe.n_draws=lots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:") and "--probe.n_draws" in err and "'lots'" in err


@pytest.mark.parametrize("module,name", [(igb_init, "gaussian__mlp_tanh.npz"), (igb_train, "tanh__d3__sgd.npz")])
@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_damaged_results_on_replot_and_resume_are_one_line_exit_2(module, name, damage, init_run, train_run, tmp_path,
                                                                   capsys):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(init_run if module is igb_init else train_run, run)
    path = run / "results" / name
    path.write_bytes(b"" if damage == "empty" else path.read_bytes()[:200])
    why = "EOFError" if damage == "empty" else "BadZipFile"
    expected = f"error: {path} is not a readable results file ({why}); delete it to have it computed again, or rerun with --overwrite to start the run over\n"
    for argv in (["--replot", str(run)], ["--out", str(run), "--resume"]):
        capsys.readouterr()
        if module is igb_train and "--resume" in argv:
            # the engine's metrics.jsonl is the record: a resume rebuilds the damaged file from it
            assert _run(module, argv) == 0
            original = files.load_npz((init_run if module is igb_init else train_run) / "results" / name)
            rebuilt = files.load_npz(path)
            assert set(rebuilt) == set(original)
            for k in original:
                np.testing.assert_array_equal(rebuilt[k], original[k], err_msg=k)
            continue
        assert _run(module, argv) == 2
        assert capsys.readouterr().err == expected


def test_notebook_api_runs_in_memory_and_writes_no_file(tmp_path, monkeypatch, train_run):
    monkeypatch.chdir(tmp_path)
    result = igb.train_phases(igb.train_preset("smoke"))
    figures = igb.train_figures(result.arrays, 0.85, 0.6)
    assert os.listdir(tmp_path) == []
    saved = json.loads((train_run / "summary.json").read_text())
    assert result.summary == saved                            # the experiment writes what the library computes
    assert {"fmax_sgd", "verdict"} <= set(figures)
    init = igb.probe_init(igb.init_preset("smoke"))
    assert "width" in init.arrays and os.listdir(tmp_path) == []


def test_an_igb_train_overwrite_that_cannot_start_leaves_the_finished_run_byte_identical(train_run, tmp_path,
                                                                                         capsys):
    """Issue "Never lose a run, round two", item 2: the data error is found before anything is deleted."""
    import shutil
    run = tmp_path / "run"
    shutil.copytree(train_run, run)
    before = {p.relative_to(run): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"}
    capsys.readouterr()
    assert _run(igb_train, ["--preset", "smoke", "--out", str(run), "--overwrite", "--data.n_val=100000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    after = {p.relative_to(run): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"}
    assert after == before


def test_a_finished_igb_run_without_checkpoints_whose_rows_lack_init_signal_is_resummarised_to_the_same_bytes(
        train_run, tmp_path, capsys):
    """A finished run re-summarised from metrics.jsonl (no checkpoint) evaluates step 0 again, like every resume: rows
    an older version wrote without ``init_signal`` get it back, and summary.json and metrics.jsonl come out as the
    run wrote them (the signals at init are measured in the evaluation of step 0)."""
    import shutil
    run = tmp_path / "run"
    shutil.copytree(train_run, run)
    shutil.rmtree(run / "checkpoints")
    summary, metrics = (run / "summary.json").read_bytes(), (run / "metrics.jsonl").read_bytes()
    rows = [json.loads(line) for line in metrics.decode().splitlines()]
    assert sum("init_signal" in r for r in rows) == sum(r["step"] == 0 for r in rows) > 0
    old = [{k: v for k, v in r.items() if k != "init_signal"} for r in rows]       # as an older version wrote them
    (run / "metrics.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in old))
    capsys.readouterr()
    assert _run(igb_train, ["--preset", "smoke", "--out", str(run), "--resume"]) == 0
    assert "re-summarised from metrics.jsonl" in capsys.readouterr().err
    assert (run / "summary.json").read_bytes() == summary and (run / "metrics.jsonl").read_bytes() == metrics


def test_the_summary_is_a_function_of_the_saved_results_and_the_short_horizons_rate_is_trained(train_run):
    from jaxinit.igb import summary_train, tables
    from jaxinit.jsonsafe import to_json
    saved = json.loads((train_run / "summary.json").read_text())
    assert json.loads(json.dumps(to_json(summary_train.summarize_saved(train_run)))) == saved
    res = dict(np.load(train_run / "results" / "tanh__d3__sgd.npz"))
    changed = np.flatnonzero(res["point_lr_short"] != res["point_lr"])
    for p in range(len(res["point_role"])):      # arm 1 exactly where the short horizon chose another rate
        arm1 = (res["point"] == p) & (res["arm"] == 1)
        assert arm1.any() == (p in changed)
        assert np.all(res["lr"][arm1] == res["point_lr_short"][p])
    rows = saved["runs"]["tanh__d3__sgd"]["phases"]
    assert all(r["at_short"]["same_rate"] == (r["lr_short"] == r["lr"]) for r in rows)
    assert "gauss_fmax" in res and res["gauss_fmax"].shape == res["test_fmax"].shape
    assert "| ordered-deep" in tables.run_tables(train_run)
