"""``python -m experiments.<name> --replot DIR``: a finished run's figures again, from its saved results only.

The run must be one of this experiment (run.json's ``experiment``, or for runs made before it recorded one, the
sections of its config.json: `jaxinit.run.registry.experiment_of`); another experiment's run is refused in one line
that names the command that does redraw it (and touches nothing). Its config.json must be a complete config of this
experiment (every field present: the figures read them), the files the experiment's figures read
(``Experiment.replot_reads``) JSON objects, and its results present. The redraw holds the run's lock
(`jaxinit.run.rundir.RunLock`), so it never runs while another process writes the run. Anything the figures then
cannot read in the saved files is one line naming the run.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from jaxinit.errors import ConfigError
from jaxinit.run import files, registry, rundir
from jaxinit.run.config_parse import ADDED_DEFAULTS, dotted_keys, from_dict

# What a figure module raises on saved files that are not what it expects (a hand edit, another version's).
_UNREADABLE = (KeyError, IndexError, TypeError, ValueError, AttributeError, OSError)


def replot(experiment: str, prog: str, config_cls: type, run_dir: str, plot_all: Callable[[Path], list[Path]],
           reads: tuple[str, ...] = ()) -> list[Path]:
    """Check the run in ``run_dir`` (module docstring), then ``plot_all(run_dir)`` under its lock; the figures' paths."""
    out = Path(run_dir).expanduser()
    where = f"--replot {files.safe_path(out)}"
    if not out.is_dir():
        raise ConfigError(f"{where}: no such run directory")
    config = _json_object(out / "config.json", where, "this run's config")
    _check_experiment(out, config, experiment, where)
    _check_config(config_cls, config, where)
    for name in reads:
        _json_object(out / name, where, f"the {experiment} results the figures are drawn from")
    if not (list((out / "results").glob("*.npz")) or list(out.glob("*.npz"))):
        raise ConfigError(f"{where}: no saved results (results/*.npz) of a {prog} run there")
    with rundir.RunLock(out):
        try:
            return plot_all(out)
        except ConfigError:
            raise
        except _UNREADABLE as err:
            text = str(err).splitlines()[0][:120] if str(err) else ""
            raise ConfigError(f"{where}: its saved results cannot be drawn ({type(err).__name__}: {text}); they are "
                              f"not those of a finished {experiment} run of this version") from None


def _json_object(path: Path, where: str, what: str) -> dict:
    if not path.is_file():
        raise ConfigError(f"{where}: {path.name} is missing ({what})")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{where}: {path.name} is not readable JSON ({type(err).__name__})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {path.name} is not a JSON object ({what})")
    return data


def _check_experiment(out: Path, config: dict, experiment: str, where: str) -> None:
    info = {}
    if (out / "run.json").is_file():
        try:
            info = json.loads((out / "run.json").read_text())
        except (OSError, ValueError):
            info = {}
    found = registry.experiment_of(config, info)
    if found is not None and found != experiment:
        other = f"; redraw it with python -m experiments.{found} --replot {files.safe_path(out)}" \
            if found in registry.NAMES and registry.entry(found).run_dir else ""
        raise ConfigError(f"{where}: it holds a run of {files.safe_path(found)}, not of {experiment} (nothing was "
                          f"changed){other}")


def _check_config(config_cls: type, config: dict, where: str) -> None:
    try:
        cfg = from_dict(config_cls, config)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    added = {".".join(k) for k in ADDED_DEFAULTS}      # fields newer than some runs: their default is meant
    missing = [k for k in dotted_keys(cfg) if k not in added and not _has(config, k.split("."))]
    if missing:
        raise ConfigError(f"{where}: config.json lacks {', '.join(missing[:3])} (the figures read it); restore "
                          f"the field")


def _has(data: Any, keys: list[str]) -> bool:
    for k in keys:
        if not isinstance(data, dict) or k not in data:
            return False
        data = data[k]
    return True


