"""The process environment a run starts under, checked before jax reads it: one line instead of a traceback or
XLA's abort.

- `import_jax`: ``import jax`` with the ``JAX_*`` variables it reads at import (``JAX_DEFAULT_MATMUL_PRECISION=bogus``
  is a ValueError raised while jax is imported, before any entrypoint could catch it); `experiments/__init__.py`
  calls it, so ``python -m experiments.<name>`` prints one line and exits 2.
- `check_xla_flags`: XLA aborts the process (a C++ log line, exit 1) on a flag it does not know, when the backend
  starts. Every ``XLA_FLAGS`` entry must read ``--name[=value]`` and name a flag XLA defines: XLA registers each
  flag under its literal name, so a name that occurs in none of the XLA binaries jax loads (jaxlib's, and any
  PJRT plugin's) is certainly unknown (a name found there might still be refused by XLA; that is rare).
- `backend_errors`: a ``JAX_PLATFORMS`` this machine lacks is one line.

Imports nothing of jax at module level.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import mmap
import os
import re
import sys
from pathlib import Path

from jaxinit.errors import ConfigError
from jaxinit.run.files import safe_path

_FLAG = re.compile(r"--(xla_[A-Za-z0-9_]+)(=.*)?")      # XLA defines its flags under xla_ only
_JAX_FLAG = re.compile(r"for JAX flag (\w+)")


def import_jax() -> None:
    """``import jax``; a ``JAX_*`` environment value jax refuses at import is one line and exit status 2 when the
    process runs an experiment (``python -m experiments.<name>``), a `ConfigError` otherwise."""
    try:
        import jax  # noqa: F401
    except ValueError as err:
        found = _JAX_FLAG.search(str(err))
        if found is None:
            raise
        var = found.group(1).upper()
        message = (f"{var}={safe_path(os.environ.get(var, ''))}: jax refuses it ({str(err).splitlines()[0][:120]}); "
                   f"unset {var} or give a value jax knows")
        if sys.argv[:1] == ["-m"]:       # python -m experiments.NAME, while the package is imported
            print(f"error: {message}", file=sys.stderr)
            raise SystemExit(2) from None
        raise ConfigError(message) from None


def check_xla_flags(text: str | None = None) -> None:
    """Refuse (one `ConfigError` line) an ``XLA_FLAGS`` entry that is not ``--name[=value]`` or names no flag of XLA
    (module docstring); ``text`` defaults to the environment's ``XLA_FLAGS``."""
    text = os.environ.get("XLA_FLAGS", "") if text is None else text
    for entry in text.split():
        match = _FLAG.fullmatch(entry)
        if match is None:
            raise ConfigError(f"XLA_FLAGS: {safe_path(entry)} is not an XLA flag (they read --xla_name=value); "
                              f"fix or unset XLA_FLAGS")
        if not known_to_xla(match.group(1)):
            raise ConfigError(f"XLA_FLAGS: {safe_path(entry)} names no flag this jaxlib's XLA defines (XLA would "
                              f"abort); fix or unset XLA_FLAGS")


@functools.lru_cache(maxsize=None)
def known_to_xla(name: str) -> bool:
    """Whether the flag ``name`` occurs, as a whole C string, in an XLA binary jax loads; True where none is found
    (nothing to check against)."""
    binaries = xla_binaries()
    if not binaries:
        return True
    needle = name.encode() + b"\0"      # a string literal's end: a longer name that merely contains it does not count
    for path in binaries:
        with contextlib.suppress(OSError, ValueError), open(path, "rb") as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data.find(needle) >= 0:
                return True
    return False


@functools.lru_cache(maxsize=1)
def xla_binaries() -> tuple[Path, ...]:
    """The shared libraries of jaxlib and of the installed PJRT plugins (``jax_plugins.*``, ``libtpu``), largest
    first (XLA itself is the largest)."""
    found: list[Path] = []
    for package in ("jaxlib", "jax_plugins", "libtpu"):
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(package)
            for root in (spec.submodule_search_locations or []) if spec else []:
                found += Path(root).rglob("*.so")
    return tuple(sorted({p for p in found if p.is_file()}, key=lambda p: -p.stat().st_size))


@contextlib.contextmanager
def backend_errors():
    """The first uses of the backend: a platform this machine lacks (``JAX_PLATFORMS=gpu`` on a CPU) is one line."""
    try:
        yield
    except RuntimeError as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise ConfigError(f"JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!s}: no such backend here ({first}); "
                          f"unset JAX_PLATFORMS or name one this machine has") from None
