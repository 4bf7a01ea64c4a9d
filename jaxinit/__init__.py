"""jaxinit: initialization scale, memory and bias in deep networks.

For notebooks: `load_run(dir)`, a finished run of any experiment (`jaxinit.run.runs`), and `override(cfg,
"train.epochs=3", ...)`, a config with the command line's overrides (`jaxinit.run.config_parse`). Importing
the package loads nothing else: names are imported on first use.
"""

_LAZY = {"load_run": "jaxinit.run.runs", "Run": "jaxinit.run.runs", "override": "jaxinit.run.config_parse"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jaxinit' has no attribute {name!r}")


__all__ = ["Run", "load_run", "override"]
