"""The design sub-config of the clock sweep (`ClocksConfig.design`): replication over data splits and the
verdicts `jaxinit.forgetting.design` draws from the points (pairs, batch series, tuned rates, the clock test
over trained horizons)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class DesignConfig:
    splits: int = 1
    """data splits every point runs on (data.split_seed + 0 .. splits-1); the split is a random effect of the
    design's intervals (jaxinit.forgetting.design_stats)"""
    rule: Literal["best_val", "best_val_interpolated", "final"] = "final"
    """the predictor of the clock verdict: final = the trajectory's predictor at each horizon"""
    trained: float = 0.99
    """a horizon enters the clock verdict when every member's train accuracy at that predictor is >= this"""
    pairs: tuple[str, ...] = ()
    """paired contrasts label=pointA@epoch/pointB@epoch (B - A over shared replicates)"""
    evals: int = 0
    """0: every point evaluates every train.eval_every epochs; N: a point of E epochs every max(that, ~E / N)
    epochs (1, 2, 5, 10, 20, 40), so a long point costs ~N evaluations"""
    horizons: tuple[int, ...] = ()
    """epochs summarised in every point besides the grid of clock_test.HORIZON_GRID (where evaluated)"""
    batch_series: tuple[str, ...] = ()
    """label=pointA@epoch,pointB@epoch,...: cells along batch size; the per-replicate slope against log2 b"""
    tune: bool = False
    """per family, the learning rate with the best mean validation accuracy at the selected epochs is its
    tuned rate (each family its own from the same grid)"""
