"""Provenance of a run: where its results came from and what changes its numbers besides its config.

- `provenance()`: code version (`git_commit`), packages (`versions`), platform and device, for one segment of
  ``run.json``; `append_provenance` / `read_provenance`: run.json's ``provenance`` list, one segment per
  (resumed) part of a run, every earlier segment and every other key kept.
- `numeric_environment()`: what changes a run's numbers besides its config (its fingerprint's environment,
  `jaxinit.run.runinfo`); `numeric_xla_flags`: the ``XLA_FLAGS`` that count.
- `read_run_json`: run.json as a dict ({} without one; one `ConfigError` line if unreadable).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from jaxinit.errors import ConfigError
from jaxinit.run import files
from jaxinit.run.files import safe_path


def git_commit() -> str:
    """The commit of the checkout the code runs from (``+dirty`` if it has local changes), or "unknown"."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict[str, str]:
    from importlib import metadata
    out = {}
    for name in ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def provenance() -> dict[str, Any]:
    """Where a result came from: code version, packages, device (for run.json, never summary.json)."""
    import jax
    device = jax.devices()[0]
    return {"git_commit": git_commit(), "versions": versions(), "python": sys.version.split()[0],
            "platform": jax.default_backend(), "device_kind": device.device_kind,
            "device_count": jax.device_count(), "host": socket.gethostname()}


# XLA flags known to leave computed values alone (dumps, logs, profiles, caches). Every other flag counts: it may
# change the numerics. The host device count is left out here because the count itself is recorded
# (`numeric_environment`'s ``device_count``): members laid over more devices were measured to train to other
# digits (issue 35: an igb_train smoke run resumed on 2 host devices differed from its first metrics line).
_INERT_XLA_FLAGS = ("--xla_dump", "--xla_gpu_dump", "--xla_log", "--xla_hlo_profile",
                    "--xla_force_host_platform_device_count", "--xla_gpu_per_fusion_autotune_cache_dir",
                    "--xla_gpu_cuda_data_dir")


def numeric_xla_flags(text: str) -> list[str]:
    """The flags of an ``XLA_FLAGS`` value that may change results, sorted (order does not matter to XLA)."""
    return sorted(f for f in text.split() if not f.startswith(_INERT_XLA_FLAGS))


def numeric_environment() -> dict[str, Any]:
    """What changes a run's numbers besides its config, for its fingerprint: 64-bit mode, the default
    matmul precision (``JAX_DEFAULT_MATMUL_PRECISION`` included: jax reads it into its config) and PRNG, the
    platform, device kind and count and the process count, numerics-changing ``XLA_FLAGS`` and the jax / jaxlib
    versions. Equal dicts promise the same arithmetic; a resume under another one must be refused (`diff_keys`
    names what changed)."""
    import jax
    ver = versions()
    precision = jax.config.jax_default_matmul_precision
    return {"jax": ver["jax"], "jaxlib": ver["jaxlib"], "x64": bool(jax.config.jax_enable_x64),
            "default_matmul_precision": None if precision is None else str(precision),
            "default_prng_impl": str(jax.config.jax_default_prng_impl),
            "threefry_partitionable": bool(jax.config.jax_threefry_partitionable),
            "platform": jax.default_backend(), "device_kind": jax.devices()[0].device_kind,
            "device_count": jax.device_count(), "process_count": jax.process_count(),
            "xla_flags": numeric_xla_flags(os.environ.get("XLA_FLAGS", ""))}


def read_provenance(run_json: Path) -> list[dict]:
    """The provenance segments of run.json, oldest first ([] without one; the old single dict is one segment)."""
    info = read_run_json(run_json)
    prov = info.get("provenance")
    return [] if prov is None else [prov] if isinstance(prov, dict) else list(prov)


def append_provenance(run_json: Path, info: dict,
                      write: Callable[[Path, Any], None] = files.write_json) -> list[dict]:
    """Append one segment (this process's part of the run) to run.json's ``provenance`` list, keeping
    every earlier segment and every other key; returns the list. ``write`` is the writer to use
    (`Manifest.write_json` inside a run with a manifest)."""
    data = read_run_json(run_json)
    segments = read_provenance(run_json) + [info]
    write(Path(run_json), {**data, "provenance": segments})
    return segments


def read_run_json(run_json: Path) -> dict:
    """run.json as a dict: {} where there is none; an unreadable one is one `ConfigError` line (its provenance
    would be lost if it were overwritten)."""
    path = Path(run_json)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("provenance", []), (dict, list)):
            raise ValueError("not a JSON object with a provenance list")
    except (OSError, ValueError) as err:
        raise ConfigError(f"{safe_path(path)} is not readable ({type(err).__name__}); its earlier provenance "
                          f"would be lost: move it away to start a new one") from None
    return data
