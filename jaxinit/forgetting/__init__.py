"""The initialization-memory study (Das et al. 2026, arXiv 2605.29152; docs/theory.md section 6).

Notebook use (every name here is also what `python -m experiments.forgetting` runs):

    from jaxinit import forgetting
    cfg = forgetting.preset("smoke")                # frozen dataclasses: change with dataclasses.replace
    res = forgetting.fit(cfg)                       # in memory: no file is written
    res.summary["spread"]["sgd"]["spread_pp"]       # the summary.json dict; res.rows, res.states too
    res = forgetting.fit(cfg, model=MyFlaxModule()) # a user's flax module, swept over sigma_w

Modules: `config` (presets), `loop` (`fit`: the study's groups, plan and evaluation for the engine,
`jaxinit.train`, which owns members, strategies, the step, checkpoints and the run directory), `memory`,
`history` and `stats` (selection, spread, clocks; pure numpy), `plotting` and `figures` (figures from saved
results), `clocks` / `clock_run` / `clock_test` (the clock sweep), `compare` (paired runs), `interpolation` (depth x
`sigma_w` in fitting the training set, across runs).
The training names are imported on first use, so the analysis and the figures load without jax.
"""
from jaxinit.forgetting.config import PRESETS, AnalysisConfig, ForgettingConfig, preset, validate

_LAZY = {"fit", "Result", "build_sweep"}


def __getattr__(name: str):
    if name in _LAZY:
        from jaxinit.forgetting import loop
        return getattr(loop, name)
    raise AttributeError(f"module 'jaxinit.forgetting' has no attribute {name!r}")


__all__ = ["PRESETS", "AnalysisConfig", "ForgettingConfig", "Result", "build_sweep", "fit", "preset", "validate"]
