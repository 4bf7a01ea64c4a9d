"""Results files written atomically: a reader never sees half a file, a failed write leaves nothing.

Every results file (JSON, JSON lines, text, `.npz`, figures) is written to a temporary file in the
same directory, flushed and fsync-ed, then renamed over its target (`os.replace` is atomic on POSIX).
A full disk, a read-only directory or a path the file system cannot encode becomes one `ConfigError`
line (exit status 2 at the entrypoints) and the temporary file is removed, so the directory holds
either the old file or the new one, never a fragment.

Every writer takes an optional ``root`` (the run directory): with it, a target that resolves outside
``root`` -- through a symlinked folder (``figures -> /elsewhere``) or a symlinked file -- is refused in
one line before anything is created (`check_inside`; callers that write by other means, e.g. appending
to metrics.jsonl, call it themselves). Paths in messages go through `safe_path`, which escapes
undecodable bytes and control characters, so a message stays one line whatever the path holds.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from jaxinit.errors import ConfigError


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


# C0 and C1 controls, DEL and the Unicode line / paragraph separators: anything a terminal may break a line on.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7f, 0xa0))} | {0x2028: "\\u2028", 0x2029: "\\u2029"}


def safe_path(path: Path | str) -> str:
    """A path as one line of printable text (undecodable bytes and control characters escaped as
    ``\\xNN``), shortened if very long."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace").translate(_CONTROLS)
    return text if len(text) <= 200 else text[:90] + " ... " + text[-90:]


def check_inside(root: Path | str, path: Path | str) -> Path:
    """``path`` if it resolves (every symlink on the way followed) to a place inside ``root``; else one
    `ConfigError` line naming the link. ``root`` itself may be a symlink (an ``--out`` on another disk)."""
    top = os.path.realpath(root)
    target = os.path.realpath(path)
    if os.path.commonpath([top, target]) == top:
        return Path(path)
    link = _first_link(Path(path))
    what = f"{safe_path(link)} is a symbolic link to {safe_path(os.path.realpath(link))}" if link else \
        f"{safe_path(path)} lies"
    raise ConfigError(f"{what} outside the run directory {safe_path(root)}; results are only written inside "
                      f"it (remove the link, or choose another --out)")


def _first_link(path: Path) -> Path | None:
    """The first symlink on the way down to ``path`` (for the message)."""
    for p in (*reversed(path.parents), path):
        if p.is_symlink():
            return p
    return None


def sha256_file(path: Path | str) -> str:
    """SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def atomic_path(path: Path | str, *, root: Path | str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it over ``path``.

    With ``root``, a ``path`` that resolves outside ``root`` is refused first (`check_inside`).
    """
    path = Path(path)
    tmp = None
    try:
        if root is not None:
            check_inside(root, path)
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


def json_text(data: Any) -> str:
    """Sorted, indented JSON and a newline; NaN / infinity are refused (they are not JSON)."""
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def jsonl_text(rows: list[dict]) -> str:
    """One sorted JSON object a line."""
    return "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in rows)


def write_npz(file: Any, named: Mapping[str, Any] | None, arrays: Mapping[str, Any]) -> None:
    """`np.savez` of ``named`` and ``arrays`` together into an open binary file."""
    np.savez(file, **{**(named or {}), **arrays})


def figure_bytes(fig: Any, path: Path | str, **kwargs: Any) -> bytes:
    """``fig.savefig`` into memory, in the format of ``path``'s suffix (png if none)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", **kwargs)
    return buf.getvalue()


def write_text(path: Path | str, text: str, *, root: Path | str | None = None) -> None:
    with atomic_path(path, root=root) as tmp:
        tmp.write_text(text)


def write_json(path: Path | str, data: Any, *, root: Path | str | None = None) -> None:
    """Sorted, indented JSON; NaN / infinity are refused (they are not JSON): pass None instead."""
    write_text(path, json_text(data), root=root)


def write_jsonl(path: Path | str, rows: list[dict], *, root: Path | str | None = None) -> None:
    write_text(path, jsonl_text(rows), root=root)


def save_npz(path: Path | str, named: Mapping[str, Any] | None = None, /, *, root: Path | str | None = None,
             **arrays: Any) -> None:
    """`np.savez` through a temporary file (a run killed while saving leaves the old file or none).

    Arrays come as keywords or as the mapping ``named`` (for names that are not identifiers, or ``root``).
    """
    with atomic_path(path, root=root) as tmp:
        with open(tmp, "wb") as f:
            write_npz(f, named, arrays)


def load_npz(path: Path | str) -> dict[str, np.ndarray]:
    """All arrays of an `.npz`; an empty, truncated or foreign file is one `ConfigError` line."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as err:
        # (Not "rerun without --resume": a same-config rerun continues the run and reads the same file.)
        raise ConfigError(f"{safe_path(path)} is not a readable results file ({type(err).__name__}); delete "
                          f"it to have it computed again, or rerun with --overwrite to start the run over") from None


def save_figure(fig: Any, path: Path | str, *, root: Path | str | None = None, **kwargs: Any) -> Path:
    """``fig.savefig`` through a temporary file; the format comes from ``path``'s suffix."""
    path = Path(path)
    with atomic_path(path, root=root) as tmp:
        tmp.write_bytes(figure_bytes(fig, path, **kwargs))
    return path
