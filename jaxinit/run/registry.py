"""The experiments, in one list: every ``python -m experiments.<name>`` by its name.

An experiment on the shared command line (`jaxinit.run.cli.Experiment`) must be listed here; its run
directory's run.json records the name (``experiment``, written when the run starts), and `load_run`
(`jaxinit.run.runs`) reads it back. Runs made before run.json recorded it are told apart by config.json's
top-level sections (`experiment_of`). tests/test_registry.py holds this list against experiments/*.py.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class Entry(NamedTuple):
    name: str
    """``python -m experiments.<name>``, and the ``experiment`` of its runs"""
    what: str
    """one line: what it computes"""
    sections: frozenset[str] = frozenset()
    """config.json sections that tell its runs apart (runs made before run.json named the experiment)"""
    run_dir: bool = True
    """writes a run directory (config.json, run.json) that `load_run` reads"""


EXPERIMENTS = (
    Entry("forgetting", "initialization memory: spread over sigma_w per optimizer, forgetting clocks",
          frozenset({"sweep", "analysis"})),
    Entry("clocks", "the clock sweep: spread against each optimizer family's own clock",
          frozenset({"sweep", "analysis", "clocks"})),
    Entry("phase_diagram", "mean-field phase diagrams over (sigma_w2, sigma_b2)", frozenset({"grid", "plot", "timing"})),
    Entry("igb_init", "finite networks at init against mean-field and IGB theory", frozenset({"probe"})),
    Entry("igb_train", "training across the phases at each point's own learning rate", frozenset({"phases", "grid"})),
    Entry("igb_rescale", "rescaling a trained net to a backward factor, then fine-tuning",
          frozenset({"pretrain", "finetune", "rescale"})),
    Entry("memory_phases", "the forgetting and IGB instruments on nets initialised across the phases",
          frozenset({"phases"})),
    Entry("benchmark", "members per second of the train step, member strategies side by side", frozenset({"bench"})),
    Entry("accel_check", "the staged accelerator check (accel.json; no run directory)", run_dir=False),
)
NAMES = tuple(e.name for e in EXPERIMENTS)


def entry(name: str) -> Entry:
    """The experiment ``name``; KeyError naming the list if it is not registered."""
    for e in EXPERIMENTS:
        if e.name == name:
            return e
    raise KeyError(f"experiment {name!r} is not in jaxinit.run.registry.EXPERIMENTS ({', '.join(NAMES)})")


def experiment_of(config: Any, run_info: Any) -> str | None:
    """Which experiment wrote a run: run.json's ``experiment`` where recorded; else the entry whose
    `Entry.sections` config.json holds, the one with the most of them where several do; None if none does."""
    if isinstance(run_info, dict) and isinstance(run_info.get("experiment"), str):
        return run_info["experiment"]
    keys = set(config) if isinstance(config, dict) else set()
    found = [e for e in EXPERIMENTS if e.sections and e.sections <= keys]
    return max(found, key=lambda e: len(e.sections)).name if found else None
