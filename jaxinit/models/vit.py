"""A small vision transformer in the mean-field convention, with or without residual connections.

Patch embedding (``embed``: dense on P x P patches, plus ``pos_embedding/bias`` of shape
(tokens, width), drawn like a bias), ``depth`` blocks of multi-head self-attention and a two-layer MLP
(``stacked_blocks``: one ``nn.scan`` over identical blocks, layer axis first), mean over tokens, dense
``head``. With `jaxinit.models.core.from_flax` (``"normal_fan_in"``, ``"normal"``) every weight is
N(0, sigma_w2 / fan_in) and every bias and the position embedding N(0, sigma_b2). There is no
LayerNorm, so the forward signal is governed by (sigma_w2, sigma_b2) as in the MLP theory; with
``residual`` each of the 2 x depth branches is scaled by 1 / sqrt(2 depth) to keep the stream O(1).

Probes (see `jaxinit.models.deep.probe`): the token stream after the embedding and after every block
is sown as ``"h"`` (and perturbable); `preactivations` flattens them to (layers, B, tokens x width):
nodes are (token, channel) pairs. The token mean the head reads is sown as ``"features"``.
Inputs: images (H, W, C), sequences (L, C) or flat vectors (D,) (read as (D, 1)); every spatial size
must be a multiple of ``patch``.
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError
from jaxinit.models import activations
from jaxinit.models.deep import probe


def patchify(x: jax.Array, patch: int) -> jax.Array:
    """(B, *S, C) -> (B, tokens, patch^n C) with n = len(S); (B, D) is read as (B, D, 1)."""
    if x.ndim == 2:
        x = x[..., None]
    b, *spatial, c = x.shape
    if any(s % patch for s in spatial):
        raise ConfigError(f"ViT: input sizes {tuple(spatial)} are not multiples of patch={patch}")
    grid = [s // patch for s in spatial]
    x = x.reshape(b, *[v for g in grid for v in (g, patch)], c)
    n = len(spatial)
    order = [0, *range(1, 2 * n, 2), *range(2, 2 * n + 1, 2), 2 * n + 1]
    return x.transpose(order).reshape(b, math.prod(grid), patch ** n * c)


class _PosEmbedding(nn.Module):
    """A learned (tokens, width) offset; named ``bias`` (no ``scale`` sibling): drawn like a bias."""
    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        return h + self.param("bias", nn.initializers.zeros, h.shape[-2:])


class _Block(nn.Module):
    width: int
    heads: int
    mlp_ratio: int
    activation: str
    alpha: float | None   # None: no residual connections

    @nn.compact
    def __call__(self, h: jax.Array, _) -> tuple[jax.Array, None]:
        b, t, d = h.shape
        split = lambda z: z.reshape(b, t, self.heads, d // self.heads)
        q, k, v = (split(nn.Dense(d, name=n)(h)) for n in ("query", "key", "value"))
        scores = jnp.einsum("bthe,bshe->bhts", q, k) / math.sqrt(d // self.heads)
        mixed = jnp.einsum("bhts,bshe->bthe", jax.nn.softmax(scores, axis=-1), v).reshape(b, t, d)
        h = self._add(h, nn.Dense(d, name="out")(mixed))
        hidden = activations.get(self.activation)(nn.Dense(self.mlp_ratio * d, name="mlp_in")(h))
        h = self._add(h, nn.Dense(d, name="mlp_out")(hidden))
        return probe(self, h), None

    def _add(self, h, branch):
        return branch if self.alpha is None else h + self.alpha * branch


class ViT(nn.Module):
    """``__call__(x (B, *S, C), train=False) -> logits (B, n_classes)``."""
    n_classes: int
    width: int = 32
    depth: int = 2
    heads: int = 4
    patch: int = 2
    mlp_ratio: int = 2
    activation: str = "gelu"
    residual: bool = True

    def __post_init__(self):
        if min(self.width, self.depth, self.heads, self.patch, self.mlp_ratio) < 1 or self.width % self.heads:
            raise ConfigError(f"ViT: width, depth, heads, patch, mlp_ratio must be >= 1 and width a multiple of "
                              f"heads, got width={self.width} depth={self.depth} heads={self.heads} patch={self.patch}")
        activations.get(self.activation)
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        del train
        h = _PosEmbedding(name="pos_embedding")(nn.Dense(self.width, name="embed")(patchify(x, self.patch)))
        h = probe(self, h)
        alpha = 1.0 / math.sqrt(2.0 * self.depth) if self.residual else None
        stack = nn.scan(_Block, variable_axes={"params": 0, "intermediates": 0, "perturbations": 0},
                        split_rngs={"params": True}, length=self.depth)
        h, _ = stack(self.width, self.heads, self.mlp_ratio, self.activation, alpha, name="stacked_blocks")(h, None)
        pooled = h.mean(axis=1)
        self.sow("intermediates", "features", pooled)
        return nn.Dense(self.n_classes, name="head")(pooled)


def _unwrap(value):
    return value[0] if isinstance(value, tuple) else value


def preactivations(tree: dict) -> jax.Array:
    """The token streams (or their perturbations / gradients), shape (depth + 1, B, tokens x width)."""
    first = _unwrap(tree["h"])[None]
    streams = jnp.concatenate([first, _unwrap(tree["stacked_blocks"]["h"])], axis=0)
    return streams.reshape(*streams.shape[:2], -1)


def features(intermediates: dict) -> jax.Array:
    """What the readout reads: the token mean of the last stream, shape (B, width)."""
    return _unwrap(intermediates["features"])


def make_vit(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> ViT:
    """The registry's ViT: width, depth (blocks) and activation from ``cfg``; 4 heads where the width
    allows (else 1), patches of 2 where every spatial size is even (else 1)."""
    spatial = tuple(input_shape[:-1]) if len(input_shape) > 1 else tuple(input_shape)
    patch = 2 if all(s % 2 == 0 for s in spatial) else 1
    heads = 4 if cfg.width % 4 == 0 else 1
    return ViT(n_classes, width=cfg.width, depth=cfg.depth, heads=heads, patch=patch, activation=cfg.activation)


__all__ = ["ViT", "make_vit", "patchify", "preactivations", "features"]
