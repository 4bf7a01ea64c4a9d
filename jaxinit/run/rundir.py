"""A run directory is owned: one writer at a time, never another run's or a user's files lost.

Rules (every experiment, through `jaxinit.run.cli`):
- A run directory holds `config.json` and the files the experiment writes. Which files are the run's
  own is recorded in its manifest, ``DIR/.manifest.json`` (`jaxinit.run.manifest.Manifest`): every path
  the run wrote, with its kind (``file``, ``dir``, ``checkpoint`` -- an orbax step folder --, ``run`` -- a
  sub-run such as a clock point) and, for results files written through the manifest, their SHA-256. An
  entry is recorded *before* its file is created, so a run killed mid-write never leaves an unrecorded
  file. The manifest, the name rule and what a path is live in `jaxinit.run.manifest`.
- `foreign_entries` / `inspect`: anything that is not a manifest entry (or the temporary twin of one)
  is foreign, and so is a recorded file whose bytes no longer match their digest (someone replaced
  it). `clear_owned` deletes manifest entries only: a user's file inside ``figures/``,
  ``checkpoints/`` or ``points/`` stays, a folder that still holds foreign files stays, and a nested
  run directory (one holding its own config.json or manifest) is never deleted unless the manifest
  records it as this run's sub-run.
- Runs made before manifests existed (no ``.manifest.json``) fall back to the name rule: a directory
  with ``config.json`` owns the `RUN_FILES` names at its top, and inside its folders what the
  experiments write there (orbax step folders by content, figures by extension, clock points that are
  themselves such runs). A directory without config.json and without a manifest is never a run (its
  files cannot be told from a user's). The first `Manifest.record` in such a run adopts what the
  name rule owns (without digests).
- `check_not_nested`: an ``--out`` inside another run's own folders (``A/checkpoints/999``) is refused:
  that run's clean-up would delete it.
- `RunLock`: an advisory `flock` on `DIR/.lock`, held for the whole run, names the process that
  holds it; a second process writing into the same directory is refused with one line. The kernel
  drops the lock when its process dies, so a killed run never leaves a stale lock behind. A lock that
  is a symlink, a hard link or not a plain file is refused (its target is never written).
What a run records besides its results (provenance, numeric environment) is `jaxinit.run.provenance`'s; its
fingerprint and run.json's timings are `jaxinit.run.runinfo`'s.
"""
from __future__ import annotations

import errno
import fcntl
import glob
import json
import os
import posixpath
import shutil
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from jaxinit.errors import ConfigError
from jaxinit.run.files import safe_path
from jaxinit.run.manifest import (LOCK, MANIFEST, ORBAX_TMP, RUN_FILES, STEP_ENTRIES, Manifest, _atomic_twin_of,
                                  _digest_ok, _is_dir, _is_file, _legacy, _owned_by, is_run_dir, is_step_folder)


def resolve_out(text: str | None, default: str) -> Path:
    """``--out`` as a path: ``~`` expanded; an empty value is an error (it used to mean the default)."""
    if text is None:
        text = default
    if not text.strip():
        raise ConfigError("--out: empty path; give a directory")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"--out {safe_path(text)}: not valid UTF-8 (orbax and tensorstore need UTF-8 paths); "
                          f"choose another directory name") from None
    return Path(os.path.expanduser(text))


# --------------------------------------------------------------------------- the lock
class RunLock:
    """Exclusive advisory lock on ``out/.lock`` (see the module docstring)."""

    def __init__(self, out: Path):
        self.path = Path(out) / LOCK
        self._fd: int | None = None

    def __enter__(self) -> "RunLock":
        out = safe_path(self.path.parent)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_NOFOLLOW: a symlinked .lock is refused, never truncated through; O_NONBLOCK: a FIFO does not hang.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise ConfigError(f"--out {out}: {safe_path(self.path)} is a symbolic link; a run's lock is a "
                                  f"plain file of its own (remove the link)") from None
            raise ConfigError(f"--out {out}: cannot write there ({err.strerror or err})") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            os.close(fd)
            why = "is not a plain file" if not stat.S_ISREG(info.st_mode) else "has other hard links"
            raise ConfigError(f"--out {out}: {safe_path(self.path)} {why}; a run's lock is a plain file of its "
                              f"own (remove it)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 4096).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise ConfigError(f"--out {out} is in use by {safe_path(holder)}; wait for it or "
                              f"choose another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} ({' '.join(sys.argv[:1])})\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fd is not None:
            os.close(self._fd)   # closing drops the flock; the file stays (removing it would race)
            self._fd = None


# --------------------------------------------------------------------------- inspecting a directory
def foreign_entries(out: Path) -> list[str]:
    """Paths (relative, sorted) in ``out`` that are not the run's own: not in its manifest (or, without
    one, not owned by the name rule), or recorded files whose bytes have changed since."""
    m = Manifest(out)
    if not m.exists():
        return _legacy(out)[1]
    entries, found = m.entries(), []

    def walk(folder: Path, prefix: str) -> None:
        for p in sorted(folder.iterdir()):
            rel = prefix + p.name
            if rel in (LOCK, MANIFEST) or _atomic_twin_of(rel) == MANIFEST:
                continue
            entry = entries.get(rel)
            if entry is None:
                if _owned_by(entries, rel) is None:
                    found.append(rel)
            elif entry["kind"] == "dir" and _is_dir(p):
                walk(p, rel + "/")
            elif entry["kind"] == "file" and _is_file(p) and _digest_ok(p, entry):
                pass
            elif entry["kind"] == "checkpoint" and is_step_folder(p):
                pass
            elif entry["kind"] == "run" and _is_dir(p):
                found.extend(f"{rel}/{f}" for f in foreign_entries(p))
            else:
                found.append(rel)
    walk(out, "")
    return found


def inspect(out: Path) -> str:
    """``"new"`` (missing, or only the lock / manifest), ``"run"`` (has config.json), ``"partial"``
    (only the run's own files, no config.json: possible only with a manifest) or ``"foreign"`` (holds
    something that is not the run's: `foreign_entries` names it, e.g. a user's
    ``checkpoints/model_epoch_90.pt``). An unreadable manifest is a `ConfigError`."""
    if not out.exists():
        return "new"
    if not out.is_dir():
        return "foreign"
    if foreign_entries(out):
        return "foreign"
    if _is_file(out / "config.json"):
        return "run"
    names = [p.name for p in out.iterdir() if p.name not in (LOCK, MANIFEST) and _atomic_twin_of(p.name) != MANIFEST]
    return "partial" if names else "new"


def read_saved_config(out: Path) -> dict:
    try:
        return json.loads((out / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{safe_path(out / 'config.json')} is not readable JSON ({type(err).__name__})") from None


def check_not_nested(out: Path) -> None:
    """Refuse an ``--out`` inside another run's own folders (e.g. ``A/checkpoints/999``): that run's
    clean-up of old checkpoints or its ``--overwrite`` would delete it. A sub-run the other run
    recorded itself (a clock point under ``points/``) is allowed. A run is recognised by its manifest,
    or (before manifests) by config.json next to a ``.lock``."""
    target = Path(os.path.realpath(out))
    for above in target.parents:
        legacy = (above / "config.json").is_file() and (above / LOCK).exists()
        if not ((above / MANIFEST).exists() or legacy):
            continue
        parts = target.relative_to(above).parts
        if (above / MANIFEST).exists():
            entries = Manifest(above).entries()
            if entries.get("/".join(parts), {}).get("kind") == "run":
                continue
            owned = parts[0] in RUN_FILES or any("/".join(parts[:k]) in entries for k in range(1, len(parts) + 1))
        else:
            owned = parts[0] in RUN_FILES and not (parts[0] == "points" and len(parts) == 2
                                                   and (target / "config.json").is_file())
        if owned:
            raise ConfigError(f"--out {safe_path(out)} lies inside the run in {safe_path(above)} (in its "
                              f"{safe_path(parts[0])}/), whose clean-up would delete it; choose a directory "
                              f"outside that run")


def check_outside_runs(out: Path, writes: str) -> None:
    """The rule for a command that writes into ``out`` without being a run there (``experiments.accel_check
    --out``, ``python -m jaxinit.forgetting.plotting --out``): ``out`` must be no run directory and lie inside no
    run's own folders (`check_not_nested`), so no command writes inside another run's folders. ``writes``: what
    it writes there, for the message."""
    if is_run_dir(Path(out)):
        raise ConfigError(f"--out {safe_path(out)} is a run directory; {writes} is written only outside runs "
                          f"(choose another --out)")
    check_not_nested(Path(out))


# --------------------------------------------------------------------------- deleting the run's own files
def clear_owned(out: Path, only: tuple[str, ...] | None = None, *, aside: Path | None = None) -> list[str]:
    """Delete the run's own files and nothing else; returns what was kept (relative paths: replaced
    files, and folders or checkpoints that still hold something that is not the run's).

    Only manifest entries are touched (without a manifest: what the name rule owns), deepest first:
    a recorded file is removed if its bytes still match its digest (a replaced one is kept), a
    checkpoint loses orbax's entries, a recorded sub-run is cleared the same way, and a folder is
    removed only once empty. ``only``: top-level names to restrict to (the sink's stale
    ``("summary.json", "figures")``). The lock and the manifest stay (the manifest keeps what is left).

    ``aside``: a folder on the same file system (`jaxinit.run.overwrite`): everything that would be deleted
    is renamed to its relative path there instead, and the manifest's bytes (of every sub-run too) are
    copied there first, so the directory can be put back exactly as it was.
    """
    m = Manifest(out)
    entries = m.entries() if m.exists() else _legacy(out)[0]
    if aside is not None and m.exists():
        aside.mkdir(parents=True, exist_ok=True)
        shutil.copy2(m.path, aside / MANIFEST)
    chosen = [rel for rel in entries if only is None or rel.split("/")[0] in only]
    kept: list[str] = []
    top = os.path.realpath(out)
    drop = _Drop(aside)
    for rel in sorted(chosen, key=lambda r: (-r.count("/"), r)):
        p, entry = out / rel, entries[rel]
        if os.path.commonpath([top, os.path.realpath(p.parent)]) != top:
            kept.append(rel)      # reached through a link out of the run (figures -> /elsewhere): not ours
            continue
        try:
            gone = _remove(p, entry, kept, rel, drop)
        except OSError as err:
            raise ConfigError(f"cannot remove {safe_path(p)} ({err.strerror or err}); nothing else was "
                              f"touched") from None
        if gone:
            entries.pop(rel)
    if m.exists() and only is None:
        stale = [t for t in out.iterdir() if _atomic_twin_of(t.name) == MANIFEST and _is_file(t)]
        for twin in stale:        # a manifest write killed before its rename: the run's own, never a user's
            drop(twin, twin.name)
    if m.exists():
        m._save(entries)
    return sorted(kept)


class _Drop:
    """How `clear_owned` removes a path: deleted, or renamed to the same relative path under ``aside``."""

    def __init__(self, aside: Path | None):
        self.aside = aside

    def __call__(self, p: Path, rel: str) -> None:
        if self.aside is None:
            shutil.rmtree(p) if _is_dir(p) else p.unlink()
            return
        target = self.aside / rel
        if _is_dir(p) and target.is_dir():
            p.rmdir()             # emptied already: its contents went there one by one
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(p, target)

    def below(self, rel: str) -> Path | None:
        return None if self.aside is None else self.aside / rel


def _remove(p: Path, entry: dict, kept: list[str], rel: str, drop: _Drop) -> bool:
    """Remove one entry; True once nothing of it is left (it is then dropped from the manifest)."""
    kind = entry["kind"]
    parent = posixpath.dirname(rel)
    if kind == "file":
        for twin in p.parent.glob(f".{glob.escape(p.name)}.*.tmp") if _is_dir(p.parent) else ():
            if _is_file(twin):
                drop(twin, posixpath.join(parent, twin.name))
        if not os.path.lexists(p):
            return True
        if _is_file(p) and _digest_ok(p, entry):
            drop(p, rel)
            return True
    elif kind == "checkpoint":
        twins = sorted(p.parent.glob(f"{glob.escape(p.name)}{ORBAX_TMP}*")) if _is_dir(p.parent) else []
        for step in [*twins, p]:
            if os.path.lexists(step) and not _remove_step(step, posixpath.join(parent, step.name), drop):
                kept.append(posixpath.join(parent, step.name))
        return not os.path.lexists(p)
    elif kind == "run":
        if not os.path.lexists(p):
            return True
        if _is_dir(p):
            kept.extend(f"{rel}/{k}" for k in clear_owned(p, aside=drop.below(rel)))
            if {c.name for c in p.iterdir()} <= {LOCK, MANIFEST}:
                for name in (LOCK, MANIFEST):
                    (p / name).unlink(missing_ok=True)   # (with ``aside``, the manifest's copy is there)
                p.rmdir()
                return True
            kept.append(rel)
            return False
    elif kind == "dir":
        if not os.path.lexists(p):
            return True
        if _is_dir(p) and not any(p.iterdir()):
            drop(p, rel)
            return True
        kept.append(rel)
        return not _is_dir(p)   # a folder holding what is not ours stays recorded; a link in its place does not
    kept.append(rel)
    return True         # a replaced file, a link in place of a folder: not ours any more


def _remove_step(step: Path, rel: str, drop: _Drop) -> bool:
    """Remove orbax's entries of a step folder (never a nested run); True if the folder is gone."""
    if not _is_dir(step) or is_run_dir(step):
        return False
    for c in step.iterdir():
        if c.name.partition(ORBAX_TMP)[0] in STEP_ENTRIES and (_is_dir(c) or not c.is_dir()):
            drop(c, f"{rel}/{c.name}")
    if any(step.iterdir()):
        return False
    drop(step, rel)
    return True


def clear_run(out: Path) -> None:
    """Delete this run's own files, never anything else; keep the lock (`clear_owned`). (``--overwrite`` sets
    them aside instead: `jaxinit.run.overwrite`.)"""
    clear_owned(out)


def diff_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys where two nested config dicts differ (for a one-line refusal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [prefix.rstrip(".")] if a != b else []

