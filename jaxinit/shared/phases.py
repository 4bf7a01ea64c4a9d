"""Phase points the IGB and joined studies train (the trainability study of Bassi et al. 2026), placed and labelled
by the theory's own solvers.

Placement at a given sigma_b2 (docs/theory.md section 5), by activation family:
- bounded (tanh): ordered-deep = `ordered_factor` x EOC; EOC = `theory.meanfield.eoc`; prejudice = geometric
  mean of the EOC and the neutrality line (c* = 1/2); neutrality = `neutral_factor` x the neutrality line.
- unbounded (ReLU): ordered-deep, EOC (the whole line sigma_w2 = 2, while the paper calls only sigma_b2 = 0
  the EOC) and chaotic-deep = `chaotic_factor` x EOC (no neutral region).
- pooled ReLU (two criteria, docs/theory.md section 2): ordered-deep = `ordered_factor` x the forward EOC
  (chi_1~ = 1), EOC = the forward EOC, between = their geometric mean with the gradient EOC (chi_1 = 1; the
  band `theory.phase` labels vanishing-gradient deep prejudice), gradient EOC, chaotic-deep =
  `chaotic_factor` x the gradient EOC. Pooled ReLU has no critical point in c (xi_c = 5.2 / 3.6 layers
  everywhere): the study asks whether depth beyond a few xi_c fails at every sigma_w2.
- optional `eoc_factors` f: points f x EOC named ``"<f>xEOC"`` (the L / xi_c sweep).

`theory.phase.point_theory` labels any list of points in one call per theory function: the phase
(`theory.phase.phase_points`), chi_1^(L-1) at q*, the mean-field backward product along the actual q_l
(`theory.meanfield.backward_product`, what a measured backward factor is compared with) and xi_c
(`theory.meanfield.depth_scales`, Schoenholz et al. 2017) with L / xi_c, the organising variable.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from jaxinit.errors import ConfigError

PHASES = ("ordered-deep", "EOC", "between", "gradient EOC", "prejudice", "neutrality", "chaotic-deep")
FAMILY_PHASES = {"bounded": ("ordered-deep", "EOC", "prejudice", "neutrality"),
                 "unbounded": ("ordered-deep", "EOC", "chaotic-deep"),
                 "pooled": ("ordered-deep", "EOC", "between", "gradient EOC", "chaotic-deep")}


def family(act: str) -> str:
    """'pooled' (pooled ReLU: two edges of chaos), 'bounded' (a neutral region) or 'unbounded'."""
    from theory.activations import get
    a = get(act)
    return "pooled" if a.homogeneous and a.nodes > 1 else "bounded" if a.bounded else "unbounded"


def check_names(act: str, names) -> None:
    """One-line `ConfigError` when ``names`` (non-empty) holds no phase of ``act``'s family."""
    own = FAMILY_PHASES[family(act)]
    if names and not set(names) & set(own):
        raise ConfigError(f"{act}: none of --phases.names={list(names)} is a phase of this activation "
                          f"({', '.join(own)})")


def phase_points(act: str, sigma_b2: float, ordered_factor: float = 0.75, chaotic_factor: float = 1.5,
                 neutral_factor: float = 1.5, eoc_factors: tuple[float, ...] = ()) -> list[tuple[str, float]]:
    """(name, sigma_w2) of every point at `sigma_b2` (module docstring), in the order of `PHASES`, then the
    `eoc_factors` points; from `theory.meanfield.critical_lines` (both EOCs and the neutrality line)."""
    from theory import meanfield as mf
    lines = {k: float(v) for k, v in mf.critical_lines(sigma_b2, act).items()}
    eoc, grad, neutral = lines["eoc_forward"], lines["eoc_gradient"], lines["neutrality"]
    points = [("ordered-deep", ordered_factor * eoc), ("EOC", eoc)]
    if not math.isclose(eoc, grad, rel_tol=1e-9):       # pooled ReLU: two edges of chaos
        points += [("between", math.sqrt(eoc * grad)), ("gradient EOC", grad), ("chaotic-deep", chaotic_factor * grad)]
    elif math.isfinite(neutral) and neutral > eoc:      # bounded: a neutral region beyond the prejudiced one
        points += [("prejudice", math.sqrt(eoc * neutral)), ("neutrality", neutral_factor * neutral)]
    else:                                               # unbounded: the chaotic side stays deeply prejudiced
        points.append(("chaotic-deep", chaotic_factor * eoc))
    return points + [(f"{f:g}xEOC", f * eoc) for f in eoc_factors]


def phase_rows(act: str, sigma_b2: float, seeds: int, names=(), ordered_factor: float = 0.75,
               chaotic_factor: float = 1.5, neutral_factor: float = 1.5,
               eoc_factors: tuple[float, ...] = ()) -> list[tuple[str, float, float, int]]:
    """(role, sigma_w2, sigma_b2, seeds) of the points `phase_points` places at ``sigma_b2``: the phases in ``names``
    (empty: every phase of the activation), then every ``<f>xEOC`` point; one-line `ConfigError` when none is left."""
    rows = [(name, sw, sigma_b2, seeds) for name, sw in
            phase_points(act, sigma_b2, ordered_factor, chaotic_factor, neutral_factor, eoc_factors)
            if not names or name in names or name.endswith("xEOC")]
    if not rows:
        raise ConfigError(f"{act}: none of --phases.names={list(names)} is a phase of this activation")
    return rows


def case_points(act: str, depth: int, rows) -> dict[str, np.ndarray]:
    """The points one case trains, from (role, sigma_w2, sigma_b2, seeds) ``rows`` (`phase_rows`, then any grid of
    the study's), with their theory (`theory.phase.point_theory`) and reported ``seeds``."""
    role, sw, sb, seeds = zip(*rows)
    sw, sb = np.array(sw, float), np.array(sb, float)
    from theory import phase
    return {"role": np.array(role), "sigma_w2": sw, "sigma_b2": sb, "seeds": np.array(seeds, np.int32),
            **phase.point_theory(act, depth, sw, sb)}


def theory_phase_names(act: str, sigma_w2, sigma_b2, depth: int) -> list[str]:
    """The theory's label (`theory.phase.PHASE_LEGEND`) of each (sigma_w2, sigma_b2) point."""
    from theory import phase
    return phase.point_theory(act, depth, sigma_w2, sigma_b2)["theory_phase"].tolist()


class Case(NamedTuple):
    """One trained case (``"<act>__d<depth>__<optimizer>"``): its network, optimizer, points (`case_points`) and,
    where it trains a grid, the theory diagram over it (`theory.phase.diagram_around`; else empty)."""
    act: str
    depth: int
    optimizer: str
    width: int
    points: dict
    diagram: dict
