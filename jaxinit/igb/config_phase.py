"""Config and presets of the theory phase diagrams (`jaxinit.igb.phase_diagram`, `python -m experiments.phase_diagram`).

Presets: ``smoke`` (tests, seconds), ``cpu`` (default: 200 x 200, depth 100, timing; README numbers).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from jaxinit.config import Preset, Presets, TheoryActivation, check_values
from jaxinit.errors import ConfigError

PANELS: tuple[TheoryActivation, ...] = ("relu", "tanh", "relu+maxpool", "tanh+maxpool", "relu+avgpool", "tanh+avgpool")


@dataclass(frozen=True)
class GridConfig:
    n: int = 200
    """points per axis"""
    sigma_w2_max: float = 6.0
    """sigma_w2 grid: sigma_w2_max / n .. sigma_w2_max"""
    sigma_b2_max: float = 0.5
    """sigma_b2 grid: 0 .. sigma_b2_max"""
    depth: int = 100
    """layer whose c and gamma are stored (c_depth, gamma_depth)"""


@dataclass(frozen=True)
class PlotConfig:
    acts: tuple[TheoryActivation, ...] = PANELS
    """one panel per activation (theory.activations)"""
    criterion: Literal["forward", "gradient"] = "forward"
    """phases classified by chi_1~ (forward) or chi_1 (gradient)"""
    eoc_tol: float = 0.01
    """|chi - 1| <= eoc_tol is drawn as the EOC band"""
    layers_act: TheoryActivation = "tanh"
    """activation of the c_l, gamma_l per layer figure"""
    layers_sigma_b2: float = 0.05
    """sigma_b2 of that figure (tanh EOC there: sigma_w2 = 1.760955, docs/theory.md section 4)"""
    layers_sigma_w2: tuple[float, ...] = (1.2, 1.5, 1.760955, 2.2, 3.0, 5.0)
    """sigma_w2 values of that figure, on both sides of the EOC"""
    layers_depth: int = 100
    """layers of that figure"""


@dataclass(frozen=True)
class TimingConfig:
    enabled: bool = True
    """time the vmapped tanh diagram against the per-point numpy/scipy loop"""
    n: int = 200
    """points per axis of the timed diagram"""
    depth: int = 100
    """depth of the timed diagram"""
    baseline_points: int = 150
    """grid points timed with the numpy/scipy loop (extrapolated to the grid)"""
    repeats: int = 3
    """jax first calls (each after clearing the jit cache); the median is reported"""
    seed: int = 0
    """seed of the baseline's point sample"""


@dataclass(frozen=True)
class PhaseDiagramConfig:
    grid: GridConfig = GridConfig()
    """the (sigma_w2, sigma_b2) grid"""
    plot: PlotConfig = PlotConfig()
    """panels and the per-layer figure"""
    timing: TimingConfig = TimingConfig()
    """the speed comparison"""


SMOKE = PhaseDiagramConfig(
    grid=GridConfig(n=12, depth=20),
    plot=PlotConfig(layers_sigma_w2=(1.5, 1.760955, 3.0), layers_depth=20),
    timing=TimingConfig(n=6, depth=5, baseline_points=2, repeats=1))
PRESETS = Presets({
    "cpu": Preset(PhaseDiagramConfig(), "the README's numbers: six panels on a 200 x 200 grid, depth 100, timed "
                                        "against numpy/scipy; ~2 min on 2 cores"),
    "smoke": Preset(SMOKE, "tests, seconds: a 12 x 12 grid, depth 20"),
})


def validate(cfg: PhaseDiagramConfig) -> None:
    """One-line `ConfigError` for values that make no sense."""
    from jaxinit import budget
    check_values(cfg)   # also: activations and criterion among their choices
    g, p, t = cfg.grid, cfg.plot, cfg.timing
    if g.n < 2 or g.depth < 1 or not (g.sigma_w2_max > 0 and math.isfinite(g.sigma_w2_max)):
        raise ConfigError("--grid: n >= 2, depth >= 1 and a finite sigma_w2_max > 0 required")
    if not (g.sigma_b2_max >= 0 and math.isfinite(g.sigma_b2_max)):
        raise ConfigError(f"--grid.sigma_b2_max must be finite and >= 0, got {g.sigma_b2_max}")
    if p.eoc_tol < 0 or p.layers_depth < 1 or p.layers_sigma_b2 < 0 or min(p.layers_sigma_w2) <= 0:
        raise ConfigError("--plot: eoc_tol >= 0, layers_depth >= 1, layers_sigma_b2 >= 0, layers_sigma_w2 > 0")
    if t.n < 1 or t.depth < 1 or t.baseline_points < 1 or t.repeats < 1:
        raise ConfigError("--timing: n, depth, baseline_points and repeats must be >= 1")
    budget.check_phase_grid("grid.n", g.n, len(p.acts))
    if t.enabled:
        budget.check_phase_grid("timing.n", t.n, 1)
