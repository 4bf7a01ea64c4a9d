"""``--overwrite`` that never costs the old run unless the new one starts.

    aside = set_aside(out)   # the old run's own files leave ``out`` (renamed, not copied, not deleted)
    ...                      # the new run writes config.json, loads data, selects, compiles, ...
    aside.discard()          # it has started (`jaxinit.run.manifest.when_started` calls this): the old files go
    aside.restore()          # or it never did (an error, a signal): ``out`` is again exactly what it was

What is set aside is exactly what `jaxinit.run.rundir.clear_owned` deleted before: the run's own files (its
manifest entries; a user's file anywhere in the directory stays where it is), renamed into a sibling folder
``<parent>/.<name>.jaxinit-overwrite-<random>`` of the run directory's real path, on the same file system, so
that setting aside and putting back are renames (no copy, no second disk's worth of space), together with a
copy of every manifest's bytes. `Aside.restore` deletes the new run's own files, renames the old ones back and
puts the old manifests back: every file is byte for byte what it was. `Aside.discard` first renames the folder
to ``.<name>.jaxinit-discard-<random>`` (so a kill while it is deleted never leaves something mistaken for a run
waiting to be put back), then deletes it.

A process killed in between (kill -9, a power cut) leaves the set-aside folder next to the run. The next command
that claims the directory (`recover`, under the run's lock) puts it back if the run there never started (it holds
no more than the start files), deletes a half-deleted ``discard`` folder, and otherwise refuses in one line
naming the folder.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from jaxinit.errors import ConfigError
from jaxinit.run import rundir
from jaxinit.run.files import describe_os_error, safe_path
from jaxinit.run.manifest import LOCK, MANIFEST, START_FILES, Manifest, _legacy

PENDING, DISCARD = ".jaxinit-overwrite-", ".jaxinit-discard-"
NOTE = ".jaxinit-overwrite.json"    # inside the folder: which run directory it belongs to, whether it had a manifest
OLD = "old"                         # inside the folder: the set-aside files by their relative paths


def _prefix(out: Path, kind: str) -> str:
    return f".{out.name[:80]}{kind}"


class Aside:
    """The old run's own files, set aside (`set_aside`) until the new run starts (`discard`) or fails (`restore`)."""

    def __init__(self, out: Path, folder: Path):
        self.out, self.folder = Path(out), Path(folder)

    @property
    def old(self) -> Path:
        return self.folder / OLD

    def note(self) -> dict:
        return json.loads((self.folder / NOTE).read_text())

    def discard(self) -> None:
        """The new run has started: delete the old run's files (renamed out of the way first)."""
        if not self.folder.exists():
            return
        gone = self.folder.with_name(self.folder.name.replace(PENDING, DISCARD, 1))
        try:
            os.rename(self.folder, gone)
        except OSError as err:      # the new run goes on; the old files stay where they are, named
            print(f"{safe_path(self.folder)}: the replaced run's files could not be deleted "
                  f"({err.strerror or err}); delete the folder yourself", file=sys.stderr)
            return
        shutil.rmtree(gone, ignore_errors=True)

    def restore(self) -> None:
        """The new run never started: its own files deleted, the old run's put back, the old manifest with them.
        A path the old run had that is taken meanwhile (it cannot be, by the rules above) is left in the folder
        and named in one `ConfigError` line."""
        note = self.note()
        rundir.clear_owned(self.out)                       # the new run's config.json, fingerprint.json, run.json
        clashes = _merge(self.old, self.out, "")
        if not note["manifest"]:
            (self.out / MANIFEST).unlink(missing_ok=True)   # the old run had none (made before manifests)
        for name in set(os.listdir(self.out)) - set(note["names"]):
            p = self.out / name
            if p.is_dir() and not p.is_symlink() and not any(p.iterdir()):
                p.rmdir()           # an empty folder a library made on its own (orbax's checkpoints/)
        if clashes:
            raise ConfigError(f"could not put back {safe_path(clashes[0])} of the earlier run in "
                              f"{safe_path(self.out)} (the path is taken); its files are in "
                              f"{safe_path(self.folder)}")
        shutil.rmtree(self.folder)


def _merge(src: Path, dst: Path, rel: str) -> list[str]:
    """Rename everything under ``src`` into ``dst`` (folders merged, manifests replaced); the paths that clash."""
    clashes = []
    if not src.is_dir():
        return clashes
    dst.mkdir(parents=True, exist_ok=True)
    for child in sorted(src.iterdir()):
        target, sub = dst / child.name, f"{rel}{child.name}"
        if child.is_dir() and not child.is_symlink() and target.is_dir() and not target.is_symlink():
            clashes += _merge(child, target, sub + "/")
        elif not os.path.lexists(target) or child.name == MANIFEST:
            os.replace(child, target)
        else:
            clashes.append(sub)
    return clashes


def set_aside(out: Path) -> Aside:
    """Move the run's own files out of ``out`` into a new sibling folder (module docstring); one `ConfigError` line,
    with nothing moved, where that folder cannot be made, and everything put back where a rename fails."""
    out = Path(out)
    real = Path(os.path.realpath(out))
    try:
        folder = Path(tempfile.mkdtemp(prefix=_prefix(real, PENDING), dir=real.parent))
    except OSError as err:
        raise ConfigError(f"--overwrite: {describe_os_error(err, real.parent)}: the earlier run is set aside there "
                          f"until the new one starts; nothing was changed (delete the run yourself, or choose "
                          f"another --out)") from None
    names = sorted(os.listdir(out))
    (folder / NOTE).write_text(json.dumps({"out": str(real), "manifest": Manifest(out).exists(), "names": names}))
    aside = Aside(out, folder)
    try:
        rundir.clear_owned(out, aside=aside.old)
    except BaseException:
        with contextlib.suppress(Exception):
            if not _merge(aside.old, out, ""):
                shutil.rmtree(folder)
        raise
    return aside


def _found(out: Path) -> list[Path]:
    """Folders next to ``out``'s real path that an --overwrite of ``out`` left (pending or half-discarded)."""
    real = Path(os.path.realpath(out))
    if not real.parent.is_dir():
        return []
    found = []
    for p in real.parent.iterdir():
        if (PENDING in p.name or DISCARD in p.name) and p.name.startswith(f".{real.name[:80]}") and p.is_dir():
            with contextlib.suppress(OSError, ValueError, KeyError):
                if json.loads((p / NOTE).read_text())["out"] == str(real):
                    found.append(p)
    return sorted(found)


def recover_first(out: Path) -> None:
    """`recover`, under the run's lock, before a command reads anything in ``out`` (its config.json on --resume);
    nothing is done (no lock file made) where nothing was left."""
    if _found(out):
        with rundir.RunLock(out):
            recover(out)


def recover(out: Path) -> None:
    """(Holding the run's lock, before anything else) What an --overwrite killed midway left next to ``out``: a
    half-deleted old run is deleted; a set-aside one is put back if the run in ``out`` never started (one line
    says so), else refused in one line naming the folder."""
    for folder in _found(out):
        if DISCARD in folder.name:
            shutil.rmtree(folder, ignore_errors=True)
            continue
        if not _never_started(Path(out)):
            raise ConfigError(f"{safe_path(folder)} holds the earlier run of {safe_path(out)} that an interrupted "
                              f"--overwrite set aside, and {safe_path(out)} holds a newer run: move one of them "
                              f"away (nothing was changed)")
        Aside(Path(out), folder).restore()
        print(f"{safe_path(out)}: put back the earlier run that an interrupted --overwrite had set aside",
              file=sys.stderr)


def _never_started(out: Path) -> bool:
    """Only the start files (and lock, manifest) of a run are in ``out``'s manifest, besides folders (kept where they
    hold a user's files): nothing was trained there."""
    if not out.is_dir():
        return True
    m = Manifest(out)
    entries = m.entries() if m.exists() else _legacy(out)[0]
    return {rel.split("/")[0] for rel, e in entries.items() if e["kind"] != "dir"} <= START_FILES | {LOCK, MANIFEST}
