"""Results files written atomically: a reader never sees half a file, a failed write leaves nothing.

Every results file (JSON, JSON lines, text, `.npz`, figures) is written to a temporary file in the
same directory, flushed and fsync-ed, then renamed over its target (`os.replace` is atomic on POSIX).
A full disk, a read-only directory or a path the file system cannot encode becomes one `ConfigError`
line (exit status 2 at the entrypoints) and the temporary file is removed, so the directory holds
either the old file or the new one, never a fragment.
"""
from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from jaxinit.config import ConfigError


def describe_os_error(err: OSError, path: Path | str) -> str:
    """One line for a failed write: what the operating system said, in words a user can act on."""
    if err.errno == errno.ENOSPC:
        why = "no space left on the device"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = "not writable"
    elif err.errno == errno.ENAMETOOLONG:
        why = "path too long"
    else:
        why = err.strerror or type(err).__name__
    return f"cannot write {safe_path(path)}: {why}"


def safe_path(path: Path | str) -> str:
    """A path as printable text (undecodable bytes escaped), shortened if very long."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    return text if len(text) <= 200 else text[:90] + " ... " + text[-90:]


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it over ``path``."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~_umask())   # mkstemp makes 0600; results are shared like any file
        os.close(fd)
        tmp = Path(name)
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except UnicodeEncodeError:
        raise ConfigError(f"cannot write {safe_path(path)}: the file system cannot encode this path") from None
    except OSError as err:
        raise ConfigError(describe_os_error(err, path)) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: Path | str, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: Path | str, data: Any) -> None:
    """Sorted, indented JSON; NaN / infinity are refused (they are not JSON): pass None instead."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_jsonl(path: Path | str, rows: list[dict]) -> None:
    write_text(path, "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in rows))


def save_npz(path: Path | str, **arrays: Any) -> None:
    """`np.savez` through a temporary file (a run killed while saving leaves the old file or none)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)


def load_npz(path: Path | str) -> dict[str, np.ndarray]:
    """All arrays of an `.npz`; an empty, truncated or foreign file is one `ConfigError` line."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as err:
        raise ConfigError(f"{safe_path(path)} is not a readable results file ({type(err).__name__}); "
                          f"rerun without --resume, or delete it") from None


def save_figure(fig: Any, path: Path | str, **kwargs: Any) -> Path:
    """``fig.savefig`` through a temporary file; the format comes from ``path``'s suffix."""
    path = Path(path)
    with atomic_path(path) as tmp:
        buf = io.BytesIO()
        fig.savefig(buf, format=path.suffix.lstrip(".") or "png", **kwargs)
        tmp.write_bytes(buf.getvalue())
    return path
