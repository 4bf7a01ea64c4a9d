"""The project's error types: a leaf every module may import (it imports nothing of the project).

`ConfigError` is bad user input -- a flag, a config value, a file a run reads or may write. The
entrypoints (`jaxinit.run.cli`) print it as one line and exit with status 2, so its message is one line
that names what is wrong and what to do.
"""
from __future__ import annotations


class ConfigError(ValueError):
    """Bad user input: printed as one line, exit status 2 (see `jaxinit.run.cli`)."""
