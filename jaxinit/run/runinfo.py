"""What a run records besides its results: its fingerprint, run.json, files drawn by other writers.

- ``fingerprint.json`` (a manifest entry, `jaxinit.run.manifest`): what the run's numbers depend on -- the
  config, the numeric environment (`jaxinit.run.provenance.numeric_environment`) and, for ``fit(..., model=...)``, the
  user's model (`describe_model`: class, fields, parameter shapes). `start_fingerprint` writes it when
  a run starts; every later part of the run (``--resume``, a same-config rerun, ``fit(..., resume=True)``)
  calls `check_fingerprint`, which refuses in one line naming what differs, so results are never
  mixed from two configs, models or numeric environments. config.json itself stays editable (it is
  recorded without a digest): a hand edit is caught here, by name, instead of being reused. A run made
  before fingerprints existed adopts the current one on its first resume (nothing to compare with).
- `fingerprint`: what a study computes once for its run -- the SHA-256 of its config (`config_fingerprint`,
  stamped into every checkpoint) and the parts fingerprint.json records -- for the forgetting and the IGB study alike.
  Configs are compared as `jaxinit.run.config_parse.comparable` sees them, so a run made before a field
  existed continues.
- run.json: `record_experiment` names the experiment that writes the run (`jaxinit.run.registry`; a run of
  another experiment is refused in one line); `write_run_info` replaces its timings, keeping that name and
  the provenance segments (`jaxinit.run.provenance.append_provenance`).
- `record_written`: files another module wrote into the run (figures drawn by a plotting module),
  recorded with their digests so that they are the run's own.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable

from jaxinit.config import to_dict
from jaxinit.errors import ConfigError
from jaxinit.run.config_parse import comparable
from jaxinit.run.files import safe_path
from jaxinit.run.manifest import Manifest
from jaxinit.run.provenance import numeric_environment, read_run_json
from jaxinit.run.rundir import diff_keys

FINGERPRINT = "fingerprint.json"
RUN_JSON = "run.json"
# START_FILES (`jaxinit.run.manifest`): config.json, fingerprint.json, run.json, what the CLI writes into a run
# directory before the experiment starts (removed again if set-up refuses it).
# What run.json keeps when a part of the run rewrites its timings (`write_run_info`).
KEPT = ("experiment", "provenance")
_WHAT = {"config": "its files belong to another config than the one given",
         "config.json": "config.json differs from the one the run started with",
         "environment": "the numeric environment differs from the one the run started with",
         "model": "the model differs from the one the run started with"}
_ADVICE = {"config": "give the config it started with, or start over in another directory",
           "config.json": "restore it, or rerun with --overwrite to start over",
           "environment": "continue it under the environment it started with, or rerun with --overwrite",
           "model": "pass the model the run started with, or start over in another directory"}


def _plain(x: Any) -> Any:
    """JSON's view of ``x`` (tuples as lists), so a stored and a computed fingerprint compare equal."""
    return json.loads(json.dumps(x, sort_keys=True))


def read_fingerprint(out: Path) -> dict:
    path = Path(out) / FINGERPRINT
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as err:
        raise ConfigError(f"{safe_path(path)} is unreadable ({type(err).__name__}); the run cannot be checked "
                          f"against what it started with: rerun with --overwrite to start over") from None
    return data


def _write(out: Path, data: dict) -> None:
    Manifest(out).write_json(Path(out) / FINGERPRINT, data)


def start_fingerprint(out: Path, parts: dict) -> None:
    """(A fresh start) Record ``parts`` ({"config", "environment"[, "model"]}); parts recorded earlier by
    this same start (the CLI's, before the library adds the model) are kept unless given again."""
    _write(out, {**read_fingerprint(out), **_plain(parts)})


def check_fingerprint(out: Path, parts: dict, *, from_config_json: bool = False) -> None:
    """(A continued run) Refuse in one line if any of ``parts`` differs from what the run started with;
    parts it never recorded (a run made before fingerprints) are adopted. ``from_config_json``: the
    config was read from the run's config.json (the CLI), so a difference is a hand edit of that file."""
    stored, parts = read_fingerprint(out), _plain(parts)
    for key, value in parts.items():
        if key == "environment" and isinstance(value, dict) and isinstance(stored.get(key), dict):
            value = {k: v for k, v in value.items() if k in stored[key]}    # a run made before a key was recorded
        if key in stored and stored[key] != value:
            keys = diff_keys(stored[key], value) or [key]
            name = "config.json" if key == "config" and from_config_json else key
            raise ConfigError(f"{_WHAT.get(name, name + ' differs')}: {', '.join(keys[:4])} "
                              f"(in {safe_path(out)}); {_ADVICE.get(name, 'rerun with --overwrite')}")
    if any(key not in stored for key in parts):
        _write(out, {**stored, **parts})


def _digest(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def config_fingerprint(cfg) -> str:
    """SHA-256 of the config (fields added since, at their defaults, left out: `comparable`)."""
    return _digest(comparable(to_dict(cfg)))


def fingerprint(cfg, model: Any = None, resolved: Any = None) -> tuple[str, dict]:
    """(`config_fingerprint`, the parts fingerprint.json records): the config, the numeric environment and,
    where the study trains a ``resolved`` `jaxinit.models.Model` (the forgetting study), the user's ``model``
    as `describe_model` sees it (None for the registry's: ``cfg.model`` names it)."""
    config = comparable(to_dict(cfg))
    parts = {"config": config, "environment": numeric_environment()}
    if resolved is not None:
        parts["model"] = describe_model(model, resolved)
    return _digest(config), parts


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def describe_model(model: Any, resolved: Any) -> dict | None:
    """A user's model as the fingerprint sees it: class, dataclass fields (reprs, memory addresses
    dropped) and every parameter / state shape (``jax.eval_shape`` of its init); None for the
    registry's model (``cfg.model`` names it)."""
    if model is None:
        return None
    import jax
    cls = type(model)
    fields = {}
    if dataclasses.is_dataclass(model) and not isinstance(model, type):
        fields = {f.name: _ADDRESS.sub("", repr(getattr(model, f.name, None)))
                  for f in dataclasses.fields(model) if f.name not in ("parent", "name")}
    tree = jax.eval_shape(resolved.init, jax.random.key(0), 1.0)
    shapes = {jax.tree_util.keystr(p): [list(x.shape), str(x.dtype)]
              for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "fields": fields, "shapes": shapes}


def check_experiment(out: Path, name: str) -> None:
    """A run whose run.json names another experiment than ``name`` is refused in one line (its config would be
    read as this one's); a run that names none (made before run.json did) passes."""
    recorded = read_run_json(Path(out) / RUN_JSON).get("experiment")
    if recorded is not None and recorded != name:
        raise ConfigError(f"{safe_path(out)} holds a run of {safe_path(str(recorded))}, not of {name}; choose another "
                          f"--out (or replace that run with --overwrite)")


def record_experiment(out: Path, name: str) -> None:
    """run.json's ``experiment`` = ``name`` (`check_experiment` first), written where it is not yet."""
    check_experiment(out, name)
    path = Path(out) / RUN_JSON
    info = read_run_json(path)
    if info.get("experiment") != name:
        Manifest(out).write_json(path, {**info, "experiment": name})


def write_run_info(out: Path, info: dict) -> None:
    """run.json = ``info``, keeping the experiment's name and the provenance segments earlier parts of the run
    recorded (`KEPT`)."""
    path = Path(out) / RUN_JSON
    old = read_run_json(path)
    Manifest(out).write_json(path, {**info, **{k: old[k] for k in KEPT if k in old}})


def record_written(out: Path, paths: Iterable[Path]) -> list[Path]:
    """Record files another module wrote into the run (with their digests); returns the paths."""
    m, paths = Manifest(out), list(paths)
    for p in paths:
        m.record(p, "file", digest=True)
    return paths
