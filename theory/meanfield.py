"""Mean-field recursions: length and covariance maps, fixed points, chi_1, edge of chaos, depth scales.

Conventions (THEORY.md section 1): `W_ij ~ N(0, sigma_w2 / fan_in)`, `b_i ~ N(0, sigma_b2)`, inputs
with `q0_aa = |x|^2/d = 1` and `q0_ab = 0`; layer `l = 1` is the first (linear) pre-activation,
`q1 = sigma_w2 q0 + sigma_b2`, and the map `l -> l + 1` is the first that involves the activation.
Both inputs keep equal variances at every layer, so one `q` describes them.

Maps (THEORY.md section 2; Poole et al. 2016, Schoenholz et al. 2017):

- `q' = sigma_w2 E[psi(sqrt(q) z)^2] + sigma_b2`
- `c' = (sigma_w2 E[psi(u_a) psi(u_b)] + sigma_b2) / (sigma_w2 E[psi(u_a)^2] + sigma_b2)`; the
  denominator uses the same rule as the numerator, so `c = 1` is an exact fixed point.
  For positively homogeneous `psi` (linear, ReLU family) `q` scales out:
  `c' = (sigma_w2 K(c) + r) / (sigma_w2 K(1) + r)` with unit-variance `K` and `r = sigma_b2 / q`,
  which also covers `q = inf` (`r = 0`).
- `chi_1 = sigma_w2 E|grad psi(sqrt(q*) z)|^2` (the backward factor: `E[delta^2]` is multiplied by it
  per layer, equal widths). `chi_1~` (forward criterion of the trainability paper, Bassi et al. 2026)
  is `sigma_w2 E[psi(z)^2]` for homogeneous `psi` and `chi_1` otherwise; for plain ReLU both are
  `sigma_w2 / 2`, for ReLU + pooling they differ (THEORY.md section 2).

Fixed points are solved, never iterated to a tolerance: `q*` in closed form for homogeneous
activations (`inf` when `sigma_w2 E[psi(z)^2] >= 1`: the variance grows without bound), by a
bracketed root solve otherwise (`[sigma_b2, sigma_b2 + sigma_w2]` for bounded `psi`); `c* = 1`
exactly wherever the slope of the c-map at `c = 1` is <= 1 (there the approach to 1 is at best
algebraic, THEORY.md section 2), else the root of `(c' - c)/(1 - c)` in `[0, 1)`.
Root solves have fixed iteration counts (vmappable): bisection for `q*` (56 halvings of a bracket of
width `sigma_w2`), the edge of chaos and the neutrality line (80 halvings), bisection then
safeguarded Newton steps for `c*`.

Public functions take floats or arrays that broadcast, run in float64 inside `jax.enable_x64`
(never switched on globally) and return numpy float64 arrays, so values survive outside the scope.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from theory.activations import Activation, get

N_BISECT = 20
N_NEWTON = 8
SLOPE_TOL = 1e-12        # c* = 1 where the c-map slope at 1 is <= 1 + SLOPE_TOL
Q_SEARCH_HI = 1e4        # upper end of the q brackets of eoc / neutrality_line (relative to 1 + sigma_b2)


# --------------------------------------------------------------------------- root finding
def solve_decreasing(f, lo, hi, n_bisect: int = N_BISECT, n_newton: int = N_NEWTON):
    """Root of `f` in `[lo, hi]` given `f(lo) >= 0 > f(hi)`: bisection, then safeguarded Newton.

    Newton steps (derivative by `jax.jvp`) that leave the current bracket are replaced by the
    bracket's midpoint (as in Numerical Recipes' `rtsafe`), so the result is never worse than
    `n_bisect + n_newton` bisections. Fixed iteration counts: works under `vmap` and `jit`.
    """
    def bisect(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        pos = f(mid) >= 0
        return jnp.where(pos, mid, lo), jnp.where(pos, hi, mid)

    def newton(_, state):
        lo, hi, x = state
        fx, dfx = jax.jvp(f, (x,), (jnp.ones_like(x),))
        pos = fx >= 0
        lo, hi = jnp.where(pos, x, lo), jnp.where(pos, hi, x)
        step = x - fx / dfx
        ok = (step >= lo) & (step <= hi)
        return lo, hi, jnp.where(ok, step, 0.5 * (lo + hi))

    lo, hi = lax.fori_loop(0, n_bisect, bisect, (lo, hi))
    if n_newton == 0:
        return 0.5 * (lo + hi)
    _, _, x = lax.fori_loop(0, n_newton, newton, (lo, hi, 0.5 * (lo + hi)))
    return x


# --------------------------------------------------------------------------- maps (single point)
def _bias_ratio(sigma_b2, q):
    """`sigma_b2 / q` with `0/0 = 0` and `x/inf = 0` (homogeneous maps only)."""
    return jnp.where(sigma_b2 == 0, 0.0, sigma_b2 / q)


def _q_map(q, sw, sb, act: Activation):
    return sw * act.second_moment(q) + sb


def _k1(q, act: Activation):
    """`K(q, 1)`, the c-map's denominator: the second moment itself where that is bit-identical."""
    return act.second_moment(q) if act.exact_diagonal else act.kernel(q, jnp.ones_like(q))


def _one_minus_c_map(c, q, sw, sb, act: Activation, k1=None):
    """`1 - c'`, written as `sigma_w2 (K(1) - K(c)) / (sigma_w2 K(1) + sigma_b2)` to keep digits near c = 1.

    `k1 = K(q, 1)` may be passed in when it is reused (fixed `q` in the c* solve).
    """
    if act.homogeneous:
        r = _bias_ratio(sb, q)
        k1 = act.second_moment(1.0)
        return sw * (k1 - act.kernel(1.0, c)) / (sw * k1 + r)
    k1 = _k1(q, act) if k1 is None else k1
    return sw * (k1 - act.kernel(q, c)) / (sw * k1 + sb)


def _c_map(c, q, sw, sb, act: Activation):
    return 1.0 - _one_minus_c_map(c, q, sw, sb, act)


def _c_slope(c, q, sw, sb, act: Activation):
    """`dc'/dc = sigma_w2 q G(q, c) / (sigma_w2 K(q, 1) + sigma_b2)` (Price: `dK/dq_ab = G`)."""
    if act.homogeneous:
        r = _bias_ratio(sb, q)
        return sw * act.grad_kernel(1.0, c) / (sw * act.second_moment(1.0) + r)
    slope = sw * q * act.grad_kernel(q, c) / (sw * _k1(q, act) + sb)
    return jnp.where(jnp.isinf(q), 1.0, slope)   # q* = inf (GELU, SiLU): the ReLU limit, slope 1


# --------------------------------------------------------------------------- fixed points (single point)
def _q_star(sw, sb, act: Activation):
    if act.homogeneous:
        a = sw * act.second_moment(1.0)
        return jnp.where(a < 1.0, sb / jnp.where(a < 1.0, 1.0 - a, 1.0), jnp.inf)
    g = lambda q: _q_map(q, sw, sb, act) - q
    if act.bounded:          # 0 <= psi^2 <= 1  =>  q* in [sigma_b2, sigma_b2 + sigma_w2]
        return solve_decreasing(g, sb, sb + sw, n_bisect=56, n_newton=0)
    return _q_star_unbounded(g, sw, sb)


def _q_star_unbounded(g, sw, sb):
    """Stable fixed point reached from `q1 = sigma_w2 + sigma_b2` (unbounded, non-homogeneous `psi`).

    Scans `q1 2^k`, k = 1..60, upwards when `g(q1) = q'(q1) - q1 >= 0` (first sign change; none -> inf)
    and downwards otherwise (first sign change; none -> bracket down to 0), then solves in that bracket.
    """
    q1 = sw + sb
    k = jnp.arange(1.0, 61.0)
    up_grid, down_grid = q1 * 2.0 ** k, q1 * 2.0 ** -k
    up = g(q1) >= 0
    neg = jax.vmap(g)(up_grid) < 0
    i_up = jnp.argmax(neg)
    lo_up = jnp.where(i_up == 0, q1, up_grid[i_up - 1])
    pos = jax.vmap(g)(down_grid) >= 0
    i_dn = jnp.argmax(pos)
    hi_dn = jnp.where(i_dn == 0, q1, down_grid[i_dn - 1])
    lo_dn = jnp.where(pos.any(), down_grid[i_dn], 0.0)
    root = solve_decreasing(g, jnp.where(up, lo_up, lo_dn), jnp.where(up, up_grid[i_up], hi_dn),
                            n_bisect=60, n_newton=4)
    return jnp.where(up & ~neg.any(), jnp.inf, root)


def _c_star(q, sw, sb, act: Activation):
    slope1 = _c_slope(1.0, q, sw, sb, act)
    if act.homogeneous:
        # every homogeneous registry entry has slope <= 1 at c = 1 everywhere (ReLU: = 1 exactly at q* = inf,
        # where c -> 1 algebraically); nan would flag a violation; linear sigma_w2 > 1: every c is fixed
        c_star = jnp.where(slope1 <= 1.0 + SLOPE_TOL, 1.0, jnp.nan)
        return jnp.where(sw > 1.0, jnp.nan, c_star) if act.name == "linear" else c_star
    k1 = _k1(q, act)
    h = lambda c: 1.0 - _one_minus_c_map(c, q, sw, sb, act, k1) / (1.0 - c)   # (c' - c) / (1 - c)
    return jnp.where(slope1 <= 1.0 + SLOPE_TOL, 1.0, solve_decreasing(h, 0.0, 1.0))


def _backward_factor(q, sw, act: Activation):
    """`sigma_w2 E|grad psi(sqrt(q) z)|^2`; at `q = inf` the activation's large-q limit."""
    if act.homogeneous:
        return sw * act.grad_moment(1.0)
    finite = jnp.isfinite(q)
    return sw * jnp.where(finite, act.grad_moment(jnp.where(finite, q, 1.0)), act.grad_moment_inf)


def _chi1(sw, q_star, act: Activation):
    return _backward_factor(q_star, sw, act)


def _chi1_tilde(sw, q_star, act: Activation):
    if act.homogeneous:
        return sw * act.second_moment(1.0)
    return _chi1(sw, q_star, act)


# --------------------------------------------------------------------------- edge of chaos, neutrality (single point)
def _eoc(sb, act: Activation, criterion: str):
    if act.homogeneous:
        moment = act.second_moment(1.0) if criterion == "forward" else act.grad_moment(1.0)
        return jnp.ones_like(sb) / moment
    # chi_1 = 1 and q = sigma_w2 V(q) + sigma_b2  <=>  sigma_w2 = 1 / D(q),  q - V(q)/D(q) - sigma_b2 = 0
    f = lambda q: sb + act.second_moment(q) / act.grad_moment(q) - q
    hi = Q_SEARCH_HI * (1.0 + sb)
    q = solve_decreasing(f, sb, hi, n_bisect=80, n_newton=0)
    # sigma_b2 = 0 with f < 0 just above 0: the root is q* = 0 exactly, a degenerate root (f ~ -q^3 for
    # tanh) that bisection only resolves to ~1e-8; take it exactly (tanh 1, erf pi/4).
    q = jnp.where((sb == 0) & (f(jnp.full_like(sb, 1e-4)) < 0), 0.0, q)
    return jnp.where(f(hi) < 0, 1.0 / act.grad_moment(q), jnp.nan)


def _neutrality(sb, act: Activation):
    if act.homogeneous:        # c* = 1 everywhere (THEORY.md section 5)
        return jnp.full_like(sb, jnp.nan)
    half = jnp.full_like(sb, 0.5)
    sw_of_q = lambda q: (q - sb) / act.second_moment(q)

    def f(q):   # c'(1/2) - 1/2 at the fixed point q, times the c-map's denominator
        sw = sw_of_q(q)
        return sw * act.kernel(q, half) + sb - 0.5 * (sw * _k1(q, act) + sb)

    hi = sb + Q_SEARCH_HI * (1.0 + sb)
    lo = sb + 1e-12 * (1.0 + sb)
    q = solve_decreasing(f, lo, hi, n_bisect=80, n_newton=0)
    sw = sw_of_q(q)
    # sigma_b2 = 0 and c* < 1/2 right above q = 0 (tanh: c* = 0 in the whole chaotic phase): the boundary
    # is the degenerate root q -> 0, sigma_w2 -> 1 / psi'(0)^2, which bisection resolves only to ~1e-8
    snap = (sb == 0) & (f(jnp.full_like(sb, 1e-4)) < 0)
    q = jnp.where(snap, 0.0, q)
    sw = jnp.where(snap, 1.0 / act.grad_moment(jnp.zeros_like(sb)), sw)
    chaotic = _chi1(sw, q, act) >= 1.0 - 1e-9    # c* = 1/2 must be the stable fixed point
    return jnp.where((f(hi) < 0) & chaotic, sw, jnp.nan)


def _depth_scales(q, c, sw, sb, act: Activation):
    """`(xi_q, xi_c)` at the fixed point `(q, c)`."""
    if act.homogeneous:
        dq = sw * act.second_moment(1.0)
    else:
        q_safe = jnp.where(jnp.isinf(q), 1.0, q)
        dq = jnp.where(jnp.isinf(q), jnp.inf, sw * jax.grad(act.second_moment)(q_safe))
    dc = _c_slope(c, q, sw, sb, act)
    scale = lambda s: jnp.where(s < 1.0, -1.0 / jnp.log(s), jnp.inf)
    return scale(dq), scale(dc)


# --------------------------------------------------------------------------- propagation (single point)
def _propagate(sw, sb, q0, c0, act: Activation, depth: int):
    q1 = sw * q0 + sb
    c1 = (sw * c0 * q0 + sb) / q1

    def layer(carry, _):
        q, c = carry
        nxt = (_q_map(q, sw, sb, act), _c_map(c, q, sw, sb, act))
        return nxt, nxt

    _, (qs, cs) = lax.scan(layer, (q1, c1), None, length=depth - 1)
    return jnp.concatenate([q1[None], qs]), jnp.concatenate([c1[None], cs])


# --------------------------------------------------------------------------- public API
def _check_act(act: str) -> Activation:
    return get(act)


def _summary(sw, sb, act: Activation) -> dict:
    """Everything at one (sigma_w2, sigma_b2) that needs the fixed points: one compiled program per activation."""
    q = _q_star(sw, sb, act)
    c = _c_star(q, sw, sb, act)
    xi_q, xi_c = _depth_scales(q, c, sw, sb, act)
    return {"q_star": q, "c_star": c, "chi1": _chi1(sw, q, act), "chi1_tilde": _chi1_tilde(sw, q, act),
            "xi_q": xi_q, "xi_c": xi_c}


def _curves(sb, act: Activation) -> dict:
    """Both EOC criteria and the neutrality line at one sigma_b2 (one program per activation)."""
    forward = _eoc(sb, act, "forward")
    gradient = _eoc(sb, act, "gradient") if act.homogeneous else forward
    return {"eoc_forward": forward, "eoc_gradient": gradient, "neutrality": _neutrality(sb, act)}


_POINT = {   # single-point kernels behind the public functions; vmapped by `_batched`
    "q_map": lambda act, q, sw, sb: _q_map(q, sw, sb, act),
    "c_map": lambda act, c, q, sw, sb: _c_map(c, q, sw, sb, act),
    "summary": lambda act, sw, sb: _summary(sw, sb, act),
    "curves": lambda act, sb: _curves(sb, act),
    "backward_factor": lambda act, q, sw: _backward_factor(q, sw, act),
}


@functools.partial(jax.jit, static_argnums=(0, 1))
def _batched(kind: str, act_name: str, *args):
    return jax.vmap(functools.partial(_POINT[kind], get(act_name)))(*args)


def bucket(n: int) -> int:
    """Padded batch size: powers of two from 8, so calls of nearby sizes share one compiled program."""
    return max(8, 1 << (n - 1).bit_length())


def _flat_padded(args) -> tuple[tuple, int, list]:
    """Broadcast float64 copies of `args`; return the shape, the size and flat copies padded to `bucket`."""
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64) for a in args])
    shape, size = arrays[0].shape, arrays[0].size
    if size == 0:
        raise ValueError("empty input")
    pad = lambda a: jnp.asarray(np.concatenate([a.reshape(-1), np.full(bucket(size) - size, a.reshape(-1)[-1])]))
    return shape, size, [pad(a) for a in arrays]


def _run(kind: str, act: str, *args):
    """Broadcast `args`, flatten, pad to `bucket`, run the vmapped kernel in float64, return numpy arrays."""
    _check_act(act)
    with jax.enable_x64(True):
        shape, size, flat = _flat_padded(args)
        out = _batched(kind, act, *flat)
        unpad = lambda o: np.asarray(o)[:size].reshape(shape)
        return {k: unpad(v) for k, v in out.items()} if isinstance(out, dict) else unpad(out)


def q_map(q, sigma_w2, sigma_b2, act: str):
    """Length map `q' = sigma_w2 E[psi(sqrt(q) z)^2] + sigma_b2` (THEORY.md section 2)."""
    return _run("q_map", act, q, sigma_w2, sigma_b2)


def c_map(c, q, sigma_w2, sigma_b2, act: str):
    """Correlation map `c' = q'_ab / q'_aa` for two inputs of length `q` and correlation `c` (section 2)."""
    return _run("c_map", act, c, q, sigma_w2, sigma_b2)


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


def chi1(sigma_w2, sigma_b2, act: str):
    """`chi_1 = sigma_w2 E|grad psi(sqrt(q*) z)|^2` (THEORY.md section 2): the gradient criterion.

    Also the per-layer factor of `E[delta^2]` at `q*` (see `backward_factor`). `< 1` ordered,
    `> 1` chaotic. For homogeneous `psi` it does not depend on `q*` (finite or not).
    """
    return _run("summary", act, sigma_w2, sigma_b2)["chi1"]


def chi1_tilde(sigma_w2, sigma_b2, act: str):
    """Forward criterion `chi_1~ = dq'_ab/dq_ab` along `c = 1` (Bassi et al. 2026): `sigma_w2 E[psi(z)^2]`
    for homogeneous `psi` (the growth rate of `q`), `chi_1` for every other activation."""
    return _run("summary", act, sigma_w2, sigma_b2)["chi1_tilde"]


def criticality(sigma_w2, sigma_b2, act: str, criterion: str = "forward"):
    """`chi1_tilde` (`criterion="forward"`) or `chi1` (`"gradient"`)."""
    _check_criterion(criterion)
    return chi1_tilde(sigma_w2, sigma_b2, act) if criterion == "forward" else chi1(sigma_w2, sigma_b2, act)


def backward_factor(q, sigma_w2, act: str):
    """`sigma_w2 E|grad psi(sqrt(q) z)|^2`: factor of `E[delta^2]` across a layer whose pre-activations
    have variance `q` (equal widths; Schoenholz et al. 2017). Equals `chi_1` at `q = q*`."""
    return _run("backward_factor", act, q, sigma_w2)


def _check_criterion(criterion: str) -> None:
    if criterion not in ("forward", "gradient"):
        raise ValueError(f"criterion must be 'forward' or 'gradient', got {criterion!r}")


def eoc(sigma_b2, act: str, criterion: str = "forward"):
    """`sigma_w2` on the edge of chaos at bias variance `sigma_b2`.

    `"forward"`: `chi_1~ = 1` (trainability paper); `"gradient"`: `sigma_w2 E|grad psi|^2 = 1`. They
    differ only for pooled ReLU: 4 pi/(3 pi + 2) vs 4/3 (MaxPool), 4 pi/(pi + 1) vs 4 (AvgPool); ReLU 2,
    linear 1, independent of `sigma_b2`. Otherwise solved with `q` as the unknown:
    `sigma_w2 = 1/D(q)`, `q = V(q)/D(q) + sigma_b2` (`V = E psi^2`, `D = E|grad psi|^2`), bracketed in
    `[sigma_b2, 1e4 (1 + sigma_b2)]`; nan where no root is bracketed.
    """
    _check_criterion(criterion)
    return _run("curves", act, sigma_b2)["eoc_" + criterion]


def neutrality_line(sigma_b2, act: str):
    """`sigma_w2` where `c* = 1/2` (gamma = 1, the neutrality / prejudice boundary, THEORY.md section 5).

    Solved with `q*` as the unknown: `sigma_w2(q) = (q - sigma_b2) / V(q)` and `c'(1/2) = 1/2` at `q`.
    nan where none exists: homogeneous `psi` (`c* = 1` everywhere) and activations whose `c*` stays
    above 1/2 (tanh + maxpool).
    """
    return _run("curves", act, sigma_b2)["neutrality"]


def depth_scales(sigma_w2, sigma_b2, act: str):
    """`(xi_q, xi_c)`: `-1/ln(dq'/dq at q*)` and `-1/ln(dc'/dc at c*)` (Schoenholz et al. 2017).

    `dq'/dq = chi_1 + sigma_w2 E[psi'' psi] = sigma_w2 dV/dq`; `dc'/dc = chi_c` at `(q*, c*)` (`= chi_1`
    at `c* = 1`). `inf` where the slope is >= 1 (edge of chaos, unbounded `q*`).
    """
    out = _run("summary", act, sigma_w2, sigma_b2)
    return out["xi_q"], out["xi_c"]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _propagate_batched(act_name: str, depth: int, sw, sb, q0, c0):
    act = get(act_name)
    return jax.vmap(lambda a, b, c, d: _propagate(a, b, c, d, act, depth))(sw, sb, q0, c0)


def propagate(sigma_w2, sigma_b2, act: str, depth: int, q0=1.0, c0=0.0):
    """`(q, c)` per layer, shapes `broadcast + (depth,)`; index `l - 1` holds layer `l`.

    Layer 1 is linear: `q1 = sigma_w2 q0 + sigma_b2`, `c1 = (sigma_w2 c0 q0 + sigma_b2) / q1`; layers
    `2..depth` apply the maps (THEORY.md section 1). A `lax.scan`, vmapped over the broadcast inputs.
    """
    _check_act(act)
    depth = int(depth)
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    with jax.enable_x64(True):
        shape, size, flat = _flat_padded((sigma_w2, sigma_b2, q0, c0))
        q, c = _propagate_batched(act, depth, *flat)
        return (np.asarray(q)[:size].reshape(shape + (depth,)), np.asarray(c)[:size].reshape(shape + (depth,)))


__all__ = ["q_map", "c_map", "propagate", "fixed_point", "chi1", "chi1_tilde", "criticality", "eoc",
           "neutrality_line", "depth_scales", "backward_factor", "solve_decreasing"]
