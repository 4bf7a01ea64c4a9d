"""The override parser and the shared command-line driver."""
import json
from dataclasses import dataclass

import pytest

from jaxinit import cli
from jaxinit.config import (ConfigError, DataConfig, OptConfig, SweepConfig, TrainConfig, apply_overrides,
                            from_dict, to_dict, validate_common)


@dataclass(frozen=True)
class Cfg:
    data: DataConfig = DataConfig()
    opt: OptConfig = OptConfig()
    train: TrainConfig = TrainConfig()
    sweep: SweepConfig = SweepConfig()


def test_overrides_parse_by_annotation():
    cfg = apply_overrides(Cfg(), ["--train.epochs=7", "--sweep.sigma_w=0.5,1,2.5", "--data.binarize=true",
                                  "--opt.lr=0.3", "--sweep.optimizers=sgd,adam", "--opt.weight_decay=none"])
    assert cfg.train.epochs == 7 and cfg.sweep.sigma_w == (0.5, 1.0, 2.5)
    assert cfg.data.binarize is True and cfg.opt.lr == 0.3 and cfg.sweep.optimizers == ("sgd", "adam")
    assert cfg.opt.weight_decay is None
    assert Cfg().train.epochs == 10  # frozen: the original is untouched


def test_values_with_equals_signs_survive():
    cfg = apply_overrides(Cfg(), ["--opt.setting_lr=sgd=0.05,adam=1e-3"])
    assert cfg.opt.setting_lr == ("sgd=0.05", "adam=1e-3")


@pytest.mark.parametrize("item, fragment", [
    ("--train.nope=1", "Unrecognized options: --train.nope=1"),
    ("--nope.x=1", "Unrecognized options: --nope.x=1"),
    ("--train.epochs=abc", "Error parsing --train.epochs"),
    ("--opt.lr=nan", "NaN is not a valid value"),
    ("--data.binarize=maybe", "expected true or false, got 'maybe'"),
    ("--train=3", "Unrecognized options: --train=3"),
    ("--train.epochs", "Missing value for argument '--train.epochs'"),
    ("--sweep.sigma_w=,", "expected a comma-separated list"),
])
def test_bad_overrides_raise_one_clear_error(item, fragment):
    with pytest.raises(ConfigError, match=fragment) as err:
        apply_overrides(Cfg(), [item])
    assert "\n" not in str(err.value) and "│" not in str(err.value)


def test_space_form_and_equals_form_agree():
    a = apply_overrides(Cfg(), ["--train.epochs=7", "--sweep.sigma_w=0.5,2", "--data.augment=yes"])
    b = apply_overrides(Cfg(), ["--train.epochs", "7", "--sweep.sigma_w", "0.5,2", "--data.augment", "yes"])
    assert a == b and a.train.epochs == 7 and a.data.augment is True


@pytest.mark.parametrize("item, fragment", [
    ("--train.batch_size=0", "batch_size"), ("--train.epochs=-1", "epochs"), ("--sweep.sigma_w=0,1", "sigma_w"),
    ("--sweep.sigma_w=-1", "sigma_w"), ("--sweep.seeds=0", "seeds"), ("--opt.weight_decay=-1", "weight_decay"),
    ("--opt.lr=inf", "lr"), ("--train.strategy=magic", "strategy"), ("--opt.lr=1e39", "float32"),
    ("--sweep.sigma_w=1e39", "float32"), ("--opt.weight_decay=5e38", "float32"), ("--sweep.sigma_w=0.5,0.5", "repeated"),
])
def test_validation_rejects_nonsense(item, fragment):
    with pytest.raises(ConfigError, match=fragment):
        validate_common(apply_overrides(Cfg(), [item]))


def test_dict_round_trip():
    cfg = apply_overrides(Cfg(), ["--sweep.sigma_w=0.1,2", "--opt.lr=0.2"])
    assert from_dict(Cfg, json.loads(json.dumps(to_dict(cfg)))) == cfg


def _main(cfg, out, resume):
    (out / "run.json").write_text(json.dumps({"epochs": cfg.train.epochs, "resume": resume}))


def _result(out):
    return json.loads((out / "run.json").read_text())


PRESETS = {"a": Cfg(), "b": apply_overrides(Cfg(), ["--train.epochs=3"])}


def _run(argv):
    return cli.run_experiment("x", "doc", Cfg, PRESETS, "a", _main, "unused", validate=validate_common, argv=argv)


def test_driver_writes_config_and_runs(tmp_path, capsys):
    assert _run(["--preset", "b", "--out", str(tmp_path / "o"), "--train.epochs=4"]) == 0
    assert _result(tmp_path / "o")["epochs"] == 4
    assert json.loads((tmp_path / "o" / "config.json").read_text())["train"]["epochs"] == 4
    assert str(tmp_path / "o") in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["--preset", "zzz"], "unknown preset"),
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
    assert "a (default), b" in out
    for section, field_ in (("data", "name"), ("opt", "setting_lr"), ("train", "epochs"), ("sweep", "sigma_w")):
        assert f"--{section}.{field_}" in out
    assert "(default: 3)" in out                    # preset b's epochs, not the dataclass default 10


def test_replot_is_a_flag_and_needs_saved_results(tmp_path, capsys):
    calls = []

    def run(argv):
        return cli.run_experiment("x", "doc", Cfg, PRESETS, "a", _main, "unused", argv=argv,
                                  replot=lambda out: calls.append(out) or [])
    assert run(["--replot", str(tmp_path / "none")]) == 2
    assert "no saved results" in capsys.readouterr().err and calls == []
    assert not (tmp_path / "none").exists()                       # nothing created for a bad dir
    (tmp_path / "run" / "results").mkdir(parents=True)
    (tmp_path / "run" / "results" / "a.npz").write_bytes(b"")
    assert run([f"--replot={tmp_path / 'run'}"]) == 0
    assert calls == [tmp_path / "run"]
    assert _run(["--replot", str(tmp_path / "run")]) == 2           # an experiment without --replot refuses it


def test_preset_flags_are_real_flags(tmp_path):
    def run(argv):
        return cli.run_experiment("x", "doc", Cfg, PRESETS, "a", _main, "unused", argv=argv,
                                  preset_flags={"quick": "b"})
    assert run(["--quick", "--out", str(tmp_path / "q")]) == 0
    assert _result(tmp_path / "q")["epochs"] == 3
    assert run(["--quick", "--preset", "a", "--out", str(tmp_path / "r")]) == 2
