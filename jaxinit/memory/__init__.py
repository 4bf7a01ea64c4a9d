"""The joined study (issue 22): does the initial guessing bias survive training? Plain MLPs initialised across the
phase diagram, both instruments (the forgetting study's at the selected step, the IGB study's before and after
training) on every member, on the one engine.

Notebook use: ``fit(preset("smoke"))`` trains in memory and returns a `jaxinit.result.Result` whose ``summary``
is the summary.json dict; ``fit(cfg, workdir)`` writes the run directory.
"""
from __future__ import annotations

from jaxinit.memory.config import PRESETS, MemoryPhasesConfig


def preset(name: str) -> MemoryPhasesConfig:
    """The named preset's config (`PRESETS`: smoke, cpu, paper)."""
    return PRESETS.pick(name)


def fit(cfg: MemoryPhasesConfig, workdir=None, *, resume: bool = False, progress: bool = True):
    """`jaxinit.memory.study.fit`: the whole study; no file is written when ``workdir`` is None."""
    from jaxinit.memory.study import fit as _fit
    return _fit(cfg, workdir, resume=resume, progress=progress)


__all__ = ["PRESETS", "MemoryPhasesConfig", "preset", "fit"]
