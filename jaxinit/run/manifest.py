"""A run's manifest: which paths of a run directory are the run's own (`jaxinit.run.rundir` owns the directory).

- ``DIR/.manifest.json`` (`Manifest`) records every path the run wrote, with its kind (``file``, ``dir``,
  ``checkpoint`` -- an orbax step folder --, ``run`` -- a sub-run such as a clock point) and, for results
  files written through the manifest, their SHA-256. An entry is recorded *before* its file is created
  (`Manifest.writing`), so a run killed mid-write never leaves an unrecorded file.
- What a path is: `is_run_dir` (a nested run, never deleted as a mere folder), `is_step_folder` (an
  orbax step folder), and the temporary twins of atomic writes and orbax steps, owned with their entry.
- Runs made before manifests existed fall back to the name rule (`_legacy`): a directory with
  ``config.json`` owns the `RUN_FILES` names at its top and what the experiments write inside its folders.
  The first `Manifest.record` in such a run adopts what the name rule owns (without digests).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from jaxinit.errors import ConfigError
from jaxinit.run import files
from jaxinit.run.files import safe_path

# Every name any experiment writes into its run directory (files and folders).
RUN_FILES = frozenset({
    "config.json", "metrics.jsonl", "summary.json", "run.json", "figures", "checkpoints", "results",
    "clocks.jsonl", "points", "phase_diagram.npz", "timing.json", "benchmark.jsonl", "table.md", ".lock",
    ".manifest.json", "fingerprint.json", "tensorboard",
})
LOCK = ".lock"
MANIFEST = ".manifest.json"
# What the CLI writes into a run directory before the experiment starts (`jaxinit.run.runinfo`).
START_FILES = frozenset({"config.json", "fingerprint.json", "run.json"})
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


# --------------------------------------------------------------------------- when a run starts
# Run directories (real paths) whose new run has not started yet, with what to call once it has
# (`jaxinit.run.overwrite`: --overwrite keeps the old run set aside until then). A run has started when a
# path beyond the start files is first recorded in it or below it: a metrics row, a checkpoint, a results
# file, a figure, a sub-run. Every results writer declares its path here first, so none is missed.
_WAITING: dict[str, Callable[[], None]] = {}


def when_started(out: Path | str, callback: Callable[[], None] | None) -> None:
    """Call ``callback`` once, when the run in ``out`` records its first path beyond `START_FILES` (None: forget
    a callback not yet called)."""
    key = os.path.realpath(out)
    if callback is None:
        _WAITING.pop(key, None)
    else:
        _WAITING[key] = callback


def _note(path: Path) -> None:
    """``path`` is about to be recorded: a waiting run directory above it whose start files it is not has started."""
    if not _WAITING:
        return
    target = os.path.realpath(path)
    for key in list(_WAITING):
        if os.path.commonpath([key, target]) == key and target != key:
            top = Path(os.path.relpath(target, key)).parts[0]
            if top not in START_FILES | {LOCK, MANIFEST} and _atomic_twin_of(top) != MANIFEST:
                _WAITING.pop(key)()


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
        _note(self.out / rel)
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
        _note(target)
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
