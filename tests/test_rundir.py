"""Run directories are owned: continuation, refusal, --overwrite, the lock, atomic files, provenance."""
import errno
import json
import os
import signal
from dataclasses import dataclass, replace

import numpy as np
import pytest

from jaxinit import interrupt
from jaxinit.run import cli, files, manifest, rundir
from jaxinit.config import Preset, Presets, TrainConfig
from jaxinit.run.config_parse import override
from jaxinit.errors import ConfigError


@dataclass(frozen=True)
class Cfg:
    train: TrainConfig = TrainConfig()
    """training"""


CALLS = []


def _main(cfg, out, resume):
    CALLS.append((cfg.train.epochs, resume))
    manifest.Manifest(out).write_json(out / "summary.json", {"epochs": cfg.train.epochs})


PRESETS = Presets({"a": Preset(Cfg(), "the defaults"), "b": Preset(override(Cfg(), "--train.epochs=3"),
                                                                   "three epochs")})


EXPERIMENT = cli.Experiment(name="x", doc="doc", presets=PRESETS, default="a", main=_main)


def _run(argv):
    CALLS.clear()
    return cli.run(EXPERIMENT, argv)


def _one_error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


def test_rerun_of_the_same_config_continues_the_run(tmp_path):
    out = tmp_path / "o"
    assert _run(["--out", str(out)]) == 0 and CALLS == [(10, False)]
    assert _run(["--out", str(out)]) == 0 and CALLS == [(10, True)]       # resumed, nothing lost


def test_rerun_of_another_config_is_refused_and_nothing_changes(tmp_path, capsys):
    out = tmp_path / "o"
    assert _run(["--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert _run(["--out", str(out), "--train.epochs=4"]) == 2
    assert "another config (differs in train.epochs)" in _one_error(capsys) and CALLS == []
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_overwrite_replaces_only_the_runs_own_files(tmp_path):
    out = tmp_path / "o"
    assert _run(["--out", str(out)]) == 0
    manifest.Manifest(out).write_text(out / "figures" / "a.png", "png")     # the run's figure
    (out / "figures" / "mine.pdf").write_bytes(b"%PDF")                  # a user's file beside it
    assert _run(["--out", str(out), "--train.epochs=4", "--overwrite"]) == 0 and CALLS == [(4, False)]
    assert json.loads((out / "config.json").read_text())["train"]["epochs"] == 4
    assert not (out / "figures" / "a.png").exists() and (out / "figures" / "mine.pdf").read_bytes() == b"%PDF"


def test_a_directory_with_user_files_is_never_touched(tmp_path, capsys):
    out = tmp_path / "o"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "model_epoch_90.pt").write_bytes(b"weights")
    for extra in ([], ["--overwrite"]):
        assert _run(["--out", str(out)] + extra) == 2
        assert "not a run's" in _one_error(capsys)
    assert (out / "checkpoints" / "model_epoch_90.pt").read_bytes() == b"weights"
    assert not (out / "config.json").exists()


def test_partial_run_needs_overwrite(tmp_path, capsys):
    # A run that recorded its files in a manifest but lost config.json: its own files, provably.
    out = tmp_path / "o"
    manifest.Manifest(out).write_text(out / "metrics.jsonl", "{}\n", digest=False)
    assert rundir.inspect(out) == "partial"
    assert _run(["--out", str(out)]) == 2
    assert "without config.json" in _one_error(capsys)
    assert _run(["--out", str(out), "--overwrite"]) == 0 and not (out / "metrics.jsonl").exists()


def test_run_files_without_config_or_manifest_are_a_users_and_never_deleted(tmp_path, capsys):
    # Issue 20 item 2: a folder holding only figures/fig1.pdf and table.md lost both to --overwrite.
    out = tmp_path / "o"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "fig1.pdf").write_bytes(b"%PDF")
    (out / "table.md").write_text("| a |")
    assert rundir.inspect(out) == "foreign"
    assert _run(["--out", str(out), "--overwrite"]) == 2
    assert "not a run's" in _one_error(capsys)
    assert (out / "figures" / "fig1.pdf").read_bytes() == b"%PDF" and (out / "table.md").read_text() == "| a |"


def test_a_directory_in_use_is_refused_with_the_holders_name(tmp_path, capsys):
    out = tmp_path / "o"
    with rundir.RunLock(out):
        assert _run(["--out", str(out)]) == 2
        assert f"in use by pid {os.getpid()}" in _one_error(capsys)
    assert _run(["--out", str(out)]) == 0          # released: the kernel drops a flock with its holder


def test_inspect_states(tmp_path):
    assert rundir.inspect(tmp_path / "none") == "new"
    (tmp_path / "e").mkdir()
    assert rundir.inspect(tmp_path / "e") == "new"
    (tmp_path / "e" / "summary.json").write_text("{}")
    assert rundir.inspect(tmp_path / "e") == "foreign"       # no config.json, no manifest: not provably a run
    (tmp_path / "e" / "config.json").write_text("{}")
    assert rundir.inspect(tmp_path / "e") == "run"
    (tmp_path / "e" / "notes.txt").write_text("mine")
    assert rundir.inspect(tmp_path / "e") == "foreign"


def test_provenance_in_run_json(tmp_path):
    out = tmp_path / "o"
    assert _run(["--out", str(out)]) == 0
    assert _run(["--out", str(out)]) == 0                                 # a second part of the run
    segments = json.loads((out / "run.json").read_text())["provenance"]
    assert [s["resumed"] for s in segments] == [False, True] and segments[-1]["status"] == "finished"
    prov = segments[-1]
    assert set(prov["versions"]) == {"jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy"}
    assert prov["versions"]["jax"][0].isdigit() and prov["device_kind"] and prov["platform"] == "cpu"
    assert prov["git_commit"] == "unknown" or len(prov["git_commit"].split("+")[0]) == 40
    assert "provenance" not in json.loads((out / "summary.json").read_text())


# --------------------------------------------------------------------------- atomic files
def test_full_disk_is_one_line_and_leaves_nothing_behind(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    target.write_text("old")

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(ConfigError, match="no space left on the device") as err:
        files.write_json(target, {"a": 1})
    assert "\n" not in str(err.value)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_unencodable_and_overlong_paths_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="path too long|cannot write"):
        files.write_json(tmp_path / ("x" * 4000) / "a.json", {})
    bad = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xff\xfe")
    assert "\\xff" in files.safe_path(bad)


def test_out_that_is_not_utf8_is_refused_before_anything_is_written(tmp_path, capsys):
    bad = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xff\xfe")
    assert _run(["--out", bad]) == 2
    assert "not valid UTF-8" in _one_error(capsys) and list(tmp_path.iterdir()) == []


def test_results_files_get_the_usual_permissions(tmp_path):
    files.write_json(tmp_path / "a.json", {})
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_npz_round_trip_and_empty_file_is_one_line(tmp_path):
    files.save_npz(tmp_path / "r.npz", a=np.arange(3))
    np.testing.assert_array_equal(files.load_npz(tmp_path / "r.npz")["a"], np.arange(3))
    (tmp_path / "z.npz").write_bytes(b"")
    with pytest.raises(ConfigError, match="not a readable results file") as err:
        files.load_npz(tmp_path / "z.npz")
    # Issue 20 item 15: "rerun without --resume" cannot work (a same-config rerun resumes into the file).
    assert "without --resume" not in str(err.value) and "delete it" in str(err.value) and "--overwrite" in str(err.value)


def test_nan_never_reaches_json(tmp_path):
    with pytest.raises(ValueError):
        files.write_json(tmp_path / "a.json", {"x": float("nan")})
    assert not (tmp_path / "a.json").exists()


# --------------------------------------------------------------------------- signals
def test_a_signal_is_recorded_and_raised_at_the_next_check():
    with interrupt.handled():
        interrupt.check()                                   # nothing pending
        os.kill(os.getpid(), signal.SIGTERM)
        assert interrupt.pending() == signal.SIGTERM
        with pytest.raises(interrupt.Interrupted) as stop:
            interrupt.check()
        assert stop.value.status == 143
    assert interrupt.pending() is None


def test_cli_turns_an_interrupt_into_one_line_and_the_signal_status(tmp_path, capsys):
    def main(cfg, out, resume):
        os.kill(os.getpid(), signal.SIGINT)
        interrupt.check()
    code = cli.run(replace(EXPERIMENT, main=main), ["--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130 and len(err) == 1
    assert "stopped by SIGINT" in err[0] and f"--out {tmp_path / 'o'} --resume" in err[0]
