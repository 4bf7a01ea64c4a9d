"""jaxinit: initialization scale, memory and bias in deep networks.

`load_run(dir)`: a finished run of any experiment for notebooks (`jaxinit.run.runs`). Importing the package
loads nothing else: names are imported on first use.
"""

_LAZY = {"load_run": "jaxinit.run.runs", "Run": "jaxinit.run.runs"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jaxinit' has no attribute {name!r}")


__all__ = ["Run", "load_run"]
