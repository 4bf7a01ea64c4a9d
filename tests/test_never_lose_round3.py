"""Issue 35 ("Never lose a run, round three"), item 1: ``--overwrite`` sets the old run aside and puts it back, byte
for byte, when the new run cannot start (`jaxinit.run.overwrite`, `jaxinit.run.claim`).

The old runs here are made by each experiment's own command line with a stand-in main that writes what a finished
run holds (metrics rows, summary, results, a figure, a checkpoint folder, TensorBoard events) through the run's
manifest, in a second; the overwrite that fails is the experiment's real one.
"""
import errno
import json
import os
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from experiments import benchmark, clocks, forgetting, igb_init, igb_rescale, igb_train, memory_phases, phase_diagram
from jaxinit import interrupt
from jaxinit.errors import ConfigError
from jaxinit.run import cli, manifest, registry, rundir
from jaxinit.run.manifest import Manifest

MODULES = {"forgetting": forgetting, "clocks": clocks, "igb_init": igb_init, "igb_train": igb_train,
           "igb_rescale": igb_rescale, "memory_phases": memory_phases, "phase_diagram": phase_diagram,
           "benchmark": benchmark}
SMALL = {"forgetting": "smoke", "clocks": "smoke", "igb_init": "smoke", "igb_train": "smoke", "igb_rescale": "smoke",
         "memory_phases": "smoke", "phase_diagram": "smoke", "benchmark": "quick"}


def overwrite():
    """`jaxinit.run.overwrite`, imported where a test uses it (the other tests also run on code without it)."""
    from jaxinit.run import overwrite as module
    return module


def snapshot(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` (the lock aside: its holder line changes), by relative path."""
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != manifest.LOCK}


def finished_main(cfg, out: Path, resume: bool) -> None:
    """What a finished run holds, written as runs write it (through the manifest)."""
    m = Manifest(out)
    m.write_jsonl(out / "metrics.jsonl", [{"member": 0, "epoch": 0, "acc": 0.5}], digest=False)
    m.write_json(out / "summary.json", {"members": [{"member": 0}]})
    m.save_npz(out / "results" / "case.npz", a=np.arange(3))
    m.write_text(out / "figures" / "a.png", "png")
    m.write_text(out / "tensorboard" / "member_0" / "events.out", "events", digest=False)
    step = out / "checkpoints" / "4"
    m.record(step, "checkpoint")
    (step / "state").mkdir(parents=True)
    (step / "state" / "data").write_bytes(b"\x00\x01")
    (step / "_CHECKPOINT_METADATA").write_text("{}")


def make_finished(name: str, out: Path) -> dict[str, bytes]:
    """A finished run of experiment ``name`` in ``out``, with a user's file in its figures/; its snapshot."""
    exp = MODULES[name].EXPERIMENT
    assert cli.run(replace(exp, main=finished_main, prepare=None), ["--preset", SMALL[name], "--out", str(out)]) == 0
    (out / "figures" / "mine.pdf").write_text("a user's figure")
    return snapshot(out)


def one_error_line(capsys, fragment: str) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err
    return err[0]


def no_leftovers(out: Path) -> None:
    assert not [p for p in out.parent.iterdir() if "jaxinit-" in p.name], list(out.parent.iterdir())


# --------------------------------------------------------------------------- every experiment, a real late failure
def _late_failure(name: str, monkeypatch) -> list[str]:
    """An input of experiment ``name`` that fails after the old run would once have been deleted."""
    def refuse(*a, **k):
        raise ConfigError("the library refused after the set-up checks")
    if name in ("phase_diagram", "igb_init"):   # nothing in their configs fails late (a real input a probe cannot
        # read is skipped): their library refuses before its first result instead
        monkeypatch.setattr(*{"phase_diagram": (phase_diagram.pd, "phase_diagrams"),
                              "igb_init": (igb_init, "probe_init")}[name], refuse)
        return []
    if name == "benchmark":
        monkeypatch.setattr(benchmark, "machine_info", refuse)     # before its first line is measured
        return []
    return {"forgetting": ["--train.batch_size=100000"], "clocks": ["--data.n_val=5000"],
            "igb_train": ["--train.batch_size=100000"], "igb_rescale": ["--pretrain.n_train=1000000"],
            "memory_phases": ["--train.batch_size=100000"]}[name]


@pytest.mark.parametrize("name", [e.name for e in registry.EXPERIMENTS if e.run_dir])
def test_an_overwrite_that_fails_before_training_leaves_the_old_run_byte_identical(tmp_path, capsys, monkeypatch,
                                                                                  name):
    out = tmp_path / "run"
    before = make_finished(name, out)
    argv = _late_failure(name, monkeypatch)
    exp = MODULES[name].EXPERIMENT
    capsys.readouterr()
    code = cli.run(exp, ["--preset", SMALL[name], "--out", str(out), "--overwrite", *argv])
    assert code == 2
    one_error_line(capsys, "error:")
    assert snapshot(out) == before
    no_leftovers(out)


# --------------------------------------------------------------------------- the mechanism
EXP = phase_diagram.EXPERIMENT


def _overwrite_with(out: Path, main) -> int:
    return cli.run(replace(EXP, main=main, prepare=None), ["--preset", "smoke", "--out", str(out), "--overwrite"])


@pytest.mark.parametrize("failure", ["bug", "ConfigError", "SIGINT"])
def test_whatever_stops_the_new_run_before_it_starts_puts_the_old_one_back(tmp_path, capsys, failure):
    out = tmp_path / "run"
    before = make_finished("phase_diagram", out)

    def fails(cfg, o, resume):
        assert not (o / "summary.json").exists() and (o / "figures" / "mine.pdf").exists()   # set aside, not gone
        if failure == "bug":
            raise RuntimeError("a bug in the experiment")
        if failure == "ConfigError":
            raise ConfigError("the data could not be read")
        os.kill(os.getpid(), signal.SIGINT)
        interrupt.check()
    capsys.readouterr()
    if failure == "bug":
        with pytest.raises(RuntimeError):
            _overwrite_with(out, fails)
    else:
        assert _overwrite_with(out, fails) == (2 if failure == "ConfigError" else 130)
        err = capsys.readouterr().err
        assert f"the earlier run in {out} is as it was" in err and len(err.strip().splitlines()) == 1, err
    assert snapshot(out) == before
    no_leftovers(out)


def test_once_the_new_run_writes_a_result_the_old_one_is_gone_and_the_new_one_kept(tmp_path, capsys):
    out = tmp_path / "run"
    make_finished("phase_diagram", out)

    def starts_then_fails(cfg, o, resume):
        Manifest(o).write_json(o / "summary.json", {"new": True})
        assert not [p for p in o.parent.iterdir() if "jaxinit-" in p.name]      # deleted at that moment
        raise ConfigError("failed after it started")
    assert _overwrite_with(out, starts_then_fails) == 2
    assert json.loads((out / "summary.json").read_text()) == {"new": True}
    assert (out / "figures" / "mine.pdf").read_text() == "a user's figure"       # a user's file never moves away
    assert not (out / "metrics.jsonl").exists() and not (out / "checkpoints" / "4").exists()
    no_leftovers(out)


def test_an_overwrite_killed_midway_is_put_back_by_the_next_command(tmp_path, capsys):
    out = tmp_path / "run"
    before = make_finished("phase_diagram", out)
    with rundir.RunLock(out):
        overwrite().set_aside(out)                          # ... and the process is killed here (kill -9)
        Manifest(out).write_json(out / "config.json", {"grid": {}}, digest=False)
    assert "summary.json" not in snapshot(out)
    capsys.readouterr()
    assert cli.run(replace(EXP, main=lambda cfg, o, r: None, prepare=None), ["--out", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "put back the earlier run that an interrupted --overwrite had set aside" in err
    after = snapshot(out)
    assert after["summary.json"] == before["summary.json"] and after["checkpoints/4/state/data"] == b"\x00\x01"
    no_leftovers(out)


def test_a_half_deleted_old_run_is_cleared_and_a_newer_run_is_never_mixed_with_one_set_aside(tmp_path, capsys):
    out = tmp_path / "run"
    before = make_finished("phase_diagram", out)
    good = replace(EXP, main=finished_main, prepare=None)

    def newer_run_started():
        Manifest(out).write_text(out / "config.json", before["config.json"].decode(), digest=False)
        Manifest(out).write_json(out / "summary.json", {"newer": True})
    aside, ow = overwrite().set_aside(out), overwrite()
    newer_run_started()
    os.rename(aside.folder, aside.folder.with_name(aside.folder.name.replace(ow.PENDING, ow.DISCARD)))
    assert cli.run(good, ["--preset", "smoke", "--out", str(out), "--overwrite"]) == 0   # killed while deleting it
    no_leftovers(out)
    pending = overwrite().set_aside(out)
    newer_run_started()                                   # (by hand: a run cannot start with one set aside)
    capsys.readouterr()
    assert cli.run(good, ["--preset", "smoke", "--out", str(out)]) == 2
    assert pending.folder.exists() and "move one of them away" in capsys.readouterr().err


def test_a_run_directory_whose_parent_refuses_the_aside_folder_is_left_alone(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    before = make_finished("phase_diagram", out)

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(overwrite().tempfile, "mkdtemp", no_space)
    capsys.readouterr()
    assert _overwrite_with(out, finished_main) == 2
    one_error_line(capsys, "nothing was changed")
    assert snapshot(out) == before


def test_a_leftover_manifest_temp_file_neither_blocks_an_overwrite_nor_is_lost(tmp_path, capsys):
    out = tmp_path / "run"
    make_finished("phase_diagram", out)
    (out / "..manifest.json.k3j2x.tmp").write_text('{"format": "half')      # one kill -9 in ~20 leaves it
    before = snapshot(out)

    def fails(cfg, o, resume):
        raise ConfigError("late")
    assert _overwrite_with(out, fails) == 2
    assert snapshot(out) == before
    assert _overwrite_with(out, finished_main) == 0                           # and a good overwrite starts
    assert not (out / "..manifest.json.k3j2x.tmp").exists()
    assert (out / "figures" / "mine.pdf").exists()


def test_a_fresh_run_that_fails_before_it_starts_leaves_nothing_behind(tmp_path, capsys):
    out = tmp_path / "new"

    def bug(cfg, o, resume):
        (o / "checkpoints").mkdir()                      # what orbax makes on its own
        raise IndexError("a bug")
    with pytest.raises(IndexError):
        cli.run(replace(EXP, main=bug, prepare=None), ["--preset", "smoke", "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == [manifest.LOCK, manifest.MANIFEST]
    assert cli.run(replace(EXP, main=finished_main, prepare=None), ["--preset", "smoke", "--out", str(out),
                                                                     "--grid.n=9"]) == 0   # the corrected rerun


# --------------------------------------------------------------------------- item 3: no command writes in a run
def test_an_out_inside_a_runs_own_folders_or_a_run_itself_is_refused_for_other_writers(tmp_path):
    out = tmp_path / "run"
    make_finished("phase_diagram", out)
    for inside in (out / "checkpoints" / "6", out, out / "figures"):
        with pytest.raises(ConfigError) as err:
            rundir.check_outside_runs(inside, "accel.json")
        assert "\n" not in str(err.value)
    rundir.check_outside_runs(tmp_path / "elsewhere", "accel.json")
    rundir.check_outside_runs(out / "my_notes", "accel.json")        # a user's folder in a run is the user's
