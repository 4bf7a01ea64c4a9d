"""GELU and SiLU: exact Gaussian expectations through the family `x Phi(a x)` (docs/theory.md sections 2-4).

`GELU(x) = x Phi(x)`, and SiLU is a finite mixture of the same family: with the erf expansion of tanh
used for tanh (`theory.activations`, `tanh(y) = sum_k a_k erf(b_k y) + e(y)`, `sum a_k = 1`,
`|e| < 3e-10`), `sigmoid(x) = (1 + tanh(x/2))/2 = sum_k a_k Phi(s_k x) + e(x/2)/2` with
`s_k = b_k / sqrt 2`, so `SiLU(x) = sum_k a_k x Phi(s_k x)` up to `x e(x/2)/2` (relative error of the
kernels ~1e-9 at any q). Every expectation is then a finite sum of the closed forms below: exact in q,
unlike a fixed Gauss-Hermite rule, which loses digits once `sqrt(q)` is large against the scale of the
kink (the comparison: docs/phase_diagram.md).

Closed forms (derived by Gaussian integration by parts / Stein's lemma on
`x Phi(a x) = E_e[x 1{a x - e > 0}]`; tests check them against scipy quadrature). For
`u1 = sqrt(q) z1`, `u2 = sqrt(q)(c z1 + s z2)`, `s^2 = 1 - c^2`, and slopes `a`, `b`:

- `A1 = 1 + a^2 q`, `A2 = 1 + b^2 q`, `P = A1 A2`, `D = P - a^2 b^2 q^2 c^2 = 1 + (a^2 + b^2) q + a^2 b^2 q^2 s^2`,
  `rho = a b q c / sqrt(P)` (the correlation of the two orthant events), `h = 1/A1 + 1/A2`;
- `E[u1 Phi(a u1)] = a q / sqrt(2 pi A1)`;
- `K_ab = E[u1 Phi(a u1) u2 Phi(b u2)] = q c (1/4 + arcsin(rho)/(2 pi)) + a b q^2 (s^2 + c^2 h) / (2 pi sqrt D)`;
- `G_ab = E[phi_a'(u1) phi_b'(u2)] = 1/4 + arcsin(rho)/(2 pi) + a b q c (h + 1/D) / (2 pi sqrt D)`,
  `phi_a'(x) = Phi(a x) + a x phi(a x)`; `G_ab = dK_ab/d(q c)` (Price's theorem).

`1 - rho = D / (sqrt P (sqrt P + a b q c))` is formed without cancellation, so `arcsin(rho)` keeps its
digits when `rho -> 1` (large q near c = 1), and every other term is a sum of positive parts.
For GELU, `a = b = 1`: `K = q c (1/4 + arcsin(q c/(1 + q))/(2 pi)) + q^2 (1 - c^2 + 2 c^2/(1 + q)) /
(2 pi sqrt((1 + q)^2 - q^2 c^2))`.
Mixtures `sum_k w_k x Phi(s_k x)` sum `w_j w_k K_{s_j s_k}` over the pairs `j <= k` (K is symmetric
in `a, b` because both inputs have the same variance).

All functions take float64 arrays that broadcast (`q` finite, `c` in [-1, 1]).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf

from theory.special import arcsin_with_complement

TWO_PI = 2.0 * math.pi
GELU_MIXTURE = (np.array([1.0]), np.array([1.0]))   # (weights, slopes): x Phi(x)


def silu_mixture(tanh_erf_a, tanh_erf_b) -> tuple[np.ndarray, np.ndarray]:
    """(weights, slopes) of SiLU from tanh's erf expansion: `a_k`, `s_k = b_k / sqrt 2`."""
    return np.asarray(tanh_erf_a, np.float64), np.asarray(tanh_erf_b, np.float64) / math.sqrt(2.0)


def _pairs(weights, slopes):
    """Slopes of every pair `j <= k` and its weight `w_j w_k` (twice off the diagonal)."""
    j, k = np.triu_indices(len(weights))
    pair_w = np.where(j == k, 1.0, 2.0) * weights[j] * weights[k]
    return slopes[j], slopes[k], pair_w


def _pair_terms(q, c, a, b):
    """`(K_ab, G_ab)` with the pair axis last (module docstring)."""
    q, c = jnp.asarray(q)[..., None], jnp.asarray(c)[..., None]
    a2q, b2q, abq = a * a * q, b * b * q, a * b * q
    a1, a2 = 1.0 + a2q, 1.0 + b2q
    s2 = (1.0 - c) * (1.0 + c)
    d = 1.0 + a2q + b2q + abq * abq * s2
    root_p, root_d = jnp.sqrt(a1 * a2), jnp.sqrt(d)
    rho = abq * c / root_p
    orthant = 0.25 + arcsin_with_complement(rho, d / (root_p * (root_p + abq * c))) / TWO_PI
    h = 1.0 / a1 + 1.0 / a2
    kernel = q * c * orthant + abq * q * (s2 + c * c * h) / (TWO_PI * root_d)
    grad_kernel = orthant + abq * c * (h + 1.0 / d) / (TWO_PI * root_d)
    return kernel, grad_kernel


def mixture_mean(q, weights, slopes):
    """`E[psi(sqrt(q) z)] = sum_k w_k s_k q / sqrt(2 pi (1 + s_k^2 q))`."""
    q = jnp.asarray(q)[..., None]
    return jnp.sum(weights * slopes * q / jnp.sqrt(TWO_PI * (1.0 + slopes ** 2 * q)), axis=-1)


def mixture_kernel(q, c, weights, slopes):
    """`E[psi(u1) psi(u2)] = sum_{j <= k} w_jk K_{s_j s_k}(q, c)`."""
    a, b, pair_w = _pairs(weights, slopes)
    return jnp.sum(pair_w * _pair_terms(q, c, a, b)[0], axis=-1)


def mixture_grad_kernel(q, c, weights, slopes):
    """`E[psi'(u1) psi'(u2)] = sum_{j <= k} w_jk G_{s_j s_k}(q, c)`."""
    a, b, pair_w = _pairs(weights, slopes)
    return jnp.sum(pair_w * _pair_terms(q, c, a, b)[1], axis=-1)


def gelu(x):
    """`x Phi(x)` (exact GELU, not the tanh approximation)."""
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_grad(x):
    """`Phi(x) + x phi(x)`."""
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * jnp.exp(-0.5 * x * x) / math.sqrt(TWO_PI)


def silu(x):
    """`x sigmoid(x)`."""
    return x * jax.nn.sigmoid(x)


def silu_grad(x):
    """`sigmoid(x) (1 + x (1 - sigmoid(x)))`."""
    s = jax.nn.sigmoid(x)
    return s * (1.0 + x * (1.0 - s))
