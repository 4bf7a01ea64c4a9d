"""Phase points of the trainability paper (Bassi et al. 2026), placed by the theory's own solvers.

At a given sigma_b2 (THEORY.md section 5): ordered-deep = `ordered_factor` x EOC; EOC = `theory.meanfield.eoc`
(forward criterion; for the ReLU family the whole line sigma_w2 = 2 is drawn as EOC, while the paper
calls only sigma_b2 = 0 the EOC); bounded activations: prejudice = geometric mean of the EOC and the
neutrality line (c* = 1/2), neutrality = `neutral_factor` x the neutrality line; unbounded ones (no
neutral region): chaotic-deep = `chaotic_factor` x EOC. `theory_phase_names` gives the theory's own
label of any point, to check the placement.
"""
from __future__ import annotations

import math

import numpy as np

PHASES = ("ordered-deep", "EOC", "prejudice", "neutrality", "chaotic-deep")


def phase_points(act: str, sigma_b2: float, ordered_factor: float = 0.75, chaotic_factor: float = 1.5,
                 neutral_factor: float = 1.5) -> list[tuple[str, float]]:
    """(phase name, sigma_w2) at `sigma_b2`, from `theory.meanfield.eoc` and `neutrality_line`."""
    from theory import meanfield as mf
    eoc = float(mf.eoc(sigma_b2, act))
    points = [("ordered-deep", ordered_factor * eoc), ("EOC", eoc)]
    neutral = float(mf.neutrality_line(sigma_b2, act))
    if math.isfinite(neutral) and neutral > eoc:
        points += [("prejudice", math.sqrt(eoc * neutral)), ("neutrality", neutral_factor * neutral)]
    else:   # unbounded activations: no neutral region, the chaotic side stays deeply prejudiced
        points.append(("chaotic-deep", chaotic_factor * eoc))
    return points


def theory_phase_names(act: str, sigma_w2, sigma_b2, depth: int) -> list[str]:
    """The theory's label (`theory.phase.PHASE_LEGEND`) of each (sigma_w2, sigma_b2) point."""
    from theory import phase
    names = []
    for w, b in zip(np.atleast_1d(sigma_w2), np.atleast_1d(sigma_b2)):
        code = int(np.asarray(phase.phase_diagram(act, np.array([w]), np.array([b]), depth)["phase"]).ravel()[0])
        names.append(phase.PHASE_LEGEND[code])
    return names


def backward_factor(act: str, sigma_w2, sigma_b2, n_layers: int) -> np.ndarray:
    """chi_1^n_layers: the mean-field factor by which E[delta^2] shrinks (< 1) or grows over `n_layers`."""
    from theory import meanfield as mf
    return np.asarray(mf.chi1(np.asarray(sigma_w2, float), np.asarray(sigma_b2, float), act), float) ** n_layers


def backward_product(act: str, sigma_w2, sigma_b2, depth: int) -> np.ndarray:
    """The mean-field `E|delta_1|^2 / E|delta_L|^2` of a depth-`depth` net along its actual `q_l`
    (`theory.meanfield.backward_product`, inputs with `q0 = 1`): what a measured backward factor is compared
    with. `backward_factor` above (`chi_1^(L-1)` at `q*`) ignores the transient of `q_l`; for tanh it is
    1.4-2x this product at the phase points (README, "Theory")."""
    from theory import meanfield as mf
    return np.asarray(mf.backward_product(np.asarray(sigma_w2, float), np.asarray(sigma_b2, float), act, depth), float)
