"""`jaxinit.run.tensorboard`: metrics rows as TensorBoard event files, read back by TensorBoard's own reader."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxinit.run import manifest, rundir
from jaxinit.run import tensorboard as tb
from jaxinit.errors import ConfigError

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
ROOT = Path(__file__).resolve().parents[1]


def _rows(epochs, members=(0, 1), shift=0.0):
    return [{"member": m, "optimizer": ("sgd", "adam")[m], "sigma_w": (0.5, 2.0)[m], "seed": 0, "epoch": e,
             "step": 4 * e, "lr": 0.05, "train_loss": 2.0 / (e + 1) + shift, "train_acc": 0.1 * e,
             "val_loss": 2.1 / (e + 1) + m, "val_acc": 0.09 * e + shift, "test_loss": None if e == 2 else 2.2,
             "test_acc": 0.123456789 * e, "param_norm": 10.0 + e + m, "diverged": False, "diverged_step": None,
             "param_norm_layers": {"dense_0/kernel": 3.0}}
            for e in epochs for m in members]


def _read(folder: Path) -> dict[str, list[tuple[int, float]]]:
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def _expected(rows, member, key):
    return [(r["epoch"], float(np.float32(r[key]))) for r in rows if r["member"] == member and r[key] is not None]


def test_rows_come_back_with_their_steps_and_values(tmp_path):
    rows = _rows(range(4))
    tb.write_rows(tmp_path, rows[:2])                  # epoch 0, as a fresh run writes it
    paths = tb.write_rows(tmp_path, rows[2:])          # then one call per evaluation
    assert [p.parent.name for p in paths] == ["member_000_sgd_sw0.5_s0", "member_001_adam_sw2.0_s0"]
    for m, p in enumerate(paths):
        got = _read(p.parent)
        assert set(got) == {"lr", "train/loss", "train/acc", "val/loss", "val/acc", "test/loss", "test/acc",
                            "param_norm"}
        for key, t in (("val_loss", "val/loss"), ("val_acc", "val/acc"), ("test_acc", "test/acc"),
                       ("train_loss", "train/loss"), ("param_norm", "param_norm"), ("test_loss", "test/loss")):
            assert got[t] == _expected(rows, m, key), t          # float32 in the file, every step once
        assert [s for s, _ in got["test/loss"]] == [0, 1, 3]     # a None is left out
    assert sorted(p.name for p in (tmp_path / "tensorboard").rglob("*") if p.is_file()) == [tb.EVENTS] * 2


def test_files_are_the_runs_own_and_overwrite_deletes_only_them(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    manifest.Manifest(tmp_path).record(tmp_path / "config.json")
    paths = tb.write_rows(tmp_path, _rows(range(2)))
    entries = manifest.Manifest(tmp_path).entries()
    for p in paths:
        assert entries[p.relative_to(tmp_path).as_posix()] == {"kind": "file"}     # appended to: no digest
    user = tmp_path / "tensorboard" / "notes.txt"
    user.write_text("mine")
    assert rundir.foreign_entries(tmp_path) == ["tensorboard/notes.txt"]
    rundir.clear_run(tmp_path)
    assert user.read_text() == "mine" and not any(p.exists() for p in paths)
    assert not (tmp_path / "tensorboard" / paths[0].parent.name).exists()


def test_a_resumed_run_appends_and_its_redone_epochs_replace_the_old_ones(tmp_path):
    first = _rows(range(4))
    tb.write_rows(tmp_path, first)
    again = _rows(range(2, 6), shift=0.5)         # resumed from the checkpoint of epoch 1: 2.. are redone
    paths = tb.write_rows(tmp_path, again)
    got = _read(paths[0].parent)["val/acc"]
    assert got == _expected(first[:4], 0, "val_acc") + _expected(again, 0, "val_acc")
    assert [s for s, _ in got] == [0, 1, 2, 3, 4, 5]


def test_a_write_killed_midway_is_cut_off_before_the_next(tmp_path):
    rows = _rows(range(3), members=(0,))
    [path] = tb.write_rows(tmp_path, rows[:2])
    whole = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x2a\x00\x00\x00\x00\x00\x00\x00\x01\x02")       # a record's head, killed mid-write
    tb.write_rows(tmp_path, rows[2:])
    assert _read(path.parent)["val/acc"] == _expected(rows, 0, "val_acc")
    assert tb._tail(path) == (path.stat().st_size, 2) and path.stat().st_size > whole


def test_igb_rows_go_under_their_run_by_step(tmp_path):
    rows = [{"act": "tanh", "depth": 3, "optimizer": "sgd", "width": 16, "member": j, "role": role, "seed": 0,
             "sigma_w2": 1.5, "sigma_b2": 0.1, "lr": 0.2, "step": step, "test_acc": 0.5 + 0.01 * step,
             "test_fmax": 0.9, "test_class_acc": [1.0, 0.0], "diverged": False}
            for step in (0, 10) for j, role in enumerate(("ordered-deep", "eoc"))]
    paths = tb.write_rows(tmp_path, rows, step_key="step", tag_prefix="igb/")
    assert [p.parent.relative_to(tmp_path / "tensorboard").as_posix() for p in paths] == [
        "tanh__d3__sgd/member_000_ordered-deep_s0", "tanh__d3__sgd/member_001_eoc_s0"]
    got = _read(paths[1].parent)
    assert set(got) == {"igb/lr", "igb/test/acc", "igb/test/fmax"}
    assert got["igb/test/acc"] == [(0, float(np.float32(0.5))), (10, float(np.float32(0.6)))]


def test_bad_places_and_rows_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="not a directory"):
        tb.write_rows(tmp_path / "missing", _rows([0]))
    with pytest.raises(ValueError, match="'member'"):
        tb.write_rows(tmp_path, [{"epoch": 0, "val_acc": 0.5}])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(elsewhere, run / "tensorboard")
    with pytest.raises(ConfigError, match="symbolic link"):
        tb.write_rows(run, _rows([0]))
    assert list(elsewhere.iterdir()) == [] and not (run / ".manifest.json").exists()     # nothing recorded either
    assert tb.write_rows(run, []) == []


def test_tensorboardx_is_imported_only_to_write():
    code = ("import sys, jaxinit.run.tensorboard as tb, jaxinit.run.runs, jaxinit.progress; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorboardX', 'tensorboard', 'jax')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.replace("'", '"')) == []
