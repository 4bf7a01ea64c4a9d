"""CNN with max or average pooling in the mean-field convention (THEORY.md section 1).

    h1 = conv(W1, x) + b1,   h(l+1) = conv(W(l+1), pool(phi(h(l)))) + b(l+1),
    logits = W_out GAP(pool(phi(h(L)))) + b_out,   W ~ N(0, sigma_w2 / fan_in), fan_in = 3*3*C_in.

Two ways to pool, both with `pool` = "max" | "avg":
- `pool_over="channels"`: each conv emits 2 C channels and adjacent channel pairs are pooled. The two
  pooled pre-activations see the same input through independent filters, so they are the papers'
  independent 2-node psi ("relu+maxpool" in `theory`), the case comparable to the theory.
- `pool_over="space"`: the usual 2 x 2 spatial pooling after every layer while the map is larger than
  1 x 1; the four pooled nodes are correlated through overlapping inputs, so the theory is only a guide.
Circular padding keeps every position statistically alike (no zero-padded borders), so the per-layer
Gram statistics over (position, channel) nodes follow one mean-field map.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from jaxinit.models.deep import ELEMENTWISE, make_psi, scale


@dataclass(frozen=True)
class CNNSpec:
    image_shape: tuple[int, int, int]   # (H, W, C)
    width: int = 32                      # channels after pooling
    depth: int = 4                       # conv layers (pre-activations recorded for each)
    n_out: int = 10
    act: str = "relu"                    # elementwise phi
    pool: str = "max"                    # max | avg
    pool_over: str = "channels"          # channels | space

    @property
    def k(self) -> int:
        return 2 if self.pool_over == "channels" else 1

    @property
    def psi(self) -> str:
        return f"{self.act}+{self.pool}pool" if self.pool_over == "channels" else self.act


def draw(key: jax.Array, spec: CNNSpec) -> dict:
    if spec.act not in ELEMENTWISE or spec.pool not in ("max", "avg") or spec.pool_over not in ("channels", "space"):
        raise ValueError(f"bad CNN spec {spec}")
    keys = jax.random.split(key, 2 * spec.depth + 2)
    c_in = spec.image_shape[-1]
    z = {}
    for l in range(spec.depth):
        z[f"W{l}"] = jax.random.normal(keys[2 * l], (3, 3, c_in if l == 0 else spec.width, spec.k * spec.width))
        z[f"b{l}"] = jax.random.normal(keys[2 * l + 1], (spec.k * spec.width,))
    z["W_out"] = jax.random.normal(keys[-2], (spec.width, spec.n_out))
    z["b_out"] = jax.random.normal(keys[-1], (spec.n_out,))
    return z


def scale_draw(z: dict, sigma_w2, sigma_b2) -> dict:
    # Conv kernels: fan_in is 3 * 3 * C_in, not the second-to-last axis that deep.scale assumes.
    flat = {n: (v.reshape(-1, v.shape[-1]) if v.ndim == 4 else v) for n, v in z.items()}
    scaled = scale(flat, sigma_w2, sigma_b2)
    return {n: scaled[n].reshape(z[n].shape) for n in z}


def init(key: jax.Array, sigma_w2, sigma_b2, spec: CNNSpec) -> tuple[dict, dict]:
    return scale_draw(draw(key, spec), sigma_w2, sigma_b2), {}


def _conv(x_BHWC, w):
    x = jnp.pad(x_BHWC, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="wrap")
    return jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _space_pool(y_BHWC, pool: str):
    if y_BHWC.shape[1] < 2 or y_BHWC.shape[2] < 2:
        return y_BHWC
    b, hh, ww, c = y_BHWC.shape
    tiles = y_BHWC[:, : hh // 2 * 2, : ww // 2 * 2].reshape(b, hh // 2, 2, ww // 2, 2, c)
    return tiles.max(axis=(2, 4)) if pool == "max" else tiles.mean(axis=(2, 4))


def layer_hw(spec: CNNSpec) -> list[tuple[int, int]]:
    """Spatial size of each layer's pre-activation (space pooling halves it while >= 2 x 2)."""
    hw, out = spec.image_shape[:2], []
    for _ in range(spec.depth):
        out.append(hw)
        if spec.pool_over == "space" and min(hw) >= 2:
            hw = (hw[0] // 2, hw[1] // 2)
    return out


def psi_layer(h_BHWC, spec: CNNSpec):
    y = make_psi(spec.psi)(h_BHWC)
    return _space_pool(y, spec.pool) if spec.pool_over == "space" else y


def readout_features(h_last_BN: jax.Array, spec: CNNSpec) -> jax.Array:
    """Global average of pool(phi(h(L))): what the readout dense layer sees."""
    hh, ww = layer_hw(spec)[-1]
    h = h_last_BN.reshape(h_last_BN.shape[0], hh, ww, -1)
    return psi_layer(h, spec).mean(axis=(1, 2))


def apply(params: dict, x_BHWC: jax.Array, spec: CNNSpec, shift: list | None = None):
    """(logits, list of per-layer pre-activations flattened to (B, positions * channels))."""
    hs, y = [], x_BHWC
    for l in range(spec.depth):
        h = _conv(y, params[f"W{l}"]) + params[f"b{l}"]
        if shift is not None:
            h = h + shift[l].reshape(h.shape)
        hs.append(h.reshape(h.shape[0], -1))
        y = psi_layer(h, spec)
    logits = y.mean(axis=(1, 2)) @ params["W_out"] + params["b_out"]
    return logits, hs
