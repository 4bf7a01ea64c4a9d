"""The command line's front door (`jaxinit.run.cli`): misspelt keys and presets are one line naming the closest,
the default run directory is runs/<experiment>_<preset>, run.json names the experiment and a run of another
experiment is refused; `config_parse.override` is the same parser from Python."""
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from experiments import forgetting as forgetting_main
from jaxinit.config import Preset, Presets, TrainConfig
from jaxinit.errors import ConfigError
from jaxinit.forgetting import config as fconfig
from jaxinit.run import cli, manifest
from jaxinit.run.config_parse import override, parse_overrides

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Cfg:
    train: TrainConfig = TrainConfig()
    """training"""


def _main(cfg, out, resume):
    manifest.Manifest(out).write_json(out / "summary.json", {"epochs": cfg.train.epochs, "resume": resume})


PRESETS = Presets({"small": Preset(Cfg(), "the defaults"), "long": Preset(override(Cfg(), "train.epochs=30"), "long")})


def _exp(name: str) -> cli.Experiment:
    return cli.Experiment(name=name, doc="doc", presets=PRESETS, default="small", main=_main)


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


# --------------------------------------------------------------------------- misspellings
def test_a_misspelt_key_is_one_line_naming_the_key_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    assert forgetting_main.run(["--preset", "smoke", "--train.epoch=3", "--out", str(out)]) == 2
    line = _one_error(capsys)
    assert "--train.epoch=3" in line and "did you mean --train.epochs?" in line
    assert not out.exists()


def test_the_same_from_a_shell(tmp_path):
    """As a user types it (stdout a pipe, UTF-8): exit 2, one line on stderr, the key tyro suggests."""
    proc = subprocess.run([sys.executable, "-m", "experiments.forgetting", "--preset", "smoke", "--train.epoch=3",
                           "--out", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "did you mean --train.epochs?" in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, fragment", [
    (["--preset", "smok"], "unknown preset 'smok' (did you mean smoke? choose from "),
    (["--preset", "smoke", "--epochs=3"], "unknown argument '--epochs=3' (overrides take the form "
                                          "--section.key=value); did you mean --train.epochs?"),
    (["--preset", "smoke", "--sweep.sigma=1,2"], "did you mean --sweep.sigma_w?"),
    (["--preset", "smoke", "--zzz.qqq=1"], "--zzz.qqq=1"),
])
def test_close_matches_are_named(tmp_path, capsys, argv, fragment):
    assert forgetting_main.run([*argv, "--out", str(tmp_path / "run")]) == 2
    line = _one_error(capsys)
    assert fragment in line
    if "did you mean" not in fragment:
        assert "did you mean" not in line                  # no guess where none is close
    assert not (tmp_path / "run").exists()


def test_a_value_that_does_not_parse_stays_one_line(capsys):
    with pytest.raises(ConfigError) as err:
        parse_overrides(fconfig.SMOKE, ["--train.epochs=x"])
    assert "\n" not in str(err.value) and "--train.epochs" in str(err.value)


# --------------------------------------------------------------------------- the run directory
def test_the_default_run_directory_is_named_after_experiment_and_preset(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.run(_exp("toy"), []) == 0
    assert cli.run(_exp("toy"), ["--preset", "long"]) == 0
    assert json.loads((tmp_path / "runs" / "toy_small" / "summary.json").read_text())["epochs"] == 10
    assert json.loads((tmp_path / "runs" / "toy_long" / "summary.json").read_text())["epochs"] == 30
    assert "runs/toy_long" in capsys.readouterr().out


def test_run_json_names_the_experiment_and_keeps_it(tmp_path):
    out = tmp_path / "run"
    assert cli.run(_exp("toy"), ["--out", str(out)]) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["experiment"] == "toy" and [p["status"] for p in info["provenance"]] == ["finished"]
    assert cli.run(_exp("toy"), ["--out", str(out), "--resume"]) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["experiment"] == "toy" and len(info["provenance"]) == 2
    assert json.loads((out / "summary.json").read_text())["resume"] is True


@pytest.mark.parametrize("how", [[], ["--resume"]])
def test_a_run_of_another_experiment_is_refused_and_left_as_it_is(tmp_path, capsys, how):
    out = tmp_path / "run"
    assert cli.run(_exp("toy"), ["--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert cli.run(_exp("other"), ["--out", str(out), *how]) == 2
    assert "holds a run of toy, not of other" in _one_error(capsys)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_run_made_before_run_json_named_it_gains_the_name(tmp_path):
    out = tmp_path / "run"
    assert cli.run(_exp("toy"), ["--out", str(out)]) == 0
    info = json.loads((out / "run.json").read_text())
    manifest.Manifest(out).write_json(out / "run.json", {k: v for k, v in info.items() if k != "experiment"})
    assert cli.run(_exp("toy"), ["--out", str(out)]) == 0                 # the same config: continued
    assert json.loads((out / "run.json").read_text())["experiment"] == "toy"


def test_a_set_up_refusal_leaves_no_run_behind(tmp_path, capsys):
    def refuse(cfg, out, resume):
        raise ConfigError("no data here")
    exp = cli.Experiment(name="toy", doc="doc", presets=PRESETS, default="small", main=refuse)
    out = tmp_path / "run"
    assert cli.run(exp, ["--out", str(out)]) == 2 and "no data here" in _one_error(capsys)
    assert sorted(p.name for p in out.iterdir()) == [".lock", ".manifest.json"]     # config.json, run.json gone


# --------------------------------------------------------------------------- overrides from Python
def test_override_takes_the_command_lines_items_and_python_values():
    cfg = override(fconfig.SMOKE, "train.epochs=3", "--sweep.sigma_w=0.5,1,2", "--train.batch_size", "16")
    assert (cfg.train.epochs, cfg.sweep.sigma_w, cfg.train.batch_size) == (3, (0.5, 1.0, 2.0), 16)
    assert cfg == parse_overrides(fconfig.SMOKE, ["--train.epochs=3", "--sweep.sigma_w=0.5,1,2",
                                                  "--train.batch_size=16"])
    same = override(fconfig.SMOKE, {"train.epochs": 3, "sweep.sigma_w": (0.5, 1, 2), "train.batch_size": 16})
    assert same == cfg
    typed = override(fconfig.SMOKE, {"opt.lr": None, "data.augment": True, "sweep.optimizers": ["sgd", "adam"]})
    assert (typed.opt.lr, typed.data.augment, typed.sweep.optimizers) == (None, True, ("sgd", "adam"))
    assert override(fconfig.SMOKE) is fconfig.SMOKE and fconfig.SMOKE.train.epochs != 3     # frozen: a new config


@pytest.mark.parametrize("item, fragment", [
    ("train.epoch=3", "did you mean --train.epochs?"),
    ({"train.epochs": "x"}, "--train.epochs"),
    ({"sweep.seeds": -1.5}, "--sweep.seeds"),
    ({"train.strategy": "fastest"}, "fastest"),
])
def test_override_refuses_in_one_line(item, fragment):
    with pytest.raises(ConfigError) as err:
        override(fconfig.SMOKE, item)
    assert "\n" not in str(err.value) and fragment in str(err.value), str(err.value)


def test_override_wants_strings_or_mappings():
    with pytest.raises(TypeError, match="a 'key=value' string or a mapping"):
        override(fconfig.SMOKE, 3)


def test_a_notebook_finds_override_on_the_package():
    import jaxinit
    assert jaxinit.override is override and "override" in jaxinit.__all__
    assert jaxinit.override(fconfig.SMOKE, "train.epochs=5").train.epochs == 5
