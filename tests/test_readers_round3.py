"""Issue 35 ("Never lose a run, round three"): what reads a run -- ``--replot``, `load_run`,
``python -m jaxinit.forgetting.plotting`` -- on damaged or foreign runs: one line naming the file, and nothing
written where it must not be."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

import jaxinit
from experiments import igb_rescale, igb_train, memory_phases
from jaxinit.config import to_dict
from jaxinit.errors import ConfigError
from jaxinit.forgetting import plotting
from jaxinit.run import rundir, runs

from test_plotting import _write_run


def fake_run(d: Path, module, experiment: str | None, summary=None) -> Path:
    """A run directory of ``module``'s experiment as --replot and load_run find it (no training needed)."""
    (d / "results").mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(to_dict(module.EXPERIMENT.presets["smoke"])))
    (d / "run.json").write_text(json.dumps({"experiment": experiment} if experiment else {"provenance": []}))
    np.savez(d / "results" / "case.npz", a=np.arange(3))
    if summary is not None:
        (d / "summary.json").write_text(summary)
    return d


def replot_refused(capsys, module, d: Path, fragment: str) -> str:
    before = {p: p.read_bytes() for p in d.rglob("*") if p.is_file() and p.name != ".lock"}
    capsys.readouterr()
    assert module.run(["--replot", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err
    assert {p: p.read_bytes() for p in d.rglob("*") if p.is_file() and p.name != ".lock"} == before
    assert not (d / "figures").exists()
    return err[0]


# --------------------------------------------------------------------------- --replot
@pytest.mark.parametrize("summary, fragment", [
    (None, "summary.json is missing"), ("[1, 2]", "summary.json is not a JSON object"),
    ('{"cases": {"a": ', "summary.json is not readable JSON"), ("{}", "its saved results cannot be drawn (KeyError"),
])
def test_memory_phases_replot_of_a_damaged_summary_is_one_line(tmp_path, capsys, summary, fragment):
    replot_refused(capsys, memory_phases, fake_run(tmp_path / "r", memory_phases, "memory_phases", summary), fragment)


def test_replot_needs_every_config_field_the_figures_read(tmp_path, capsys):
    d = fake_run(tmp_path / "r", memory_phases, "memory_phases", "{}")
    cfg = json.loads((d / "config.json").read_text())
    del cfg["train"]["phase_res"]
    (d / "config.json").write_text(json.dumps(cfg))
    replot_refused(capsys, memory_phases, d, "config.json lacks train.phase_res")


def test_igb_train_replot_without_config_json_is_one_line(tmp_path, capsys):
    d = fake_run(tmp_path / "r", igb_train, "igb_train")
    (d / "config.json").unlink()
    replot_refused(capsys, igb_train, d, "config.json is missing")


@pytest.mark.parametrize("recorded", [True, False])
def test_replot_of_another_experiments_run_names_it_and_touches_nothing(tmp_path, capsys, recorded):
    d = fake_run(tmp_path / "r", memory_phases, "memory_phases" if recorded else None, "{}")
    line = replot_refused(capsys, igb_train, d, "holds a run of memory_phases, not of igb_train")
    assert f"python -m experiments.memory_phases --replot {d}" in line and "delete" not in line
    d = fake_run(tmp_path / "t", igb_train, "igb_train" if recorded else None)
    replot_refused(capsys, memory_phases, d, "holds a run of igb_train, not of memory_phases")


def test_replot_waits_for_no_one_it_refuses_a_run_in_use(tmp_path, capsys):
    d = fake_run(tmp_path / "r", memory_phases, "memory_phases", "{}")
    with rundir.RunLock(d):
        replot_refused(capsys, memory_phases, d, "is in use by")


# --------------------------------------------------------------------------- load_run
@pytest.mark.parametrize("name, text, fragment", [
    ("config.json", "[1]", "config.json is not a JSON object"),
    ("run.json", "[1]", "run.json is not a JSON object"),
    ("summary.json", "[1, 2]", "summary.json is not a JSON object"),
    ("summary.json", "3", "summary.json is not a JSON object"),
    ("metrics.jsonl", '{"member": 0}\n[1, 2]\n{"member": 1}\n', "metrics.jsonl: line 2 is not JSON"),
    ("metrics.jsonl", b'{"member": 0}\n{"a": "\xff"}\n{"member": 1}\n', "metrics.jsonl: line 2 is not JSON"),
    ("config.json", b'{"a": "\xff"}', "config.json is not readable JSON"),
])
def test_load_run_of_a_damaged_file_is_one_line_naming_it(tmp_path, name, text, fragment):
    d = fake_run(tmp_path / "r", memory_phases, "memory_phases", "{}")
    (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")) as err:
        jaxinit.load_run(d)
    assert "\n" not in str(err.value)


def test_load_run_never_parses_a_summary_larger_than_any_run_writes(tmp_path):
    d = fake_run(tmp_path / "r", memory_phases, "memory_phases")
    with open(d / "summary.json", "wb") as f:
        f.truncate(runs.MAX_JSON_BYTES + 1)           # sparse: no disk used, and never read
    with pytest.raises(ConfigError, match="larger than any run writes"):
        jaxinit.load_run(d)


@pytest.mark.parametrize("module, name", [(memory_phases, "memory_phases"), (igb_rescale, "igb_rescale"),
                                          (igb_train, "igb_train")])
def test_load_run_names_runs_made_before_run_json_named_them(tmp_path, module, name):
    assert jaxinit.load_run(fake_run(tmp_path / "r", module, None, "{}")).experiment == name


# --------------------------------------------------------------------------- python -m jaxinit.forgetting.plotting
def plotting_refused(capsys, argv, fragment) -> str:
    capsys.readouterr()
    assert plotting.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    return err[0]


def test_plotting_never_writes_through_a_symlinked_figures_folder(tmp_path, capsys):
    d = _write_run(tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "acc_vs_sigma.png").write_text("a user's file outside the run")
    os.symlink(elsewhere, d / "figures")
    plotting_refused(capsys, [str(d)], "is a symbolic link")
    assert (elsewhere / "acc_vs_sigma.png").read_text() == "a user's file outside the run"
    assert [p.name for p in elsewhere.iterdir()] == ["acc_vs_sigma.png"]


def test_plotting_out_inside_another_runs_own_folders_is_refused(tmp_path, capsys):
    d, other = _write_run(tmp_path / "run"), tmp_path / "other"
    fake_run(other, memory_phases, "memory_phases")
    (other / ".manifest.json").write_text(json.dumps({"format": "jaxinit run manifest 1", "entries": {
        "results": {"kind": "dir"}}}))
    plotting_refused(capsys, [str(d), str(d), "--out", str(other / "results" / "x")], "lies inside the run")
    plotting_refused(capsys, [str(d), str(d), "--out", str(other)], "is a run directory")   # the run itself too


@pytest.mark.parametrize("damage, fragment", [
    (lambda text: text.replace('"epoch": 1,', '"epoch": "zero",', 1), "metrics.jsonl: line"),
    (lambda text: text.replace('"optimizer": "sgd"', '"optimizer": "\udcff"', 1), "metrics.jsonl: line 1 is not"),
])
def test_plotting_names_the_file_of_damaged_rows(tmp_path, capsys, damage, fragment):
    d = _write_run(tmp_path / "run")
    text = (d / "metrics.jsonl").read_text()
    (d / "metrics.jsonl").write_bytes(damage(text).encode("utf-8", "surrogateescape"))
    line = plotting_refused(capsys, [str(d)], fragment)
    assert str(d / "metrics.jsonl") in line


def test_plotting_names_a_run_of_another_experiment(tmp_path, capsys):
    d = fake_run(tmp_path / "r", memory_phases, "memory_phases", '{"members": []}')
    (d / "metrics.jsonl").write_text('{"member": 0, "epoch": 0}\n')
    line = plotting_refused(capsys, [str(d)], "holds a run of memory_phases, not of the forgetting study")
    assert "stale" not in line


def test_plotting_refuses_a_summary_with_a_nan_where_the_rows_have_an_accuracy(tmp_path, capsys):
    d = _write_run(tmp_path / "run")
    summary = json.loads((d / "summary.json").read_text())
    summary["members"][0]["test_acc_at_best"] = float("nan")
    (d / "summary.json").write_text(json.dumps(summary))
    plotting_refused(capsys, [str(d)], "test_acc_at_best nan in the summary")
