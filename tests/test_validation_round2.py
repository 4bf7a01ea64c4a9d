"""Never lose a run, round two: input validation (issue 20, items 8, 11 memory, 14).

Every refusal here is one line on stderr, exit status 2, before the run directory is claimed: no
config.json is left behind to block the corrected rerun.
"""
import json
from dataclasses import replace

import numpy as np
import pytest

from experiments import benchmark, forgetting, igb_init, igb_train, phase_diagram
from jaxinit import budget
from jaxinit.run import cli
from jaxinit.config import to_dict
from jaxinit.run.config_parse import override, from_dict
from jaxinit.errors import ConfigError
from jaxinit.forgetting import clock_presets, clocks
from jaxinit.forgetting import config as fconfig
from jaxinit.forgetting import plotting
from jaxinit.igb import config_init, config_phase, config_train, plots_init, plots_train, study_init, study_train
from jaxinit.igb import results as results_schema


def _cli(module, config_module, config_cls, argv):
    return cli.run(replace(module.EXPERIMENT, default="smoke", prepare=None), argv)


RUNNERS = {
    "forgetting": lambda argv: forgetting.run(["--preset", "smoke", *argv]),
    "benchmark": lambda argv: benchmark.run(["--preset", "quick", *argv]),
    "phase_diagram": lambda argv: _cli(phase_diagram, config_phase, config_phase.PhaseDiagramConfig, argv),
    "igb_init": lambda argv: _cli(igb_init, config_init, config_init.IGBInitConfig, argv),
    "igb_train": lambda argv: _cli(igb_train, config_train, config_train.IGBTrainConfig, argv),
}


def refused(capsys, out, name, argv, fragment):
    """``name`` with ``argv`` into ``out``: exit 2, one stderr line holding ``fragment``, no config.json."""
    assert RUNNERS[name]([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    assert fragment in err[0], err[0]
    assert not (out / "config.json").exists()
    return err[0]


# --------------------------------------------------------------------------- item 8: float32, the training dtype
@pytest.mark.parametrize("name, argv, fragment", [
    ("forgetting", ["--sweep.sigma_w=1.0,1.00000001"], "repeated values in float32"),
    ("forgetting", ["--sweep.sigma_w=1e-46"], "underflows float32"),
    ("forgetting", ["--sweep.sigma_w=1e-30,1"], "below 1e-15"),
    ("forgetting", ["--opt.lr=1e-40"], "underflows float32"),
    ("forgetting", ["--opt.weight_decay=1e-45"], "underflows float32"),
    ("forgetting", ["--opt.setting_lr=sgd=1e-46,adam=1e-3"], "--opt.setting_lr=sgd=1e-46: underflows float32"),
    ("igb_init", ["--grid.sigma_w2=1,1.00000001,2"], "grid.sigma_w2 has repeated values in float32"),
    ("igb_init", ["--grid.sigma_b2=0.1,1e-40"], "underflows float32"),
    ("igb_train", ["--opt.sgd_lr=0.05,0.0500000001"], "opt.sgd_lr has repeated values in float32"),
    ("igb_train", ["--grid.sigma_w2=1,1e-39"], "underflows float32"),
])
def test_values_are_checked_in_float32(tmp_path, capsys, name, argv, fragment):
    refused(capsys, tmp_path / "o", name, argv, fragment)


def test_exact_zero_decay_and_distinct_float32_values_pass():
    cfg = override(fconfig.SMOKE, "--sweep.sigma_w=1.0,1.0000002", "--opt.weight_decay=0")
    fconfig.validate(cfg)   # 1.0000002 is the next float32 above 1.0: two members


# --------------------------------------------------------------------------- item 14: non-finite and out-of-range
@pytest.mark.parametrize("name, argv, fragment", [
    ("forgetting", ["--data.val_fraction=inf"], "--data.val_fraction=inf: must be a finite number"),
    ("forgetting", ["--model.width_mult=inf"], "--model.width_mult=inf: must be a finite number"),
    ("forgetting", ["--opt.momentum=-inf"], "--opt.momentum=-inf"),
    ("phase_diagram", ["--plot.eoc_tol=inf"], "--plot.eoc_tol=inf"),
    ("phase_diagram", ["--plot.layers_sigma_w2=inf,1"], "--plot.layers_sigma_w2=inf"),
    ("benchmark", ["--bench.budget_s=inf"], "--bench.budget_s=inf"),
    ("igb_train", ["--train.target_acc=inf"], "--train.target_acc=inf"),
    ("forgetting", ["--data.split_seed=-1"], "a seed must lie in [0, 2**31 - 1]"),
    ("igb_init", ["--probe.seed=-3"], "a seed must lie in"),
    ("forgetting", ["--train.epochs=99999999999999999999"], "|value| must be < 2**31"),
    ("forgetting", ["--train.epochs=1000000000"], "int32 step counter"),
    ("forgetting", ["--model.width_mult=-1"], "width_mult must be > 0"),
])
def test_nonsense_numbers_are_one_line(tmp_path, capsys, name, argv, fragment):
    refused(capsys, tmp_path / "o", name, argv, fragment)


def test_refused_split_seed_leaves_nothing_that_blocks_the_rerun(tmp_path, capsys):
    out = tmp_path / "o"
    refused(capsys, out, "forgetting", ["--data.split_seed=-1", "--train.epochs=0"], "seed")
    assert forgetting.run(["--preset", "smoke", "--out", str(out), "--data.split_seed=1", "--train.epochs=0"]) == 0


# --------------------------------------------------------------------------- item 11: memory, before allocation
@pytest.mark.parametrize("name, argv, fragment", [
    ("forgetting", ["--sweep.seeds=10000000"], "40,000,000 members"),
    ("forgetting", ["--sweep.seeds=100000000000"], "|value| must be < 2**31"),
    ("forgetting", ["--data.name=gaussian", "--data.n_samples=2000000000", "--data.dim=100"], "GB"),
    ("forgetting", ["--data.name=mnist1d", "--data.n_samples=1000000000"], "would take hours"),
    ("phase_diagram", ["--grid.n=100000"], "--grid.n=100000"),
    ("phase_diagram", ["--timing.n=100000"], "--timing.n=100000"),
])
def test_sizes_beyond_memory_are_refused_with_the_estimate(tmp_path, capsys, name, argv, fragment):
    line = refused(capsys, tmp_path / "o", name, argv, fragment)
    assert "GB" in line or "hours" in line or "2**31" in line


def test_memory_estimate_is_compared_with_the_machine(monkeypatch):
    cfg = override(fconfig.SMOKE, "--sweep.seeds=1000")
    fconfig.validate(cfg)                       # 4,000 smoke members: ~0.16 GB
    monkeypatch.setattr(budget, "machine_memory", lambda: 10**8)
    with pytest.raises(ConfigError, match="4,000 members of .* parameters needs at least 0.163 GB"):
        fconfig.validate(cfg)


# --------------------------------------------------------------------------- item 14: config.json types
@pytest.mark.parametrize("section, key, value, fragment", [
    ("train", "epochs", "3", 'train.epochs must be an integer, got "3"'),
    ("train", "epochs", 3.5, "train.epochs must be an integer, got 3.5"),
    ("train", "epochs", True, "train.epochs must be an integer, got True"),
    ("opt", "lr", "0.1", "opt.lr must be a number"),
    ("data", "augment", 1, "data.augment must be true or false"),
    ("data", "binarize", True, "unknown key 'data.binarize'"),        # the IGB studies' field only (false: retired, read)
    ("model", "name", "resnet1000", 'model.name must be one of mlp|resnet9|'),
    ("train", "strategy", 3, "train.strategy must be one of auto|vmap|sequential|chunked, got 3"),
    ("sweep", "sigma_w", 5, "sweep.sigma_w must be a list"),
    ("sweep", "sigma_w", [1, "x"], "sweep.sigma_w[1] must be a number"),
    ("sweep", "optimizers", ["sgd", 3], "sweep.optimizers[1] must be a string"),
    ("data", "val_fraction", float("inf"), "--data.val_fraction=inf"),
    ("train", "epochs", 2**40, "|value| must be < 2**31"),
])
def test_from_dict_checks_every_field_against_its_annotation(section, key, value, fragment):
    saved = json.loads(json.dumps(to_dict(fconfig.SMOKE)))
    saved[section][key] = value
    with pytest.raises(ConfigError) as err:
        from_dict(fconfig.ForgettingConfig, saved)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_from_dict_keeps_what_json_gives_back():
    saved = json.loads(json.dumps(to_dict(fconfig.SMOKE)))
    saved["opt"]["lr"], saved["sweep"]["sigma_w"] = None, [1, 2]   # ints where floats are due are fine
    cfg = from_dict(fconfig.ForgettingConfig, saved)
    assert cfg.opt.lr is None and cfg.sweep.sigma_w == (1.0, 2.0) and isinstance(cfg.sweep.sigma_w[0], float)
    assert from_dict(fconfig.ForgettingConfig, to_dict(fconfig.SMOKE)) == fconfig.SMOKE
    with pytest.raises(ConfigError, match="expected an object for train"):
        from_dict(fconfig.ForgettingConfig, {**saved, "train": 5})


def test_resume_of_a_hand_edited_config_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    saved = json.loads(json.dumps(to_dict(fconfig.SMOKE)))
    saved["train"]["epochs"] = "3"
    (out / "config.json").write_text(json.dumps(saved))
    before = (out / "config.json").read_text()
    assert forgetting.run(["--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'train.epochs must be an integer, got "3"' in err[0]
    assert (out / "config.json").read_text() == before and sorted(p.name for p in out.iterdir()) == ["config.json"]


# --------------------------------------------------------------------------- IGB results that read but do not fit
def _igb_run_dir(tmp_path, cfg, arrays_by_name):
    out = tmp_path / "run"
    (out / "results").mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(to_dict(cfg)))
    for name, arrays in arrays_by_name.items():
        np.savez(out / "results" / f"{name}.npz", **arrays)
    return out


GOOD_INIT = {"sigma_w2": np.ones(3), "sigma_b2": np.ones(3), "n_inputs": np.array(8), "fmax_2": np.ones((2, 3)),
             "c": np.ones((2, 3, 4)), "gamma": np.ones((2, 3, 4)), "gamma_corr": np.ones((2, 3, 4)),
             "c_readout": np.ones((2, 3))}


@pytest.mark.parametrize("arrays, fragment", [
    ({"other": np.ones(3)}, "has no array 'sigma_w2'"),
    ({**GOOD_INIT, "c": np.ones((2, 5, 4))}, "'c' has shape (2, 5, 4), inconsistent"),
    ({**GOOD_INIT, "c_readout": np.ones(2)}, "'c_readout' has shape (2,), expected 2 or more axes"),
    ({**GOOD_INIT, "n_inputs": np.ones(2)}, "expected a scalar"),
])
def test_igb_init_replot_of_a_foreign_npz_is_one_line(tmp_path, capsys, arrays, fragment):
    out = _igb_run_dir(tmp_path, config_init.SMOKE, {"gaussian__mlp_tanh": arrays})
    with pytest.raises(ConfigError, match="results/gaussian__mlp_tanh.npz") as err:
        plots_init.plot_init_results(out)
    assert fragment in str(err.value) and "\n" not in str(err.value)
    assert _cli(igb_init, config_init, config_init.IGBInitConfig, ["--replot", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]


def test_igb_init_resume_refuses_a_foreign_cached_case_before_any_work():
    with pytest.raises(ConfigError, match="results/digits__mlp_tanh.npz has no array 'c'"):
        study_init.probe_init(config_init.SMOKE,
                              cached={"digits__mlp_tanh": {k: v for k, v in GOOD_INIT.items() if k != "c"}})
    with pytest.raises(ConfigError, match="not a case of igb_init"):
        results_schema.check_init({"stray": GOOD_INIT})


def test_igb_train_replot_refuses_a_foreign_npz(tmp_path, capsys):
    """(A resume no longer reads results/*.npz: it continues from the engine's checkpoints and metrics.jsonl and
    writes them anew; tests/test_igb_experiments.py.)"""
    bad = {"act": np.array("tanh"), "depth": np.array(3), "optimizer": np.array("sgd"), "width": np.array(16),
           "role": np.array(["EOC", "EOC"]), "point": np.zeros(2), "sigma_w2": np.ones(2), "sigma_b2": np.ones(2), "seed": np.zeros(2),
           "lr": np.ones(2), "step": np.arange(4), "alive": np.ones((4, 2), bool), "test_acc": np.ones((4, 3)),
           "test_fmax": np.ones((4, 2)), "test_class_acc": np.ones((4, 2, 2))}
    out = _igb_run_dir(tmp_path, config_train.SMOKE, {"tanh__d3__sgd": bad})
    with pytest.raises(ConfigError, match=r"results/tanh__d3__sgd.npz: 'test_acc' has shape \(4, 3\)"):
        plots_train.plot_train_results(out)
    assert _cli(igb_train, config_train, config_train.IGBTrainConfig, ["--replot", str(out)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- the plotting CLI
@pytest.mark.parametrize("members", [[1, 2], 5, "x", None])
def test_plotting_cli_on_a_malformed_summary_is_one_line(tmp_path, capsys, members):
    (tmp_path / "summary.json").write_text(json.dumps({"members": members, "spread": {}}))
    (tmp_path / "metrics.jsonl").write_text("")
    assert plotting.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'members' must be a list of member objects" in err[0]


# --------------------------------------------------------------------------- every preset stays valid
def test_every_preset_of_every_experiment_validates(monkeypatch):
    for cfg in [*fconfig.PRESETS.values()]:
        fconfig.validate(cfg)
    for cfg in clock_presets.PRESETS.values():
        clocks.validate(cfg)
    for module in (config_init, config_train, config_phase):
        for cfg in module.PRESETS.values():
            module.validate(cfg)
    for name, cfg in benchmark.PRESETS.items():
        if name != "accel":            # needs an accelerator (tests/test_benchmark.py)
            benchmark.validate(cfg)
