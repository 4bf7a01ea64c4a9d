"""What one part of a run may do with its run directory, and what is left of it however that part ends.

    c = claim(out, cfg, experiment, resume=..., overwrite=...)   # holding the run's lock (`jaxinit.run.rundir`)
    try: main(...)
    except BaseException: c.abandon() ...                        # before the run started: nothing of it stays
    c.done()

The rules (`claim`): a run of another experiment is refused; ``--resume`` continues; a fresh start into a run of
the same config continues it, into one of another config is refused; files that are not a run's are never
touched. ``--overwrite`` sets the old run's own files aside (`jaxinit.run.overwrite`) instead of deleting them.

A fresh start (a new directory, or ``--overwrite``) *starts* when it records its first path beyond config.json,
fingerprint.json and run.json (`jaxinit.run.manifest.when_started`): a metrics row, a checkpoint, a results file,
a figure. Until then everything that can refuse the run has its chance (the experiment's set-up, data, selection,
compilation), and `Claim.abandon` -- on any error or signal -- leaves the directory as it found it: the new run's
start files deleted, the old run put back byte for byte. From then on the old run's files are deleted (they were
the user's to replace) and the new run keeps what it wrote, however it ends.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jaxinit.config import to_dict
from jaxinit.errors import ConfigError
from jaxinit.run import files, manifest, overwrite, rundir, runinfo
from jaxinit.run.config_parse import comparable
from jaxinit.run.manifest import Manifest


class Claim:
    """What `claim` decided for ``out`` (``resume``: continue the run there; ``fresh``: this part writes a new run;
    ``continuing``: a rerun of the same config), and the old run an --overwrite set aside until the new one starts."""

    def __init__(self, out: Path, resume: bool, fresh: bool = False, continuing: bool = False,
                 aside: overwrite.Aside | None = None):
        self.out, self.resume, self.fresh, self.continuing, self.aside = out, resume, fresh, continuing, aside
        self.started = False
        self._before = sorted(p.name for p in out.iterdir()) if fresh and out.is_dir() else []
        if fresh:
            manifest.when_started(out, self._on_start)

    def _on_start(self) -> None:
        self.started = True
        if self.aside is not None:
            self.aside.discard()

    def abandon(self) -> bool:
        """(The part failed or was stopped) If the fresh run never started: its files removed and the old run put back
        (True); else nothing changes (False)."""
        manifest.when_started(self.out, None)
        if not self.fresh or self.started:
            return False
        if self.aside is not None:
            self.aside.restore()
        else:
            rundir.clear_owned(self.out)          # config.json, fingerprint.json, run.json: nothing else was written
            for p in self.out.iterdir():
                if p.name not in self._before and p.is_dir() and not p.is_symlink() and not any(p.iterdir()):
                    p.rmdir()                   # an empty folder a library made on its own (orbax's checkpoints/)
        self.fresh = False
        return True

    def done(self) -> None:
        """(The part ended well, or was stopped where it may continue) An old run still set aside goes."""
        manifest.when_started(self.out, None)
        if self.aside is not None and not self.started:
            self.aside.discard()


def claim(out: Path, cfg: Any, experiment: str, *, resume: bool, overwrite_: bool) -> Claim:
    """Decide what a run may do with ``out`` (module docstring), holding its lock; a fresh start writes config.json
    and names the experiment in run.json."""
    overwrite.recover(out)                           # what an --overwrite killed midway left next to it
    state = rundir.inspect(out)
    if state == "foreign" and _is_run(out):
        state = "run"             # a run with a user's files in it: they stay, untouched (said at the end)
    if resume or (state == "run" and not overwrite_):
        runinfo.check_experiment(out, experiment)    # a run of another experiment is refused here
    if resume:
        runinfo.record_experiment(out, experiment)   # (a run made before run.json named its experiment)
        return Claim(out, resume=True)
    if state == "foreign":
        raise ConfigError(f"--out {files.safe_path(out)} holds files that are not a run's; choose an empty or "
                          f"new directory (nothing there is deleted, --overwrite or not)")
    if state == "run" and not overwrite_:
        saved, asked = comparable(rundir.read_saved_config(out)), comparable(json.loads(json.dumps(to_dict(cfg))))
        if saved == asked:
            runinfo.record_experiment(out, experiment)
            return Claim(out, resume=True, continuing=True)
        diff = ", ".join(rundir.diff_keys(saved, asked)[:4])
        raise ConfigError(f"--out {files.safe_path(out)} holds a run of another config (differs in {diff}); "
                          f"use --resume to continue it, another --out, or --overwrite to replace it")
    if state == "partial" and not overwrite_:
        raise ConfigError(f"--out {files.safe_path(out)} holds an unfinished run without config.json; "
                          f"use --overwrite to replace it or another --out")
    aside = overwrite.set_aside(out) if overwrite_ and state in ("run", "partial") else None
    c = Claim(out, resume=False, fresh=True, aside=aside)
    try:
        Manifest(out).write_json(out / "config.json", to_dict(cfg), digest=False)   # users may edit it
        runinfo.record_experiment(out, experiment)
    except BaseException:
        c.abandon()
        raise
    return c


def _is_run(out: Path) -> bool:
    """A run directory whose config.json is its own (it may hold a user's files besides)."""
    return (out / "config.json").is_file() and "config.json" not in rundir.foreign_entries(out)


def stop_advice(out: Path, prog: str) -> str:
    """What a stopped run says after "stopped by SIGINT: " -- true to what ``--resume`` will find: a checkpoint to
    continue from; or, where training was cut without one (checkpoints off), that the run cannot be continued."""
    again = f"python -m {prog} --out {files.safe_path(out)}"
    m = Manifest(out)
    entries = m.entries() if m.exists() else {}
    if any(e["kind"] == "checkpoint" and (out / rel).is_dir() for rel, e in entries.items()):
        return f"the last checkpoint is kept; continue with: {again} --resume"
    status = _status(out)
    if "metrics.jsonl" in entries and status == "stopped":
        return (f"no checkpoint was saved (checkpoints are off in this config), so its training cannot be "
                f"continued; start it over with: {again} --overwrite")
    return f"continue with: {again} --resume"


def _status(out: Path) -> str | None:
    try:
        info = json.loads((out / runinfo.RUN_JSON).read_text())
        return info.get("status") if isinstance(info, dict) else None
    except (OSError, ValueError):
        return None
