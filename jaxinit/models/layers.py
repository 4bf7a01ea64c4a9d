"""Flax building blocks shared by the models: SAME conv (lax or im2col), BatchNorm, conv units, pools.

Conventions every model follows (the init core and Muon rely on them):

- activations are channels-last with any number of spatial dims: ``(B, L, C)`` for 1-D signals,
  ``(B, H, W, C)`` for images;
- every conv/dense weight is a parameter named ``"kernel"`` with layout ``(*window, C_in, C_out)``
  (dense: ``(D_in, D_out)``), so `jaxinit.init` scales it by ``sigma_w``; additive biases are ``"bias"``;
- BatchNorm is flax's, with PyTorch's constants, its gains ``"scale"`` / ``"bias"`` in ``params`` and its
  running ``"mean"`` / ``"var"`` in the ``batch_stats`` collection.

Every broadcast is written with explicit ranks, so the models run under
``jax.numpy_rank_promotion('raise')``.
"""
from __future__ import annotations

import itertools
import math
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from jaxinit.errors import ConfigError
from jaxinit.models import activations

BN_MOMENTUM = 0.9   # running <- 0.9 running + 0.1 batch (PyTorch's momentum=0.1)
BN_EPS = 1e-5
CONV_IMPLS = ("lax", "im2col")


# --------------------------------------------------------------------------- conv
def conv(x: jax.Array, kernel: jax.Array, *, stride: int = 1, impl: str = "lax") -> jax.Array:
    """'SAME'-padded convolution of ``x (B, *S, C_in)`` with ``kernel (*window, C_in, C_out)``.

    Both implementations use the same explicit pads (``ceil(n / stride)`` outputs per dim), so they agree
    to float rounding.
    """
    window = kernel.shape[:-2]
    strides = (stride,) * len(window)
    pads = lax.padtype_to_pads(x.shape[1:-1], window, strides, "SAME")
    if impl == "lax":
        spatial = "HWDTUV"[: len(window)]     # any distinct letters, matched between lhs and rhs
        dn = (f"N{spatial}C", f"{spatial}IO", f"N{spatial}C")
        return lax.conv_general_dilated(x, kernel, strides, pads, dimension_numbers=dn)
    if impl == "im2col":
        # Patches by strided slices + one einsum: under vmap over members this is a batched matmul,
        # whereas a conv with batched kernels becomes a (slow on CPU) grouped convolution.
        patches = extract_patches(x, window, strides, pads)
        return jnp.einsum("...p,po->...o", patches, kernel.reshape(-1, kernel.shape[-1]))
    raise ConfigError(f"--model.conv_impl must be one of {'|'.join(CONV_IMPLS)}, got {impl!r}")


def extract_patches(x: jax.Array, window, strides, pads) -> jax.Array:
    """(B, *S, C) -> (B, *S_out, prod(window) * C), window offsets major and channels minor.

    That ordering equals a ``(*window, C_in, C_out)`` kernel's ``reshape(-1, C_out)`` row order.
    """
    x = jnp.pad(x, [(0, 0), *pads, (0, 0)])
    out = [(n - k) // s + 1 for n, k, s in zip(x.shape[1:-1], window, strides)]
    slices = []
    for offsets in itertools.product(*(range(k) for k in window)):
        start = (0, *offsets, 0)
        limit = (x.shape[0], *(o + (m - 1) * s + 1 for o, m, s in zip(offsets, out, strides)), x.shape[-1])
        slices.append(lax.slice(x, start, limit, (1, *strides, 1)))
    return jnp.concatenate(slices, axis=-1) if len(slices) > 1 else slices[0]


class Conv(nn.Module):
    """SAME conv with a ``(window,) * n_spatial`` window (n_spatial = ``x.ndim - 2``); kernel
    ``(*window, C_in, features)``, optional zero bias. ``impl``: ``"lax"`` or ``"im2col"`` (see `conv`).
    The module's own kernel init only matters outside `jaxinit.models.core.from_flax`, which redraws it."""
    features: int
    window: int = 3
    stride: int = 1
    use_bias: bool = True
    impl: str = "lax"
    kernel_init: Callable = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        shape = (*(self.window,) * (x.ndim - 2), x.shape[-1], self.features)
        y = conv(x, self.param("kernel", self.kernel_init, shape, jnp.float32), stride=self.stride, impl=self.impl)
        if self.use_bias:
            y = y + channel_view(self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32), y.ndim)
        return y


# --------------------------------------------------------------------------- batchnorm and units
def batch_norm(train: bool, name: str) -> nn.BatchNorm:
    """flax BatchNorm over every axis but the channels: batch statistics in training, running ones in eval.

    Two-pass variance (``use_fast_variance=False``): ``mean((x - mean)^2)``, stable when |mean| >> std.
    """
    return nn.BatchNorm(use_running_average=not train, momentum=BN_MOMENTUM, epsilon=BN_EPS,
                        use_fast_variance=False, name=name)


class ConvUnit(nn.Module):
    """conv (sub-module ``conv``) -> BatchNorm (``bn``) -> activation (None: no activation).

    The conv has a bias only without BatchNorm (BN's own bias replaces it)."""
    features: int
    stride: int = 1
    batchnorm: bool = True
    activation: str | None = "relu"
    impl: str = "lax"

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        y = Conv(self.features, stride=self.stride, use_bias=not self.batchnorm, impl=self.impl, name="conv")(x)
        if self.batchnorm:
            y = batch_norm(train, name="bn")(y)
        return y if self.activation is None else activations.get(self.activation)(y)


# --------------------------------------------------------------------------- pooling
def max_pool(x: jax.Array, size: int = 2) -> jax.Array:
    """Max pool (window = stride = size) in ceil mode: odd dims keep their last row, a dim of 1 stays 1.

    Ceil mode ('SAME' padding with -inf) lets the same network take 8x8, 28x28, 32x32 or length-40
    inputs: no dim ever shrinks below 1 and no border pixel is dropped.
    """
    n = x.ndim - 2
    dims = strides = (1, *(size,) * n, 1)
    pads = lax.padtype_to_pads(x.shape, dims, strides, "SAME")
    return lax.reduce_window(x, -jnp.inf, lax.max, dims, strides, pads)


def global_max_pool(x: jax.Array) -> jax.Array:
    return x.max(axis=tuple(range(1, x.ndim - 1)))


def global_avg_pool(x: jax.Array) -> jax.Array:
    return x.mean(axis=tuple(range(1, x.ndim - 1)))


# --------------------------------------------------------------------------- helpers and checks
def channel_view(v: jax.Array, ndim: int) -> jax.Array:
    """A (C,) vector reshaped to (1, ..., 1, C) so it broadcasts without rank promotion."""
    return v.reshape((1,) * (ndim - 1) + (-1,))


def scaled_channels(channels: int, width_mult: float) -> int:
    return max(1, int(round(channels * width_mult)))


def spatial_dims(input_shape: tuple, model: str) -> int:
    """Number of spatial dims of a channels-last per-example shape; conv nets need at least one."""
    if len(input_shape) < 2 or math.prod(input_shape) == 0:
        raise ConfigError(f"--model.name={model} needs inputs shaped (*spatial, channels), got {tuple(input_shape)}")
    return len(input_shape) - 1


def check_conv_net(width_mult: float, activation: str, impl: str) -> None:
    """Settings every conv net shares; `ConfigError` (one line) on the first bad one."""
    if not width_mult > 0:
        raise ConfigError(f"--model.width_mult must be > 0, got {width_mult}")
    activations.get(activation)   # unknown names: ConfigError listing the known ones
    if activations.nodes(activation) != 1:
        # a pooled psi halves the channels, which the residual sums of these nets do not allow
        raise ConfigError(f"--model.activation: conv nets take an elementwise activation, got {activation!r}")
    if impl not in CONV_IMPLS:
        raise ConfigError(f"--model.conv_impl must be one of {'|'.join(CONV_IMPLS)}, got {impl!r}")
