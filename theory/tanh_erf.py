"""tanh through its erf expansion: closed forms of the Gaussian expectations of tanh and tanh + maxpool.

`tanh(x) = sum_k a_k erf(b_k x) + e(x)` (`TANH_ERF_A`, `TANH_ERF_B`: 10 terms, `|e| < 3e-10`), so every
tanh expectation is a finite sum of Williams' erf closed forms, exact in `q`; tanh + maxpool adds
Plackett's identity and a 1-D Gauss-Legendre integral (derivations: the docstring of
`theory.activations`, whose registry entries `tanh`, `tanh+avgpool`, `tanh+maxpool` are built from these
functions, and docs/theory.md section 3). Every name here is importable from `theory.activations` too.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

from theory import quadrature
from theory.special import arcsin, arcsin_with_complement, sin_half_pi

PI = math.pi


# --------------------------------------------------------------------------- tanh as an erf expansion
# tanh(x) ~ sum_k TANH_ERF_A[k] * erf(TANH_ERF_B[k] * x); fitted once by minimax-weighted least squares
# on [0, 40] with sum(a) = 1 imposed (tests re-check the error bound on a dense grid).
TANH_ERF_A = TANH_ERF_B = _PJ = _PK = _PAIR_W = _PAIR_B = _PAIR_B2SUM = None   # set by _set_tanh_expansion below


def _set_tanh_expansion(a, b):
    global TANH_ERF_A, TANH_ERF_B, _PJ, _PK, _PAIR_W, _PAIR_B, _PAIR_B2SUM
    TANH_ERF_A, TANH_ERF_B = np.asarray(a, np.float64), np.asarray(b, np.float64)
    _PJ, _PK = np.triu_indices(len(TANH_ERF_A))
    # pair weights a_j a_k, counted twice off the diagonal (the pair sums are symmetric)
    _PAIR_W = np.where(_PJ == _PK, 1.0, 2.0) * TANH_ERF_A[_PJ] * TANH_ERF_A[_PK]
    _PAIR_B = TANH_ERF_B[_PJ] * TANH_ERF_B[_PK]
    _PAIR_B2SUM = 2.0 * (TANH_ERF_B[_PJ] ** 2 + TANH_ERF_B[_PK] ** 2)


def _pair_u(q):
    """`u_k = 2 b_k^2 q` for both members of every pair: shapes [..., P]."""
    q = jnp.asarray(q)[..., None]
    return 2.0 * TANH_ERF_B[_PJ] ** 2 * q, 2.0 * TANH_ERF_B[_PK] ** 2 * q


def _beta_products(q):
    """`beta_j beta_k = sqrt(u_j u_k / ((1 + u_j)(1 + u_k)))` for every pair, as
    `2 b_j b_k q / sqrt(1 + 2 (b_j^2 + b_k^2) q + 4 b_j^2 b_k^2 q^2)` (one rsqrt per pair)."""
    q = jnp.asarray(q)[..., None]
    return 2.0 * _PAIR_B * q * lax.rsqrt(1.0 + q * (_PAIR_B2SUM + q * (4.0 * _PAIR_B ** 2)))


def tanh_kernel(q, c):
    """`E[tanh(u1) tanh(u2)] = (2/pi) sum_jk a_j a_k arcsin(c beta_j beta_k)` (erf expansion)."""
    c = jnp.asarray(c)[..., None]
    return (2.0 / PI) * jnp.sum(_PAIR_W * arcsin(c * _beta_products(q)), axis=-1)


def tanh_grad_kernel(q, c):
    """`E[tanh'(u1) tanh'(u2)] = (4/pi) sum_jk a_j a_k b_j b_k / sqrt((1+u_j)(1+u_k) - c^2 u_j u_k)`."""
    uj, uk = _pair_u(q)
    c = jnp.asarray(c)[..., None]
    den = jnp.sqrt(1.0 + uj + uk + (1.0 - c) * (1.0 + c) * uj * uk)
    return (4.0 / PI) * jnp.sum(_PAIR_W * _PAIR_B / den, axis=-1)


# --------------------------------------------------------------------------- tanh + maxpool
N_MAXPOOL_GL = 10
_Q_TINY = 1e-300


def _max_partial_corr(t, uj, uk):
    """Plackett's partial correlation of the two remaining orthant coordinates, as `arcsin(rho)`, and `Q`.

    `rho = t (Q + 1) / sqrt(X_j X_k)` with `e = 1 - t^2`, `S = 2 + u_j + u_k`, `Q = 1 + u_j + u_k + e u_j u_k`,
    `X_j = S + e u_k (1 + u_j)`, `X_k = S + e u_j (1 + u_k)`. `rho -> 1` as `t -> 1`, where arcsin has
    infinite slope, so `1 - rho = D / (sqrt(X_j X_k) (sqrt(X_j X_k) + t (Q + 1)))` is formed from
    `D = X_j X_k - t^2 (Q + 1)^2 = e S (S + u_j + u_k) + e^2 u_j u_k (1 + u_j + u_k + 2 S) + e^3 u_j^2 u_k^2`,
    a sum of non-negative terms (no cancellation), and arcsin is evaluated from it.
    """
    e = (1.0 - t) * (1.0 + t)
    big_s = 2.0 + uj + uk
    big_q = 1.0 + uj + uk + e * uj * uk
    root = jnp.sqrt((big_s + e * uk * (1.0 + uj)) * (big_s + e * uj * (1.0 + uk)))
    num = t * (big_q + 1.0)
    d = e * big_s * (big_s + uj + uk) + e ** 2 * uj * uk * (1.0 + uj + uk + 2.0 * big_s) + e ** 3 * (uj * uk) ** 2
    return arcsin_with_complement(num / root, d / (root * (root + num))), big_q


def tanh_max_grad_kernel(q, c):
    """`E<grad psi_a, grad psi_b>`, psi = tanh(max(h1, h2)):
    `(8/pi) sum_jk a_j a_k b_j b_k (1/4 + arcsin(rho_jk(c)) / (2 pi)) / sqrt(Q_jk(c))`."""
    uj, uk = _pair_u(jnp.maximum(q, _Q_TINY))
    c = jnp.asarray(c)[..., None]
    asin_rho, big_q = _max_partial_corr(c, uj, uk)
    terms = (0.25 + asin_rho / (2.0 * PI)) / jnp.sqrt(big_q)
    return (8.0 / PI) * jnp.sum(_PAIR_W * _PAIR_B * terms, axis=-1)


def tanh_max_kernel(q, c):
    """`E[tanh(M_a) tanh(M_b)] = kernel(q, 1) - q int_c^1 grad_kernel(q, t) dt`.

    With `theta = arcsin(t beta_j beta_k)` the pair integrands become `(4/pi)(1/4 + arcsin(rho)/(2 pi))`,
    smooth in theta; the constant part integrates to `(tanh_kernel(q, 1) - tanh_kernel(q, c)) / 2`.
    """
    q = jnp.maximum(jnp.asarray(q), _Q_TINY)
    q, c = jnp.broadcast_arrays(q, jnp.asarray(c))
    uj, uk = _pair_u(q)
    bb = _beta_products(q)                                           # [..., P]
    lo, hi = arcsin(c[..., None] * bb), arcsin(bb)
    # arcsin(rho) ~ pi/2 - C sqrt(theta_1 - theta) at the upper end (rho = 1 at t = 1): with
    # theta = theta_1 - (theta_1 - theta_c) s^2 the integrand is smooth in s
    # at c = 1 the interval is empty and the integrand's derivative is nan at its collapsed nodes: place
    # the nodes as for c = 0 there (the integral is still multiplied by hi - lo = 0)
    lo_nodes = jnp.where(c[..., None] >= 1.0, 0.0, lo)
    s, w = quadrature.legendre(N_MAXPOOL_GL)
    theta = hi[..., None] - (hi - lo_nodes)[..., None] * s ** 2      # [..., P, n]
    t = sin_half_pi(theta) / bb[..., None]
    asin_rho, _ = _max_partial_corr(t, uj[..., None], uk[..., None])
    integral = jnp.sum(asin_rho * 2.0 * s * w, axis=-1) * (hi - lo)   # [..., P]
    v = tanh_kernel(q, jnp.ones_like(q))
    return 0.5 * (v + tanh_kernel(q, c)) - (2.0 / PI ** 2) * jnp.sum(_PAIR_W * integral, axis=-1)


def tanh_max_mean(q):
    """`E[tanh(max(h1, h2))] = sum_k a_k (1/2 - arcsin(1 / (1 + u_k)) / pi)`."""
    u = 2.0 * TANH_ERF_B ** 2 * jnp.asarray(q)[..., None]
    return jnp.sum(TANH_ERF_A * (0.5 - arcsin(1.0 / (1.0 + u)) / PI), axis=-1)


# All a_k > 0 (a discretised Gaussian scale mixture: the logistic law is one, Andrews & Mallows 1974),
# so the pair sums have no cancellation. max|e| = 2.5e-10, max|e'| = 2.0e-9.
_set_tanh_expansion(
    [0.0003034554751422022, 0.007734583344995383, 0.04892221447894072, 0.1410820681132366,
     0.24126096213238749, 0.2710033792452173, 0.19545595262989404, 0.0795781177494132,
     0.014065225862243425, 0.0005940409685295522],
    [0.3097341533070865, 0.3889168073146748, 0.4815842143608803, 0.5947466935073105,
     0.734483611384803, 0.9064821253062686, 1.1169273139654414, 1.3745757695262755,
     1.6949904125135975, 2.1176222552430826])
