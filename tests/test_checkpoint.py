"""Checkpoints (jaxinit.run.checkpoint): everything restored is verified, and only this run's folders are touched.

Issue 20, items 3 and 9: a flipped bit in `checkpoints/<n>/meta/metadata` (the epoch, the step, any key)
must send the run to an older checkpoint like a flipped bit in the state does; and orbax's clean-up of
old checkpoints deleted a run made inside `checkpoints/999`.
"""
import json
import shutil

import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from jaxinit.run import manifest, rundir
from jaxinit.run.checkpoint import LEGACY_META_KEYS, Checkpointer, Corrupt, abstract_like, check_meta, meta_digest
from jaxinit.errors import ConfigError

STATE = {"w": jnp.arange(2000.0), "b": jnp.ones(3, jnp.int32)}   # w: the largest data file
PER_EPOCH = 6


def _meta(epoch):
    return {"epoch": epoch, "step_in_epoch": 0, "n_members": 2, "config_fingerprint": "f" * 16}


def _saved(path, epochs=(1, 2), **kw):
    ckpt = Checkpointer(path, steps_per_epoch=PER_EPOCH, **kw)
    for e in epochs:
        ckpt.save(e * PER_EPOCH, jax_tree_plus(STATE, e), _meta(e))
    return ckpt


def jax_tree_plus(tree, k):
    return {"w": tree["w"] + k, "b": tree["b"] + k}


def _flip(path, index, bit):
    blob = bytearray(path.read_bytes())
    blob[index] ^= 1 << bit
    path.write_bytes(bytes(blob))


def _newest_falls_back(ckpt, capsys, fragment):
    """restore_newest passes over step 12 with one line naming `fragment` and restores step 6 intact."""
    step, state, meta = ckpt.restore_newest(abstract_like(STATE), accept=lambda m: None)
    err = capsys.readouterr().err.strip().splitlines()
    assert step == 6 and meta["epoch"] == 1 and int(state["w"][0]) == 1
    assert len(err) == 1 and "checkpoint 12 (" in err[0] and fragment in err[0], err
    return err[0]


# --------------------------------------------------------------------------- item 3: the meta is covered
def test_the_meta_carries_a_digest_of_itself_and_the_step(tmp_path):
    ckpt = _saved(tmp_path)
    meta = json.loads((tmp_path / "12" / "meta" / "metadata").read_text())
    assert meta["step"] == 12 and meta["checkpoint_sha256"] == meta_digest(12, meta)
    _, restored = ckpt.restore(12, abstract_like(STATE))
    assert {k: restored[k] for k in _meta(2)} == _meta(2)


def test_the_issue_case_epoch_6_turned_into_4_is_corrupt_and_falls_back(tmp_path, capsys):
    ckpt = _saved(tmp_path)
    path = tmp_path / "12" / "meta" / "metadata"
    text = path.read_text()
    i = text.index('"epoch": 2') + len('"epoch": ')
    _flip(path, i, 0)                                # '2' -> '3': one bit
    assert '"epoch": 3' in path.read_text()
    _newest_falls_back(ckpt, capsys, "metadata do not match")


@pytest.mark.parametrize("where", ['"step": 12', '"step_in_epoch": 0', '"n_members": 2', '"config_fingerprint": "f',
                                   '"checkpoint_sha256": "', "{"])
def test_a_flipped_bit_in_a_real_meta_file_is_detected(tmp_path, capsys, where):
    ckpt = _saved(tmp_path)
    path = tmp_path / "12" / "meta" / "metadata"
    _flip(path, path.read_text().index(where) + len(where) - 1, 1)
    _newest_falls_back(ckpt, capsys, "")


def test_every_single_bit_flip_of_the_meta_is_refused_by_the_check():
    # The check itself, exhaustively: every bit of every byte of a saved meta (orbax reads it with json).
    meta = {**_meta(2), "step": 12, "state_sha256": "ab" * 32}
    meta["checkpoint_sha256"] = meta_digest(12, meta)
    blob = json.dumps(meta).encode()
    check_meta(12, json.loads(blob), PER_EPOCH)                       # intact: accepted
    for i in range(len(blob)):
        for bit in range(8):
            bad = bytearray(blob)
            bad[i] ^= 1 << bit
            try:
                parsed = json.loads(bytes(bad))
            except ValueError:
                continue                                              # unreadable: orbax raises, Corrupt
            with pytest.raises(Corrupt):
                check_meta(12, parsed if isinstance(parsed, dict) else {}, PER_EPOCH)


def test_a_renamed_step_folder_is_corrupt(tmp_path, capsys):
    ckpt = _saved(tmp_path, epochs=(1, 2))
    ckpt.close()
    shutil.move(tmp_path / "12", tmp_path / "18")
    again = Checkpointer(tmp_path, steps_per_epoch=PER_EPOCH)
    assert again.steps() == [6, 18]
    with pytest.raises(Corrupt, match="not to its folder 18|do not match"):
        again.restore(18, abstract_like(STATE))


def test_a_flipped_bit_in_the_state_is_still_detected(tmp_path, capsys):
    ckpt = _saved(tmp_path)
    data = max((p for p in (tmp_path / "12" / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    assert data.parent.name == "d" and data.stat().st_size > 4000
    _flip(data, data.stat().st_size // 2, 4)
    _newest_falls_back(ckpt, capsys, "")


def _legacy_save(path, step, epoch):
    """A checkpoint as the code before the meta digest wrote it (state digest only)."""
    from jaxinit.run.checkpoint import tree_digest
    manager = ocp.CheckpointManager(path.absolute(), options=ocp.CheckpointManagerOptions(
        create=True, enable_async_checkpointing=False), item_names=("state", "meta"))
    state = jax_tree_plus(STATE, epoch)
    meta = {**_meta(epoch), "state_sha256": tree_digest(state)}
    manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))
    manager.wait_until_finished()
    manager.close()


def test_legacy_checkpoints_restore_and_their_epoch_is_checked_against_the_folder(tmp_path, capsys):
    _legacy_save(tmp_path, 6, 1)
    _legacy_save(tmp_path, 12, 2)
    ckpt = Checkpointer(tmp_path, steps_per_epoch=PER_EPOCH)
    _, meta = ckpt.restore(12, abstract_like(STATE))
    assert set(meta) == LEGACY_META_KEYS
    path = tmp_path / "12" / "meta" / "metadata"
    _flip(path, path.read_text().index('"epoch": 2') + len('"epoch": '), 1)      # 2 -> 0
    _newest_falls_back(ckpt, capsys, "epoch 0 step 0 (step 0), its folder 12")


def test_a_legacy_looking_meta_with_a_mangled_key_is_corrupt():
    meta = {**_meta(2), "step": 12, "state_sha256": "ab" * 32}
    meta["checkpoint_sha257"] = meta_digest(12, meta)                 # a flip in the digest's own key
    with pytest.raises(Corrupt, match="no digest"):
        check_meta(12, meta)


# --------------------------------------------------------------------------- item 9: only our folders
def _foreign_run(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "metrics.jsonl").write_text('{"epoch": 0}\n')
    (path / "checkpoints").mkdir()
    return {p.relative_to(path): p.read_bytes() if p.is_file() else None for p in path.rglob("*")}


def _tree(path):
    return {p.relative_to(path): p.read_bytes() if p.is_file() else None for p in path.rglob("*")}


def test_pruning_never_deletes_a_run_or_a_users_folder_named_like_a_step(tmp_path):
    ckpt = _saved(tmp_path, epochs=(1,))
    nested = _foreign_run(tmp_path / "999")
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "README.txt").write_text("mine")
    (tmp_path / "90.pt").write_bytes(b"weights")
    ckpt.close()
    ckpt = Checkpointer(tmp_path, max_to_keep=2, steps_per_epoch=PER_EPOCH)
    assert ckpt.steps() == [6]                                        # 0 and 999 are not checkpoints
    for e in (2, 3, 4, 5):
        ckpt.save(e * PER_EPOCH, jax_tree_plus(STATE, e), _meta(e))
    assert ckpt.steps() == [24, 30] and not (tmp_path / "6").exists()   # our old ones were pruned
    assert _tree(tmp_path / "999") == nested
    assert (tmp_path / "0" / "README.txt").read_text() == "mine" and (tmp_path / "90.pt").read_bytes() == b"weights"
    step, _, _ = ckpt.restore_newest(abstract_like(STATE), accept=lambda m: None)
    assert step == 30


def test_saving_onto_a_foreign_folder_is_refused_and_leaves_it(tmp_path):
    (tmp_path / "0").mkdir(parents=True)
    (tmp_path / "0" / "README.txt").write_text("mine")
    ckpt = Checkpointer(tmp_path)
    with pytest.raises(ConfigError, match="is not a checkpoint of this run") as err:
        ckpt.save(0, STATE, _meta(0))
    assert "\n" not in str(err.value) and (tmp_path / "0" / "README.txt").read_text() == "mine"


def test_with_a_manifest_steps_are_recorded_and_only_recorded_ones_pruned(tmp_path):
    out = tmp_path / "run"
    m = manifest.Manifest(out)
    m.write_json(out / "config.json", {}, digest=False)
    ckpt = _saved(out / "checkpoints", epochs=(1, 2), manifest=m, max_to_keep=5)
    assert {"checkpoints/6", "checkpoints/12"} <= {k for k, e in m.entries().items() if e["kind"] == "checkpoint"}
    ckpt.close()
    shutil.copytree(out / "checkpoints" / "6", out / "checkpoints" / "3")    # a user's copy: orbax-shaped
    ckpt = Checkpointer(out / "checkpoints", max_to_keep=1, steps_per_epoch=PER_EPOCH, manifest=m)
    assert ckpt.steps() == [6, 12]
    ckpt.save(18, jax_tree_plus(STATE, 3), _meta(3))
    assert ckpt.steps() == [18] and (out / "checkpoints" / "3").is_dir()
    kinds = {k: e["kind"] for k, e in m.entries().items()}
    assert kinds.get("checkpoints/18") == "checkpoint" and "checkpoints/6" not in kinds and "checkpoints/12" not in kinds
    assert rundir.foreign_entries(out) == ["checkpoints/3"]


def test_meta_keys_the_checkpointer_adds_are_refused_from_callers(tmp_path):
    with pytest.raises(ValueError, match="must not hold"):
        Checkpointer(tmp_path).save(0, STATE, {"step": 3})


def test_abstract_like_keeps_shapes_and_dtypes():
    abstract = abstract_like(STATE)
    assert abstract["w"].shape == (2000,) and abstract["b"].dtype == np.int32


@pytest.mark.slow
def test_a_flipped_bit_at_every_byte_of_a_real_meta_file_falls_back(tmp_path, capsys):
    # Through orbax's reader: each byte once, the flipped bit cycling through all eight positions.
    ckpt = _saved(tmp_path)
    path = tmp_path / "12" / "meta" / "metadata"
    original = path.read_bytes()
    for i in range(len(original)):
        _flip(path, i, i % 8)
        _newest_falls_back(ckpt, capsys, "")
        path.write_bytes(original)


def test_checkpoints_of_another_state_structure_are_one_line_that_keeps_the_run(tmp_path):
    """A state saved by another version of the training state (here: one leaf fewer, as before
    `TrainState.update_sums`) is not called corrupt and does not advise --overwrite."""
    ckpt = _saved(tmp_path)
    newer = abstract_like({**STATE, "update_sums": jnp.zeros(3)})
    with pytest.raises(ConfigError) as e:
        ckpt.restore_newest(newer, lambda meta: None)
    msg = str(e.value)
    assert "another version of jaxinit" in msg and "--overwrite" not in msg and "\n" not in msg
    step, state, _ = ckpt.restore_newest(abstract_like(STATE), lambda meta: None)   # the same files, still intact
    assert step == 2 * PER_EPOCH and np.array_equal(np.asarray(state["w"]), np.asarray(STATE["w"] + 2))
