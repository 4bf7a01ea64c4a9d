"""Mean-field recursions: length and covariance maps, fixed points, chi_1, edge of chaos, depth scales.

Conventions (docs/theory.md section 1): `W_ij ~ N(0, sigma_w2 / fan_in)`, `b_i ~ N(0, sigma_b2)`, inputs
with `q0_aa = |x|^2/d = 1` and `q0_ab = 0`; layer `l = 1` is the first (linear) pre-activation,
`q1 = sigma_w2 q0 + sigma_b2`, and the map `l -> l + 1` is the first that involves the activation.
Both inputs keep equal variances at every layer, so one `q` describes them.

Maps (docs/theory.md section 2; Poole et al. 2016, Schoenholz et al. 2017):

- `q' = sigma_w2 E[psi(sqrt(q) z)^2] + sigma_b2`
- `c' = (sigma_w2 E[psi(u_a) psi(u_b)] + sigma_b2) / (sigma_w2 E[psi(u_a)^2] + sigma_b2)`; the
  denominator uses the same rule as the numerator, so `c = 1` is an exact fixed point.
  For positively homogeneous `psi` (linear, ReLU family) `q` scales out:
  `c' = (sigma_w2 K(c) + r) / (sigma_w2 K(1) + r)` with unit-variance `K` and `r = sigma_b2 / q`,
  which also covers `q = inf` (`r = 0`).
- `chi_1 = sigma_w2 E|grad psi(sqrt(q*) z)|^2` (the backward factor at `q*`: `E[delta^2]` is multiplied
  by `backward_factor(q_l)` per layer, equal widths, and by `chi_1` once `q_l = q*`; `backward_product`
  is the product over a net along the actual `q_l`: for tanh 0.5-0.7 of `chi_1^(L-1)` at the phase points).
  `chi_1~` (forward criterion of the trainability paper, Bassi et al. 2026): see `chi1_tilde`; for
  plain ReLU both are `sigma_w2 / 2`, for ReLU + pooling they differ.
- Pooled ReLU has no critical point in `c`: where `q*` is unbounded the slope of the c-map at `c = 1`
  is `G(1)/K(1)` whatever `sigma_w2` is (0.8249 MaxPool, 0.7585 AvgPool: `xi_c` = 5.20 and 3.62 layers at
  both edges of chaos); see `depth_scales` and `theory.phase`.

Fixed points are solved, never iterated to a tolerance: `q*` in closed form for homogeneous
activations (`inf` when `sigma_w2 E[psi(z)^2] >= 1`: the variance grows without bound), by a
bracketed root solve otherwise (`[sigma_b2, sigma_b2 + sigma_w2]` for bounded `psi`); `c* = 1`
exactly wherever the slope of the c-map at `c = 1` is <= 1 (the approach to 1 is exponential, with
depth scale `xi_c`, where the slope is < 1, and algebraic where it is 1, docs/theory.md section 2), else the root of `(c' - c)/(1 - c)` in `[0, 1)`. The single-point
kernels (`theory.pointwise`) do the work; derivatives of every solve are implicit (exact).

Arrays in, arrays out: every public function takes floats, numpy or jax arrays that broadcast
(tracers included), runs in float64 inside `jax.enable_x64` (never switched on globally,
`theory.x64`) and returns float64 jax arrays of the broadcast shape. Each works under `jax.jit` and
`jax.grad`; `act`, `criterion` and `depth` select the program and must be static there, e.g.
`jax.jit(propagate, static_argnames=("act", "depth"))`. Eager calls pad the flattened batch to a power
of two (`x64.bucket`), so calls of nearby sizes share one compiled program.
"""
from __future__ import annotations

import functools

import jax

from theory import pointwise as pw
from theory.activations import Activation, get
from theory.pointwise import solve_decreasing
from theory.x64 import bucket, padded_map, scoped


def check_criterion(criterion: str) -> None:
    """Raise ValueError unless `criterion` is `"forward"` or `"gradient"`."""
    if criterion not in ("forward", "gradient"):
        raise ValueError(f"criterion must be 'forward' or 'gradient', got {criterion!r}")


def _summary(sw, sb, act: Activation) -> dict:
    """Everything at one (sigma_w2, sigma_b2) that needs the fixed points: one compiled program per activation."""
    q = pw.q_star(sw, sb, act)
    c = pw.c_star(q, sw, sb, act)
    xi_q, xi_c = pw.depth_scales(q, c, sw, sb, act)
    return {"q_star": q, "c_star": c, "chi1": pw.chi1(sw, q, act), "chi1_tilde": pw.chi1_tilde(sw, q, act),
            "xi_q": xi_q, "xi_c": xi_c}


def _curves(sb, act: Activation) -> dict:
    """Both EOC criteria and the neutrality line at one sigma_b2 (one program per activation)."""
    forward = pw.eoc(sb, act, "forward")
    gradient = pw.eoc(sb, act, "gradient") if act.homogeneous else forward
    return {"eoc_forward": forward, "eoc_gradient": gradient, "neutrality": pw.neutrality(sb, act)}


_POINT = {   # single-point kernels behind the public functions; vmapped by `_batched`
    "q_map": lambda act, q, sw, sb: pw.q_map(q, sw, sb, act),
    "c_map": lambda act, c, q, sw, sb: pw.c_map(c, q, sw, sb, act),
    "summary": lambda act, sw, sb: _summary(sw, sb, act),
    "curves": lambda act, sb: _curves(sb, act),
    "backward_factor": lambda act, q, sw: pw.backward_factor(q, sw, act),
}


@functools.partial(jax.jit, static_argnums=(0, 1))
def _batched(kind: str, act_name: str, *args):
    return jax.vmap(functools.partial(_POINT[kind], get(act_name)))(*args)


def _run(kind: str, act: str, *args):
    """Broadcast `args`, flatten, pad to `bucket`, run the vmapped kernel, restore the broadcast shape (an unknown
    `act` raises `get`'s ValueError while the kernel is traced)."""
    return padded_map(functools.partial(_batched, kind, act), *args)


@scoped
def q_map(q, sigma_w2, sigma_b2, act: str):
    """Length map `q' = sigma_w2 E[psi(sqrt(q) z)^2] + sigma_b2` (docs/theory.md section 2)."""
    return _run("q_map", act, q, sigma_w2, sigma_b2)


@scoped
def c_map(c, q, sigma_w2, sigma_b2, act: str):
    """Correlation map `c' = q'_ab / q'_aa` for two inputs of length `q` and correlation `c` (section 2)."""
    return _run("c_map", act, c, q, sigma_w2, sigma_b2)


@scoped
def fixed_point(sigma_w2, sigma_b2, act: str):
    """`(q_star, c_star)`: the stable fixed points of the length and correlation maps.

    `q_star = inf` where the variance grows without bound (homogeneous `psi` with
    `sigma_w2 E[psi(z)^2] >= 1`, e.g. ReLU with `sigma_w2 >= 2`, including the neutral point (2, 0)).
    `c_star = 1` exactly where `c = 1` is stable (slope of the c-map at 1 <= 1: always for the ReLU
    family, and for bounded `psi` iff `chi_1 <= 1`); otherwise the root in `[0, 1)`.
    Linear with `sigma_w2 > 1`: `c_star = nan` (every `c` is a fixed point of the normalised map).
    """
    out = _run("summary", act, sigma_w2, sigma_b2)
    return out["q_star"], out["c_star"]


@scoped
def chi1(sigma_w2, sigma_b2, act: str):
    """`chi_1 = sigma_w2 E|grad psi(sqrt(q*) z)|^2` (docs/theory.md section 2): the gradient criterion.

    Also the per-layer factor of `E[delta^2]` at `q*` (see `backward_factor`). `< 1` ordered,
    `> 1` chaotic. For homogeneous `psi` it does not depend on `q*` (finite or not); where `q* = inf`
    (GELU, SiLU) it is the large-q limit `sigma_w2 / 2`.
    """
    return _run("summary", act, sigma_w2, sigma_b2)["chi1"]


@scoped
def chi1_tilde(sigma_w2, sigma_b2, act: str):
    """Forward criterion `chi_1~` of the trainability paper (Bassi et al. 2026; docs/theory.md section 2).

    Homogeneous `psi` (linear, ReLU family): `sigma_w2 E[psi(z)^2]`, the slope `dq'/dq` of the length
    map, which is linear there (`q' = sigma_w2 E[psi(z)^2] q + sigma_b2`): the per-layer growth factor of
    `q` when `q* = inf`. This is docs/theory.md's `d q'_ab / d q_ab` at `c = 1` taken along the diagonal
    (`q_ab = q_aa = q` moving together), not the partial derivative at fixed `q_aa`, which by Price's
    theorem is `sigma_w2 E|grad psi|^2 = chi_1`. The two differ for pooled ReLU (critical `sigma_w2`
    `4 pi/(3 pi + 2)` vs `4/3` for MaxPool, `4 pi/(pi + 1)` vs `4` for AvgPool) and agree for plain ReLU.
    Every other activation: `chi_1` itself (for GELU / SiLU with `q* = inf` both tend to `sigma_w2 / 2`).
    """
    return _run("summary", act, sigma_w2, sigma_b2)["chi1_tilde"]


def criticality(sigma_w2, sigma_b2, act: str, criterion: str = "forward"):
    """`chi1_tilde` (`criterion="forward"`) or `chi1` (`"gradient"`)."""
    check_criterion(criterion)
    return chi1_tilde(sigma_w2, sigma_b2, act) if criterion == "forward" else chi1(sigma_w2, sigma_b2, act)


@scoped
def backward_factor(q, sigma_w2, act: str):
    """`sigma_w2 E|grad psi(sqrt(q) z)|^2`: factor of `E[delta^2]` across a layer whose pre-activations
    have variance `q` (equal widths; Schoenholz et al. 2017): `E|delta_l|^2 = backward_factor(q_l)
    E|delta_{l+1}|^2`. Equals `chi_1` at `q = q*`; its product over a net is `backward_product`."""
    return _run("backward_factor", act, q, sigma_w2)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _backward_product_batched(act_name: str, depth: int, sw, sb, q0):
    act = get(act_name)
    return jax.vmap(lambda a, b, c: pw.backward_product(a, b, c, act, depth))(sw, sb, q0)


@scoped
def backward_product(sigma_w2, sigma_b2, act: str, depth: int, q0=1.0):
    """Mean-field `E|delta_1|^2 / E|delta_L|^2` of a depth-`L` net (`L = depth`): the product of the
    per-layer `backward_factor` along the actual length trajectory,

        `prod_{l=1}^{L-1} sigma_w2 E|grad psi(sqrt(q_l) z)|^2`,  `q_1 = sigma_w2 q0 + sigma_b2`,
        `q_{l+1} = q_map(q_l)`  (the `q` of `propagate`, index `l - 1`).

    Why these layers (Schoenholz et al. 2017, eq. 13, equal widths): with `h_{l+1} = W_{l+1} psi(h_l) + b`,
    `delta_l = dLoss/dh_l = grad psi(h_l) * (W_{l+1}^T delta_{l+1})`, so `E|delta_l|^2 =
    backward_factor(q_l) E|delta_{l+1}|^2`: the factor from hidden layer `l + 1` down to `l` is taken at
    the variance `q_l` of the lower layer. From the last hidden pre-activation `h_L` down to the first
    `h_1` that is `L - 1` factors at `q_1 .. q_{L-1}`; `q_L` and the readout do not enter. This is what a
    measured `|delta_1|^2 / |delta_L|^2` over hidden layers 1 and L is compared with (pooled `psi`: the
    norms over all `k N` pre-activations of a layer, widths `N` equal).

    `chi_1^(L-1)` (`chi1` at `q*`) is this product only when `q_1 = q*`; for tanh the transient from
    `q_1 = sigma_w2 + sigma_b2` down to `q*` has factors below `chi_1` (`E tanh'^2` decreases in `q`, and
    `q_1 > q*`), e.g. 0.54 instead of 1 at the EOC at depth 30, `sigma_b2 = 0.1`. For homogeneous `psi`
    (ReLU family) every factor is `sigma_w2 E|grad psi|^2`, whatever `q`: the product is `chi_1^(L-1)`
    exactly (ReLU `(sigma_w2 / 2)^(L-1)`). `depth = 1`: the empty product, 1.

    Shapes broadcast over `sigma_w2`, `sigma_b2`, `q0`; `act` and `depth` are static under `jax.jit`;
    differentiable (`jax.grad`). Computed as a sum of logs (`pointwise.backward_product`).
    """
    get(act)
    depth = int(depth)
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    return padded_map(functools.partial(_backward_product_batched, act, depth), sigma_w2, sigma_b2, q0)


@scoped
def eoc(sigma_b2, act: str, criterion: str = "forward"):
    """`sigma_w2` on the edge of chaos at bias variance `sigma_b2`.

    `"forward"`: `chi_1~ = 1` (trainability paper); `"gradient"`: `sigma_w2 E|grad psi|^2 = 1`. They
    differ only for pooled ReLU: 4 pi/(3 pi + 2) vs 4/3 (MaxPool), 4 pi/(pi + 1) vs 4 (AvgPool); ReLU 2,
    linear 1, independent of `sigma_b2`. Otherwise solved with `q` as the unknown:
    `sigma_w2 = 1/D(q)`, `q = V(q)/D(q) + sigma_b2` (`V = E psi^2`, `D = E|grad psi|^2`), bracketed in
    `[sigma_b2, 1e4 (1 + sigma_b2)]`; nan where no root is bracketed.
    """
    check_criterion(criterion)
    return _run("curves", act, sigma_b2)["eoc_" + criterion]


@scoped
def critical_lines(sigma_b2, act: str) -> dict:
    """`{"eoc_forward", "eoc_gradient", "neutrality"}` at `sigma_b2`: `eoc` under both criteria and
    `neutrality_line`, from one program (what places the trained points of every activation family)."""
    return _run("curves", act, sigma_b2)


@scoped
def neutrality_line(sigma_b2, act: str):
    """`sigma_w2` where `c* = 1/2` (gamma = 1, the neutrality / prejudice boundary, docs/theory.md section 5).

    Solved with `q*` as the unknown: `sigma_w2(q) = (q - sigma_b2) / V(q)` and `c'(1/2) = 1/2` at `q`,
    `q*` bracketed in `[sigma_b2, sigma_b2 + 1e4 (1 + sigma_b2)]`, and kept only where `c* = 1/2` is the
    stable fixed point (`chi_1 >= 1`). nan for homogeneous `psi` (`c* = 1` everywhere) and GELU / SiLU
    (`c* = 1` wherever `q*` is unbounded). Tanh + MaxPool is finite but far out: its non-zero mean keeps
    `c* > 1/2` up to `sigma_w2` = 37.6, 39.7, 47.3, 56.1 at `sigma_b2` = 0, 0.1, 0.5, 1 (`q*` = 32-51),
    beyond any practical range (no neutral region in figures, docs/theory.md section 3).
    """
    return _run("curves", act, sigma_b2)["neutrality"]


@scoped
def depth_scales(sigma_w2, sigma_b2, act: str):
    """`(xi_q, xi_c)`: `-1/ln(dq'/dq at q*)` and `-1/ln(dc'/dc at c*)` (Schoenholz et al. 2017).

    `dq'/dq = chi_1 + sigma_w2 E[psi'' psi] = sigma_w2 dV/dq`; `dc'/dc = chi_c` at `(q*, c*)` (`= chi_1`
    at `c* = 1` with finite `q*`). `inf` where the slope is >= 1 (edge of chaos, unbounded `q*`).

    Homogeneous `psi` with unbounded `q*` (`sigma_w2` at or above the forward criterion, or any `sigma_w2`
    at `sigma_b2 = 0`): `sigma_b2 / q -> 0` and `dc'/dc = G(1)/K(1)` (unit-variance `grad_kernel` /
    `kernel`), independent of `sigma_w2`. Plain ReLU: 1, `xi_c = inf`. Pooled ReLU: 0.8249 (MaxPool) and
    0.7585 (AvgPool), `xi_c = 5.196` and `3.619` layers at both edges of chaos and beyond: pooled ReLU has
    no critical point in `c` (`theory.phase` docstring).
    """
    out = _run("summary", act, sigma_w2, sigma_b2)
    return out["xi_q"], out["xi_c"]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _propagate_batched(act_name: str, depth: int, sw, sb, q0, c0):
    act = get(act_name)
    return jax.vmap(lambda a, b, c, d: pw.propagate(a, b, c, d, act, depth))(sw, sb, q0, c0)


@scoped
def propagate(sigma_w2, sigma_b2, act: str, depth: int, q0=1.0, c0=0.0):
    """`(q, c)` per layer, shapes `broadcast + (depth,)`; index `l - 1` holds layer `l`.

    Layer 1 is linear: `q1 = sigma_w2 q0 + sigma_b2`, `c1 = (sigma_w2 c0 q0 + sigma_b2) / q1`; layers
    `2..depth` apply the maps (docs/theory.md section 1). A `lax.scan`, vmapped over the broadcast inputs;
    `act` and `depth` are static under `jax.jit`.
    """
    get(act)
    depth = int(depth)
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    return padded_map(functools.partial(_propagate_batched, act, depth), sigma_w2, sigma_b2, q0, c0)


__all__ = ["q_map", "c_map", "propagate", "fixed_point", "chi1", "chi1_tilde", "criticality", "eoc",
           "neutrality_line", "depth_scales", "backward_factor", "backward_product", "check_criterion"]
