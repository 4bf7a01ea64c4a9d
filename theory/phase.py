"""Phases of the trainability paper and vectorised phase diagrams over (sigma_w2, sigma_b2).

docs/theory.md section 5 (Bassi et al. 2026, arXiv 2505.12096), with `chi` the criterion the diagram is
classified by: the forward criterion `chi_1~` (default) or the gradient criterion `chi_1` (equal for
every activation but pooled ReLU, see `theory.meanfield`):

| code | phase                      | condition                                               |
|------|----------------------------|---------------------------------------------------------|
| 0    | ordered deep prejudice     | `chi < 1` (then `c* = 1`): persistent bias, vanishing gradients |
| 1    | transient deep prejudice   | `|chi - 1| <= eoc_tol`: edge of chaos, bias absorbed early |
| 2    | chaotic deep prejudice     | `chi > 1` and `c* = 1` (unbounded activations)          |
| 3    | prejudice                  | `chi > 1` and `1/2 < c* < 1` (bounded activations)      |
| 4    | neutrality                 | `chi > 1` and `c* <= 1/2` (gamma <= 1)                  |
| 5    | vanishing-gradient deep prejudice | `chi_1~ >= 1 > chi_1`, outside the EOC band (pooled ReLU only) |

Code 5 is the band between the two criteria of pooled ReLU (`4 pi/(3 pi + 2) = 1.0999 < sigma_w2 < 4/3`
for MaxPool, `4 pi/(pi + 1) = 3.0342 < sigma_w2 < 4` for AvgPool). There the variance grows without bound
(`chi_1~ >= 1`, `q* = inf`) while the backpropagated signal vanishes (`chi_1 = sigma_w2 E|grad psi|^2 < 1`),
so neither "chaotic" (code 2 would say exploding gradients under the forward criterion) nor "ordered"
(code 0 under the gradient criterion, which also means a finite `q*`) describes it; it is labelled by the
gradient `chi_1` whichever criterion classifies the rest of the diagram.

Pooled ReLU has no critical point in `c` at all: `psi` is positively homogeneous, so where `q*` is
unbounded (every `sigma_w2` above the forward criterion, and every `sigma_w2` at `sigma_b2 = 0`) the
slope of the correlation map at `c = 1` is `G(1)/K(1)` (unit-variance `grad_kernel` / `kernel`),
whatever `sigma_w2` is: `0.75 / (3/4 + 1/(2 pi)) = 0.8249` for MaxPool, `(1/4) / (1/4 + 1/(4 pi)) = 0.7585`
for AvgPool, i.e. `xi_c = 5.196` and `3.619` layers at both "edges of chaos" and everywhere beyond them
(below the forward criterion with `sigma_b2 > 0` the slope is `chi_1`, smaller still). `c` reaches 1
exponentially: `1 - c_100 = 4.5e-10` (MaxPool) and `2.5e-13` (AvgPool) at every `sigma_w2` at
`sigma_b2 = 0`. Plain ReLU has `G(1)/K(1) = 1` (`xi_c = inf`, the algebraic approach of docs/theory.md section 2).

The edge of chaos is a line; on a grid it is the band `|chi - 1| <= eoc_tol` (default 0.01, about
one cell of a 200-point grid over sigma_w2 in (0, 6]); figures draw the exact curve from
`meanfield.eoc` on top.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from theory import meanfield as mf
from theory import pointwise as pw
from theory.activations import Activation, get
from theory.igb import gamma_of_c
from theory.x64 import f64, scoped

ORDERED_DEEP, TRANSIENT_DEEP, CHAOTIC_DEEP, PREJUDICE, NEUTRALITY, VANISHING_GRADIENT_DEEP = range(6)
PHASE_LEGEND = {
    ORDERED_DEEP: "ordered deep prejudice",
    TRANSIENT_DEEP: "transient deep prejudice (EOC)",
    CHAOTIC_DEEP: "chaotic deep prejudice",
    PREJUDICE: "prejudice",
    NEUTRALITY: "neutrality",
    VANISHING_GRADIENT_DEEP: "vanishing-gradient deep prejudice (chi1~ >= 1 > chi1)",
}
DEFAULT_EOC_TOL = 0.01
BATCH = 8192   # grid points vmapped at once (lax.map batches): bounds memory, keeps vectorisation


@scoped
def classify(chi, c_star, eoc_tol: float = DEFAULT_EOC_TOL, chi1_tilde=None, chi1=None):
    """Integer phase codes (see `PHASE_LEGEND`) from the criterion `chi` and the fixed point `c*`.

    `chi` is the criterion the diagram is classified by (`chi1_tilde` or `chi1`). Given both criteria
    (`chi1_tilde`, `chi1`), points with `chi1_tilde >= 1 > chi1` outside the EOC band of `chi` get code 5
    (`VANISHING_GRADIENT_DEEP`) instead of 2 or 0; without them codes 0-4 only.
    """
    chi, c_star = jnp.asarray(chi), jnp.asarray(c_star)
    deep = jnp.where(chi < 1.0, ORDERED_DEEP, CHAOTIC_DEEP)
    shallow = jnp.where(c_star > 0.5, PREJUDICE, NEUTRALITY)
    code = jnp.where((chi < 1.0) | (c_star >= 1.0), deep, shallow)
    if chi1_tilde is not None and chi1 is not None:
        band = (jnp.asarray(chi1_tilde) >= 1.0) & (jnp.asarray(chi1) < 1.0)   # q* = inf, gradients vanish
        code = jnp.where(band, VANISHING_GRADIENT_DEEP, code)
    return jnp.where(jnp.abs(chi - 1.0) <= eoc_tol, TRANSIENT_DEEP, code).astype(jnp.int32)


def _point(sw, sb, act: Activation, depth: int, criterion: str, eoc_tol: float):
    q_star = pw.q_star(sw, sb, act)
    c_star = pw.c_star(q_star, sw, sb, act)
    chi1 = pw.chi1(sw, q_star, act)
    chi1_tilde = pw.chi1_tilde(sw, q_star, act)
    c_depth = pw.last_c(sw, sb, act, depth)
    chi = chi1_tilde if criterion == "forward" else chi1
    return {"chi1": chi1, "chi1_tilde": chi1_tilde, "q_star": q_star, "c_star": c_star,
            "c_depth": c_depth, "gamma_depth": gamma_of_c(c_depth),
            "phase": classify(chi, c_star, eoc_tol, chi1_tilde, chi1)}


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _diagram(act_name: str, depth: int, criterion: str, eoc_tol: float, sw, sb):
    """vmapped `_point` over flat grids in batches of `BATCH` (the caller pads to a multiple of it)."""
    act = get(act_name)
    fn = jax.vmap(functools.partial(_point, act=act, depth=depth, criterion=criterion, eoc_tol=eoc_tol))
    if sw.shape[0] <= BATCH:
        return fn(sw, sb)
    chunks = lambda x: x.reshape(-1, BATCH)
    out = lax.map(lambda xs: fn(*xs), (chunks(sw), chunks(sb)))
    return jax.tree.map(lambda x: x.reshape(-1), out)


def _pad(x):
    """Pad a flat grid (by repeating its last point) to a multiple of BATCH when it exceeds BATCH."""
    if x.size <= BATCH:
        return x
    return jnp.concatenate([x, jnp.repeat(x[-1:], (-x.size) % BATCH)])


@scoped
def phase_diagram(act: str, sigma_w2, sigma_b2, depth: int, eoc_tol: float = DEFAULT_EOC_TOL,
                  criterion: str = "forward") -> dict:
    """Mean-field and IGB quantities on the grid `sigma_w2 x sigma_b2` (1-D grids), vectorised.

    Returns float64 jax arrays (`phase`: int32) of shape `(len(sigma_w2), len(sigma_b2))` (`[i, j]` is
    `(sigma_w2[i], sigma_b2[j])`): `chi1`, `chi1_tilde`, `q_star`, `c_star`, `c_depth` and
    `gamma_depth` (`c` and `gamma = c/(1-c)` at layer `depth` of `propagate`, inputs with
    `q0 = 1`, `c0 = 0`), `phase` (int codes, `PHASE_LEGEND`), plus the 1-D grids. Classification
    uses `chi1_tilde` (`criterion="forward"`, docs/theory.md section 2) or `chi1` (`"gradient"`); the band
    `chi1_tilde >= 1 > chi1` of pooled ReLU is code 5 under both (module docstring).
    One jitted program per (act, depth, criterion, eoc_tol): the grid points are vmapped in batches
    of `BATCH`, and changing the grid values does not recompile. The grids may be jax arrays or
    tracers; under `jax.jit`, `act`, `depth`, `eoc_tol` and `criterion` are static.
    """
    mf.check_criterion(criterion)    # an unknown `act`: `get`'s ValueError, raised while `_diagram` is traced
    if int(depth) < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    w, b = f64(sigma_w2).reshape(-1), f64(sigma_b2).reshape(-1)
    ww, bb = jnp.meshgrid(w, b, indexing="ij")
    out = _diagram(act, int(depth), criterion, float(eoc_tol), _pad(ww.reshape(-1)), _pad(bb.reshape(-1)))
    result = {k: v[:ww.size].reshape(ww.shape) for k, v in out.items()}
    result["sigma_w2"], result["sigma_b2"] = w, b
    return result


def _trained_point(sw, sb, act: Activation, depth: int):
    """`_point` plus what a trained point is compared with: `xi_c` (`meanfield.depth_scales`) and the mean-field
    backward product along the actual `q_l` for inputs with `q0 = 1` (`meanfield.backward_product`)."""
    out = _point(sw, sb, act, depth, "forward", DEFAULT_EOC_TOL)
    out["xi_c"] = pw.depth_scales(out["q_star"], out["c_star"], sw, sb, act)[1]
    out["backward_product"] = pw.backward_product(sw, sb, jnp.ones_like(sw), act, depth)
    return out


@functools.partial(jax.jit, static_argnums=(0, 1))
def _trained_points(act_name: str, depth: int, sw, sb):
    return jax.vmap(functools.partial(_trained_point, act=get(act_name), depth=depth))(sw, sb)


@scoped
def phase_points(act: str, sigma_w2, sigma_b2, depth: int) -> dict:
    """At paired points `(sigma_w2[i], sigma_b2[i])` (equal-length 1-D arrays, not their cartesian grid): the
    quantities of `phase_diagram` (forward criterion, default `eoc_tol`) plus `xi_c` (correlation depth scale,
    `meanfield.depth_scales`; inf at the edge of chaos) and `backward_product` (`meanfield.backward_product`,
    `q0 = 1`): everything a list of trained points is labelled and compared with, in one compiled program per
    (act, depth). Every value equals that of the function named."""
    if int(depth) < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    w, b = f64(sigma_w2).reshape(-1), f64(sigma_b2).reshape(-1)
    if w.shape != b.shape:
        raise ValueError(f"paired points need as many sigma_w2 as sigma_b2, got {w.size} and {b.size}")
    return _trained_points(act, int(depth), w, b)


def point_theory(act: str, depth: int, sigma_w2, sigma_b2) -> dict:
    """`phase_points` as a list of trained points is labelled with (numpy arrays, one entry per point):
    ``theory_phase`` (the `PHASE_LEGEND` name), ``chi1_pow`` (`chi_1^(L-1)` at `q*`), ``backward_product``
    (`E|delta_1|^2 / E|delta_L|^2` along `q_l`, inputs with `q0 = 1`), ``xi_c`` and ``depth_over_xi_c``
    (`L / xi_c`, 0 where `xi_c` is infinite: the organising variable of the trainability study)."""
    t = {k: np.asarray(v) for k, v in phase_points(act, sigma_w2, sigma_b2, depth).items()}
    xi_c = t["xi_c"].astype(float)
    return {"theory_phase": np.array([PHASE_LEGEND[int(c)] for c in t["phase"]]),
            "chi1_pow": t["chi1"].astype(float) ** (int(depth) - 1),
            "backward_product": t["backward_product"].astype(float), "xi_c": xi_c, "depth_over_xi_c": depth / xi_c}


def diagram_around(act: str, depth: int, sigma_w2, sigma_b2, res: int) -> dict:
    """The ``res`` x ``res`` `phase_diagram` on geometric grids spanning the points ``sigma_w2``, ``sigma_b2``
    (1.3x beyond in sigma_w2, 1.5x in sigma_b2, from at least 1e-3), with the forward EOC and the neutrality
    line over its sigma_b2 (`meanfield.critical_lines`), as numpy arrays named ``pd_*``: what a figure of
    trained points draws them on without a theory run."""
    sw = np.geomspace(np.min(sigma_w2) / 1.3, np.max(sigma_w2) * 1.3, res)
    sb = np.geomspace(max(np.min(sigma_b2), 1e-3) / 1.5, np.max(sigma_b2) * 1.5, res)
    codes = sorted(PHASE_LEGEND)
    diagram, lines = phase_diagram(act, sw, sb, depth), mf.critical_lines(sb, act)
    return {"pd_sigma_w2": sw, "pd_sigma_b2": sb, "pd_phase": np.asarray(diagram["phase"]),
            "pd_codes": np.array(codes), "pd_names": np.array([PHASE_LEGEND[c] for c in codes]),
            "pd_eoc": np.asarray(lines["eoc_forward"], float), "pd_neutral": np.asarray(lines["neutrality"], float)}


__all__ = ["PHASE_LEGEND", "ORDERED_DEEP", "TRANSIENT_DEEP", "CHAOTIC_DEEP", "PREJUDICE", "NEUTRALITY",
           "VANISHING_GRADIENT_DEEP", "classify", "phase_diagram", "phase_points", "point_theory", "diagram_around"]
