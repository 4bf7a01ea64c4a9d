"""Theory phase diagrams over (sigma_w2, sigma_b2): mean field + Initial Guessing Bias (docs/theory.md 2-5).

Six panels (ReLU, Tanh, ReLU+Max, Tanh+Max, ReLU+Avg, Tanh+Avg; pooling over k = 2 pre-activations):
the phases of the trainability paper (Bassi et al. 2026, `theory.phase.PHASE_LEGEND`), the edge of chaos
(solid: forward criterion, dashed: gradient criterion where they differ) and the neutrality line
c* = 1/2; plus c_l and gamma_l per layer on both sides of the EOC. Library: `jaxinit.igb.phase_diagram`.

    python -m experiments.phase_diagram --out runs/phase_diagram          # cpu: 200 x 200, depth 100, timing
    python -m experiments.phase_diagram --preset smoke --out /tmp/phase   # seconds (tests)
    python -m experiments.phase_diagram --grid.n=100 --timing.enabled=false
    python -m experiments.phase_diagram --replot runs/phase_diagram     # figures from phase_diagram.npz

Writes `phase_diagram.npz` (per activation `<act>__<field>`, `+` spelled `_`: phase, chi1, chi1_tilde,
q_star, c_star, c_depth, gamma_depth on the (sigma_w2, sigma_b2) grid, indexed [i_w, i_b]; eoc_forward,
eoc_gradient, neutrality on the sigma_b2 grid; `layers__c`, `layers__gamma`), `figures/phase_diagram.png`,
`figures/c_gamma_layers.png` and, with timing, `timing.json`. `--resume` recomputes (nothing is long).
Runtime and the speed comparison: README, "Theory: phase diagrams".
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from jaxinit.run import cli
from jaxinit.igb import phase_diagram as pd
from jaxinit.igb.config_phase import PRESETS, PhaseDiagramConfig, validate
from theory import phase


def main(cfg: PhaseDiagramConfig, out: Path, resume: bool) -> None:
    t0 = time.perf_counter()
    result = pd.phase_diagrams(cfg)
    if result.timing is not None:
        t = result.timing
        print(f"tanh {t['n_grid']}x{t['n_grid']} depth {t['depth']}: jax first call {t['jax_first_s']:.2f} s, second "
              f"{t['jax_second_s']:.2f} s; baseline {t['baseline_per_point_s'] * 1e3:.1f} ms/point -> "
              f"{t['baseline_extrapolated_s']:.0f} s; speedup {t['speedup_first_call']:.0f}x ({t['note']})")
    for path in pd.save(result, cfg, out):
        print(f"figure {path}")
    for act in cfg.plot.acts:
        counts = np.bincount(result.arrays[pd.key(act, "phase")].ravel(), minlength=len(phase.PHASE_LEGEND))
        named = ", ".join(f"{phase.PHASE_LEGEND[k]} {int(n)}" for k, n in enumerate(counts) if n)
        print(f"{act:>13}: eoc(sigma_b2=0) {result.arrays[pd.key(act, 'eoc_forward')][0]:.6g}; grid points per "
              f"phase: {named}")
    print(f"phase diagrams done in {time.perf_counter() - t0:.1f} s")


EXPERIMENT = cli.Experiment(name="phase_diagram", doc=__doc__, presets=PRESETS, default="cpu", main=main, validate=validate, replot=pd.replot)


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
