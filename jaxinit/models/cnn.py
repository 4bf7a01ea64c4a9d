"""CNN with max or average pooling in the mean-field convention (docs/theory.md section 1), flax linen.

    h1 = conv(W1, x) + b1,   h(l+1) = conv(W(l+1), pool(psi(h(l)))) + b(l+1),
    logits = W_out GAP(pool(psi(h(L)))) + b_out,   W ~ N(0, sigma_w2 / fan_in), fan_in = 3^n C_in

(`from_flax(module, input_shape, "normal_fan_in", "normal")`; n spatial dims). Two ways to pool:

- over channels, through a pooled ``activation`` ("relu+maxpool", "relu+avgpool", ...): each conv emits
  2 C channels and adjacent channel pairs are pooled. The two pooled pre-activations see the same input
  through independent filters, so they are the papers' independent 2-node psi, the case the theory covers;
- over space, ``space_pool="max" | "avg"``: 2 x 2 (or 2) pooling after every layer while the map is
  larger than 1; the pooled nodes are correlated through overlapping inputs, so the theory is a guide.

Circular padding keeps every position statistically alike (no zero-padded borders), so the per-layer
Gram statistics over (position, channel) nodes follow one mean-field map. Convs ``conv_{l}`` are not
scanned (a conv inside ``lax.scan`` trains 8-44x slower on CPU, docs/benchmark.md). Probes: each layer's
pre-activation is sown / perturbable as ``"h{l}"``, the pooled map the head reads as ``"features"``.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError
from jaxinit.models import activations
from jaxinit.models.deep import probe

SPACE_POOLS = ("none", "max", "avg")


def space_pool(y: jax.Array, pool: str) -> jax.Array:
    """Non-overlapping pooling by 2 along every spatial axis of (B, *S, C), while every size is >= 2."""
    spatial = y.shape[1:-1]
    if pool == "none" or min(spatial) < 2:
        return y
    window = (2,) * len(spatial)
    return (nn.max_pool if pool == "max" else nn.avg_pool)(y, window, strides=window, padding="VALID")


class CNN(nn.Module):
    """``__call__(x (B, *S, C), train=False) -> logits``; a flat (B, D) input is read as (B, D, 1)."""
    n_classes: int
    width: int = 32
    depth: int = 4
    activation: str = "relu+maxpool"
    space_pool: str = "none"

    def __post_init__(self):
        if self.depth < 1 or self.width < 1:
            raise ConfigError(f"CNN: depth and width must be >= 1, got {self.depth}, {self.width}")
        if self.space_pool not in SPACE_POOLS:
            raise ConfigError(f"CNN: space_pool must be one of {'|'.join(SPACE_POOLS)}, got {self.space_pool!r}")
        activations.get(self.activation)
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        del train
        y = x[..., None] if x.ndim == 2 else x
        psi, k = activations.get(self.activation), activations.nodes(self.activation)
        window = (3,) * (y.ndim - 2)
        for layer in range(self.depth):
            h = nn.Conv(k * self.width, window, padding="CIRCULAR", name=f"conv_{layer}")(y)
            y = space_pool(psi(probe(self, h, f"h{layer}")), self.space_pool)
        pooled = y.mean(axis=tuple(range(1, y.ndim - 1)))
        self.sow("intermediates", "features", pooled)
        return nn.Dense(self.n_classes, name="head")(pooled)


def _unwrap(value):
    return value[0] if isinstance(value, tuple) else value


def preactivations(tree: dict) -> list[jax.Array]:
    """Per-layer pre-activations (or perturbations / gradients), each flattened to (B, positions x channels)."""
    names = sorted((n for n in tree if n.startswith("h") and n[1:].isdigit()), key=lambda n: int(n[1:]))
    return [jnp.reshape(_unwrap(tree[n]), (_unwrap(tree[n]).shape[0], -1)) for n in names]


def features(intermediates: dict) -> jax.Array:
    """What the readout reads: the global average of the last pooled map, shape (B, width)."""
    return _unwrap(intermediates["features"])


def make_cnn(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> CNN:
    """The registry's CNN: width (channels after pooling), depth (conv layers), activation from ``cfg``.
    A pooled activation ("relu+maxpool") pools channel pairs; a plain one gets 2 x 2 max pooling in space."""
    del input_shape   # any number of spatial dims
    pooled = activations.nodes(cfg.activation) > 1
    return CNN(n_classes, width=cfg.width, depth=cfg.depth, activation=cfg.activation,
               space_pool="none" if pooled else "max")


__all__ = ["CNN", "make_cnn", "preactivations", "features", "space_pool", "SPACE_POOLS"]
