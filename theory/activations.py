"""Activation registry: the Gaussian expectations the mean-field maps need (docs/theory.md sections 2-4).

For an activation `psi` (elementwise `phi`, or `k = 2` independent pre-activations pooled by max or
mean) and two inputs with equal pre-activation variance `q` and correlation `c`, each entry gives

- `mean(q)          = E[psi(sqrt(q) z)]`
- `second_moment(q) = E[psi(sqrt(q) z)^2]`                      (length map, docs/theory.md section 2)
- `kernel(q, c)     = E[psi(u_a) psi(u_b)]`                      (covariance map)
- `grad_kernel(q, c) = E[<grad psi(u_a), grad psi(u_b)>]`       (`chi_c / sigma_w2`; by Price's theorem
  `d kernel / d q_ab`, which is also how the multi-node closed forms below were derived)
- `grad_moment(q)   = E[|grad psi(sqrt(q) z)|^2]`               (`chi_1 / sigma_w2`)
- `grad_moment0     = |grad psi(0)|^2` of the exact activation, where the edge of chaos at `sigma_b2 = 0`
  needs it (`q* = 0` there; nan for the homogeneous entries, whose `grad_moment` is constant)

where for pooled activations `u_a = (h_a1, h_a2)` and the pairs `(h_a1, h_b1)`, `(h_a2, h_b2)` are iid
with covariance `q [[1, c], [c, 1]]`. `psi(h)` applies the activation to a finite layer: pooled
activations read the last axis as `N` groups of `k` consecutive pre-activations.

How each expectation is computed (no Monte Carlo anywhere):

- linear, relu, erf: closed forms (docs/theory.md section 3; Cho & Saul 2009, Williams 1997).
- tanh: `tanh(x) = sum_k a_k erf(b_k x) + e(x)`, a 10-term erf expansion fitted once
  (`|e| < 3e-10`, `|e'| < 2.1e-9` on the real line, sum a_k = 1 exactly), so every tanh expectation is a
  finite sum of Williams' erf closed forms, exact in `q`: `kernel = (2/pi) sum_jk a_j a_k
  arcsin(c beta_j beta_k)`, `beta_k^2 = 2 b_k^2 q / (1 + 2 b_k^2 q)`. Gauss-Hermite with 200 nodes is
  only 1e-6 accurate at `q = 7` (tanh is steep on the Gaussian's scale); tests check both agree where
  Gauss-Hermite converges.
- gelu, silu: members of the family `x Phi(a x)` (SiLU through the same erf expansion as tanh), whose
  expectations are closed forms in any q (`theory.gelu`).
- avgpool of `k = 2` iid pairs: `E[psi_a psi_b] = K_phi / 2 + m_a m_b / 2`, `E<grad, grad> = G_phi / 2`.
- relu + maxpool: with `theta = arccos c`, `A = arcsin(c / sqrt 2)`, Plackett's identity on the
  4-D orthant probability `2 P(h_1 > max(h_2, 0) for both inputs)` gives the closed form
  `G(c) = 21/32 - theta/pi + theta^2/(2 pi^2) + A/(2 pi) - A^2/(2 pi^2)` (G(1) = 3/4, G(0) = 9/32,
  G(-1) = 0), and `K(c) = K(1) - int_c^1 G`, integrated in closed form; `K(1) = 3/4 + 1/(2 pi)`,
  `K(0) = (1/sqrt(2 pi) + 1/(2 sqrt pi))^2 = E[relu(max)]^2`, `K(-1) = 1/pi`.
- tanh + maxpool: per erf term, `erf(b M) = 2 Phi(sqrt 2 b M) - 1` with `M = max(h_1, h_2)`; the product
  of two such terms is an inclusion-exclusion of orthant probabilities of
  `(h_a1 - e_a, h_a2 - e_a, h_b1 - e_b, h_b2 - e_b)` (auxiliary Gaussians `e`). Plackett's identity
  differentiates the 4-D orthant in `c` into a closed form (a bivariate density times a 2-D orthant
  probability with partial correlation `rho`), so `grad_kernel` is closed form and
  `kernel(q, c) = kernel(q, 1) - q int_c^1 grad_kernel`, a 1-D smooth integral done by
  Gauss-Legendre after the substitutions `theta = arcsin(t beta_j beta_k)` (removes the peak of
  `1/sqrt(Q)` at large q) and `theta = theta_1 - (theta_1 - theta_c) s^2` (removes the square-root
  behaviour of `arcsin(rho)` at `t = 1`).
  `kernel(q, 1) = E[tanh(M)^2] = E[tanh(z)^2]` and `grad_moment` equal tanh's (even functions of the
  max of two iid Gaussians have the law of one, docs/theory.md section 3).
The tanh and tanh + maxpool closed forms (erf expansion) are in `theory.tanh_erf`.

All functions take float64 arrays that broadcast and return arrays of the broadcast shape; they are
differentiable in `q` and `c` (`jax.grad`), the ReLU kernels through Price's theorem (`dK/dc = G`), whose
closed forms autodiff would turn into nan at `c = 1`.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from theory import gelu as xphi
from theory.special import sqrt1m as _sqrt1m
from theory.tanh_erf import (TANH_ERF_A, TANH_ERF_B, tanh_grad_kernel, tanh_kernel, tanh_max_grad_kernel,
                             tanh_max_kernel, tanh_max_mean)

PI = math.pi
SQRT_2PI = math.sqrt(2.0 * PI)


class Activation(NamedTuple):
    """Expectations of one activation under the conventions of docs/theory.md section 1-2."""
    name: str
    nodes: int             # pre-activations pooled into one unit (k)
    bounded: bool          # |psi| <= 1: q* lies in [sigma_b2, sigma_b2 + sigma_w2]
    homogeneous: bool      # psi(a h) = a psi(h) for a > 0: q scales out of every map
    psi: Callable          # finite layer: h[..., k N] -> [..., N]
    mean: Callable
    second_moment: Callable
    kernel: Callable
    grad_kernel: Callable
    grad_moment: Callable
    grad_moment_inf: float  # lim_{q -> inf} grad_moment (unbounded, non-homogeneous); nan otherwise
    # E|grad psi(0)|^2 of the exact activation (nan: use grad_moment(0)). At sigma_b2 = 0 the edge of chaos
    # of tanh-like psi is the degenerate root q* = 0, sigma_w2 = 1 / E|grad psi(0)|^2, known exactly; the
    # erf expansion of tanh has tanh'(0)^2 = 1 - 4.1e-9 (its |e'(0)| = 2.0e-9), which would move it to 1 + 4.1e-9.
    grad_moment0: float = math.nan


def _pool(phi: Callable, reduce: Callable, k: int = 2) -> Callable:
    def psi(h):
        h = jnp.asarray(h)
        return reduce(phi(h.reshape(h.shape[:-1] + (h.shape[-1] // k, k))), axis=-1)
    return psi


def _identity(x):
    return x


# --------------------------------------------------------------------------- linear
def _linear() -> Activation:
    return Activation(
        "linear", 1, False, True, _identity,
        mean=lambda q: jnp.zeros_like(q),
        second_moment=lambda q: q,
        kernel=lambda q, c: q * c,
        grad_kernel=lambda q, c: jnp.ones_like(q * c),
        grad_moment=lambda q: jnp.ones_like(q),
        grad_moment_inf=math.nan)


# --------------------------------------------------------------------------- relu
def _price_derivative(grad_kernel_unit: Callable) -> Callable:
    """Decorator: give a unit-variance kernel `K(c)` the derivative `dK/dc = G(c)` (Price's theorem).

    The closed forms hold `sqrt(1 - c^2)` and `arccos c` terms whose derivatives are infinite at
    `c = 1` and cancel analytically; autodiff would return nan there (c reaches 1 exactly in deep
    ordered nets), while `G(1)` is finite.
    """
    def wrap(kernel_unit: Callable) -> Callable:
        k = jax.custom_jvp(kernel_unit)
        k.defjvp(lambda primals, tangents: (kernel_unit(*primals), grad_kernel_unit(*primals) * tangents[0]))
        return k
    return wrap


def relu_grad_kernel(c):
    """`E[relu'(u1) relu'(u2)] = (pi - theta) / (2 pi)`."""
    return (PI - jnp.arctan2(_sqrt1m(c), c)) / (2.0 * PI)


@_price_derivative(relu_grad_kernel)
def relu_kernel_unit(c):
    """`E[relu(u1) relu(u2)]` at unit variance: `(sqrt(1-c^2) + (pi - theta) c) / (2 pi)` (Cho & Saul 2009)."""
    s = _sqrt1m(c)
    theta = jnp.arctan2(s, c)
    return (s + (PI - theta) * c) / (2.0 * PI)


def _relu() -> Activation:
    return Activation(
        "relu", 1, False, True, jax.nn.relu,
        mean=lambda q: jnp.sqrt(q) / SQRT_2PI,
        second_moment=lambda q: 0.5 * q,
        kernel=lambda q, c: q * relu_kernel_unit(c),
        grad_kernel=lambda q, c: relu_grad_kernel(c) + 0.0 * q,
        grad_moment=lambda q: 0.5 + 0.0 * q,
        grad_moment_inf=math.nan)


def _relu_avgpool() -> Activation:
    """(relu(h1) + relu(h2)) / 2: `K = q (K_relu(c) + 1/(2 pi)) / 2`, `G = G_relu / 2`, E|grad|^2 = 1/4."""
    return Activation(
        "relu+avgpool", 2, False, True, _pool(jax.nn.relu, jnp.mean),
        mean=lambda q: jnp.sqrt(q) / SQRT_2PI,
        second_moment=lambda q: q * (0.25 + 0.25 / PI),
        kernel=lambda q, c: 0.5 * q * (relu_kernel_unit(c) + 0.5 / PI),
        grad_kernel=lambda q, c: 0.5 * relu_grad_kernel(c) + 0.0 * q,
        grad_moment=lambda q: 0.25 + 0.0 * q,
        grad_moment_inf=math.nan)


_A_MAX = 1.0 / math.sqrt(2.0)
RELU_MAX_M1 = 1.0 / SQRT_2PI + 0.5 / math.sqrt(PI)   # E[relu(max(z1, z2))]
RELU_MAX_M2 = 0.75 + 0.5 / PI                          # E[relu(max(z1, z2))^2] (docs/theory.md section 3)


def relu_max_grad_kernel(c):
    """`E<grad psi_a, grad psi_b>` for psi = relu(max(h1, h2)), unit variance, correlation `c`.

    Equals `2 P(h_a1 > max(h_a2, 0), h_b1 > max(h_b2, 0))`; Plackett's identity in `c` and two
    integrations give `21/32 - theta/pi + theta^2/(2 pi^2) + A/(2 pi) - A^2/(2 pi^2)`,
    `theta = arccos c`, `A = arcsin(c / sqrt 2)`.
    """
    theta = jnp.arctan2(_sqrt1m(c), c)
    a = jnp.arcsin(_A_MAX * c)
    return 21.0 / 32.0 - theta / PI + theta ** 2 / (2 * PI ** 2) + a / (2 * PI) - a ** 2 / (2 * PI ** 2)


def _relu_max_antiderivative(c, xp=jnp):
    """An antiderivative of `relu_max_grad_kernel` in `c` (term by term); `xp=np` for float64 constants."""
    s = xp.sqrt(xp.clip((1.0 - c) * (1.0 + c), 0.0, None))
    theta = xp.arctan2(s, c)
    a = xp.arcsin(_A_MAX * c)
    sa = xp.sqrt(1.0 - (_A_MAX * c) ** 2)
    return (21.0 / 32.0 * c
            - (c * theta - s) / PI
            + (c * theta ** 2 - 2.0 * s * theta - 2.0 * c) / (2 * PI ** 2)
            + (c * a + sa / _A_MAX) / (2 * PI)
            - (c * a ** 2 + 2.0 / _A_MAX * sa * a - 2.0 * c) / (2 * PI ** 2))


_RELU_MAX_F1 = float(_relu_max_antiderivative(np.float64(1.0), np))   # numpy: float64 outside any x64 scope


@_price_derivative(relu_max_grad_kernel)
def relu_max_kernel_unit(c):
    """`E[psi_a psi_b]`, psi = relu(max(h1, h2)), unit variance: `K(1) - int_c^1 G(t) dt`."""
    return RELU_MAX_M2 - (_RELU_MAX_F1 - _relu_max_antiderivative(c))


def _relu_maxpool() -> Activation:
    return Activation(
        "relu+maxpool", 2, False, True, _pool(jax.nn.relu, jnp.max),
        mean=lambda q: jnp.sqrt(q) * RELU_MAX_M1,
        second_moment=lambda q: q * RELU_MAX_M2,
        kernel=lambda q, c: q * relu_max_kernel_unit(c),
        grad_kernel=lambda q, c: relu_max_grad_kernel(c) + 0.0 * q,
        grad_moment=lambda q: 0.75 + 0.0 * q,
        grad_moment_inf=math.nan)


# --------------------------------------------------------------------------- erf
def _erf_activation() -> Activation:
    """erf: `K = (2/pi) arcsin(2 q c / (1 + 2 q))`, `G = (4/pi) / sqrt((1+2q)^2 - 4 q^2 c^2)` (Williams 1997)."""
    return Activation(
        "erf", 1, True, False, jax.scipy.special.erf,
        mean=lambda q: jnp.zeros_like(q),
        second_moment=lambda q: (2.0 / PI) * jnp.arcsin(2.0 * q / (1.0 + 2.0 * q)),
        kernel=lambda q, c: (2.0 / PI) * jnp.arcsin(2.0 * q * c / (1.0 + 2.0 * q)),
        grad_kernel=lambda q, c: (4.0 / PI) / jnp.sqrt((1.0 + 2.0 * q) ** 2 - 4.0 * q ** 2 * c ** 2),
        grad_moment=lambda q: (4.0 / PI) / jnp.sqrt(1.0 + 4.0 * q),
        grad_moment_inf=math.nan, grad_moment0=4.0 / PI)


# --------------------------------------------------------------------------- tanh (theory.tanh_erf)
def _tanh() -> Activation:
    return Activation(
        "tanh", 1, True, False, jnp.tanh,
        mean=lambda q: jnp.zeros_like(q),
        second_moment=lambda q: tanh_kernel(q, jnp.ones_like(q)),
        kernel=tanh_kernel,
        grad_kernel=tanh_grad_kernel,
        grad_moment=lambda q: tanh_grad_kernel(q, jnp.ones_like(q)),
        grad_moment_inf=math.nan, grad_moment0=1.0)


def _tanh_avgpool() -> Activation:
    """(tanh(h1) + tanh(h2)) / 2: zero mean, so every expectation is tanh's halved (docs/theory.md section 3)."""
    return Activation(
        "tanh+avgpool", 2, True, False, _pool(jnp.tanh, jnp.mean),
        mean=lambda q: jnp.zeros_like(q),
        second_moment=lambda q: 0.5 * tanh_kernel(q, jnp.ones_like(q)),
        kernel=lambda q, c: 0.5 * tanh_kernel(q, c),
        grad_kernel=lambda q, c: 0.5 * tanh_grad_kernel(q, c),
        grad_moment=lambda q: 0.5 * tanh_grad_kernel(q, jnp.ones_like(q)),
        grad_moment_inf=math.nan, grad_moment0=0.5)   # |grad psi(0)|^2 = (1/2)^2 + (1/2)^2


def _tanh_maxpool() -> Activation:
    return Activation(
        "tanh+maxpool", 2, True, False, _pool(jnp.tanh, jnp.max),
        mean=tanh_max_mean,
        second_moment=lambda q: tanh_kernel(q, jnp.ones_like(q)),
        kernel=tanh_max_kernel,
        grad_kernel=tanh_max_grad_kernel,
        grad_moment=lambda q: tanh_grad_kernel(q, jnp.ones_like(q)),
        grad_moment_inf=math.nan, grad_moment0=1.0)


# --------------------------------------------------------------------------- GELU, SiLU (theory.gelu)
def _xphi_activation(name: str, phi: Callable, weights, slopes) -> Activation:
    """`psi = sum_k w_k x Phi(s_k x)`: closed forms of `theory.gelu`, exact in q (no quadrature)."""
    kernel = lambda q, c: xphi.mixture_kernel(q, c, weights, slopes)
    grad_kernel = lambda q, c: xphi.mixture_grad_kernel(q, c, weights, slopes)
    return Activation(
        name, 1, False, False, phi,
        mean=lambda q: xphi.mixture_mean(q, weights, slopes),
        second_moment=lambda q: kernel(q, jnp.ones_like(q)),
        kernel=kernel,
        grad_kernel=grad_kernel,
        grad_moment=lambda q: grad_kernel(q, jnp.ones_like(q)),
        grad_moment_inf=0.5,   # both tend to relu: E[relu'^2] = 1/2
        grad_moment0=0.25)     # psi'(0) = Phi(0) = sigmoid(0) = 1/2


# --------------------------------------------------------------------------- registry
def _build() -> dict[str, Activation]:
    acts = [_linear(), _relu(), _erf_activation(), _tanh(),
            _xphi_activation("gelu", xphi.gelu, *xphi.GELU_MIXTURE),
            _xphi_activation("silu", xphi.silu, *xphi.silu_mixture(TANH_ERF_A, TANH_ERF_B)),
            _relu_maxpool(), _relu_avgpool(), _tanh_maxpool(), _tanh_avgpool()]
    return {a.name: a for a in acts}


def get(name: str) -> Activation:
    """The registry entry for `name`; unknown names raise ValueError listing the known ones."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}") from None


ACTIVATIONS = _build()
NAMES = tuple(ACTIVATIONS)
