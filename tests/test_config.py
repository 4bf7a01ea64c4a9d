"""The override parser and the shared command-line driver."""
import json
import typing
from dataclasses import dataclass, replace

import pytest

from jaxinit.run import cli
from jaxinit.config import (DataConfig, OptConfig, Preset, Presets, SweepConfig, TrainConfig,
                            to_dict, validate_common)
from jaxinit.run.config_parse import override, from_dict
from jaxinit.errors import ConfigError


@dataclass(frozen=True)
class Cfg:
    data: DataConfig = DataConfig()
    opt: OptConfig = OptConfig()
    train: TrainConfig = TrainConfig()
    sweep: SweepConfig = SweepConfig()


def test_overrides_parse_by_annotation():
    cfg = override(Cfg(), "--train.epochs=7", "--sweep.sigma_w=0.5,1,2.5", "--data.augment=true",
                                  "--opt.lr=0.3", "--sweep.optimizers=sgd,adam", "--opt.weight_decay=none",
                                  "--train.strategy=chunked", "--data.name=digits")
    assert cfg.train.epochs == 7 and cfg.sweep.sigma_w == (0.5, 1.0, 2.5) and cfg.train.strategy == "chunked"
    assert cfg.data.augment is True and cfg.opt.lr == 0.3 and cfg.sweep.optimizers == ("sgd", "adam")
    assert cfg.opt.weight_decay is None
    assert Cfg().train.epochs == 10  # frozen: the original is untouched


def test_values_with_equals_signs_survive():
    cfg = override(Cfg(), "--opt.setting_lr=sgd=0.05,adam=1e-3")
    assert cfg.opt.setting_lr == ("sgd=0.05", "adam=1e-3")


@pytest.mark.parametrize("item, fragment", [
    ("--train.nope=1", "Unrecognized options: --train.nope=1"),
    ("--nope.x=1", "Unrecognized options: --nope.x=1"),
    ("--train.epochs=abc", "Error parsing --train.epochs"),
    ("--opt.lr=nan", "NaN is not a valid value"),
    ("--data.augment=maybe", "expected true or false, got 'maybe'"),
    ("--train.strategy=magic", "invalid choice 'magic' for argument '--train.strategy'"),
    ("--data.binarize=true", "Unrecognized options: --data.binarize=true"),   # the IGB studies' field only
    ("--train=3", "Unrecognized options: --train=3"),
    ("--train.epochs", "Missing value for argument '--train.epochs'"),
    ("--sweep.sigma_w=,", "expected a comma-separated list"),
])
def test_bad_overrides_raise_one_clear_error(item, fragment):
    with pytest.raises(ConfigError, match=fragment) as err:
        override(Cfg(), item)
    assert "\n" not in str(err.value) and "│" not in str(err.value)


def test_space_form_and_equals_form_agree():
    a = override(Cfg(), "--train.epochs=7", "--sweep.sigma_w=0.5,2", "--data.augment=yes")
    b = override(Cfg(), "--train.epochs", "7", "--sweep.sigma_w", "0.5,2", "--data.augment", "yes")
    assert a == b and a.train.epochs == 7 and a.data.augment is True


@pytest.mark.parametrize("item, fragment", [
    ("--train.batch_size=0", "batch_size"), ("--train.epochs=-1", "epochs"), ("--sweep.sigma_w=0,1", "sigma_w"),
    ("--sweep.sigma_w=-1", "sigma_w"), ("--sweep.seeds=0", "seeds"), ("--opt.weight_decay=-1", "weight_decay"),
    ("--opt.lr=inf", "lr"), ("--opt.lr=1e39", "float32"),
    ("--sweep.sigma_w=1e39", "float32"), ("--opt.weight_decay=5e38", "float32"), ("--sweep.sigma_w=0.5,0.5", "repeated"),
])
def test_validation_rejects_nonsense(item, fragment):
    with pytest.raises(ConfigError, match=fragment):
        validate_common(override(Cfg(), item))


def test_dict_round_trip():
    cfg = override(Cfg(), "--sweep.sigma_w=0.1,2", "--opt.lr=0.2")
    assert from_dict(Cfg, json.loads(json.dumps(to_dict(cfg)))) == cfg


def _main(cfg, out, resume):
    (out / "run.json").write_text(json.dumps({"epochs": cfg.train.epochs, "resume": resume}))


def _result(out):
    return json.loads((out / "run.json").read_text())


PRESETS = Presets({"a": Preset(Cfg(), "the defaults"), "b": Preset(override(Cfg(), "--train.epochs=3"),
                                                                   "three epochs")})
EXPERIMENT = cli.Experiment(name="x", doc="doc", presets=PRESETS, default="a", main=_main,
                            validate=validate_common)


def _run(argv):
    return cli.run(EXPERIMENT, argv)


def test_driver_writes_config_and_runs(tmp_path, capsys):
    assert _run(["--preset", "b", "--out", str(tmp_path / "o"), "--train.epochs=4"]) == 0
    assert _result(tmp_path / "o")["epochs"] == 4
    assert json.loads((tmp_path / "o" / "config.json").read_text())["train"]["epochs"] == 4
    assert str(tmp_path / "o") in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["--preset", "zzz"], r"unknown preset 'zzz' \(choose from a, b\)"),
    (["--bogus"], "unknown argument"),
    (["--out="], "empty path"),
    (["--resume", "--preset", "zzz"], "unknown preset"),
    (["--resume", "--overwrite"], "contradict"),
    (["--train.batch_size=0"], "batch_size"),
    (["--resume"], "nothing to resume|no run to resume"),
])
def test_driver_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, fragment):
    out = tmp_path / "o"
    assert _run((argv + ["--out", str(out)]) if argv != ["--out="] else argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    import re
    assert re.search(fragment, err[0])
    assert not (out / "config.json").exists()


def test_driver_unwritable_out(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert _run(["--out", str(blocker / "sub")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_driver_resume_uses_saved_config(tmp_path):
    out = tmp_path / "o"
    assert _run(["--out", str(out), "--train.epochs=5"]) == 0
    (out / "run.json").unlink()
    assert _run(["--out", str(out), "--resume"]) == 0
    assert _result(out)["epochs"] == 5
    assert _run(["--out", str(out), "--resume", "--train.epochs=6"]) == 2


def test_help_lists_every_field_with_the_presets_default(capsys):
    assert _run(["--help", "--preset", "b"]) == 0
    out = capsys.readouterr().out
    assert "a (default)  the defaults" in out and "b            three epochs" in out
    for section, field_ in (("data", "name"), ("opt", "setting_lr"), ("train", "epochs"), ("sweep", "sigma_w")):
        assert f"--{section}.{field_}" in out
    assert "(default: 3)" in out                    # preset b's epochs, not the dataclass default 10
    assert sum(line.lstrip().startswith("usage:") for line in out.splitlines()) == 1    # ours, not tyro's too


def test_replot_is_a_flag_and_needs_saved_results(tmp_path, capsys):
    calls = []

    def run(argv):
        return cli.run(replace(EXPERIMENT, replot=lambda out: calls.append(out) or []), argv)
    assert run(["--replot", str(tmp_path / "none")]) == 2
    assert "no such run directory" in capsys.readouterr().err and calls == []
    assert not (tmp_path / "none").exists()                       # nothing created for a bad dir
    (tmp_path / "run" / "results").mkdir(parents=True)
    (tmp_path / "run" / "config.json").write_text(json.dumps(to_dict(Cfg())))
    assert run(["--replot", str(tmp_path / "run")]) == 2
    assert "no saved results" in capsys.readouterr().err and calls == []
    (tmp_path / "run" / "results" / "a.npz").write_bytes(b"")
    assert run([f"--replot={tmp_path / 'run'}"]) == 0
    assert calls == [tmp_path / "run"]
    assert _run(["--replot", str(tmp_path / "run")]) == 2           # an experiment without --replot refuses it


def test_preset_flags_are_real_flags(tmp_path):
    def run(argv):
        return cli.run(replace(EXPERIMENT, preset_flags={"quick": "b"}), argv)
    assert run(["--quick", "--out", str(tmp_path / "q")]) == 0
    assert _result(tmp_path / "q")["epochs"] == 3
    assert run(["--quick", "--preset", "a", "--out", str(tmp_path / "r")]) == 2


# --------------------------------------------------------------------------- every experiment: one shape, presets, choices
def _experiments():
    from experiments import benchmark, clocks, forgetting, igb_init, igb_train, phase_diagram
    return {m.__name__.split(".")[-1]: m for m in (forgetting, clocks, igb_init, igb_train, phase_diagram, benchmark)}


EXPERIMENTS = ("forgetting", "clocks", "igb_init", "igb_train", "phase_diagram", "benchmark")


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_has_one_shape(name):
    module = _experiments()[name]
    assert isinstance(module.EXPERIMENT, cli.Experiment) and module.EXPERIMENT.prog == f"experiments.{name}"
    assert isinstance(module.EXPERIMENT.presets, Presets) and callable(module.run)
    assert module.EXPERIMENT.default_preset() in module.EXPERIMENT.presets
    assert not hasattr(cli, "run_experiment") and not hasattr(cli, "write_json_atomic") and not hasattr(cli, "replot")


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_help_lists_every_preset_with_its_description_under_one_usage(name, capsys):
    module = _experiments()[name]
    assert module.run(["--help"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    presets = module.EXPERIMENT.presets
    assert len(presets) >= 2
    for preset in presets:
        description = presets.description(preset)
        assert description and "\n" not in description
        assert any(line.split()[:1] == [preset] and line.rstrip().endswith(description) for line in lines), preset
    assert sum("usage:" in line for line in lines) == 1, [line for line in lines if "usage:" in line]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_an_unknown_preset_is_one_line_naming_the_presets(name, capsys, tmp_path):
    module = _experiments()[name]
    assert module.run(["--preset", "nope", "--out", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --preset: unknown preset 'nope'"), err
    assert f"choose from {', '.join(module.EXPERIMENT.presets)}" in err[0]
    assert "Traceback" not in captured.err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("name, argv, fragment", [
    ("forgetting", ["--train.strategy=magic"], "invalid choice 'magic' for argument '--train.strategy'"),
    ("forgetting", ["--data.name=imagenet"], "invalid choice 'imagenet' for argument '--data.name'"),
    ("forgetting", ["--opt.schedule=linear"], "invalid choice 'linear' for argument '--opt.schedule'"),
    ("igb_train", ["--sweep.optimizers=sgd,lion"], "--sweep.optimizers: expected one of sgd|momentum|adam, got 'lion'"),
    ("igb_init", ["--model.mlp_acts=tanh,swish"], "--model.mlp_acts: expected one of linear|relu|"),
    ("phase_diagram", ["--plot.criterion=backward"], "invalid choice 'backward' for argument '--plot.criterion'"),
])
def test_a_choice_outside_its_literal_is_one_line_exit_2(name, argv, fragment, capsys, tmp_path):
    assert _experiments()[name].run(["--preset", "smoke", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name, shown", [
    ("forgetting", ["--train.strategy {auto,vmap,sequential,chunked}", "--train.precision {float32,tf32,bf16}",
                    "--opt.schedule {constant,step,cosine,warmup_cosine}", "--model.sigma_w_scope {all,hidden,head}",
                    "--analysis.selection {best_val,best_val_interpolated,final}"]),
    ("igb_train", ["--sweep.optimizers {sgd,momentum,adam},...", "--model.acts {tanh,relu,relu+maxpool,relu+avgpool},..."]),
    ("phase_diagram", ["--plot.criterion {forward,gradient}"]),
])
def test_help_shows_the_choices_of_literal_fields(name, shown, capsys):
    assert _experiments()[name].run(["--help"]) == 0
    out = capsys.readouterr().out
    for text in shown:
        assert text in out, text


def test_study_specific_data_fields_are_only_in_their_studys_help(capsys):
    runs = _experiments()
    helps = {}
    for name in ("forgetting", "clocks", "igb_train", "igb_init"):
        assert runs[name].run(["--help"]) == 0
        helps[name] = capsys.readouterr().out
    assert "--data.binarize" not in helps["forgetting"] and "--data.binarize" not in helps["clocks"]
    assert "IGB" not in helps["forgetting"].split("config fields of the chosen preset")[1]
    assert "--data.binarize" in helps["igb_train"] and "--data.binarize" in helps["igb_init"]


# --------------------------------------------------------------------------- Literal fields: parsed, saved, checked
def test_literal_fields_refuse_other_values_in_one_line():
    from jaxinit.config import check_values
    with pytest.raises(ConfigError, match=r"^--train.strategy must be one of auto\|vmap\|sequential\|chunked, got 'magic'$"):
        check_values(Cfg(train=TrainConfig(strategy="magic")))      # a config built in code, not parsed
    saved = json.loads(json.dumps(to_dict(Cfg())))
    saved["data"]["normalize"] = "minmax"
    with pytest.raises(ConfigError) as err:
        from_dict(Cfg, saved)
    assert str(err.value) == ('config.json: data.normalize must be one of standard|sphere|none, got "minmax"; '
                              'correct the file')
    saved["data"]["normalize"] = 3
    with pytest.raises(ConfigError, match="data.normalize must be one of"):
        from_dict(Cfg, saved)
    saved["data"]["normalize"] = "sphere"
    assert from_dict(Cfg, saved).data.normalize == "sphere"


def test_tuple_of_literal_round_trips_and_refuses_a_stranger():
    from jaxinit.igb import config_train
    cfg = override(config_train.SMOKE, "--sweep.optimizers=momentum,sgd")
    assert cfg.sweep.optimizers == ("momentum", "sgd")
    assert from_dict(config_train.IGBTrainConfig, json.loads(json.dumps(to_dict(cfg)))) == cfg
    saved = json.loads(json.dumps(to_dict(cfg)))
    saved["sweep"]["optimizers"] = ["sgd", "lion"]
    with pytest.raises(ConfigError, match=r"sweep.optimizers\[1\] must be one of sgd\|momentum\|adam, got \"lion\""):
        from_dict(config_train.IGBTrainConfig, saved)


def test_the_shared_literals_equal_their_libraries_registries():
    from jaxinit import config, init, optim, precision
    from jaxinit.data import NAMES, NORMALIZE
    from jaxinit.forgetting.memory import SELECTION_RULES
    from jaxinit.forgetting.config import AnalysisConfig
    from jaxinit.models import BUILDERS, activations
    from jaxinit.models.layers import CONV_IMPLS
    from theory import activations as theory_activations
    args = typing.get_args
    assert set(args(config.DataName)) == set(NAMES) and set(args(config.Normalize)) == set(NORMALIZE)
    assert set(args(config.ModelName)) == set(BUILDERS) and set(args(config.ConvImpl)) == set(CONV_IMPLS)
    assert set(args(config.Activation)) == set(activations.NAMES)
    assert set(args(config.TheoryActivation)) == set(theory_activations.NAMES)
    assert set(args(config.BaseInit)) == set(init.BASE_INITS) and set(args(config.SigmaWScope)) == set(init.SIGMA_W_SCOPES)
    assert set(args(config.Schedule)) == set(optim.SCHEDULES) and set(args(config.MuonAux)) == set(optim.MUON_AUX)
    assert set(args(config.MuonFirstLayer)) == set(optim.MUON_FIRST_LAYER)
    assert set(args(config.Precision)) == set(precision.PRECISIONS)
    assert set(args(typing.get_type_hints(AnalysisConfig)["selection"])) == set(SELECTION_RULES)


def test_presets_hold_configs_each_with_a_one_line_description():
    from jaxinit import forgetting
    assert forgetting.preset("smoke") is forgetting.PRESETS["smoke"] and "tests" in forgetting.PRESETS.description("smoke")
    with pytest.raises(ConfigError, match=r"unknown preset 'nope' \(choose from cpu, cpu_full, smoke, paper, "):
        forgetting.preset("nope")
    with pytest.raises(TypeError, match="Preset"):
        Presets({"a": Cfg()})
    with pytest.raises(TypeError, match="one line"):
        Presets({"a": Preset(Cfg(), "two\nlines")})
