"""MLP: flatten -> depth x [dense(width) -> BatchNorm? -> activation] -> dense(n_classes).

Sub-modules (and so parameter names): ``dense_{i}`` (flax ``Dense``, kernel ``(D_in, D_out)``),
``bn_{i}`` (flax ``BatchNorm``, running statistics in ``batch_stats``), the classifier ``head``.
Hidden dense layers carry a bias only without BatchNorm (BN's own bias makes it redundant); the
head always has one. With a pooled activation (``"relu+maxpool"``: k = 2 pre-activations per unit)
each hidden dense layer emits ``k * width`` pre-activations and ``width`` units leave the activation.
"""
from __future__ import annotations

import flax.linen as nn
import jax

from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError
from jaxinit.models import activations
from jaxinit.models.layers import batch_norm


class MLP(nn.Module):
    """``__call__(x (B, ...), train=False) -> logits (B, n_classes)``; any input shape, flattened."""
    n_classes: int
    width: int = 256
    depth: int = 3
    batchnorm: bool = True
    activation: str = "relu"

    def __post_init__(self):
        if self.depth < 0 or self.width < 1:
            raise ConfigError(f"--model.depth must be >= 0 and --model.width >= 1, got {self.depth}, {self.width}")
        activations.get(self.activation)
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        psi, k = activations.get(self.activation), activations.nodes(self.activation)
        h = x.reshape(x.shape[0], -1)
        for i in range(self.depth):
            h = nn.Dense(k * self.width, use_bias=not self.batchnorm, name=f"dense_{i}")(h)
            if self.batchnorm:
                h = batch_norm(train, name=f"bn_{i}")(h)
            h = psi(h)
        return nn.Dense(self.n_classes, name="head")(h)


def make_mlp(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> MLP:
    del input_shape   # any shape: flattened
    return MLP(n_classes, width=cfg.width, depth=cfg.depth, batchnorm=cfg.batchnorm, activation=cfg.activation)


__all__ = ["MLP", "make_mlp"]
