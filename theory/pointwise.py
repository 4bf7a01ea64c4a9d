"""Single-point mean-field kernels: maps, fixed points, criteria, edge of chaos, neutrality, propagation.

The pure jax functions behind `theory.meanfield` and `theory.phase`, on scalar float64 arguments and an
`Activation` entry (`theory.activations.get(name)`); vmap them over grids, call them inside jit and
differentiate them (`jax.grad`). Conventions and sources: `theory.meanfield` and docs/theory.md sections 1-2.

- `q_map`, `c_map`, `one_minus_c_map`, `c_slope`: the length and correlation maps and the slope `dc'/dc`.
- `q_star`, `c_star`: fixed points (closed form, bracketed bisection, safeguarded Newton; never iterated to
  a tolerance); `chi1`, `chi1_tilde`, `backward_factor`; `depth_scales`.
- `eoc`, `neutrality`: `sigma_w2` on the edge of chaos and on `c* = 1/2` at one `sigma_b2`.
- `propagate`, `last_c`: `(q, c)` per layer, or `c` at the last layer only (phase diagrams);
  `backward_product`: the product of `backward_factor` along the `q` of `propagate`.

Root solves return their value from fixed-count bisection / Newton loops and their derivative from the
implicit function theorem (`implicit_root`): `dx*/dtheta = -(df/dtheta) / (df/dx)` at the root, so `jax.grad`
of `q*`, `c*`, the edge of chaos or the neutrality line is exact, not the derivative of a bisection.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from theory.activations import Activation

N_BISECT = 20
N_NEWTON = 8
SLOPE_TOL = 1e-12        # c* = 1 where the c-map slope at 1 is <= 1 + SLOPE_TOL
Q_SEARCH_HI = 1e4        # upper end of the q brackets of eoc / neutrality (relative to 1 + sigma_b2)


# --------------------------------------------------------------------------- root finding
def implicit_root(f, x, safe):
    """`x` (a root of `f` found without tracking derivatives), with derivative `-f_theta / f_x`.

    `f` closes over the parameters `theta` it is differentiated in. The value is `x` exactly
    (`f(x) - stop_gradient(f(x)) = 0`); where `f(x)` or `f'(x)` is not finite or `f'(x) = 0` (a bracket end
    outside the domain of `f`, a discarded branch) the derivative is 0 and `f` is evaluated at `safe`
    instead, so no nan reaches the gradient of the caller's `where`.
    """
    x = lax.stop_gradient(x)
    fx, dfx = lax.stop_gradient(jax.jvp(f, (x,), (jnp.ones_like(x),)))
    ok = jnp.isfinite(fx) & jnp.isfinite(dfx) & (dfx != 0)
    f_eval = f(jnp.where(ok, x, lax.stop_gradient(safe)))
    step = (f_eval - lax.stop_gradient(f_eval)) / jnp.where(ok, dfx, 1.0)
    return x - jnp.where(ok, step, 0.0)


def solve_decreasing(f, lo, hi, n_bisect: int = N_BISECT, n_newton: int = N_NEWTON):
    """Root of `f` in `[lo, hi]` given `f(lo) >= 0 > f(hi)`: bisection, then safeguarded Newton.

    Newton steps (derivative by `jax.jvp`) that leave the current bracket are replaced by the
    bracket's midpoint (as in Numerical Recipes' `rtsafe`), so the result is never worse than
    `n_bisect + n_newton` bisections. Fixed iteration counts: works under `vmap` and `jit`; the
    derivative with respect to whatever `f` closes over is the implicit one (`implicit_root`).
    """
    safe = 0.5 * (lo + hi)

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

    lo, hi = lax.fori_loop(0, n_bisect, bisect, lax.stop_gradient((lo, hi)))
    x = 0.5 * (lo + hi)
    if n_newton:
        _, _, x = lax.fori_loop(0, n_newton, newton, (lo, hi, x))
    return implicit_root(f, x, safe)


# --------------------------------------------------------------------------- maps
def bias_ratio(sigma_b2, q):
    """`sigma_b2 / q` with `0/0 = 0` and `x/inf = 0` (homogeneous maps only)."""
    return jnp.where(sigma_b2 == 0, 0.0, sigma_b2 / jnp.where(sigma_b2 == 0, 1.0, q))


def q_map(q, sw, sb, act: Activation):
    """`q' = sigma_w2 E[psi(sqrt(q) z)^2] + sigma_b2`."""
    return sw * act.second_moment(q) + sb


def one_minus_c_map(c, q, sw, sb, act: Activation, k1=None):
    """`1 - c'`, written as `sigma_w2 (K(1) - K(c)) / (sigma_w2 K(1) + sigma_b2)` to keep digits near c = 1.

    Homogeneous `psi`: unit-variance `K` and `sigma_b2 / q` (covers `q = inf`). `k1 = K(q, 1)` may be
    passed in when it is reused (fixed `q` in the c* solve).
    """
    if act.homogeneous:
        k1 = act.second_moment(1.0)
        return sw * (k1 - act.kernel(1.0, c)) / (sw * k1 + bias_ratio(sb, q))
    k1 = act.second_moment(q) if k1 is None else k1
    return sw * (k1 - act.kernel(q, c)) / (sw * k1 + sb)


def c_map(c, q, sw, sb, act: Activation):
    """`c' = (sigma_w2 K(q, c) + sigma_b2) / (sigma_w2 K(q, 1) + sigma_b2)`."""
    return 1.0 - one_minus_c_map(c, q, sw, sb, act)


def c_slope(c, q, sw, sb, act: Activation):
    """`dc'/dc = sigma_w2 q G(q, c) / (sigma_w2 K(q, 1) + sigma_b2)` (Price: `dK/dq_ab = G`)."""
    if act.homogeneous:
        return sw * act.grad_kernel(1.0, c) / (sw * act.second_moment(1.0) + bias_ratio(sb, q))
    inf, zero = jnp.isinf(q), q == 0
    q = jnp.where(inf | zero, 1.0, q)
    slope = sw * q * act.grad_kernel(q, c) / (sw * act.second_moment(q) + sb)
    # q* = inf (GELU, SiLU): the ReLU limit, slope 1. q* = 0 (sigma_b2 = 0, ordered, unbounded psi): psi is
    # linear on the vanishing scale, K(q, c) ~ psi'(0)^2 q c, so the slope tends to 1 (and to 0 if sigma_b2 > 0)
    return jnp.where(inf, 1.0, jnp.where(zero, jnp.where(sb == 0, 1.0, 0.0), slope))


# --------------------------------------------------------------------------- fixed points
def q_star(sw, sb, act: Activation):
    """Stable fixed point of the length map (`inf` where the variance grows without bound)."""
    if act.homogeneous:
        a = sw * act.second_moment(1.0)
        return jnp.where(a < 1.0, sb / jnp.where(a < 1.0, 1.0 - a, 1.0), jnp.inf)
    g = lambda q: q_map(q, sw, sb, act) - q
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


def c_star(q, sw, sb, act: Activation):
    """Stable fixed point of the c-map at `q`: 1 where the slope at `c = 1` is <= 1, else the root in [0, 1)."""
    slope1 = c_slope(1.0, q, sw, sb, act)
    if act.homogeneous:
        # every homogeneous registry entry has slope <= 1 at c = 1 everywhere (ReLU: = 1 exactly at q* = inf,
        # where c -> 1 algebraically); nan would flag a violation; linear sigma_w2 > 1: every c is fixed
        c = jnp.where(slope1 <= 1.0 + SLOPE_TOL, 1.0, jnp.nan)
        return jnp.where(sw > 1.0, jnp.nan, c) if act.name == "linear" else c
    k1 = act.second_moment(q)
    h = lambda c: 1.0 - one_minus_c_map(c, q, sw, sb, act, k1) / (1.0 - c)   # (c' - c) / (1 - c)
    return jnp.where(slope1 <= 1.0 + SLOPE_TOL, 1.0, solve_decreasing(h, 0.0, 1.0))


# --------------------------------------------------------------------------- criteria
def backward_factor(q, sw, act: Activation):
    """`sigma_w2 E|grad psi(sqrt(q) z)|^2`; at `q = inf` the activation's large-q limit."""
    if act.homogeneous:
        return sw * act.grad_moment(1.0)
    finite = jnp.isfinite(q)
    return sw * jnp.where(finite, act.grad_moment(jnp.where(finite, q, 1.0)), act.grad_moment_inf)


def chi1(sw, q, act: Activation):
    """`chi_1 = sigma_w2 E|grad psi(sqrt(q*) z)|^2` at `q = q*` (gradient criterion)."""
    return backward_factor(q, sw, act)


def chi1_tilde(sw, q, act: Activation):
    """Forward criterion: `sigma_w2 E[psi(z)^2]` for homogeneous `psi`, `chi1` otherwise (see meanfield)."""
    if act.homogeneous:
        return sw * act.second_moment(1.0)
    return chi1(sw, q, act)


def depth_scales(q, c, sw, sb, act: Activation):
    """`(xi_q, xi_c)` at the fixed point `(q, c)`: `-1/ln` of `dq'/dq` and `dc'/dc`, `inf` where >= 1."""
    if act.homogeneous:
        dq = sw * act.second_moment(1.0)
    else:
        inf = jnp.isinf(q)
        dq = jnp.where(inf, jnp.inf, sw * jax.grad(act.second_moment)(jnp.where(inf, 1.0, q)))
    dc = c_slope(c, q, sw, sb, act)
    scale = lambda s: jnp.where(s < 1.0, -1.0 / jnp.log(jnp.where(s < 1.0, s, 0.5)), jnp.inf)
    return scale(dq), scale(dc)


# --------------------------------------------------------------------------- edge of chaos, neutrality
def eoc(sb, act: Activation, criterion: str):
    """`sigma_w2` with `chi_1~ = 1` (`"forward"`) or `chi_1 = 1` (`"gradient"`) at `sigma_b2`; nan if none."""
    if act.homogeneous:
        moment = act.second_moment(1.0) if criterion == "forward" else act.grad_moment(1.0)
        return jnp.ones_like(sb) / moment
    # chi_1 = 1 and q = sigma_w2 V(q) + sigma_b2  <=>  sigma_w2 = 1 / D(q),  q - V(q)/D(q) - sigma_b2 = 0
    f = lambda q: sb + act.second_moment(q) / act.grad_moment(q) - q
    hi = Q_SEARCH_HI * (1.0 + sb)
    q = solve_decreasing(f, sb, hi, n_bisect=80, n_newton=0)
    # sigma_b2 = 0 with f < 0 just above 0: the root is q* = 0 exactly, a degenerate root (f ~ -q^3 for
    # tanh) that bisection only resolves to ~1e-8; take it exactly, with sigma_w2 = 1 / |grad psi(0)|^2 of
    # the exact activation (tanh 1, erf pi/4, tanh+avgpool 2 exactly).
    snap = (sb == 0) & (f(jnp.full_like(sb, 1e-4)) < 0)
    sw = jnp.where(snap, 1.0 / _grad_moment_at_zero(act, sb), 1.0 / act.grad_moment(jnp.where(snap, 1.0, q)))
    return jnp.where(f(hi) < 0, sw, jnp.nan)


def _grad_moment_at_zero(act: Activation, like):
    """`E|grad psi(0)|^2`: the registry's exact value (`grad_moment0`) where it has one, else `grad_moment(0)`.

    The erf expansion of tanh gives `tanh'(0)^2 = 1 - 4.1e-9`, so without the exact value the edge of chaos
    and the neutrality line of tanh at `sigma_b2 = 0` would be `1 + 4.1e-9` instead of 1. (`chi1` at that
    point still uses the expansion: `chi1(1, 0, "tanh") = 1 - 4.1e-9`, within its documented accuracy.)
    """
    if math.isnan(act.grad_moment0):
        return act.grad_moment(jnp.zeros_like(like))
    return jnp.full_like(like, act.grad_moment0)


def neutrality(sb, act: Activation):
    """`sigma_w2` with `c* = 1/2` at `sigma_b2` (nan if none; see `theory.meanfield.neutrality_line`)."""
    if act.homogeneous:        # c* = 1 everywhere (docs/theory.md section 5)
        return jnp.full_like(sb, jnp.nan)
    half = jnp.full_like(sb, 0.5)
    sw_of_q = lambda q: (q - sb) / act.second_moment(q)

    def f(q):   # c'(1/2) - 1/2 at the fixed point q, times the c-map's denominator
        sw = sw_of_q(q)
        return sw * act.kernel(q, half) + sb - 0.5 * (sw * act.second_moment(q) + sb)

    hi = sb + Q_SEARCH_HI * (1.0 + sb)
    lo = sb + 1e-12 * (1.0 + sb)
    q = solve_decreasing(f, lo, hi, n_bisect=80, n_newton=0)
    sw = sw_of_q(q)
    # sigma_b2 = 0 and c* < 1/2 right above q = 0 (tanh: c* = 0 in the whole chaotic phase): the boundary
    # is the degenerate root q -> 0, sigma_w2 -> 1 / psi'(0)^2, which bisection resolves only to ~1e-8
    snap = (sb == 0) & (f(jnp.full_like(sb, 1e-4)) < 0)
    q = jnp.where(snap, 0.0, q)
    sw = jnp.where(snap, 1.0 / _grad_moment_at_zero(act, sb), sw)
    # c* = 1/2 must be the stable fixed point; at the snapped root it is the edge of chaos itself
    chaotic = snap | (chi1(sw, q, act) >= 1.0 - 1e-9)
    return jnp.where((f(hi) < 0) & chaotic, sw, jnp.nan)


# --------------------------------------------------------------------------- propagation
def _layer(sw, sb, act: Activation):
    def step(carry, _):
        q, c = carry
        nxt = (q_map(q, sw, sb, act), c_map(c, q, sw, sb, act))
        return nxt, nxt
    return step


def propagate(sw, sb, q0, c0, act: Activation, depth: int):
    """`(q, c)` at layers `1..depth` (index `l - 1`): layer 1 linear, then `depth - 1` maps (`lax.scan`)."""
    q1 = sw * q0 + sb
    c1 = (sw * c0 * q0 + sb) / q1
    _, (qs, cs) = lax.scan(_layer(sw, sb, act), (q1, c1), None, length=depth - 1)
    return jnp.concatenate([q1[None], qs]), jnp.concatenate([c1[None], cs])


def backward_product(sw, sb, q0, act: Activation, depth: int):
    """`prod_{l=1}^{depth-1} backward_factor(q_l)` along `q_1 = sigma_w2 q0 + sigma_b2`, `q_{l+1} = q_map(q_l)`.

    Summed as logs (`lax.scan` over the layers): a factor 0 gives 0, inf gives inf, never a product overflow.
    """
    def step(carry, _):
        q, log_p = carry
        return (q_map(q, sw, sb, act), log_p + jnp.log(backward_factor(q, sw, act))), None
    q1 = sw * q0 + sb
    (_, log_p), _ = lax.scan(step, (q1, jnp.zeros_like(q1)), None, length=depth - 1)
    return jnp.exp(log_p)


def last_c(sw, sb, act: Activation, depth: int):
    """`c` at layer `depth` of `propagate` with `q0 = 1`, `c0 = 0`, without storing the layers."""
    step = _layer(sw, sb, act)
    (_, c), _ = lax.scan(lambda carry, x: (step(carry, x)[0], None), (sw + sb, sb / (sw + sb)), None,
                         length=depth - 1)
    return c


__all__ = ["implicit_root", "solve_decreasing", "bias_ratio", "q_map", "one_minus_c_map", "c_map", "c_slope",
           "q_star", "c_star", "backward_factor", "chi1", "chi1_tilde", "depth_scales", "eoc", "neutrality",
           "propagate", "backward_product", "last_c"]
