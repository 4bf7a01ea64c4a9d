"""Elementary functions the closed-form kernels call many times per map evaluation (float64 jax.numpy).

XLA's float64 arcsin / sin are slow on CPU next to tanh (docs/phase_diagram.md) and the kernels of
`theory.activations` and `theory.gelu` call them ~100 times per map evaluation, so both are evaluated
here as polynomials in vectorisable Horner form.

- `arcsin(x)`: |x| <= 1/2 directly, else `pi/2 - 2 arcsin(sqrt((1 - |x|)/2))`, so that
  `arcsin(sqrt t)/sqrt t` is needed on t in [0, 1/4] only; there it is the polynomial below in
  s = 8t - 1, the Chebyshev economisation (exact rational arithmetic) of its Taylor series
  `sum_n C(2n, n) t^n / (4^n (2n + 1))`, truncation tail 1.6e-17 (tests: max error 2 ulp of pi/2).
- `arcsin_with_complement(x, 1 - x)`: the same, given `1 - x` formed without cancellation by the
  caller (keeps digits where the argument tends to 1, e.g. the large-q GELU kernel).
- `sin_half_pi(theta)`: Taylor series on [-pi/2, pi/2] (remainder < 3e-16).
- `sqrt1m(c) = sqrt((1 - c)(1 + c))`, accurate near |c| = 1.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

PI = math.pi

_ASIN_SERIES = np.array([
    1.0221005752492498, 0.023472196200223696, 0.0014859415578623095, 0.00012529313331256214,
    1.2116523077144013e-05, 1.269930661896025e-06, 1.4033986094563414e-07, 1.6101623159871324e-08,
    1.8997263232217636e-09, 2.2879502893106995e-10, 2.805655012218205e-11, 3.682516286629292e-12,
    4.658263107307966e-13])
_SIN_SERIES = np.array([(-1.0) ** n / math.factorial(2 * n + 1) for n in range(11)])   # |theta| <= pi/2


def horner(coefs: np.ndarray, t):
    """`sum_k coefs[k] t^k` in Horner form (static numpy coefficients)."""
    acc = jnp.full_like(t, coefs[-1])
    for a in coefs[-2::-1]:
        acc = acc * t + a
    return acc


def arcsin_with_complement(x, one_minus_x):
    """arcsin(x) on [-1, 1] given also `1 - x` computed without cancellation (used near x = 1).

    |x| <= 1/2: `x p(x^2)`; x > 1/2: `pi/2 - 2 y p(y^2)`, `y = sqrt((1 - x)/2)`; x < -1/2 by symmetry.
    """
    a = jnp.abs(x)
    big = a > 0.5
    one_minus_a = jnp.where(x > 0, one_minus_x, 1.0 - a)
    t = jnp.where(big, 0.5 * jnp.clip(one_minus_a, 0.0, None), x * x)
    series = horner(_ASIN_SERIES, 8.0 * t - 1.0)
    outer = 0.5 * PI - 2.0 * jnp.sqrt(jnp.where(big, t, 0.25)) * series
    return jnp.where(big, jnp.sign(x) * outer, x * series)


def arcsin(x):
    """arcsin on [-1, 1] (float64, differentiable; derivative infinite only at |x| = 1)."""
    return arcsin_with_complement(x, 1.0 - x)


def sin_half_pi(theta):
    """sin on [-pi/2, pi/2] by its Taylor series (remainder < 3e-16)."""
    return theta * horner(_SIN_SERIES, theta * theta)


def sqrt1m(c):
    """sqrt(1 - c^2) computed as sqrt((1 - c)(1 + c)), accurate near |c| = 1."""
    return jnp.sqrt(jnp.clip((1.0 - c) * (1.0 + c), 0.0))
