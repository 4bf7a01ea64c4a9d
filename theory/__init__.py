"""Infinite-width theory of random initialization, in float64 jax.numpy (never imports jaxinit).

- `theory.activations`: Gaussian expectations per activation (closed forms, erf expansion, quadrature).
- `theory.meanfield`: length / correlation maps, fixed points, chi_1, edge of chaos, depth scales.
- `theory.igb`: Initial Guessing Bias: gamma <-> c, estimators, f_max distributions.
- `theory.phase`: phase classification and vmapped phase diagrams over (sigma_w2, sigma_b2).

Conventions and sources: docs/THEORY.md (shared docs). float64 is scoped with `jax.enable_x64`
inside each public function and never switched on globally; results come back as numpy float64.
"""
from theory import activations, igb, meanfield, phase, quadrature

__all__ = ["activations", "igb", "meanfield", "phase", "quadrature"]
