"""jax's persistent compilation cache, on by default for the experiments: a repeated or resumed run loads its
compiled programs (on a GPU, autotuning included) from disk instead of compiling them again.

    JAXINIT_COMPILE_CACHE=DIR    python -m experiments.NAME ...   # the cache in DIR
    JAXINIT_COMPILE_CACHE=off    python -m experiments.NAME ...   # no cache (also 0, false, no, none)

Without the variable the folder is one jax was already given (``JAX_COMPILATION_CACHE_DIR``, as the test
suite sets it), else ``$XDG_CACHE_HOME/jaxinit/xla`` (``~/.cache/jaxinit/xla``). jax caches only programs
whose compilation took at least ``jax_persistent_cache_min_compile_time_secs`` (its default, or
``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``). `enable` must run before the process compiles anything:
jax decides once, at its first compilation, whether a cache is used. Nothing here imports the run
plumbing; `jaxinit.run.cli` calls `enable` first thing.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

ENV = "JAXINIT_COMPILE_CACHE"
OFF = ("0", "off", "false", "no", "none")


def default_dir(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/jaxinit/xla``, or ``~/.cache/jaxinit/xla`` without that variable."""
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "jaxinit" / "xla"


def chosen_dir(env: Mapping[str, str] = os.environ, jax_dir: str | None = None) -> Path | None:
    """The folder `enable` uses: ``JAXINIT_COMPILE_CACHE`` (None where it says off), else ``jax_dir`` (the
    folder jax already has), else `default_dir`."""
    value = env.get(ENV)
    if value is not None and value.strip().lower() in OFF:
        return None
    if value:
        return Path(value).expanduser()
    return Path(jax_dir) if jax_dir else default_dir(env)


def enable(env: Mapping[str, str] = os.environ) -> str | None:
    """Point jax's persistent compilation cache at `chosen_dir` (or turn it off); returns the folder in use,
    None when off. A folder that cannot be created costs the cache, not the run (one line on stderr)."""
    import jax
    folder = chosen_dir(env, jax.config.jax_compilation_cache_dir)
    if folder is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        print(f"warning: no compilation cache ({folder}: {err.strerror or err}); set {ENV}=DIR or {ENV}=off",
              file=sys.stderr)
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    return str(folder)


def in_use() -> str | None:
    """The cache folder jax is configured with (None: none), for run.json."""
    import jax
    if not jax.config.jax_enable_compilation_cache:
        return None
    return jax.config.jax_compilation_cache_dir or None
