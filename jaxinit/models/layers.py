"""Pure functional layers shared by the models: conv (lax or im2col), dense, BatchNorm, pooling.

Parameters are nested dicts; every conv/dense weight leaf is named ``"kernel"`` (that name is what
`jaxinit.init.is_kernel` keys on), biases ``"bias"``, BatchNorm gains ``"scale"`` / ``"bias"``.
Layouts: activations are channels-last with any number of spatial dims (``(B, L, C)`` for 1-D signals,
``(B, H, W, C)`` for images); conv kernels are ``(*window, C_in, C_out)``, dense kernels ``(D_in, D_out)``.

Every broadcast is written with explicit ranks, so the models run under
``jax.numpy_rank_promotion('raise')``.
"""
from __future__ import annotations

import itertools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxinit.config import ConfigError

Params = dict
State = dict

BN_MOMENTUM = 0.9   # running <- 0.9 running + 0.1 batch (PyTorch's momentum=0.1)
BN_EPS = 1e-5
CONV_IMPLS = ("lax", "im2col")


class Model(NamedTuple):
    """A model as two pure functions.

    init(key, sigma_w) -> (params, state); apply(params, state, x, *, train) -> (logits, new_state).
    ``state`` holds BatchNorm running statistics and is ``{}`` for models without BatchNorm.
    """
    init: Callable
    apply: Callable


# --------------------------------------------------------------------------- activations
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "erf": jax.lax.erf,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "silu": jax.nn.silu,
    "elu": jax.nn.elu,
    "sigmoid": jax.nn.sigmoid,
    "linear": lambda x: x,
}


def activation(name: str) -> Callable[[jax.Array], jax.Array]:
    if name not in ACTIVATIONS:
        raise ConfigError(f"--model.activation must be one of {'|'.join(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]


# --------------------------------------------------------------------------- dense
def dense_init(d_in: int, d_out: int, *, bias: bool) -> Params:
    """Placeholder (zero) kernel, filled by `jaxinit.init.fill_kernels`; bias 0."""
    params = {"kernel": jnp.zeros((d_in, d_out), jnp.float32)}
    if bias:
        params["bias"] = jnp.zeros((d_out,), jnp.float32)
    return params


def dense_apply(params: Params, x: jax.Array) -> jax.Array:
    y = x @ params["kernel"]
    if "bias" in params:
        y = y + _channel_view(params["bias"], y.ndim)
    return y


# --------------------------------------------------------------------------- conv
def conv_init(window: tuple[int, ...], c_in: int, c_out: int, *, bias: bool) -> Params:
    """Placeholder (zero) kernel, filled by `jaxinit.init.fill_kernels`; bias 0."""
    params = {"kernel": jnp.zeros((*window, c_in, c_out), jnp.float32)}
    if bias:
        params["bias"] = jnp.zeros((c_out,), jnp.float32)
    return params


def conv_apply(params: Params, x: jax.Array, *, stride: int = 1, impl: str = "lax") -> jax.Array:
    """'SAME'-padded convolution; both implementations use the same explicit pads, so they agree."""
    kernel = params["kernel"]
    window = kernel.shape[:-2]
    strides = (stride,) * len(window)
    pads = lax.padtype_to_pads(x.shape[1:-1], window, strides, "SAME")
    if impl == "lax":
        y = _conv_lax(x, kernel, strides, pads)
    elif impl == "im2col":
        y = _conv_im2col(x, kernel, strides, pads)
    else:
        raise ConfigError(f"--model.conv_impl must be one of {'|'.join(CONV_IMPLS)}, got {impl!r}")
    if "bias" in params:
        y = y + _channel_view(params["bias"], y.ndim)
    return y


def _conv_lax(x, kernel, strides, pads):
    spatial = "HWDTUV"[: len(strides)]     # any distinct letters, matched between lhs and rhs
    dn = (f"N{spatial}C", f"{spatial}IO", f"N{spatial}C")
    return lax.conv_general_dilated(x, kernel, strides, pads, dimension_numbers=dn)


def _conv_im2col(x, kernel, strides, pads):
    # Patches by strided slices + one einsum: under vmap over members this is a batched matmul,
    # whereas a conv with batched kernels becomes a (slow on CPU) grouped convolution.
    patches = extract_patches(x, kernel.shape[:-2], strides, pads)
    return jnp.einsum("...p,po->...o", patches, kernel.reshape(-1, kernel.shape[-1]))


def extract_patches(x: jax.Array, window, strides, pads) -> jax.Array:
    """(B, *S, C) -> (B, *S_out, prod(window) * C), window offsets major and channels minor.

    That ordering equals a ``(*window, C_in, C_out)`` kernel's ``reshape(-1, C_out)`` row order.
    """
    x = jnp.pad(x, [(0, 0), *pads, (0, 0)])
    padded = x.shape[1:-1]
    out = [(n - k) // s + 1 for n, k, s in zip(padded, window, strides)]
    slices = []
    for offsets in itertools.product(*(range(k) for k in window)):
        start = (0, *offsets, 0)
        limit = (x.shape[0], *(o + (m - 1) * s + 1 for o, m, s in zip(offsets, out, strides)), x.shape[-1])
        slices.append(lax.slice(x, start, limit, (1, *strides, 1)))
    return jnp.concatenate(slices, axis=-1) if len(slices) > 1 else slices[0]


# --------------------------------------------------------------------------- batchnorm
def bn_init(channels: int) -> tuple[Params, State]:
    params = {"scale": jnp.ones((channels,), jnp.float32), "bias": jnp.zeros((channels,), jnp.float32)}
    state = {"mean": jnp.zeros((channels,), jnp.float32), "var": jnp.ones((channels,), jnp.float32)}
    return params, state


def bn_apply(params: Params, state: State, x: jax.Array, *, train: bool) -> tuple[jax.Array, State]:
    """Normalise over every axis but the channels: batch statistics in training, running ones in eval."""
    if train:
        axes = tuple(range(x.ndim - 1))
        mean = x.mean(axes)
        var = jnp.square(x - _channel_view(mean, x.ndim)).mean(axes)
        state = {"mean": BN_MOMENTUM * state["mean"] + (1 - BN_MOMENTUM) * mean,
                 "var": BN_MOMENTUM * state["var"] + (1 - BN_MOMENTUM) * var}
    else:
        mean, var = state["mean"], state["var"]
    inv = params["scale"] * lax.rsqrt(var + BN_EPS)
    y = (x - _channel_view(mean, x.ndim)) * _channel_view(inv, x.ndim) + _channel_view(params["bias"], x.ndim)
    return y, state


# --------------------------------------------------------------------------- conv + BN + act unit
def unit_init(window, c_in, c_out, *, batchnorm: bool) -> tuple[Params, State]:
    """conv (no bias when BatchNorm follows: BN's bias replaces it) [+ BN]."""
    params = {"conv": conv_init(window, c_in, c_out, bias=not batchnorm)}
    state = {}
    if batchnorm:
        params["bn"], state["bn"] = bn_init(c_out)
    return params, state


def unit_apply(params, state, x, *, train, impl, act=None, stride=1) -> tuple[jax.Array, State]:
    """conv -> [BN] -> [act]; the returned state is {} without BN."""
    y = conv_apply(params["conv"], x, stride=stride, impl=impl)
    if "bn" in params:
        y, bn_state = bn_apply(params["bn"], state["bn"], y, train=train)
        state = {"bn": bn_state}
    return (act(y) if act is not None else y), state


# --------------------------------------------------------------------------- pooling
def max_pool(x: jax.Array, size: int = 2) -> jax.Array:
    """Max pool (window = stride = size) in ceil mode: odd dims keep their last row, a dim of 1 stays 1.

    Ceil mode ('SAME' padding with -inf) lets the same network take 8x8, 28x28, 32x32 or length-40
    inputs: no dim ever shrinks below 1 and no border pixel is dropped.
    """
    n = x.ndim - 2
    dims, strides = (1, *(size,) * n, 1), (1, *(size,) * n, 1)
    pads = lax.padtype_to_pads(x.shape, dims, strides, "SAME")
    return lax.reduce_window(x, -jnp.inf, lax.max, dims, strides, pads)


def global_max_pool(x: jax.Array) -> jax.Array:
    return x.max(axis=tuple(range(1, x.ndim - 1)))


def global_avg_pool(x: jax.Array) -> jax.Array:
    return x.mean(axis=tuple(range(1, x.ndim - 1)))


# --------------------------------------------------------------------------- helpers
def _channel_view(v: jax.Array, ndim: int) -> jax.Array:
    """A (C,) vector reshaped to (1, ..., 1, C) so it broadcasts without rank promotion."""
    return v.reshape((1,) * (ndim - 1) + (-1,))


def scaled_channels(channels: int, width_mult: float) -> int:
    return max(1, int(round(channels * width_mult)))


def spatial_dims(input_shape: tuple, model: str) -> int:
    """Number of spatial dims of a channels-last per-example shape; conv nets need at least one."""
    if len(input_shape) < 2 or math.prod(input_shape) == 0:
        raise ConfigError(f"--model.name={model} needs inputs shaped (*spatial, channels), got {tuple(input_shape)}")
    return len(input_shape) - 1

