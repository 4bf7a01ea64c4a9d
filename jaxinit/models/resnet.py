"""Residual conv nets as flax modules, generic over the number of spatial dims (1-D signals, 2-D images).

- `ResNet9` (Page's DAWNBench net, used by airbench): conv-BN-ReLU units of 3x3 convs,
  ``prep 64 | layer1 128 + maxpool 2 + residual(res1a, res1b) | layer2 256 + maxpool 2 |
  layer3 512 + maxpool 2 + residual(res3a, res3b) | global max pool | head (no bias) | x 0.125``.
- `CifarResNet` (He et al. 2016, §4.2; depth 6n+2 = 8, 20, 32, 44, 56, 110): ``stem`` 3x3 conv 16, three
  stages of n basic blocks ``stage{s}_block{b}`` (units ``unit1``, ``unit2``) with 16-32-64 channels,
  stride 2 at the first block of stages 2 and 3, global average pool, ``head``.
  Shortcuts are **option A** (parameter free, as in the paper's CIFAR nets): identity, or, where the
  shape changes, subsample by 2 (``x[::2]`` per spatial dim, same size as the stride-2 conv's ceil
  output) and zero-pad the new channels (half before, half after).

Each unit is a `layers.ConvUnit` (sub-modules ``conv`` and ``bn``), so parameters are named like
``params["stage1_block0"]["unit1"]["conv"]["kernel"]`` and BatchNorm statistics like
``batch_stats["prep"]["bn"]["mean"]``. Channels are multiplied by ``width_mult`` (e.g. 0.125 -> ResNet-9
with 8-16-32-64). Max pools are in ceil mode, so no dim shrinks below 1; the global pool makes the head
resolution-independent. With ``batchnorm=False`` every conv gets a (zero) bias instead of BN.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError
from jaxinit.models import activations
from jaxinit.models import layers as L

RESNET9_CHANNELS = (64, 128, 256, 512)
RESNET9_OUT_SCALE = 0.125
CIFAR_RESNET_WIDTHS = (16, 32, 64)
CIFAR_RESNET_DEPTHS = (8, 20, 32, 44, 56, 110)   # 8: one block per stage, a CPU-sized member of the family


class ResNet9(nn.Module):
    """``__call__(x (B, *spatial, C), train=False) -> logits (B, n_classes)``."""
    n_classes: int
    width_mult: float = 1.0
    batchnorm: bool = True
    activation: str = "relu"
    conv_impl: str = "lax"

    def __post_init__(self):
        L.check_conv_net(self.width_mult, self.activation, self.conv_impl)
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        L.spatial_dims(x.shape[1:], "resnet9")
        c0, c1, c2, c3 = (L.scaled_channels(c, self.width_mult) for c in RESNET9_CHANNELS)

        def unit(name, features, h):
            return L.ConvUnit(features, batchnorm=self.batchnorm, activation=self.activation,
                              impl=self.conv_impl, name=name)(h, train)

        h = unit("prep", c0, x)
        h = L.max_pool(unit("layer1", c1, h))
        h = h + unit("res1b", c1, unit("res1a", c1, h))
        h = L.max_pool(unit("layer2", c2, h))
        h = L.max_pool(unit("layer3", c3, h))
        h = h + unit("res3b", c3, unit("res3a", c3, h))
        return nn.Dense(self.n_classes, use_bias=False, name="head")(L.global_max_pool(h)) * RESNET9_OUT_SCALE


class BasicBlock(nn.Module):
    """unit1 (conv-BN-act, stride) -> unit2 (conv-BN) -> + option-A shortcut -> act."""
    features: int
    stride: int = 1
    batchnorm: bool = True
    activation: str = "relu"
    conv_impl: str = "lax"

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        unit = lambda name, **kw: L.ConvUnit(self.features, batchnorm=self.batchnorm, impl=self.conv_impl,
                                             name=name, **kw)
        y = unit("unit1", stride=self.stride, activation=self.activation)(x, train)
        y = unit("unit2", activation=None)(y, train)
        return activations.get(self.activation)(y + shortcut_a(x, self.features, self.stride))


class CifarResNet(nn.Module):
    """CIFAR ResNet-``depth`` (6n+2); ``__call__(x (B, *spatial, C), train=False) -> logits``."""
    depth: int
    n_classes: int
    width_mult: float = 1.0
    batchnorm: bool = True
    activation: str = "relu"
    conv_impl: str = "lax"

    def __post_init__(self):
        if self.depth < 8 or (self.depth - 2) % 6:
            raise ConfigError(f"--model.name: CIFAR ResNet depth must be 6n+2 >= 8, got {self.depth}")
        L.check_conv_net(self.width_mult, self.activation, self.conv_impl)
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        L.spatial_dims(x.shape[1:], f"resnet{self.depth}")
        widths = [L.scaled_channels(c, self.width_mult) for c in CIFAR_RESNET_WIDTHS]
        shared = dict(batchnorm=self.batchnorm, activation=self.activation)
        h = L.ConvUnit(widths[0], impl=self.conv_impl, name="stem", **shared)(x, train)
        for stage, features in enumerate(widths):
            for b in range((self.depth - 2) // 6):
                stride = 2 if (stage > 0 and b == 0) else 1
                h = BasicBlock(features, stride, conv_impl=self.conv_impl, name=f"stage{stage + 1}_block{b}",
                               **shared)(h, train)
        return nn.Dense(self.n_classes, name="head")(L.global_avg_pool(h))


def shortcut_a(x: jax.Array, c_out: int, stride: int) -> jax.Array:
    """Option A: identity, or subsample spatially by `stride` and zero-pad channels up to `c_out`."""
    if stride > 1:
        x = x[(slice(None), *(slice(None, None, stride),) * (x.ndim - 2), slice(None))]
    extra = c_out - x.shape[-1]
    if extra:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(extra // 2, extra - extra // 2)])
    return x


def make_resnet9(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> ResNet9:
    L.spatial_dims(input_shape, cfg.name)
    return ResNet9(n_classes, width_mult=cfg.width_mult, batchnorm=cfg.batchnorm, activation=cfg.activation,
                   conv_impl=cfg.conv_impl)


def make_cifar_resnet(cfg: ModelConfig, input_shape: tuple, n_classes: int, depth: int) -> CifarResNet:
    L.spatial_dims(input_shape, cfg.name)
    return CifarResNet(depth, n_classes, width_mult=cfg.width_mult, batchnorm=cfg.batchnorm,
                       activation=cfg.activation, conv_impl=cfg.conv_impl)


__all__ = ["ResNet9", "CifarResNet", "BasicBlock", "make_resnet9", "make_cifar_resnet", "CIFAR_RESNET_DEPTHS"]
