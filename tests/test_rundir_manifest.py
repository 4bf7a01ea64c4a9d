"""The run manifest (jaxinit.run.manifest.Manifest): a run deletes what it wrote and nothing else.

Issue 20 items 1, 2 and 9: `--resume` deleted a user's files in figures/, `--overwrite` deleted user data
that merely had a run file's name (checkpoints/90.pt, checkpoints/0/README.txt, points/<anything>/), and
a run made inside another run's checkpoints/ was destroyed by that run's clean-up.
"""
import hashlib
import json
import os

import pytest

from jaxinit.run import manifest, rundir
from jaxinit.errors import ConfigError


def _run_with_manifest(out):
    """A finished run as an integrated sink writes it: every file through the manifest."""
    m = manifest.Manifest(out)
    m.write_json(out / "config.json", {"train": {"epochs": 3}}, digest=False)
    m.record(out / "metrics.jsonl")
    (out / "metrics.jsonl").write_text('{"epoch": 0}\n')
    m.write_json(out / "summary.json", {"spread": 1.0})
    m.write_text(out / "figures" / "fig1.png", "png")
    m.write_text(out / "results" / "a.npz", "npz")
    step = out / "checkpoints" / "6"
    m.record(step, "checkpoint")
    (step / "state").mkdir(parents=True)
    (step / "state" / "data").write_bytes(b"x")
    (step / "_CHECKPOINT_METADATA").write_text("{}")
    return m


def _user_files(out):
    """What issue 20 found deleted: user files inside the run's folders, and a nested run."""
    made = {"figures/my.pdf": b"mine", "figures/drafts/d.txt": b"draft", "checkpoints/90.pt": b"weights",
            "checkpoints/0/README.txt": b"readme", "points/notes/n.txt": b"note", "notes.txt": b"top"}
    for rel, data in made.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
    nested = out / "checkpoints" / "999"
    nested.mkdir()
    (nested / "config.json").write_text("{}")
    (nested / "metrics.jsonl").write_text("{}\n")
    return {**made, "checkpoints/999/config.json": b"{}", "checkpoints/999/metrics.jsonl": b"{}\n"}


def _still_there(out, made):
    return {rel: (out / rel).read_bytes() for rel in made if (out / rel).exists()} == made


def test_entries_are_the_files_written_with_kinds_and_digests(tmp_path):
    out = tmp_path / "run"
    m = _run_with_manifest(out)
    e = m.entries()
    assert e["figures"] == {"kind": "dir"} and e["checkpoints/6"] == {"kind": "checkpoint"}
    assert "sha256" not in e["config.json"] and "sha256" not in e["metrics.jsonl"]
    assert e["summary.json"]["sha256"] == hashlib.sha256((out / "summary.json").read_bytes()).hexdigest()
    assert m.owns(out / "figures" / "fig1.png") and m.owns("checkpoints/6/state/data")
    assert not m.owns(out / "figures" / "other.png")
    assert rundir.foreign_entries(out) == [] and rundir.inspect(out) == "run"
    assert json.loads((out / ".manifest.json").read_text())["format"].startswith("jaxinit run manifest")


def test_every_foreign_file_is_named_and_makes_the_directory_foreign(tmp_path):
    out = tmp_path / "run"
    _run_with_manifest(out)
    _user_files(out)
    assert rundir.foreign_entries(out) == ["checkpoints/0", "checkpoints/90.pt", "checkpoints/999", "figures/drafts",
                                           "figures/my.pdf", "notes.txt", "points"]
    assert rundir.inspect(out) == "foreign"


def test_clear_owned_deletes_only_manifest_entries(tmp_path):
    out = tmp_path / "run"
    _run_with_manifest(out)
    made = _user_files(out)
    kept = rundir.clear_owned(out)
    assert _still_there(out, made)
    for rel in ("config.json", "metrics.jsonl", "summary.json", "figures/fig1.png", "results", "checkpoints/6"):
        assert not (out / rel).exists(), rel
    assert kept == ["checkpoints", "figures"] and (out / manifest.MANIFEST).exists()
    left = manifest.Manifest(out).entries()
    assert set(left) == {"figures", "checkpoints"}          # folders still holding the user's files


def test_the_stale_summary_and_figures_go_but_a_users_figures_stay(tmp_path):
    # Item 1: `--resume` ran rmtree on figures/; the sink now clears its own stale entries only.
    out = tmp_path / "run"
    _run_with_manifest(out)
    made = _user_files(out)
    rundir.clear_owned(out, only=("summary.json", "figures"))
    assert _still_there(out, made)
    assert not (out / "summary.json").exists() and not (out / "figures" / "fig1.png").exists()
    assert (out / "metrics.jsonl").exists() and (out / "checkpoints" / "6").exists() and (out / "results" / "a.npz").exists()


def test_a_replaced_file_is_kept_and_reported(tmp_path):
    out = tmp_path / "run"
    m = _run_with_manifest(out)
    (out / "figures" / "fig1.png").write_text("the user's own drawing")
    assert m.modified() == ["figures/fig1.png"] and rundir.foreign_entries(out) == ["figures/fig1.png"]
    assert rundir.clear_owned(out) == ["figures", "figures/fig1.png"]
    assert (out / "figures" / "fig1.png").read_text() == "the user's own drawing"


def test_a_nested_run_inside_a_recorded_folder_is_never_deleted(tmp_path):
    out = tmp_path / "run"
    m = _run_with_manifest(out)
    inner = out / "figures" / "run2"
    manifest.Manifest(inner).write_json(inner / "config.json", {}, digest=False)
    m.record(out / "checkpoints" / "12", "checkpoint")           # recorded, then a user's run took the name
    (out / "checkpoints" / "12").mkdir()
    (out / "checkpoints" / "12" / "config.json").write_text("{}")
    (out / "checkpoints" / "12" / "state").mkdir()
    rundir.clear_owned(out)
    assert (inner / "config.json").exists() and (out / "checkpoints" / "12" / "state").is_dir()


def test_a_recorded_sub_run_is_cleared_with_its_own_manifest(tmp_path):
    out = tmp_path / "clocks"
    m = manifest.Manifest(out)
    m.write_json(out / "config.json", {}, digest=False)
    point = out / "points" / "sgd_lr0.05"
    m.record(point, "run")
    _run_with_manifest(point)
    (point / "figures" / "mine.pdf").write_text("mine")
    assert rundir.foreign_entries(out) == ["points/sgd_lr0.05/figures/mine.pdf"]
    assert rundir.clear_owned(out) == ["points", "points/sgd_lr0.05", "points/sgd_lr0.05/figures"]
    assert (point / "figures" / "mine.pdf").read_text() == "mine" and not (point / "summary.json").exists()
    (point / "figures" / "mine.pdf").unlink()
    rundir.clear_owned(out)
    assert not (out / "points").exists()


def test_a_write_killed_at_any_point_leaves_a_directory_that_is_still_the_runs(tmp_path, monkeypatch):
    out = tmp_path / "run"
    m = _run_with_manifest(out)
    with pytest.raises(RuntimeError):                 # killed while writing: the temporary file goes
        with m.writing(out / "figures" / "fig2.png") as tmp:
            tmp.write_text("half")
            raise RuntimeError
    assert rundir.foreign_entries(out) == []
    # Killed between the rename and the digest's update: the new bytes match the pending digest.
    monkeypatch.setattr("jaxinit.run.manifest._settle", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        m.write_json(out / "summary.json", {"spread": 2.0})
    assert json.loads((out / "summary.json").read_text()) == {"spread": 2.0}
    assert rundir.foreign_entries(out) == []
    monkeypatch.undo()
    with pytest.raises(RuntimeError):                 # the next write killed before its rename: still ours
        with m.writing(out / "summary.json") as tmp:
            tmp.write_text("half")
            raise RuntimeError
    assert rundir.foreign_entries(out) == [] and m.entries()["summary.json"]["sha256"] == \
        hashlib.sha256((out / "summary.json").read_bytes()).hexdigest()
    # A temporary twin left by a kill -9 (atomic write, orbax step) is the run's, and cleared with it.
    (out / "figures" / ".fig1.png.x1y2.tmp").write_text("tmp")
    (out / "checkpoints" / "6.orbax-checkpoint-tmp-17").mkdir()
    (out / "checkpoints" / "6.orbax-checkpoint-tmp-17" / "state").mkdir()
    assert rundir.foreign_entries(out) == []
    rundir.clear_owned(out)
    assert not (out / "figures").exists() and not (out / "checkpoints").exists()


def test_an_unreadable_manifest_is_one_line(tmp_path):
    out = tmp_path / "run"
    _run_with_manifest(out)
    (out / manifest.MANIFEST).write_text('{"format": "jaxinit run manifest 1", "entries": {"a": {"kind": "')
    with pytest.raises(ConfigError, match="cannot be told from others") as err:
        rundir.inspect(out)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError):
        rundir.clear_owned(out)
    assert (out / "summary.json").exists()


def test_paths_outside_the_run_are_not_recorded(tmp_path):
    m = manifest.Manifest(tmp_path / "run")
    with pytest.raises(ValueError):
        m.record(tmp_path / "elsewhere.txt")
    with pytest.raises(ValueError):
        m.record("../elsewhere.txt")


# --------------------------------------------------------------------------- runs made before manifests
def _legacy_run(out):
    (out / "checkpoints" / "6" / "state").mkdir(parents=True)
    (out / "checkpoints" / "6" / "_CHECKPOINT_METADATA").write_text("{}")
    (out / "figures").mkdir()
    (out / "figures" / "fig1.png").write_text("png")
    for name in ("config.json", "summary.json", "metrics.jsonl"):
        (out / name).write_text("{}")


def test_legacy_runs_keep_the_name_rule_but_user_data_with_run_names_is_foreign(tmp_path):
    out = tmp_path / "old"
    _legacy_run(out)
    assert rundir.foreign_entries(out) == [] and rundir.inspect(out) == "run"
    made = _user_files(out)
    assert rundir.foreign_entries(out) == ["checkpoints/0", "checkpoints/90.pt", "checkpoints/999", "figures/drafts",
                                           "notes.txt", "points/notes"]          # figures/my.pdf: the name rule's limit
    del made["figures/my.pdf"]
    rundir.clear_owned(out)
    assert _still_there(out, made) and not (out / "checkpoints" / "6").exists() and not (out / "summary.json").exists()


def test_the_first_record_in_a_legacy_run_adopts_what_the_name_rule_owns(tmp_path):
    out = tmp_path / "old"
    _legacy_run(out)
    (out / "notes.txt").write_text("mine")
    manifest.Manifest(out).write_json(out / "run.json", {})
    e = manifest.Manifest(out).entries()
    assert {"config.json", "summary.json", "figures/fig1.png", "checkpoints/6", "run.json"} <= set(e)
    assert e["checkpoints/6"]["kind"] == "checkpoint" and "notes.txt" not in e
    assert rundir.foreign_entries(out) == ["notes.txt"]


# --------------------------------------------------------------------------- item 9: nested runs
def test_an_out_inside_another_runs_folders_is_refused(tmp_path):
    a = tmp_path / "A"
    _run_with_manifest(a)
    for inside in ("checkpoints/999", "figures/x", "results", "summary.json.d"):
        if inside == "summary.json.d":
            rundir.check_not_nested(a / inside)           # not one of A's names: allowed
            continue
        with pytest.raises(ConfigError, match="lies inside the run in") as err:
            rundir.check_not_nested(a / inside)
        assert "\n" not in str(err.value)
    rundir.check_not_nested(a)                            # the run itself
    rundir.check_not_nested(tmp_path / "B")
    rundir.check_not_nested(a / "notes" / "run")          # a user's folder beside the run's: A is then foreign
    link = tmp_path / "link"
    link.symlink_to(a / "checkpoints")
    with pytest.raises(ConfigError, match="lies inside"):
        rundir.check_not_nested(link / "999")


def test_a_sub_run_the_run_recorded_itself_is_allowed(tmp_path):
    c = tmp_path / "clocks"
    m = manifest.Manifest(c)
    m.write_json(c / "config.json", {}, digest=False)
    m.record(c / "points" / "p1", "run")
    rundir.check_not_nested(c / "points" / "p1")
    with pytest.raises(ConfigError):
        rundir.check_not_nested(c / "points" / "p2")


def test_legacy_runs_are_recognised_by_config_and_lock(tmp_path):
    a = tmp_path / "A"
    _legacy_run(a)
    rundir.check_not_nested(a / "checkpoints" / "999")    # no .lock: a notebook's folder, not provably a run
    (a / manifest.LOCK).write_text("")
    with pytest.raises(ConfigError, match="in its checkpoints/"):
        rundir.check_not_nested(a / "checkpoints" / "999")
    (a / "points" / "p").mkdir(parents=True)
    (a / "points" / "p" / "config.json").write_text("{}")
    rundir.check_not_nested(a / "points" / "p")           # an existing clock point of an old clocks run


def test_is_step_folder_by_content(tmp_path):
    step = tmp_path / "12"
    (step / "state").mkdir(parents=True)
    assert not manifest.is_step_folder(step)                # not finalized: no _CHECKPOINT_METADATA
    (step / "_CHECKPOINT_METADATA").write_text("{}")
    assert manifest.is_step_folder(step)
    (step / "README.txt").write_text("x")
    assert not manifest.is_step_folder(step)
    (tmp_path / "3.orbax-checkpoint-tmp-99" / "meta.orbax-checkpoint-tmp-1").mkdir(parents=True)
    assert manifest.is_step_folder(tmp_path / "3.orbax-checkpoint-tmp-99")
    for name in ("90.pt", "²"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "_CHECKPOINT_METADATA").write_text("{}")
        assert not manifest.is_step_folder(tmp_path / name)
    os.symlink(step, tmp_path / "13")
    assert not manifest.is_step_folder(tmp_path / "13")
