"""Deep MLP and residual MLP in the mean-field convention of docs/theory.md section 1 (flax linen).

    h1 = W1 x + b1,   h(l+1) = W(l+1) psi(h(l)) + b(l+1),   logits = W_out psi(h(L)) + b_out
    residual:         h(l+1) = h(l) + alpha (W(l+1) psi(h(l)) + b(l+1)),   alpha = 1 / sqrt(depth)
    W ~ N(0, sigma_w2 / fan_in),  b ~ N(0, sigma_b2),  no normalisation layers.

The convention is `from_flax(module, input_shape, "normal_fan_in", "normal")` with
``sigma_w = sqrt(sigma_w2)``, ``sigma_b = sqrt(sigma_b2)``; `jaxinit.init.base_draw` plus
`scale_params` do the same on one shared draw (a grid of scales never recompiles). `psi` is any name
of `jaxinit.models.activations`; a pooled one ("relu+maxpool") makes every layer emit k = 2
pre-activations per unit, pooled pairwise: the papers' independent k-node psi.

Parameters: ``embed`` (layer 1), ``stacked_layers/dense`` (layers 2..L as one ``(L-1, width, k width)``
kernel run by ``nn.scan``, so compile time does not grow with depth; the ``stacked`` prefix tells
`jaxinit.init.stacked_axes` that the leading axis counts layers, not fan-in), ``head``.
Probes through flax's own mechanisms: every hidden pre-activation is sown into ``intermediates``
(name ``"h"``) and passed through ``perturb("h")`` (d loss / d perturbation = the backpropagated
delta_l); the readout's input psi(h_L) is sown as ``"features"``. `preactivations` lists a tree of
either kind in layer order.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxinit.errors import ConfigError
from jaxinit.models import activations


def probe(module: nn.Module, h: jax.Array, name: str = "h") -> jax.Array:
    """Record ``h`` (sow) and add the caller's perturbation to it, if one is passed.

    Nothing is created at init (the template of `from_flax` stays params-only); pass
    ``mutable=["perturbations"]`` to `apply` once to get the zero perturbations of a batch.
    """
    if not module.is_initializing():
        h = module.perturb(name, h)
    module.sow("intermediates", name, h)
    return h


class _Layer(nn.Module):
    """One hidden layer h -> W psi(h) + b (plain) or h + alpha (W psi(h) + b) (residual)."""
    features: int
    activation: str
    alpha: float | None

    @nn.compact
    def __call__(self, h: jax.Array, _) -> tuple[jax.Array, None]:
        branch = nn.Dense(self.features, name="dense")(activations.get(self.activation)(h))
        h = branch if self.alpha is None else h + self.alpha * branch
        return probe(self, h), None


class DeepMLP(nn.Module):
    """``__call__(x (B, ...), train=False) -> logits (B, n_classes)``; inputs are flattened."""
    n_classes: int
    width: int = 256
    depth: int = 30
    activation: str = "tanh"
    residual: bool = False

    def __post_init__(self):
        if self.depth < 1 or self.width < 1:
            raise ConfigError(f"deep MLP: depth and width must be >= 1, got {self.depth}, {self.width}")
        activations.get(self.activation)
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        del train   # no dropout, no BatchNorm
        features = activations.nodes(self.activation) * self.width
        h = probe(self, nn.Dense(features, name="embed")(x.reshape(x.shape[0], -1)))
        if self.depth > 1:
            alpha = 1.0 / float(self.depth) ** 0.5 if self.residual else None
            stack = nn.scan(_Layer, variable_axes={"params": 0, "intermediates": 0, "perturbations": 0},
                            split_rngs={"params": True}, length=self.depth - 1)
            h, _ = stack(features, self.activation, alpha, name="stacked_layers")(h, None)
        psi_h = activations.get(self.activation)(h)
        self.sow("intermediates", "features", psi_h)
        return nn.Dense(self.n_classes, name="head")(psi_h)


def _unwrap(value):
    return value[0] if isinstance(value, tuple) else value


def preactivations(tree: dict) -> jax.Array:
    """Hidden pre-activations (or their perturbations / gradients) of a `DeepMLP`, shape (L, B, k width)."""
    first = _unwrap(tree["h"])[None]
    if "stacked_layers" not in tree:
        return first
    return jnp.concatenate([first, _unwrap(tree["stacked_layers"]["h"])], axis=0)


def features(intermediates: dict) -> jax.Array:
    """What the readout reads: psi(h_L), shape (B, width)."""
    return _unwrap(intermediates["features"])


__all__ = ["DeepMLP", "preactivations", "features", "probe"]
