"""Deep MLP and residual MLP in the mean-field convention of THEORY.md section 1.

    h1 = W1 x + b1,   h(l+1) = W(l+1) psi(h(l)) + b(l+1),   logits = W_out psi(h(L)) + b_out
    W ~ N(0, sigma_w2 / fan_in),  b ~ N(0, sigma_b2),  no normalisation layers.

`psi` is an elementwise activation or a multi-node one, "act+maxpool" / "act+avgpool": each layer
then has k = 2 pre-activations per unit, pooled pairwise, exactly the papers' k-node psi.
Residual variant: h(l+1) = h(l) + alpha (W psi(h(l)) + b) with alpha = 1 / sqrt(depth).

Parameters are the standard normal draws; `scale` turns them into weights for given traced
(sigma_w2, sigma_b2), so a grid of scales shares one draw (paired members) and never recompiles.
`apply` returns the logits and every hidden pre-activation, stacked (L, B, k * width); the optional
`shift` of that shape is added to them so that d loss / d shift is the backpropagated signal delta.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

ELEMENTWISE = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "erf": jax.scipy.special.erf,
    "linear": lambda h: h,
    "gelu": lambda h: jax.nn.gelu(h, approximate=False),
    "silu": jax.nn.silu,
}
POOLS = {"maxpool": jnp.max, "avgpool": jnp.mean}


def psi_nodes(act: str) -> int:
    """Pre-activations pooled into one unit: 1 for elementwise phi, 2 for the papers' pooled psi."""
    return 2 if "+" in act else 1


def make_psi(act: str):
    """psi acting on the last axis of size k * width -> width (units are adjacent k-tuples)."""
    name, _, pool = act.partition("+")
    if name not in ELEMENTWISE or (pool and pool not in POOLS):
        raise ValueError(f"unknown activation {act!r}: {sorted(ELEMENTWISE)} optionally +maxpool|+avgpool")
    phi = ELEMENTWISE[name]
    if not pool:
        return phi
    reduce = POOLS[pool]

    def psi(h):
        return reduce(phi(h).reshape(*h.shape[:-1], h.shape[-1] // 2, 2), axis=-1)
    return psi


@dataclass(frozen=True)
class DeepSpec:
    """Static structure; depth = L hidden pre-activation layers (the readout is layer L + 1)."""
    d_in: int
    width: int
    depth: int
    n_out: int = 10
    act: str = "tanh"
    residual: bool = False

    @property
    def k(self) -> int:
        return psi_nodes(self.act)


def draw(key: jax.Array, spec: DeepSpec) -> dict:
    """Standard normal draws for every weight and bias (the network before scaling)."""
    k_in, k_hid, k_out, k_bin, k_bhid, k_bout = jax.random.split(key, 6)
    n, kn, lm1 = spec.width, spec.k * spec.width, spec.depth - 1
    return {"W_in": jax.random.normal(k_in, (spec.d_in, kn)), "b_in": jax.random.normal(k_bin, (kn,)),
            "W": jax.random.normal(k_hid, (lm1, n, kn)), "b": jax.random.normal(k_bhid, (lm1, kn)),
            "W_out": jax.random.normal(k_out, (n, spec.n_out)), "b_out": jax.random.normal(k_bout, (spec.n_out,))}


def scale(z: dict, sigma_w2: jax.Array, sigma_b2: jax.Array) -> dict:
    """W = sqrt(sigma_w2 / fan_in) Z_W, b = sqrt(sigma_b2) Z_b; fan_in is the first axis of W."""
    out = {}
    for name, value in z.items():
        if name.startswith("W"):
            out[name] = value * jnp.sqrt(sigma_w2 / value.shape[-2])
        else:
            out[name] = value * jnp.sqrt(sigma_b2)
    return out


scale_draw = scale


def readout_features(h_last_BN: jax.Array, spec: DeepSpec) -> jax.Array:
    """What the readout layer sees: psi(h(L)), so logits = features @ W_out + b_out."""
    return make_psi(spec.act)(h_last_BN)


def init(key: jax.Array, sigma_w2, sigma_b2, spec: DeepSpec) -> tuple[dict, dict]:
    """(params, state) with state = {} (no BatchNorm), in the THEORY.md convention."""
    return scale(draw(key, spec), sigma_w2, sigma_b2), {}


def apply(params: dict, x_BD: jax.Array, spec: DeepSpec, shift: jax.Array | None = None):
    """(logits (B, n_out), pre-activations (L, B, k * width))."""
    psi = make_psi(spec.act)
    n_batch = x_BD.shape[0]
    if shift is None:
        shift = jnp.zeros((spec.depth, n_batch, spec.k * spec.width), x_BD.dtype)
    h = x_BD @ params["W_in"] + params["b_in"] + shift[0]
    alpha = 1.0 / jnp.sqrt(spec.depth) if spec.residual else None

    def layer(h, wbs):
        w, b, s = wbs
        branch = psi(h) @ w + b
        h_next = (h + alpha * branch if spec.residual else branch) + s
        return h_next, h_next

    h_last, hs = jax.lax.scan(layer, h, (params["W"], params["b"], shift[1:]))
    logits = psi(h_last) @ params["W_out"] + params["b_out"]
    return logits, jnp.concatenate([h[None], hs], axis=0)
