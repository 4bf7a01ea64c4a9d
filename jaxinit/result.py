"""What every experiment's library call returns: one type, in memory (with a directory, the same is on disk).

    res = forgetting.fit(cfg)                      # or igb.train_phases, igb.probe_init, igb.phase_diagrams,
    res.summary, res.rows, res.timing              # clock_run.run: the fields an experiment does not have are None
    res.arrays                                     # named numpy arrays beside the rows (per case, per point)

Light on purpose (no jax): the theory-only experiments return it too.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class Result(NamedTuple):
    """``summary``: the summary.json dict (None on processes other than 0, and for the phase diagrams, which
    write none); ``rows``: the metrics rows; ``timing``: run.json's timing; ``states``: {group: member-stacked
    final TrainState} of a training run; ``sweep``: its `jaxinit.train.engine.Sweep`; ``arrays``: named numpy
    arrays a study keeps beside its rows (igb_train and igb_init: per case; phase_diagram: its panels; the
    clock sweep: each point's horizon entries)."""
    summary: dict | None
    rows: list[dict] | None
    timing: dict | None
    states: dict[str, Any] | None = None
    sweep: Any = None
    arrays: dict[str, Any] | None = None


__all__ = ["Result"]
