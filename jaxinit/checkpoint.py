"""Orbax checkpoints of the whole member-stacked training state, for exact resume.

One checkpoint per saved epoch under `DIR/checkpoints/<epoch>/`, holding two items:
`state` (the stacked pytree, StandardSave / StandardRestore against an abstract target built with
`jax.eval_shape`) and `meta` (JSON: epoch, member count). Orbax writes into a temporary directory
and renames it when complete, so a run killed mid-save leaves the previous checkpoint intact.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from jaxinit.config import ConfigError


class Checkpointer:
    """Thin wrapper around `ocp.CheckpointManager` keyed by epoch."""

    def __init__(self, directory: Path, max_to_keep: int = 2):
        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                               enable_async_checkpointing=False)
        self._manager = ocp.CheckpointManager(Path(directory).absolute(), options=options,
                                              item_names=("state", "meta"))

    def latest_epoch(self) -> int | None:
        return self._manager.latest_step()

    def save(self, epoch: int, state: Any, meta: dict) -> None:
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        self._manager.save(epoch, args=args, force=True)
        self._manager.wait_until_finished()

    def restore(self, epoch: int, abstract_state: Any) -> tuple[Any, dict]:
        """Restore `state` shaped like `abstract_state` (ShapeDtypeStructs); corrupt -> ConfigError."""
        args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore())
        try:
            restored = self._manager.restore(epoch, args=args)
        except Exception as e:  # orbax raises many types for a damaged directory; all mean the same here
            raise ConfigError(f"--resume: checkpoint {epoch} is corrupt or incompatible "
                              f"({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})") from None
        return restored.state, dict(restored.meta)

    def close(self) -> None:
        self._manager.close()


def abstract_like(tree: Any) -> Any:
    """ShapeDtypeStruct tree of `tree` (keeps shardings so a sharded state restores sharded)."""
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
