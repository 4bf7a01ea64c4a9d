"""`load_run(dir)`: what a finished run of any experiment wrote, for notebooks.

    import jaxinit
    run = jaxinit.load_run("runs/forgetting_cpu")
    run                                     # <Run of forgetting in runs/forgetting_cpu: 1,440 rows, summary>
    run.experiment                          # its name in jaxinit.run.registry: "forgetting", "igb_train", ...
    run.config["train"]["epochs"]           # config.json
    run.summary["spread"]["sgd"]            # summary.json (None if the run has none)
    run.rows[0]["val_acc"]                  # metrics.jsonl ([] if the run has none)
    sgd = run.arrays["optimizer"] == "sgd"  # the rows' scalar columns as numpy arrays
    run.arrays["val_acc"][sgd]
    run.df                                  # the same columns as a pandas DataFrame (needs pandas)
    run.results["tanh__d3__sgd"]["test_acc"]   # IGB runs: results/*.npz; phase diagrams: phase_diagram.npz
    run.points["sgd_lr0.02_b64"].rows       # the clock sweep: every point is a run of its own
    run.run_info["provenance"]              # run.json: timings, versions, machine

Reads only (no lock, no manifest change), so it also works on a run that is still training; numpy only
(no jax), so a notebook can load runs on a machine without an accelerator.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from jaxinit.errors import ConfigError
from jaxinit.run import files
from jaxinit.run.registry import experiment_of

RESULTS = "results"
# What makes a metrics row unique: a resumed run may have written the same evaluation twice.
_ROW_ID = ("act", "depth", "width", "optimizer", "member")


@dataclass(frozen=True, repr=False)
class Run:
    """A run directory's files (see the module docstring); its repr is one line."""
    path: Path
    experiment: str | None
    config: dict
    summary: dict | None
    rows: list[dict]
    run_info: dict
    results: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    points: dict[str, "Run"] = field(default_factory=dict)

    @cached_property
    def arrays(self) -> dict[str, np.ndarray]:
        """{column: numpy array} of the rows' scalar columns (`columns`)."""
        return columns(self.rows)

    def frame(self):
        """The scalar columns (`arrays`) as a pandas DataFrame."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Run.frame() / Run.df need pandas (pip install pandas); the same columns are "
                              "in Run.arrays as numpy arrays") from None
        return pd.DataFrame(self.arrays)

    @property
    def df(self):
        return self.frame()

    def __repr__(self) -> str:
        what = [f"{len(self.rows):,} rows", "summary" if self.summary is not None else "no summary"]
        if self.results:
            names = list(self.results)
            what.append(f"results {', '.join(names[:3])}" + (f" (+{len(names) - 3} more)" if len(names) > 3 else ""))
        if self.points:
            what.append(f"{len(self.points)} points")
        return f"<Run of {self.experiment or 'an unknown experiment'} in {files.safe_path(self.path)}: {', '.join(what)}>"


def load_run(path: str | Path) -> Run:
    """The run in ``path`` (one `ConfigError` line if it is not a run directory)."""
    out = Path(path)
    if not out.is_dir():
        why = "not a directory" if out.exists() else "no such directory"
        raise ConfigError(f"{files.safe_path(out)} is not a run directory ({why})")
    if not (out / "config.json").is_file():
        raise ConfigError(f"{files.safe_path(out)} is not a run directory (it has no config.json)")
    config = read_json(out / "config.json")
    run_info = read_json(out / "run.json") if (out / "run.json").is_file() else {}
    points = out / "points"
    return Run(path=out, experiment=experiment_of(config, run_info), config=config,
               summary=read_json(out / "summary.json") if (out / "summary.json").is_file() else None,
               rows=unique_rows(read_jsonl(out / "metrics.jsonl")) if (out / "metrics.jsonl").is_file() else [],
               run_info=run_info,
               results={**{p.stem: files.load_npz(p) for p in sorted(out.glob("*.npz"))}, **load_results(out)},
               points={p.name: load_run(p) for p in sorted(points.iterdir()) if (p / "config.json").is_file()}
               if points.is_dir() else {})


def load_results(out: Path | str) -> dict[str, dict[str, np.ndarray]]:
    """Every ``out/results/*.npz`` by name (one `ConfigError` line for an unreadable one)."""
    return {f.stem: files.load_npz(f) for f in sorted((Path(out) / RESULTS).glob("*.npz"))}


# --------------------------------------------------------------------------- reading
# No run writes a JSON document (config.json, run.json, summary.json) near this size; a larger one is not a run's,
# and parsing it could exhaust memory (a 3 GB summary.json did) before it failed.
MAX_JSON_BYTES = 256 * 2**20


def read_json(path: Path) -> dict:
    """A run's JSON document, which is always an object; anything else (unreadable, not UTF-8, not JSON, a list or
    a number, larger than `MAX_JSON_BYTES`) is one `ConfigError` line naming the file."""
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ConfigError(f"{files.safe_path(path)} is {path.stat().st_size / 2**30:.3g} GB, larger than any run "
                              f"writes ({MAX_JSON_BYTES // 2**20} MB); it is not this run's")
        data = json.loads(path.read_bytes().decode("utf-8"))
    except ConfigError:
        raise
    except (OSError, ValueError, MemoryError, RecursionError) as err:
        raise ConfigError(f"{files.safe_path(path)} is not readable JSON ({type(err).__name__})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{files.safe_path(path)} is not a JSON object (it holds a {type(data).__name__}); it is "
                          f"not this run's")
    return data


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file (metrics.jsonl): one JSON object a line.

    A killed run may leave a truncated last line: it is dropped. A line anywhere else that is not a JSON object
    (does not parse, is not UTF-8, is a list) is corruption and raises `ConfigError` (a ValueError) naming the
    file and the line. NaN / Infinity tokens (python's json) are accepted.
    """
    return [row for _, row in _numbered_rows(path)]


def read_rows(path: str | Path, keys: tuple[str, ...] = ("member", "epoch")) -> list[dict[str, Any]]:
    """`read_jsonl` of metrics rows whose ``keys`` are non-negative integers (what the readers index by); a row
    without them is one `ConfigError` line naming the file and the line."""
    numbered = _numbered_rows(path)
    for n, row in numbered:
        bad = [k for k in keys if type(row.get(k)) is not int or row[k] < 0]
        if bad:
            raise ConfigError(f"{files.safe_path(path)}: line {n} has {bad[0]} {json.dumps(row.get(bad[0]))[:40]}, "
                              f"not a count (the file is damaged)")
    return [row for _, row in numbered]


def _numbered_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(1-based line number, row) of every JSON object line (`read_jsonl`'s rules)."""
    try:
        lines = Path(path).read_bytes().split(b"\n")
    except (OSError, MemoryError) as err:
        raise ConfigError(f"{files.safe_path(path)} is not readable ({type(err).__name__})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    rows = []
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError):
            if n == len(lines) - 1:
                break  # the partial write of an interrupted run
            raise ConfigError(f"{files.safe_path(path)}: line {n + 1} is not JSON (an object a line)") from None
        rows.append((n + 1, row))
    return rows


def unique_rows(rows: list[dict]) -> list[dict]:
    """One row per evaluation (member, and epoch or step): of rows written twice (a resumed run) the
    later one, in the place of the first."""
    last: dict[tuple, dict] = {}
    for r in rows:
        when = "epoch" if "epoch" in r else "step"
        last[tuple(r.get(k) for k in (*_ROW_ID, when))] = r
    return list(last.values())


def columns(rows: list[dict]) -> dict[str, np.ndarray]:
    """{key: array over rows} for keys whose values are scalars: bool, int (int64), float (float64, NaN
    for None or a missing value), str; a column mixing kinds is an object array. Nested values (dicts,
    lists) are left out: they are in the rows."""
    out = {}
    for key in dict.fromkeys(k for r in rows for k in r):
        vals = [r.get(key) for r in rows]
        if any(isinstance(v, (dict, list)) for v in vals):
            continue
        kinds = {_kind(v) for v in vals}
        if kinds <= {"float", "int", "none"} and kinds != {"int"}:
            out[key] = np.array([np.nan if v is None else v for v in vals], np.float64)
        elif len(kinds) == 1 and kinds != {"other"}:
            out[key] = np.array(vals, {"int": np.int64, "bool": bool, "str": str}[kinds.pop()])
        else:
            out[key] = np.array(vals, object)
    return out


def _kind(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, numbers.Integral):
        return "int"
    if isinstance(v, numbers.Real):
        return "float"
    return "str" if isinstance(v, str) else "other"
