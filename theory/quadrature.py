"""Gaussian expectations by fixed quadrature rules (docs/theory.md section 4).

Every rule here is a set of static numpy nodes computed once (cached) and baked into traced
jax.numpy code as constants, so expectations vmap and jit like any other array function.

- `hermite(n)`: probabilists' Gauss-Hermite (`hermegauss`), weights divided by sqrt(2 pi) so that
  `sum_i w_i f(x_i) ~ E[f(z)]`, `z ~ N(0, 1)`; exact for polynomials of degree < 2n.
- `legendre(n)`: Gauss-Legendre on [0, 1] for smooth integrands on a finite interval.
- `expect_1d(f, q)`: `E[f(sqrt(q) z)]`.
- `expect_2d(f, g, q, c)`: `E[f(u1) g(u2)]` on the Cholesky grid of docs/theory.md section 2,
  `u1 = sqrt(q) z1`, `u2 = sqrt(q) (c z1 + sqrt(1 - c^2) z2)`, as a tensordot of the two node axes.

Both inputs share the same variance `q` (our two inputs always have equal norms, docs/theory.md section 1).
Quadrature on a kink (ReLU, max) converges only like 1e-3 (section 4): use closed forms there.
All functions assume float64 inputs (the caller scopes `jax.enable_x64`).
"""
from __future__ import annotations

import functools
from typing import Callable

import jax.numpy as jnp
import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from numpy.polynomial.legendre import leggauss

# Default orders (the registry uses Gauss-Hermite for no activation: a fixed rule loses digits once sqrt(q)
# is large against the activation's scale, e.g. GELU at q = 1e3; tests use it as a cross-check where it
# converges).
N_1D = 200
N_2D = 64


@functools.lru_cache(maxsize=None)
def hermite(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Probabilists' Gauss-Hermite nodes and normalised weights: `sum(w) == 1`."""
    x, w = hermegauss(n)
    return x, w / np.sqrt(2.0 * np.pi)


@functools.lru_cache(maxsize=None)
def legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [0, 1]."""
    x, w = leggauss(n)
    return 0.5 * (x + 1.0), 0.5 * w


def expect_1d(f: Callable, q, n: int = N_1D):
    """`E[f(sqrt(q) z)]`, `z ~ N(0, 1)`, for `q` of any shape (node axis appended last)."""
    x, w = hermite(n)
    u = jnp.sqrt(q)[..., None] * x
    return jnp.sum(f(u) * w, axis=-1)


def expect_2d(f: Callable, g: Callable, q, c, n: int = N_2D):
    """`E[f(u1) g(u2)]` for `(u1, u2)` centred Gaussian, variances `q`, correlation `c`.

    Cholesky parametrisation (docs/theory.md section 2): `u1 = sqrt(q) z1`,
    `u2 = sqrt(q) (c z1 + s z2)`, `s = sqrt((1 - c)(1 + c))` (accurate near `c = 1`).
    The sum over `z2` is done first (inner conditional expectation), then over `z1`.
    """
    x, w = hermite(n)
    q, c = jnp.broadcast_arrays(jnp.asarray(q), jnp.asarray(c))
    rq = jnp.sqrt(q)[..., None]
    s = jnp.sqrt(jnp.clip((1.0 - c) * (1.0 + c), 0.0))[..., None, None]
    u1 = rq * x                                               # [..., i]
    u2 = rq[..., None] * (c[..., None, None] * x[:, None] + s * x[None, :])   # [..., i, j]
    inner = jnp.tensordot(g(u2), w, axes=([-1], [0]))         # E[g(u2) | z1]
    return jnp.sum(f(u1) * inner * w, axis=-1)


def integrate(f: Callable, lo, hi, n: int):
    """`int_lo^hi f(t) dt` by n-point Gauss-Legendre; `lo`, `hi` broadcast, node axis appended last."""
    x, w = legendre(n)
    lo, hi = jnp.asarray(lo), jnp.asarray(hi)
    width = (hi - lo)[..., None]
    t = lo[..., None] + width * x
    return jnp.sum(f(t) * w, axis=-1) * width[..., 0]
