"""A run directory is owned: one writer at a time, never another run's or a user's files lost.

Rules (every experiment, through `jaxinit.cli`):
- A run directory holds `config.json` and the files the experiment writes. Which files are the run's
  own is recorded in its manifest, ``DIR/.manifest.json`` (`Manifest`): every path the run wrote, with
  its kind (``file``, ``dir``, ``checkpoint`` -- an orbax step folder --, ``run`` -- a sub-run such as a
  clock point) and, for results files written through the manifest, their SHA-256. An entry is
  recorded *before* its file is created, so a run killed mid-write never leaves an unrecorded file.
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
- `provenance()` / `append_provenance`: what `run.json` records besides timings, one segment per
  (resumed) part of a run; `numeric_environment()`: what changes results besides the config.
  The run's fingerprint (config, numeric environment, a user's model) and run.json's timings are kept
  by `jaxinit.runinfo` (its names are importable from here too).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import os
import posixpath
import re
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from jaxinit import files
from jaxinit.config import ConfigError
from jaxinit.files import safe_path

# Every name any experiment writes into its run directory (files and folders).
RUN_FILES = frozenset({
    "config.json", "metrics.jsonl", "summary.json", "run.json", "figures", "checkpoints", "results",
    "clocks.jsonl", "points", "phase_diagram.npz", "timing.json", "benchmark.jsonl", "table.md", ".lock",
    ".manifest.json", "fingerprint.json",
})
LOCK = ".lock"
MANIFEST = ".manifest.json"
KINDS = ("file", "dir", "checkpoint", "run")
_FORMAT = "jaxinit run manifest 1"

# An orbax step folder holds exactly these (each may carry orbax's temporary suffix while being written).
ORBAX_TMP = ".orbax-checkpoint-tmp"
CHECKPOINT_ITEMS = ("state", "meta")
STEP_ENTRIES = frozenset({"_CHECKPOINT_METADATA", "commit_success.txt", *CHECKPOINT_ITEMS})
_STEP_NAME = re.compile(r"[0-9]+")


def is_run_file(name: str) -> bool:
    """One of `RUN_FILES`, or a temporary file of an atomic write (`.NAME.XXXX.tmp`)."""
    return name in RUN_FILES or (name.startswith(".") and name.endswith(".tmp"))


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


# --------------------------------------------------------------------------- what a path is
def _is_dir(p: Path) -> bool:
    """A real directory (a symlink to one is never ours to descend into)."""
    return p.is_dir() and not p.is_symlink()


def _is_file(p: Path) -> bool:
    return p.is_file() and not p.is_symlink()


def is_run_dir(p: Path) -> bool:
    """Holds its own config.json or manifest: a run directory, never deleted as a mere folder."""
    return _is_dir(p) and ((p / "config.json").exists() or (p / MANIFEST).exists())


def _atomic_twin_of(name: str) -> str | None:
    """``summary.json`` for ``.summary.json.k3j2.tmp`` (a `files.atomic_path` temporary), else None."""
    if name.startswith(".") and name.endswith(".tmp") and name.count(".") >= 3:
        return name[1:name.rindex(".", 0, len(name) - 4)]
    return None


def is_step_folder(p: Path) -> bool:
    """An orbax step folder (``<digits>``, finalized) or its temporary twin, holding orbax's entries only."""
    if not _is_dir(p) or not _STEP_NAME.fullmatch(p.name.partition(ORBAX_TMP)[0]):
        return False
    entries = [c.name.partition(ORBAX_TMP)[0] for c in p.iterdir()]
    finalized = ORBAX_TMP in p.name or "_CHECKPOINT_METADATA" in entries
    return finalized and all(e in STEP_ENTRIES for e in entries)


def _step_twin_of(name: str) -> str | None:
    """``8`` for orbax's ``8.orbax-checkpoint-tmp...`` (a step being written), else None."""
    base, sep, _ = name.partition(ORBAX_TMP)
    return base if sep and _STEP_NAME.fullmatch(base) else None


# --------------------------------------------------------------------------- runs made before manifests
# What the experiments write inside their folders (the name rule; `Manifest` records replace it).
_LEGACY_FOLDERS: dict[str, Callable[[Path], str | None]] = {
    "checkpoints": lambda p: "checkpoint" if is_step_folder(p) else None,
    "figures": lambda p: "file" if _is_file(p) and (p.suffix in (".png", ".pdf", ".svg") or _atomic_twin_of(p.name))
    else None,
    "results": lambda p: "file" if _is_file(p) and (p.suffix in (".npz", ".json") or _atomic_twin_of(p.name))
    else None,
    "points": lambda p: "run" if _is_dir(p) and (p / "config.json").is_file() and not _legacy(p)[1] else None,
}


def _legacy(out: Path) -> tuple[dict[str, dict], list[str]]:
    """(owned entries, foreign relative paths) of a run directory without a manifest, by the name rule."""
    owned: dict[str, dict] = {}
    foreign: list[str] = []
    has_config = _is_file(out / "config.json")
    for p in sorted(out.iterdir()):
        name = p.name
        twin = _atomic_twin_of(name)
        if name == LOCK:
            continue
        if p.is_symlink() or not (name in RUN_FILES or twin in RUN_FILES) or (not has_config and twin is None):
            foreign.append(name)
        elif twin is not None or (name not in _LEGACY_FOLDERS and _is_file(p)):
            owned[name] = {"kind": "file"}
        elif name in _LEGACY_FOLDERS and _is_dir(p):
            owned[name] = {"kind": "dir"}
            for c in sorted(p.iterdir()):
                kind = _LEGACY_FOLDERS[name](c)
                if kind is None:
                    foreign.append(f"{name}/{c.name}")
                else:
                    owned[f"{name}/{c.name}"] = {"kind": kind}
        else:
            foreign.append(name)
    return owned, foreign


# --------------------------------------------------------------------------- the manifest
class Manifest:
    """The paths a run wrote, in ``out/.manifest.json`` (see the module docstring).

    Stateless between calls: every method reads the file afresh (the run holds `RunLock`, so it is
    the only writer), so separate ``Manifest(out)`` objects in the CLI, the sink and the
    checkpointer never overwrite each other's entries. Paths may be given absolute (inside ``out``)
    or relative to it.
    """

    def __init__(self, out: Path | str):
        self.out = Path(out)
        self.path = self.out / MANIFEST

    def exists(self) -> bool:
        return os.path.lexists(self.path)

    def entries(self) -> dict[str, dict]:
        """{relative posix path: {"kind": ..., ["sha256": ..., "pending": ...]}}; {} without a manifest."""
        if not self.exists():
            return {}
        try:
            if self.path.is_symlink():
                raise ValueError("a symbolic link")
            data = json.loads(self.path.read_text())
            entries = data["entries"]
            if data.get("format") != _FORMAT or not all(isinstance(e, dict) and e.get("kind") in KINDS
                                                        for e in entries.values()):
                raise ValueError("not a run manifest")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ConfigError(f"{safe_path(self.path)} is unreadable ({type(err).__name__}: {str(err)[:80]}); the "
                              f"run's own files cannot be told from others: move what you keep out of "
                              f"{safe_path(self.out)} and delete it, or choose another --out") from None
        return dict(entries)

    def rel(self, path: Path | str) -> str:
        """``path`` relative to the run directory, posix-style. ``path`` is a file-system path (absolute,
        or relative to the working directory: ``out / "summary.json"``) or, if that lies outside the
        run, a path relative to the run (``"figures/a.png"``); ValueError if it lies outside both ways."""
        base = os.path.abspath(self.out)
        for full in (os.path.abspath(path), os.path.normpath(os.path.join(base, path))):
            rel = os.path.relpath(full, base)
            if rel != "." and rel != ".." and not rel.startswith(".." + os.sep):
                return Path(rel).as_posix()
        raise ValueError(f"{path} is not inside the run directory {self.out}")

    def _save(self, entries: dict[str, dict]) -> None:
        files.write_json(self.path, {"format": _FORMAT, "entries": dict(sorted(entries.items()))}, root=self.out)

    def _update(self, change: Callable[[dict[str, dict]], None]) -> None:
        entries = self.entries() if self.exists() else _legacy(self.out)[0] if self.out.is_dir() else {}
        change(entries)
        self._save(entries)

    def record(self, path: Path | str, kind: str = "file", *, digest: bool = False) -> str:
        """Declare ``path`` the run's own (call before creating it); its parent folders become ``dir``
        entries. ``digest=True`` stores the SHA-256 of the file as it is now. Returns the relative path."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        rel = self.rel(path)
        sha = files.sha256_file(self.out / rel) if digest else None

        def change(entries):
            _add_parents(entries, rel)
            entries[rel] = {"kind": kind, **({"sha256": sha} if sha else {})}
        self._update(change)
        return rel

    def forget(self, path: Path | str) -> None:
        """Drop ``path`` and every entry below it (after deleting them, or when they are no longer ours)."""
        rel = self.rel(path)
        self._update(lambda entries: [entries.pop(k) for k in list(entries) if k == rel or k.startswith(rel + "/")])

    def owns(self, path: Path | str) -> bool:
        """A manifest entry, a path inside a recorded checkpoint or sub-run, or the temporary twin of an entry."""
        rel = self.rel(path)
        if rel in (LOCK, MANIFEST) or _atomic_twin_of(rel) == MANIFEST:
            return True
        return _owned_by(self.entries(), rel) is not None

    def modified(self) -> list[str]:
        """Recorded files whose bytes match neither their digest nor the one being written."""
        return [rel for rel, e in sorted(self.entries().items())
                if e["kind"] == "file" and _is_file(self.out / rel) and not _digest_ok(self.out / rel, e)]

    # ------------------------------------------------------------------ writers
    @contextlib.contextmanager
    def writing(self, path: Path | str, *, digest: bool = True) -> Iterator[Path]:
        """`files.atomic_path` inside the run directory, recorded: the entry is declared before the
        temporary file exists, and its digest (``digest=True``) is stored as ``pending`` before the
        rename and as ``sha256`` after it, so a kill at any point leaves a file that matches its entry."""
        rel = self.rel(path)
        target = files.check_inside(self.out, self.out / rel)
        # A write killed after its rename left the new bytes under "pending": they are the file's now.
        pending = self.entries().get(rel, {}).get("pending") if self.exists() else None
        current = files.sha256_file(target) if pending and _is_file(target) else None
        self._update(lambda entries: _declare(entries, rel, current))
        with files.atomic_path(target, root=self.out) as tmp:
            yield tmp
            sha = files.sha256_file(tmp) if digest else None
            if sha:
                self._update(lambda entries: entries[rel].update(pending=sha))
        self._update(lambda entries: _settle(entries, rel, sha))

    def write_text(self, path: Path | str, text: str, *, digest: bool = True) -> None:
        with self.writing(path, digest=digest) as tmp:
            tmp.write_text(text)

    def write_json(self, path: Path | str, data: Any, *, digest: bool = True) -> None:
        """`files.write_json`, recorded (``digest=False`` for a file users may edit, e.g. config.json)."""
        self.write_text(path, files.json_text(data), digest=digest)

    def write_jsonl(self, path: Path | str, rows: list[dict], *, digest: bool = True) -> None:
        self.write_text(path, files.jsonl_text(rows), digest=digest)

    def save_npz(self, path: Path | str, named: Mapping[str, Any] | None = None, /, **arrays: Any) -> None:
        with self.writing(path) as tmp, open(tmp, "wb") as f:
            files.write_npz(f, named, arrays)

    def save_figure(self, fig: Any, path: Path | str, **kwargs: Any) -> Path:
        data = files.figure_bytes(fig, path, **kwargs)   # drawn before the entry is declared
        with self.writing(path) as tmp:
            tmp.write_bytes(data)
        return self.out / self.rel(path)


def _add_parents(entries: dict[str, dict], rel: str) -> None:
    """The folders above ``rel`` become ``dir`` entries (kept as they are if recorded already)."""
    parts = rel.split("/")
    for k in range(1, len(parts)):
        entries.setdefault("/".join(parts[:k]), {"kind": "dir"})


def _declare(entries: dict[str, dict], rel: str, current: str | None) -> None:
    """Record ``rel`` as a file about to be written, keeping the digest of the bytes it holds now."""
    _add_parents(entries, rel)
    old = entries.get(rel, {})
    sha = current if current is not None and current == old.get("pending") else old.get("sha256")
    entries[rel] = {"kind": "file", **({"sha256": sha} if sha else {})}


def _settle(entries: dict[str, dict], rel: str, sha: str | None) -> None:
    entries[rel] = {"kind": "file", **({"sha256": sha} if sha else {})}


def _digest_ok(p: Path, entry: dict) -> bool:
    allowed = {entry.get("sha256"), entry.get("pending")} - {None}
    return not allowed or files.sha256_file(p) in allowed


def _owned_by(entries: dict[str, dict], rel: str) -> dict | None:
    """The entry that makes ``rel`` the run's own, or None."""
    if rel in entries:
        return entries[rel]
    parts = rel.split("/")
    for k in range(1, len(parts)):
        above = entries.get("/".join(parts[:k]))
        if above is not None and above["kind"] in ("checkpoint", "run"):
            return above
    parent, name = "/".join(parts[:-1]), parts[-1]
    join = (lambda n: f"{parent}/{n}") if parent else (lambda n: n)
    twin = _atomic_twin_of(name)
    if twin is not None and entries.get(join(twin), {}).get("kind") == "file":
        return entries[join(twin)]
    step = _step_twin_of(name)
    if step is not None and entries.get(join(step), {}).get("kind") == "checkpoint":
        return entries[join(step)]
    return None


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


# --------------------------------------------------------------------------- deleting the run's own files
def clear_owned(out: Path, only: tuple[str, ...] | None = None) -> list[str]:
    """Delete the run's own files and nothing else; returns what was kept (relative paths: replaced
    files, and folders or checkpoints that still hold something that is not the run's).

    Only manifest entries are touched (without a manifest: what the name rule owns), deepest first:
    a recorded file is removed if its bytes still match its digest (a replaced one is kept), a
    checkpoint loses orbax's entries, a recorded sub-run is cleared the same way, and a folder is
    removed only once empty. ``only``: top-level names to restrict to (the sink's stale
    ``("summary.json", "figures")``). The lock and the manifest stay (the manifest keeps what is left).
    """
    m = Manifest(out)
    entries = m.entries() if m.exists() else _legacy(out)[0]
    chosen = [rel for rel in entries if only is None or rel.split("/")[0] in only]
    kept: list[str] = []
    top = os.path.realpath(out)
    for rel in sorted(chosen, key=lambda r: (-r.count("/"), r)):
        p, entry = out / rel, entries[rel]
        if os.path.commonpath([top, os.path.realpath(p.parent)]) != top:
            kept.append(rel)      # reached through a link out of the run (figures -> /elsewhere): not ours
            continue
        try:
            gone = _remove(p, entry, kept, rel)
        except OSError as err:
            raise ConfigError(f"cannot remove {safe_path(p)} ({err.strerror or err}); nothing else was "
                              f"touched") from None
        if gone:
            entries.pop(rel)
    if m.exists():
        m._save(entries)
    return sorted(kept)


def _remove(p: Path, entry: dict, kept: list[str], rel: str) -> bool:
    """Remove one entry; True once nothing of it is left (it is then dropped from the manifest)."""
    kind = entry["kind"]
    if kind == "file":
        for twin in p.parent.glob(f".{glob.escape(p.name)}.*.tmp") if _is_dir(p.parent) else ():
            if _is_file(twin):
                twin.unlink()
        if not os.path.lexists(p):
            return True
        if _is_file(p) and _digest_ok(p, entry):
            p.unlink()
            return True
    elif kind == "checkpoint":
        twins = sorted(p.parent.glob(f"{glob.escape(p.name)}{ORBAX_TMP}*")) if _is_dir(p.parent) else []
        for step in [*twins, p]:
            if os.path.lexists(step) and not _remove_step(step):
                kept.append(posixpath.join(posixpath.dirname(rel), step.name))
        return not os.path.lexists(p)
    elif kind == "run":
        if not os.path.lexists(p):
            return True
        if _is_dir(p):
            kept.extend(f"{rel}/{k}" for k in clear_owned(p))
            if {c.name for c in p.iterdir()} <= {LOCK, MANIFEST}:
                for name in (LOCK, MANIFEST):
                    (p / name).unlink(missing_ok=True)
                p.rmdir()
                return True
            kept.append(rel)
            return False
    elif kind == "dir":
        if not os.path.lexists(p):
            return True
        if _is_dir(p) and not any(p.iterdir()):
            p.rmdir()
            return True
        kept.append(rel)
        return not _is_dir(p)   # a folder holding what is not ours stays recorded; a link in its place does not
    kept.append(rel)
    return True         # a replaced file, a link in place of a folder: not ours any more


def _remove_step(step: Path) -> bool:
    """Delete orbax's entries of a step folder (never a nested run); True if the folder is gone."""
    if not _is_dir(step) or is_run_dir(step):
        return False
    for c in step.iterdir():
        if c.name.partition(ORBAX_TMP)[0] in STEP_ENTRIES:
            if _is_dir(c):
                shutil.rmtree(c)
            elif not c.is_dir():
                c.unlink()
    if any(step.iterdir()):
        return False
    step.rmdir()
    return True


def clear_run(out: Path) -> None:
    """(`--overwrite`) Delete this run's own files, never anything else; keep the lock (`clear_owned`)."""
    clear_owned(out)


def diff_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys where two nested config dicts differ (for a one-line refusal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [prefix.rstrip(".")] if a != b else []


# --------------------------------------------------------------------------- provenance
def git_commit() -> str:
    """The commit of the checkout the code runs from (``+dirty`` if it has local changes), or "unknown"."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict[str, str]:
    from importlib import metadata
    out = {}
    for name in ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def provenance() -> dict[str, Any]:
    """Where a result came from: code version, packages, device (for run.json, never summary.json)."""
    import jax
    device = jax.devices()[0]
    return {"git_commit": git_commit(), "versions": versions(), "python": sys.version.split()[0],
            "platform": jax.default_backend(), "device_kind": device.device_kind,
            "device_count": jax.device_count(), "host": socket.gethostname()}


# XLA flags known to leave computed values alone (dumps, logs, profiles, caches, the host device count,
# which only lays members over more devices). Every other flag counts: it may change the numerics.
_INERT_XLA_FLAGS = ("--xla_dump", "--xla_gpu_dump", "--xla_log", "--xla_hlo_profile",
                    "--xla_force_host_platform_device_count", "--xla_gpu_per_fusion_autotune_cache_dir",
                    "--xla_gpu_cuda_data_dir")


def numeric_xla_flags(text: str) -> list[str]:
    """The flags of an ``XLA_FLAGS`` value that may change results, sorted (order does not matter to XLA)."""
    return sorted(f for f in text.split() if not f.startswith(_INERT_XLA_FLAGS))


def numeric_environment() -> dict[str, Any]:
    """What changes a run's numbers besides its config, for its fingerprint: 64-bit mode, the default
    matmul precision and PRNG, the platform and device kind, numerics-changing ``XLA_FLAGS`` and the
    jax / jaxlib versions. Equal dicts promise the same arithmetic; a resume under another one must be
    refused (`diff_keys` names what changed)."""
    import jax
    ver = versions()
    precision = jax.config.jax_default_matmul_precision
    return {"jax": ver["jax"], "jaxlib": ver["jaxlib"], "x64": bool(jax.config.jax_enable_x64),
            "default_matmul_precision": None if precision is None else str(precision),
            "default_prng_impl": str(jax.config.jax_default_prng_impl),
            "threefry_partitionable": bool(jax.config.jax_threefry_partitionable),
            "platform": jax.default_backend(), "device_kind": jax.devices()[0].device_kind,
            "xla_flags": numeric_xla_flags(os.environ.get("XLA_FLAGS", ""))}


def read_provenance(run_json: Path) -> list[dict]:
    """The provenance segments of run.json, oldest first ([] without one; the old single dict is one segment)."""
    info = _read_run_json(run_json)
    prov = info.get("provenance")
    return [] if prov is None else [prov] if isinstance(prov, dict) else list(prov)


def append_provenance(run_json: Path, info: dict,
                      write: Callable[[Path, Any], None] = files.write_json) -> list[dict]:
    """Append one segment (this process's part of the run) to run.json's ``provenance`` list, keeping
    every earlier segment and every other key; returns the list. ``write`` is the writer to use
    (`Manifest.write_json` inside a run with a manifest)."""
    data = _read_run_json(run_json)
    segments = read_provenance(run_json) + [info]
    write(Path(run_json), {**data, "provenance": segments})
    return segments


def _read_run_json(run_json: Path) -> dict:
    path = Path(run_json)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("provenance", []), (dict, list)):
            raise ValueError("not a JSON object with a provenance list")
    except (OSError, ValueError) as err:
        raise ConfigError(f"{safe_path(path)} is not readable ({type(err).__name__}); its earlier provenance "
                          f"would be lost: move it away to start a new one") from None
    return data


# The fingerprint and run.json helpers live in their own module (this one is long enough); importable from here.
from jaxinit.runinfo import (FINGERPRINT, START_FILES, check_fingerprint, describe_model,  # noqa: E402
                             read_fingerprint, record_written, start_fingerprint, write_run_info)
