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
not hold orbax's entries only (`jaxinit.run.manifest.is_step_folder`) -- a user's ``checkpoints/0/README``,
another run made inside ``checkpoints/999`` -- is never touched, and with a `jaxinit.run.manifest.Manifest`
old checkpoints are deleted only if the manifest records them (orbax's own clean-up is off: it
deleted whatever it took for a step).

``asynchronous=True`` (`TrainConfig.async_checkpoint`): `Checkpointer.save` returns once the state is
copied to the host; the digest and the orbax write run in one background thread, one save at a time
(the next save, `steps`, `restore*`, `wait` and `close` wait for it, and re-raise its error). The
digest is computed from that host copy, which holds exactly the bytes a synchronous save digests
(`tree_digest` copies to the host itself). The SHA-256 of a large state costs seconds (about 1 GB/s per
core), which is why it leaves the training thread, as orbax's own async checkpointing moves the write
(orbax docs, "Asynchronous checkpointing"). Manifest records and pruning stay on the calling thread
(the manifest is read-modify-write, one writer). With several processes saves stay synchronous:
every process writes its own shards there, and orbax's barriers must not run on a side thread.
Each save's time on the training thread, its write time and its size are kept in `saves` (run.json).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from jaxinit import distributed
from jaxinit.errors import ConfigError
from jaxinit.run import files
from jaxinit.run.manifest import CHECKPOINT_ITEMS, Manifest, is_step_folder

# The meta keys of checkpoints saved before `checkpoint_sha256` existed (accepted with a state-only check).
LEGACY_META_KEYS = frozenset({"epoch", "step_in_epoch", "n_members", "config_fingerprint", "state_sha256"})


def _ocp():
    """orbax, imported on first use: a run without checkpoints (``checkpoint_every=0``, in memory) runs without it."""
    import orbax.checkpoint as ocp
    return ocp


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
    (`jaxinit.run.manifest.is_step_folder`): orbax never lists, reads the metadata of (with a warning on
    stderr) or deletes a ``checkpoints/999`` that is another run, or a user's ``checkpoints/0/``."""

    def __init__(self):
        self._inner = _ocp().step.standard_name_format()

    def __getattr__(self, name: str) -> Any:       # single_host_load_and_broadcast and friends
        return getattr(self._inner, name)

    def build_name(self, step: int) -> str:
        return self._inner.build_name(step)

    def find_all(self, base_path: Any):
        base = Path(base_path)
        if not base.is_dir():
            return iter([])
        steps = sorted(int(c.name) for c in base.iterdir() if c.name.isascii() and c.name.isdigit()
                       and is_step_folder(c))
        found = []
        for s in steps:
            with contextlib.suppress(ValueError):     # orbax's own test: not committed
                found.append(self._inner.find_step(base_path, s))
        return iter(found)

    def find_step(self, base_path: Any, step: int):
        if not is_step_folder(Path(base_path) / self.build_name(step)):
            raise ValueError(f"no step folder of this run for step {step} under {base_path}")
        return self._inner.find_step(base_path, step)


class Corrupt(Exception):
    """A checkpoint that cannot be restored as saved (why in the message)."""


class OtherStructure(Corrupt):
    """A checkpoint whose state tree differs from this code's (written by another version of the state,
    e.g. before `TrainState.update_sums` existed): intact, but not resumable by this version."""


class Checkpointer:
    """`ocp.CheckpointManager` keyed by global step, with digests checked on restore.

    ``max_to_keep``: the newest checkpoints kept (None: all). ``steps_per_epoch``: if given, a
    restored meta must satisfy ``epoch * steps_per_epoch + step_in_epoch == step``. ``manifest``: the
    run's `jaxinit.run.manifest.Manifest`; each step folder is recorded (kind ``checkpoint``) before it is
    written and forgotten once deleted, and only recorded folders are deleted.
    """

    def __init__(self, directory: Path, max_to_keep: int | None = 3, *, steps_per_epoch: int | None = None,
                 manifest: Manifest | None = None, asynchronous: bool = False):
        ocp = _ocp()
        # Orbax's max_to_keep deletes any folder it took for a step (a nested run included): the pruning is ours.
        options = ocp.CheckpointManagerOptions(max_to_keep=None, create=True, enable_async_checkpointing=False,
                                               step_name_format=_OwnSteps())
        if max_to_keep is not None and max_to_keep < 1:
            raise ValueError(f"max_to_keep must be None or >= 1, got {max_to_keep}")
        self._keep, self._per_epoch, self._manifest = max_to_keep, steps_per_epoch, manifest
        self._dir = Path(directory).absolute()
        try:
            self._manager = ocp.CheckpointManager(self._dir, options=options, item_names=CHECKPOINT_ITEMS)
        except OSError as err:
            raise ConfigError(files.describe_os_error(err, directory)) from None
        # Decided once, identically on every process (pruning calls orbax's collective delete).
        owned = manifest.entries() if manifest is not None and manifest.exists() else None
        self._ours = {s for s in self._manager.all_steps() if is_step_folder(self._dir / str(s))
                      and (owned is None or manifest.owns(self._dir / str(s)))}
        self._async = bool(asynchronous) and not distributed.is_multiprocess()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: tuple[int, Future, float] | None = None   # (step, write, seconds on the training thread)
        self.saves: list[dict] = []   # per finished save: step, blocking_s, write_s, bytes

    def steps(self) -> list[int]:
        """This run's step folders (a folder that only looks like one is not listed); waits for a pending save."""
        self.wait()
        return sorted(self._ours)

    def save(self, step: int, state: Any, meta: dict) -> None:
        """Save ``state`` and ``meta`` (JSON values; keys ``step`` and ``*_sha256`` are added here); with
        ``asynchronous``, return after the host copy (see the module docstring)."""
        if {"step", "state_sha256", "checkpoint_sha256"} & set(meta):
            raise ValueError("meta must not hold step, state_sha256 or checkpoint_sha256 (they are added here)")
        self.wait()
        folder = self._dir / str(step)
        if step not in self._ours and (folder.exists() or folder.is_symlink()):
            raise ConfigError(f"{files.safe_path(folder)} exists and is not a checkpoint of this run; move it "
                              f"away (nothing was saved there)")
        t0 = time.perf_counter()
        if not self._async:
            meta = self._with_digests(step, state, meta)
            self._record(folder)
            write_s = self._write(step, state, meta)
            self._commit(step, time.perf_counter() - t0, write_s)
            return
        self._record(folder)
        host = distributed.to_host(state)     # the only part the training thread waits for
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jaxinit-checkpoint")
        write = self._pool.submit(lambda: self._write(step, host, self._with_digests(step, host, meta)))
        self._pending = (step, write, time.perf_counter() - t0)

    def wait(self) -> None:
        """Wait for a pending asynchronous save; its error (a `ConfigError`) is raised here."""
        if self._pending is None:
            return
        step, write, blocking = self._pending
        self._pending = None
        self._commit(step, blocking, write.result())

    @staticmethod
    def _with_digests(step: int, state: Any, meta: dict) -> dict:
        meta = {**meta, "step": step, "state_sha256": tree_digest(state)}
        meta["checkpoint_sha256"] = meta_digest(step, meta)
        return meta

    def _record(self, folder: Path) -> None:
        if self._manifest is not None and distributed.is_writer():
            self._manifest.record(folder, "checkpoint")

    def _write(self, step: int, state: Any, meta: dict) -> float:
        """The orbax save of one step, finished; returns its seconds."""
        ocp, t0 = _ocp(), time.perf_counter()
        args = ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        try:
            with _quiet_orbax():
                self._manager.save(step, args=args, force=True)
                self._manager.wait_until_finished()
        except OSError as err:
            raise ConfigError(files.describe_os_error(err, self._manager.directory)) from None
        except Exception as err:   # orbax wraps I/O errors in its own types
            code = re.search(r"os_error_code='?(\d+)", str(err))     # tensorstore names the OS error by number
            if code:
                why = files.describe_os_error(OSError(int(code.group(1)), os.strerror(int(code.group(1)))), self._dir)
                raise ConfigError(f"checkpoint {step}: {why}; the previous checkpoints are intact") from None
            raise ConfigError(f"cannot save checkpoint {step}: {_first_line(err)}") from None
        return time.perf_counter() - t0

    def _commit(self, step: int, blocking_s: float, write_s: float) -> None:
        self._ours.add(step)
        self.saves.append({"step": step, "blocking_s": blocking_s, "write_s": write_s,
                           "bytes": _folder_bytes(self._dir / str(step))})
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
        self.wait()
        ocp = _ocp()
        args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore())
        try:
            restored = self._manager.restore(step, args=args)
        except Exception as err:  # orbax raises many types for a damaged directory; all mean the same here
            if "tree structures do not match" in str(err):
                raise OtherStructure("its state has another structure than this version's") from None
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
        steps, skipped, other = self.steps(), [], 0
        for step in reversed(steps):
            try:
                state, meta = self.restore(step, abstract_state)
                accept(meta)
            except Corrupt as why:
                skipped.append(f"{step} ({why})")
                other += isinstance(why, OtherStructure)
                continue
            if skipped:
                print(f"checkpoint {skipped[0]} skipped{' with ' + str(len(skipped) - 1) + ' more' if len(skipped) > 1 else ''}; "
                      f"resuming from checkpoint {step}", file=sys.stderr)
            return step, state, meta
        if steps and other == len(steps):
            raise ConfigError(f"the checkpoints in {files.safe_path(self._manager.directory)} were written by another "
                              f"version of jaxinit (its training state has another structure): continue the run with "
                              f"that version (run.json's provenance names its commit); its results files are intact")
        if steps:
            raise ConfigError(f"no usable checkpoint in {files.safe_path(self._manager.directory)}: newest "
                              f"{skipped[0]}; rerun with --overwrite")
        return None

    def close(self) -> None:
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
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


class _NoTracebacks(logging.Filter):
    """Drops orbax's error records that carry a traceback: a failed write (a full disk) is logged by each of its
    threads, tens of lines each, before the error reaches `Checkpointer` -- which says it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.exc_info)


@contextlib.contextmanager
def _quiet_orbax():
    """absl's logger (orbax logs through it) without `_NoTracebacks`'s records while a save runs."""
    logger, quiet = logging.getLogger("absl"), _NoTracebacks()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160]}" if text else type(err).__name__


def _folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (a checkpoint's size on disk, for run.json)."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def abstract_like(tree: Any) -> Any:
    """ShapeDtypeStruct tree of `tree` (keeps shardings so a sharded state restores sharded)."""
    return jax.tree.map(_ocp().utils.to_shape_dtype_struct, tree)
