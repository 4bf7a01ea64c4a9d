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
def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{files.safe_path(path)} is not readable JSON ({type(err).__name__})") from None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file (metrics.jsonl).

    A killed run may leave a truncated last line: it is dropped. An unparsable line anywhere else
    is corruption and raises `ConfigError` (a ValueError) naming the line. NaN / Infinity tokens
    (python's json) are accepted.
    """
    lines = Path(path).read_text().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    rows = []
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines) - 1:
                break  # the partial write of an interrupted run
            raise ConfigError(f"{files.safe_path(path)}: line {n + 1} is not JSON") from None
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
