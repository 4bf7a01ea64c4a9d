"""A small vision transformer in the mean-field convention, with or without residual connections.

Patch embedding (dense on P x P patches, plus a position embedding drawn like a bias), `depth` blocks
of multi-head self-attention and a two-layer MLP, mean over tokens, dense readout. Every weight is
N(0, sigma_w2 / fan_in), every bias (and the position embedding) N(0, sigma_b2). There is no
LayerNorm, so the forward signal is governed by (sigma_w2, sigma_b2) as in the MLP theory; with
`residual`, each of the 2 * depth branches is scaled by 1 / sqrt(2 * depth) to keep the stream O(1).

Recorded "pre-activations": the token stream after the embedding and after every block, flattened
to (B, tokens * width): nodes are (token, channel) pairs.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from jaxinit.models.deep import make_psi, scale


@dataclass(frozen=True)
class ViTSpec:
    image_shape: tuple[int, int, int]   # (H, W, C)
    patch: int = 2
    width: int = 32
    depth: int = 2
    heads: int = 4
    mlp_ratio: int = 2
    n_out: int = 10
    act: str = "gelu"
    residual: bool = True

    @property
    def tokens(self) -> int:
        return (self.image_shape[0] // self.patch) * (self.image_shape[1] // self.patch)


def draw(key: jax.Array, spec: ViTSpec) -> dict:
    if spec.width % spec.heads or spec.image_shape[0] % spec.patch or spec.image_shape[1] % spec.patch:
        raise ValueError(f"bad ViT spec {spec}")
    d, m, nb = spec.width, spec.mlp_ratio * spec.width, spec.depth
    shapes = {"W_emb": (spec.patch ** 2 * spec.image_shape[2], d), "b_emb": (d,), "pos": (spec.tokens, d),
              "Wq": (nb, d, d), "bq": (nb, d), "Wk": (nb, d, d), "bk": (nb, d), "Wv": (nb, d, d), "bv": (nb, d),
              "Wo": (nb, d, d), "bo": (nb, d), "W1": (nb, d, m), "b1": (nb, m), "W2": (nb, m, d), "b2": (nb, d),
              "W_out": (d, spec.n_out), "b_out": (spec.n_out,)}
    keys = jax.random.split(key, len(shapes))
    return {name: jax.random.normal(k, shape) for k, (name, shape) in zip(keys, shapes.items())}


scale_draw = scale


def readout_features(h_last_BN: jax.Array, spec: ViTSpec) -> jax.Array:
    """Token mean of the last stream: what the readout dense layer sees."""
    return h_last_BN.reshape(h_last_BN.shape[0], spec.tokens, spec.width).mean(axis=1)


def init(key: jax.Array, sigma_w2, sigma_b2, spec: ViTSpec) -> tuple[dict, dict]:
    return scale(draw(key, spec), sigma_w2, sigma_b2), {}


def patchify(x_BHWC: jax.Array, patch: int) -> jax.Array:
    b, hh, ww, c = x_BHWC.shape
    x = x_BHWC.reshape(b, hh // patch, patch, ww // patch, patch, c).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (hh // patch) * (ww // patch), patch * patch * c)


def _attention(h_BTD, p, heads: int):
    b, t, d = h_BTD.shape
    split = lambda z: z.reshape(b, t, heads, d // heads)
    q, k, v = (split(h_BTD @ p[w] + p[bias]) for w, bias in (("Wq", "bq"), ("Wk", "bk"), ("Wv", "bv")))
    scores = jnp.einsum("bthe,bshe->bhts", q, k) / jnp.sqrt(d // heads)
    mixed = jnp.einsum("bhts,bshe->bthe", jax.nn.softmax(scores, axis=-1), v).reshape(b, t, d)
    return mixed @ p["Wo"] + p["bo"]


def apply(params: dict, x_BHWC: jax.Array, spec: ViTSpec, shift: jax.Array | None = None):
    """(logits (B, n_out), stream (depth + 1, B, tokens * width))."""
    phi = make_psi(spec.act)
    h = patchify(x_BHWC, spec.patch) @ params["W_emb"] + params["b_emb"] + params["pos"]
    b, t, d = h.shape
    if shift is None:
        shift = jnp.zeros((spec.depth + 1, b, t * d), h.dtype)
    h = h + shift[0].reshape(h.shape)
    alpha = 1.0 / jnp.sqrt(2.0 * spec.depth) if spec.residual else 1.0
    blocks = {n: params[n] for n in ("Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo", "W1", "b1", "W2", "b2")}

    def block(h, ps):
        p, s = ps
        a = alpha * _attention(h, p, spec.heads)
        h = h + a if spec.residual else a
        m = alpha * (phi(h @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"])
        h = (h + m if spec.residual else m) + s.reshape(h.shape)
        return h, h.reshape(b, t * d)

    h0 = h.reshape(1, b, t * d)
    h, hs = jax.lax.scan(block, h, (blocks, shift[1:]))
    logits = h.mean(axis=1) @ params["W_out"] + params["b_out"]
    return logits, jnp.concatenate([h0, hs], axis=0)
