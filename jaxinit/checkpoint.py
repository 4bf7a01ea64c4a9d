"""Orbax checkpoints of the whole member-stacked training state: exact resume, verified on restore.

One checkpoint per save under `DIR/checkpoints/<global step>/`, holding two items: `state` (the stacked
pytree, StandardSave / StandardRestore against an abstract target built with `jax.eval_shape`) and
`meta` (JSON: epoch, step within the epoch, member count, the config's fingerprint and the state's
SHA-256). Orbax writes into a temporary directory and renames it when complete, so a run killed
mid-save leaves the previous checkpoint intact. A restored state whose digest differs from the one
saved with it (a flipped bit in a data file) is corrupt: `restore_newest` falls back to the newest
intact checkpoint and says so in one line, and if none is intact the run stops with one line.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np
import orbax.checkpoint as ocp

from jaxinit import distributed, files
from jaxinit.config import ConfigError


def tree_digest(tree: Any) -> str:
    """SHA-256 over every leaf's path, dtype, shape and bytes (a collective across hosts)."""
    h = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(distributed.to_host(tree))[0]:
        arr = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{jax.tree_util.keystr(path)}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


class Corrupt(Exception):
    """A checkpoint that cannot be restored as saved (why in the message)."""


class Checkpointer:
    """`ocp.CheckpointManager` keyed by global step, with digests checked on restore."""

    def __init__(self, directory: Path, max_to_keep: int = 3):
        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                               enable_async_checkpointing=False)
        try:
            self._manager = ocp.CheckpointManager(Path(directory).absolute(), options=options,
                                                  item_names=("state", "meta"))
        except OSError as err:
            raise ConfigError(files.describe_os_error(err, directory)) from None

    def steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def save(self, step: int, state: Any, meta: dict) -> None:
        meta = {**meta, "state_sha256": tree_digest(state)}
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        try:
            self._manager.save(step, args=args, force=True)
            self._manager.wait_until_finished()
        except OSError as err:
            raise ConfigError(files.describe_os_error(err, self._manager.directory)) from None
        except Exception as err:   # orbax wraps I/O errors in its own types
            raise ConfigError(f"cannot save checkpoint {step}: {_first_line(err)}") from None

    def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict]:
        """The state shaped like ``abstract_state`` and its meta; `Corrupt` if it is not as saved."""
        args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore())
        try:
            restored = self._manager.restore(step, args=args)
        except Exception as err:  # orbax raises many types for a damaged directory; all mean the same here
            raise Corrupt(f"unreadable ({_first_line(err)})") from None
        meta = dict(restored.meta)
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


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160]}" if text else type(err).__name__


def abstract_like(tree: Any) -> Any:
    """ShapeDtypeStruct tree of `tree` (keeps shardings so a sharded state restores sharded)."""
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
