"""A run directory is owned: one writer at a time, never another run's or a user's files lost.

Rules (every experiment, through `jaxinit.cli`):
- A run directory holds `config.json` and the files the experiment writes (`RUN_FILES`). A fresh
  run (no `--resume`) into
  * a missing or empty directory starts a new run;
  * a run of the *same* config continues it (as `--resume` would; a finished run is only re-summarised);
  * a run of another config, or a directory with run files but no readable config, is refused with
    one line unless `--overwrite` is given, which deletes that run's own files (`RUN_FILES`) and
    nothing else;
  * a directory holding anything that is not a run file is refused, `--overwrite` or not: nothing
    outside a run's own files is ever deleted.
- `RunLock`: an advisory `flock` on `DIR/.lock`, held for the whole run, names the process that
  holds it; a second process writing into the same directory is refused with one line. The kernel
  drops the lock when its process dies, so a killed run never leaves a stale lock behind.
- `provenance()`: what `run.json` records besides timings: git commit, package versions, device.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from jaxinit.config import ConfigError
from jaxinit.files import safe_path

# Every name any experiment writes into its run directory (files and folders).
RUN_FILES = frozenset({
    "config.json", "metrics.jsonl", "summary.json", "run.json", "figures", "checkpoints", "results",
    "clocks.jsonl", "points", "phase_diagram.npz", "timing.json", "benchmark.jsonl", "table.md", ".lock",
})
LOCK = ".lock"


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


class RunLock:
    """Exclusive advisory lock on ``out/.lock`` (see the module docstring)."""

    def __init__(self, out: Path):
        self.path = Path(out) / LOCK
        self._fd: int | None = None

    def __enter__(self) -> "RunLock":
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise ConfigError(f"--out {safe_path(self.path.parent)}: cannot write there ({err.strerror or err})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 4096).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise ConfigError(f"--out {safe_path(self.path.parent)} is in use by {holder}; wait for it or "
                              f"choose another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} ({' '.join(sys.argv[:1])})\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fd is not None:
            os.close(self._fd)   # closing drops the flock; the file stays (removing it would race)
            self._fd = None


# What may lie inside the run's folders; anything else there is a user's file, never ours to delete.
_FOLDER_ENTRIES = {
    "checkpoints": lambda n: n.split(".")[0].isdigit(),          # orbax step folders (and their .tmp twins)
    "figures": lambda n: n.endswith((".png", ".pdf", ".svg", ".tmp")),
    "results": lambda n: n.endswith((".npz", ".json", ".tmp")),
    "points": lambda n: not n.startswith("."),                   # run directories of a clock sweep
}


def _owned(path: Path) -> bool:
    """A top-level entry of a run directory that only a run writes (checked one level down for folders)."""
    if not is_run_file(path.name):
        return False
    check = _FOLDER_ENTRIES.get(path.name)
    if check is None or not path.is_dir():
        return check is None or not path.exists()
    return all(check(p.name) for p in path.iterdir())


def inspect(out: Path) -> str:
    """``"new"`` (missing or empty), ``"run"`` (has config.json), ``"partial"`` (only run files, no
    config.json) or ``"foreign"`` (holds something that is not a run file, e.g. a user's
    ``checkpoints/model_epoch_90.pt``)."""
    if not out.exists():
        return "new"
    if not out.is_dir():
        return "foreign"
    entries = list(out.iterdir())
    names = [p.name for p in entries]
    if not all(_owned(p) for p in entries):
        return "foreign"
    if "config.json" in names:
        return "run"
    return "partial" if [n for n in names if n != LOCK] else "new"


def read_saved_config(out: Path) -> dict:
    try:
        return json.loads((out / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{safe_path(out / 'config.json')} is not readable JSON ({type(err).__name__})") from None


def clear_run(out: Path) -> None:
    """Delete this run's own files (`RUN_FILES` and temporaries), never anything else; keep the lock."""
    for p in out.iterdir():
        if p.name == LOCK or not is_run_file(p.name):
            continue
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        except OSError as err:
            raise ConfigError(f"--overwrite: cannot remove {safe_path(p)} ({err.strerror or err})") from None


def diff_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys where two nested config dicts differ (for a one-line refusal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [prefix.rstrip(".")] if a != b else []


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
