"""The optional file sink of the IGB study: results/*.npz, JSON, progress bars.

The library's runs (`probe_init`, `train_phases`) compute in memory; the experiments pass these
helpers as callbacks so that every finished case lands in ``DIR/results/<name>.npz`` at once
(atomically, `jaxinit.files`), and ``--resume`` / ``--replot`` read them back (`load_results`; a
0-byte or truncated file is one `ConfigError` line). Every file is written through the run's
manifest (`jaxinit.rundir.Manifest`): recorded with its digest, never through a symlink out of the run.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from jaxinit import files
from jaxinit.rundir import Manifest


def json_safe(obj: Any) -> Any:
    """``obj`` with numpy scalars as Python numbers and NaN / inf as None (JSON has neither)."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def results_dir(out: Path) -> Path:
    return Path(out) / "results"


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


def load_results(out: Path) -> dict[str, dict[str, np.ndarray]]:
    """Every ``out/results/*.npz`` by name (one `ConfigError` line for an unreadable one)."""
    return {f.stem: files.load_npz(f) for f in sorted(results_dir(out).glob("*.npz"))}


def show_progress(enabled: bool | None = None, stream=None) -> bool:
    """Progress bars only where a person watches: stderr is a terminal (or ``enabled`` says so)."""
    stream = sys.stderr if stream is None else stream
    if enabled is not None:
        return enabled
    return hasattr(stream, "isatty") and stream.isatty()


def progress_bar(total: int, desc: str, enabled: bool | None = None):
    """A tqdm bar on stderr, disabled unless `show_progress`."""
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, disable=not show_progress(enabled), leave=False)


def save_figures(figures: dict[str, Any], fig_dir: Path) -> list[Path]:
    """Write matplotlib ``Figure`` objects as ``fig_dir/<name>.png`` (atomically), recorded in the
    manifest of the run ``fig_dir`` belongs to (its parent)."""
    run = Manifest(Path(fig_dir).parent)
    return [run.save_figure(fig, Path(fig_dir) / f"{name}.png", dpi=110, bbox_inches="tight")
            for name, fig in figures.items()]
