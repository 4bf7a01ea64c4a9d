"""Infinite-width theory of random initialization, in float64 jax.numpy (never imports jaxinit).

- `theory.activations`: Gaussian expectations per activation (closed forms, erf expansion);
  `theory.gelu`: GELU / SiLU closed forms; `theory.special`: fast arcsin / sin; `theory.quadrature`: rules.
- `theory.pointwise`: single-point maps, fixed points, criteria, EOC, neutrality, propagation (pure jax).
- `theory.meanfield`: the public, broadcasting API over them: length / correlation maps, fixed points,
  chi_1, edge of chaos, depth scales, the backward factor and its product along the q_l of a net.
- `theory.igb`: Initial Guessing Bias: gamma <-> c, estimators, f_max distributions.
- `theory.phase`: phase classification and vmapped phase diagrams over (sigma_w2, sigma_b2).

Conventions and sources: docs/theory.md. Public functions take and return jax arrays,
work under `jax.jit` (string / integer selectors static) and `jax.grad`; float64 is scoped with
`jax.enable_x64` inside each of them and never switched on globally (`theory.x64`, which also states
the two caveats of a scoped float64).
"""
from theory import activations, gelu, igb, meanfield, phase, pointwise, quadrature, special, x64

__all__ = ["activations", "gelu", "igb", "meanfield", "phase", "pointwise", "quadrature", "special", "x64"]
