"""Orbax checkpoints of the whole member-stacked training state: exact resume, verified on restore.

One checkpoint per save under `DIR/checkpoints/<global step>/`, holding two items: `state` (the stacked
pytree, StandardSave / StandardRestore against an abstract target built with `jax.eval_shape`) and
`meta` (JSON: epoch, step within the epoch, member count, the config's fingerprint, the step, the
state's SHA-256 and `checkpoint_sha256`, the SHA-256 of the step and of every other meta entry).
Orbax writes into a temporary directory and renames it when complete, so a run killed mid-save
leaves the previous checkpoint intact. On restore everything restored is checked: the state against
its digest, the meta against `checkpoint_sha256`, the meta's step against the step folder's name (and,
with ``steps_per_epoch``, ``epoch * steps_per_epoch + step_in_epoch`` against it too). A checkpoint
that fails any check is corrupt: `restore_newest` falls back to the newest intact checkpoint and says
so in one line, and if none is intact the run stops with one line. Checkpoints written before the
meta digest existed (meta keys `LEGACY_META_KEYS` only) are checked on their state and, with
``steps_per_epoch``, their epoch and step; a meta with any other key and no digest is corrupt.

Only step folders of this run are listed, restored or deleted: a folder named like a step that does
not hold orbax's entries only (`jaxinit.rundir.is_step_folder`) -- a user's ``checkpoints/0/README``,
another run made inside ``checkpoints/999`` -- is never touched, and with a `jaxinit.rundir.Manifest`
old checkpoints are deleted only if the manifest records them (orbax's own clean-up is off: it
deleted whatever it took for a step).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np
import orbax.checkpoint as ocp

from jaxinit import distributed, files, rundir
from jaxinit.config import ConfigError

# The meta keys of checkpoints saved before `checkpoint_sha256` existed (accepted with a state-only check).
LEGACY_META_KEYS = frozenset({"epoch", "step_in_epoch", "n_members", "config_fingerprint", "state_sha256"})


def tree_digest(tree: Any) -> str:
    """SHA-256 over every leaf's path, dtype, shape and bytes (a collective across hosts)."""
    h = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(distributed.to_host(tree))[0]:
        arr = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{jax.tree_util.keystr(path)}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def meta_digest(step: int, meta: dict) -> str:
    """SHA-256 of the step and of every meta entry but `checkpoint_sha256` (canonical JSON: sorted keys)."""
    body = {k: v for k, v in meta.items() if k != "checkpoint_sha256"}
    text = json.dumps({"step": step, "meta": body}, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


class _OwnSteps:
    """Orbax's standard step names, but only folders that are step folders by content
    (`jaxinit.rundir.is_step_folder`): orbax never lists, reads the metadata of (with a warning on
    stderr) or deletes a ``checkpoints/999`` that is another run, or a user's ``checkpoints/0/``."""

    def __init__(self):
        self._inner = ocp.step.standard_name_format()

    def __getattr__(self, name: str) -> Any:       # single_host_load_and_broadcast and friends
        return getattr(self._inner, name)

    def build_name(self, step: int) -> str:
        return self._inner.build_name(step)

    def find_all(self, base_path: Any):
        base = Path(base_path)
        if not base.is_dir():
            return iter([])
        steps = sorted(int(c.name) for c in base.iterdir() if c.name.isascii() and c.name.isdigit()
                       and rundir.is_step_folder(c))
        found = []
        for s in steps:
            with contextlib.suppress(ValueError):     # orbax's own test: not committed
                found.append(self._inner.find_step(base_path, s))
        return iter(found)

    def find_step(self, base_path: Any, step: int):
        if not rundir.is_step_folder(Path(base_path) / self.build_name(step)):
            raise ValueError(f"no step folder of this run for step {step} under {base_path}")
        return self._inner.find_step(base_path, step)


class Corrupt(Exception):
    """A checkpoint that cannot be restored as saved (why in the message)."""


class Checkpointer:
    """`ocp.CheckpointManager` keyed by global step, with digests checked on restore.

    ``max_to_keep``: the newest checkpoints kept (None: all). ``steps_per_epoch``: if given, a
    restored meta must satisfy ``epoch * steps_per_epoch + step_in_epoch == step``. ``manifest``: the
    run's `jaxinit.rundir.Manifest`; each step folder is recorded (kind ``checkpoint``) before it is
    written and forgotten once deleted, and only recorded folders are deleted.
    """

    def __init__(self, directory: Path, max_to_keep: int | None = 3, *, steps_per_epoch: int | None = None,
                 manifest: "rundir.Manifest | None" = None):
        # Orbax's max_to_keep deletes any folder it took for a step (a nested run included): the pruning is ours.
        options = ocp.CheckpointManagerOptions(max_to_keep=None, create=True, enable_async_checkpointing=False,
                                               step_name_format=_OwnSteps())
        if max_to_keep is not None and max_to_keep < 1:
            raise ValueError(f"max_to_keep must be None or >= 1, got {max_to_keep}")
        self._keep, self._per_epoch, self._manifest = max_to_keep, steps_per_epoch, manifest
        self._dir = Path(directory).absolute()
        try:
            self._manager = ocp.CheckpointManager(self._dir, options=options, item_names=rundir.CHECKPOINT_ITEMS)
        except OSError as err:
            raise ConfigError(files.describe_os_error(err, directory)) from None
        # Decided once, identically on every process (pruning calls orbax's collective delete).
        owned = manifest.entries() if manifest is not None and manifest.exists() else None
        self._ours = {s for s in self._manager.all_steps() if rundir.is_step_folder(self._dir / str(s))
                      and (owned is None or manifest.owns(self._dir / str(s)))}

    def steps(self) -> list[int]:
        """This run's step folders (a folder that only looks like one is not listed)."""
        return sorted(self._ours)

    def save(self, step: int, state: Any, meta: dict) -> None:
        """Save ``state`` and ``meta`` (JSON values; keys ``step`` and ``*_sha256`` are added here)."""
        if {"step", "state_sha256", "checkpoint_sha256"} & set(meta):
            raise ValueError("meta must not hold step, state_sha256 or checkpoint_sha256 (they are added here)")
        folder = self._dir / str(step)
        if step not in self._ours and (folder.exists() or folder.is_symlink()):
            raise ConfigError(f"{files.safe_path(folder)} exists and is not a checkpoint of this run; move it "
                              f"away (nothing was saved there)")
        meta = {**meta, "step": step, "state_sha256": tree_digest(state)}
        meta["checkpoint_sha256"] = meta_digest(step, meta)
        if self._manifest is not None and distributed.is_writer():
            self._manifest.record(folder, "checkpoint")
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        try:
            self._manager.save(step, args=args, force=True)
            self._manager.wait_until_finished()
        except OSError as err:
            raise ConfigError(files.describe_os_error(err, self._manager.directory)) from None
        except Exception as err:   # orbax wraps I/O errors in its own types
            raise ConfigError(f"cannot save checkpoint {step}: {_first_line(err)}") from None
        self._ours.add(step)
        self._prune()

    def _prune(self) -> None:
        """Delete this run's checkpoints older than the newest ``max_to_keep`` (the same on every process)."""
        if self._keep is None:
            return
        for step in sorted(self._ours)[:-self._keep]:
            try:
                self._manager.delete(step)
            except Exception as err:
                raise ConfigError(f"cannot delete old checkpoint {step}: {_first_line(err)}") from None
            self._ours.discard(step)
            if self._manifest is not None and distributed.is_writer():
                self._manifest.forget(self._dir / str(step))

    def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict]:
        """The state shaped like ``abstract_state`` and its meta; `Corrupt` if any of it is not as saved."""
        args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore())
        try:
            restored = self._manager.restore(step, args=args)
        except Exception as err:  # orbax raises many types for a damaged directory; all mean the same here
            raise Corrupt(f"unreadable ({_first_line(err)})") from None
        meta = dict(restored.meta) if isinstance(restored.meta, dict) else {}
        check_meta(step, meta, self._per_epoch)
        if meta.get("state_sha256") != tree_digest(restored.state):
            raise Corrupt("its data do not match the digest saved with it")
        return restored.state, meta

    def restore_newest(self, abstract_state: Any, accept: Callable[[dict], None]) -> tuple[int, Any, dict] | None:
        """The newest checkpoint that is intact and that ``accept(meta)`` does not refuse.

        ``accept`` raises `Corrupt` for a checkpoint this run cannot use (kept on disk) and
        `ConfigError` to stop. Returns None without checkpoints. Passing over checkpoints prints one
        line; if none is usable, one `ConfigError` line.
        """
        steps, skipped = self.steps(), []
        for step in reversed(steps):
            try:
                state, meta = self.restore(step, abstract_state)
                accept(meta)
            except Corrupt as why:
                skipped.append(f"{step} ({why})")
                continue
            if skipped:
                print(f"checkpoint {skipped[0]} skipped{' with ' + str(len(skipped) - 1) + ' more' if len(skipped) > 1 else ''}; "
                      f"resuming from checkpoint {step}", file=sys.stderr)
            return step, state, meta
        if steps:
            raise ConfigError(f"no usable checkpoint in {files.safe_path(self._manager.directory)}: newest "
                              f"{skipped[0]}; rerun with --overwrite")
        return None

    def close(self) -> None:
        self._manager.close()


def check_meta(step: int, meta: dict, steps_per_epoch: int | None = None) -> None:
    """`Corrupt` unless ``meta`` is the one saved with step folder ``step`` (see the module docstring)."""
    if "checkpoint_sha256" in meta:
        if meta["checkpoint_sha256"] != meta_digest(step, meta):
            raise Corrupt("its metadata do not match the digest saved with them")
        if meta.get("step") != step:   # a renamed folder: the digest covers the name it was saved under
            raise Corrupt(f"its metadata belong to step {meta.get('step')}, not to its folder {step}")
    elif not meta or not set(meta) <= LEGACY_META_KEYS:
        raise Corrupt("its metadata carry no digest (unknown keys: "
                      f"{', '.join(sorted(set(meta) - LEGACY_META_KEYS))[:80] or 'none'})")
    if steps_per_epoch is not None:
        try:
            at = int(meta["epoch"]) * steps_per_epoch + int(meta["step_in_epoch"])
        except (KeyError, TypeError, ValueError):
            raise Corrupt("its metadata lack a readable epoch and step") from None
        if at != step:
            raise Corrupt(f"its metadata say epoch {meta['epoch']} step {meta['step_in_epoch']} (step {at}), "
                          f"its folder {step}")


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160]}" if text else type(err).__name__


def abstract_like(tree: Any) -> Any:
    """ShapeDtypeStruct tree of `tree` (keeps shardings so a sharded state restores sharded)."""
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
