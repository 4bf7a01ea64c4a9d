"""The optional file sink of the IGB and joined studies: results/*.npz, figures, progress.

The library's runs (`probe_init`, `train_phases`, `jaxinit.memory.fit`) compute in memory; the experiments pass these
helpers as callbacks so that every finished case lands in ``DIR/results/<name>.npz`` at once
(atomically, `jaxinit.run.files`), and ``--resume`` / ``--replot`` read them back (`jaxinit.run.runs.load_results`; a
0-byte or truncated file is one `ConfigError` line). Every file is written through the run's
manifest (`jaxinit.run.manifest.Manifest`): recorded with its digest, never through a symlink out of the run.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from jaxinit.progress import Progress
from jaxinit.run.manifest import Manifest
from jaxinit.run.runs import RESULTS


def results_dir(out: Path) -> Path:
    return Path(out) / RESULTS


def saver(out: Path) -> Callable[[str, dict], None]:
    """A callback ``(name, arrays)`` that writes ``out/results/<name>.npz`` atomically."""
    def save(name: str, arrays: dict) -> None:
        Manifest(out).save_npz(results_dir(out) / f"{name}.npz", arrays)
    return save


def announcing_saver(out: Path) -> Callable[[str, dict], None]:
    """`saver` that also prints one line per result, with the seconds since it was made: each finished
    result is on disk at once (so `--resume` skips it) and the user sees the run advance."""
    save, t0 = saver(out), time.time()

    def on_done(name: str, arrays: dict) -> None:
        save(name, arrays)
        print(f"{name}: saved at {time.time() - t0:.0f} s", flush=True)
    return on_done


def progress_bar(total: int, desc: str, enabled: bool | None = None) -> Progress:
    """`jaxinit.progress.Progress` over ``total`` steps: a bar on a terminal (gone when closed), a line per
    tenth of the steps otherwise; off with ``enabled=False`` or ``JAXINIT_PROGRESS=0``."""
    return Progress(total, unit="step", desc=desc, enabled=enabled, leave=False)


def save_figures(figures: dict[str, Any], fig_dir: Path) -> list[Path]:
    """Write matplotlib ``Figure`` objects as ``fig_dir/<name>.png`` (atomically), recorded in the
    manifest of the run ``fig_dir`` belongs to (its parent)."""
    run = Manifest(Path(fig_dir).parent)
    return [run.save_figure(fig, Path(fig_dir) / f"{name}.png", dpi=110, bbox_inches="tight")
            for name, fig in figures.items()]
