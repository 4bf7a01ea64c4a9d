"""Initial Guessing Bias (IGB): gamma <-> c, estimators from pre-activations, f_max distributions.

THEORY.md section 5 (Francazi, Lucchi, Baity-Jesi 2024, arXiv 2306.00809; Bassi et al. 2026):

- For one network, node `i` has a data-mean `mu_i = E_x[h_i(x)]`; `sigma_mu2 = Var_i(mu_i)`,
  `sigma_y2 = mean_i Var_x(h_i(x))`, `gamma = sigma_mu2 / sigma_y2`.
- Infinite width then infinite data: `q_aa = sigma_mu2 + sigma_y2`, `q_ab = sigma_mu2`, so
  `c = gamma / (1 + gamma)` and `gamma = c / (1 - c)`; `c = 1/2` (gamma = 1) separates neutrality
  (`gamma < 1`) from prejudice.
- Binary output: the fraction of inputs assigned to class 0 is `G0 = Phi(sqrt(gamma) delta)`,
  `delta ~ N(0, 1)` over networks; `E f_max = 1/2 + arctan(sqrt(gamma)) / pi`.
- `n` classes: `f_c = E_xi[prod_{c' != c} Phi(xi + sqrt(gamma) (Z_c - Z_c'))]`, `Z ~ N(0, I_n)` per network.

Public functions compute in float64 inside `jax.enable_x64` and return numpy values.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr, ndtri

from theory import quadrature

N_XI = 48               # Gauss-Hermite nodes for the xi-average of the n-class formula


def gamma_of_c(c):
    """jax.numpy `c / (1 - c)` with `inf` at `c >= 1` (for use inside traced float64 code)."""
    return jnp.where(c >= 1.0, jnp.inf, c / jnp.where(c >= 1.0, 1.0, 1.0 - c))


def _x64(fn, *args):
    with jax.enable_x64(True):
        return np.asarray(fn(*[jnp.asarray(np.asarray(a, dtype=np.float64)) for a in args]))


def gamma_from_c(c):
    """`gamma = c / (1 - c)` (`inf` at `c = 1`)."""
    return _x64(gamma_of_c, c)


def c_from_gamma(gamma):
    """`c = gamma / (1 + gamma)` (`1` at `gamma = inf`)."""
    return _x64(lambda g: jnp.where(jnp.isinf(g), 1.0, g / (1.0 + jnp.where(jnp.isinf(g), 0.0, g))), gamma)


def estimate(h) -> dict:
    """IGB statistics of one network's pre-activations `h`, shape `(nodes, inputs)`.

    Naive: `sigma_mu2 = Var_i(mu_i)` (population variance over nodes of the input-means),
    `sigma_y2 = mean_i Var_a(h_ia)`, `gamma = sigma_mu2 / sigma_y2`; inflated by about
    `(1 + gamma) / (n - 1)` with `n` inputs. Bias-corrected: with `G = h^T h / N`, `Q = mean_a G_aa`,
    `P = mean_{a != b} G_ab`, `gamma_corr = P / (Q - P)`, so that `c = P / Q` equals
    `gamma_corr / (1 + gamma_corr)` exactly (THEORY.md section 5). Also returns `q = Q`, `p = P`, `c`.
    """
    with jax.enable_x64(True):
        h = jnp.asarray(np.asarray(h, dtype=np.float64))
        if h.ndim != 2 or h.shape[1] < 2:
            raise ValueError(f"h must have shape (nodes, inputs >= 2), got {h.shape}")
        out = _estimate(h)
        return {k: float(v) for k, v in out.items()}


@jax.jit
def _estimate(h):
    n_nodes, n_in = h.shape
    mu = h.mean(axis=1)
    sigma_mu2 = mu.var()
    sigma_y2 = h.var(axis=1).mean()
    gram = h.T @ h / n_nodes
    q = jnp.trace(gram) / n_in
    p = (gram.sum() - jnp.trace(gram)) / (n_in * (n_in - 1))
    return {"sigma_mu2": sigma_mu2, "sigma_y2": sigma_y2, "gamma": sigma_mu2 / sigma_y2,
            "gamma_corr": p / (q - p), "q": q, "p": p, "c": p / q}


def g0_density(g, gamma):
    """Density of `G0 = Phi(sqrt(gamma) delta)` on (0, 1): `gamma^{-1/2} exp(x^2 (1 - 1/gamma) / 2)`,
    `x = Phi^{-1}(g)`; identically 1 at `gamma = 1` (uniform)."""
    def density(g, gamma):
        x = ndtri(g)
        return jnp.exp(0.5 * x * x * (1.0 - 1.0 / gamma)) / jnp.sqrt(gamma)
    return _x64(density, g, gamma)


def fmax_binary_mean(gamma):
    """`E f_max = 1/2 + arctan(sqrt(gamma)) / pi` for two classes (0.75 at gamma = 1)."""
    return _x64(lambda g: 0.5 + jnp.arctan(jnp.sqrt(g)) / math.pi, gamma)


def _class_fractions(z, gamma):
    """`f_c` for one network with class centres `z` (shape [n]): `E_xi prod_{c' != c} Phi(xi + sqrt(gamma)(z_c - z_c'))`."""
    x, w = quadrature.hermite(N_XI)
    d = jnp.sqrt(gamma) * (z[:, None] - z[None, :])                   # [c, c']
    phi = jnp.where(jnp.eye(z.shape[0], dtype=bool)[None], 1.0, ndtr(x[:, None, None] + d[None]))
    return jnp.sum(w[:, None] * jnp.prod(phi, axis=-1), axis=0)


def _top_fraction(z, gamma):
    """`f_max` of one network: the class with the largest centre has the largest fraction."""
    x, w = quadrature.hermite(N_XI)
    top = jnp.argmax(z)
    d = jnp.sqrt(gamma) * (z[top] - z)
    phi = jnp.where(jnp.arange(z.shape[0]) == top, 1.0, ndtr(x[:, None] + d[None]))   # [xi, c'], c' != top
    return jnp.sum(w * jnp.prod(phi, axis=-1))


@functools.partial(jax.jit, static_argnums=(2, 3))
def _fmax_samples(key, gamma, n_classes: int, n_networks: int):
    if n_classes == 2:    # G0 = Phi(sqrt(gamma) delta): the xi-average of the formula done exactly
        g0 = ndtr(jnp.sqrt(gamma) * jax.random.normal(key, (n_networks,), jnp.float64))
        return jnp.maximum(g0, 1.0 - g0)
    z = jax.random.normal(key, (n_networks, n_classes), jnp.float64)
    return jax.vmap(lambda zz: _top_fraction(zz, gamma))(z)


def fmax_samples(key, gamma, n_classes: int = 2, n_networks: int = 10_000):
    """`f_max` of `n_networks` independent networks at imbalance `gamma` (one value per network).

    Binary: `max(G0, 1 - G0)`, `G0 = Phi(sqrt(gamma) delta)`; `n` classes: the fraction of the class
    with the largest centre `Z_c` (the largest fraction), the xi-average of the n-class formula by
    Gauss-Hermite (THEORY.md section 5).
    """
    _check_classes(n_classes)
    with jax.enable_x64(True):
        return np.asarray(_fmax_samples(key, jnp.float64(gamma), int(n_classes), int(n_networks)))


N_FMAX_GH = 64   # Gauss-Hermite nodes per axis (xi, z) of the n-class mean
N_FMAX_GL = 24   # Gauss-Legendre nodes of the bivariate normal CDF


def _bvn_cdf(a, b, rho):
    """`P(X <= a, Y <= b)`, unit normals with correlation `rho in [0, 1)`, by Plackett's identity:
    `Phi(a) Phi(b) + (1/2 pi) int_0^{arcsin rho} exp(-(a^2 + b^2 - 2ab sin t) / (2 cos^2 t)) dt`."""
    integrand = lambda t: jnp.exp(-(a[..., None] ** 2 + b[..., None] ** 2 - 2 * a[..., None] * b[..., None]
                                    * jnp.sin(t)) / (2 * jnp.cos(t) ** 2))
    top = jnp.arcsin(rho) * jnp.ones_like(a)
    return ndtr(a) * ndtr(b) + quadrature.integrate(integrand, jnp.zeros_like(a), top, N_FMAX_GL) / (2 * math.pi)


@jax.jit
def _fmax_mean_n(gamma, n_classes):
    """`E f_max = n E_{z, xi}[g(xi, z)^(n-1)]`, `g = E_U[Phi(xi + sqrt(gamma)(z - U)) 1{U < z}]`.

    The top class (centre `z`) wins an input against each other class independently given the shared
    input noise `xi`, and the other centres are iid below `z`, so the (n-1)-fold product factorises;
    `g = Phi2((xi + sqrt(gamma) z) / sqrt(1 + gamma), z; sqrt(gamma / (1 + gamma)))`.
    """
    x, w = quadrature.hermite(N_FMAX_GH)
    xi, z = x[:, None], x[None, :]
    rho = jnp.sqrt(gamma / (1.0 + gamma))
    g = _bvn_cdf((xi + jnp.sqrt(gamma) * z) / jnp.sqrt(1.0 + gamma) + 0.0 * z, z + 0.0 * xi, rho)
    return n_classes * jnp.einsum("i,j,ij->", w, w, g ** (n_classes - 1))


def fmax_mean(gamma, n_classes: int = 2):
    """`E f_max` at imbalance `gamma` (scalar or array), over networks.

    Binary: closed form `1/2 + arctan(sqrt(gamma))/pi`. `n > 2`: `n E[g^(n-1)]` (see `_fmax_mean_n`), a
    2-D Gauss-Hermite sum over the top centre and the input noise of a bivariate normal CDF: deterministic
    quadrature, no sampling (`gamma` up to ~1e3; checked against the binary closed form and `fmax_samples`).
    """
    _check_classes(n_classes)
    if n_classes == 2:
        return fmax_binary_mean(gamma)
    gammas = np.asarray(gamma, dtype=np.float64)
    with jax.enable_x64(True):
        f = jax.vmap(lambda g: _fmax_mean_n(g, float(n_classes)))
        return np.asarray(f(jnp.asarray(gammas.reshape(-1)))).reshape(gammas.shape)


def _check_classes(n_classes: int) -> None:
    if int(n_classes) < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")


__all__ = ["gamma_of_c", "gamma_from_c", "c_from_gamma", "estimate", "g0_density", "fmax_binary_mean", "fmax_mean",
           "fmax_samples"]
