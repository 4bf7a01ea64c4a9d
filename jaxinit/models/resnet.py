"""Residual conv nets, generic over the number of spatial dims (1-D signals, 2-D images; channels last).

- ResNet-9 (Page's DAWNBench net, used by airbench): conv-BN-ReLU units of 3x3 convs,
  ``prep 64 | layer1 128 + maxpool 2 + residual(2 units) | layer2 256 + maxpool 2 |
  layer3 512 + maxpool 2 + residual(2 units) | global max pool | linear (no bias) | x 0.125``.
- CIFAR ResNet-(6n+2) (He et al. 2016, §4.2): stem 3x3 conv 16, three stages of n basic blocks with
  16-32-64 channels, stride 2 at the first block of stages 2 and 3, global average pool, linear.
  Shortcuts are **option A** (parameter free, as in the paper's CIFAR nets): identity, or, where the
  shape changes, subsample by 2 (``x[::2]`` per spatial dim, same size as the stride-2 conv's ceil
  output) and zero-pad the new channels (half before, half after).

Channels are multiplied by ``cfg.width_mult`` (e.g. 0.125 -> ResNet-9 with 8-16-32-64). Max pools are
in ceil mode (`layers.max_pool`), so no dim shrinks below 1; the global pool makes the head
resolution-independent. With ``cfg.batchnorm=False`` every conv gets a (zero) bias instead of BN.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxinit.config import ConfigError, ModelConfig
from jaxinit.init import scaled_init
from jaxinit.models import layers as L

RESNET9_CHANNELS = (64, 128, 256, 512)
RESNET9_OUT_SCALE = 0.125
CIFAR_RESNET_DEPTHS = (20, 32, 44, 56, 110)


def make_resnet9(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> L.Model:
    n_spatial = L.spatial_dims(input_shape, cfg.name)
    c0, c1, c2, c3 = (L.scaled_channels(c, _width_mult(cfg)) for c in RESNET9_CHANNELS)
    window = (3,) * n_spatial
    act = L.activation(cfg.activation)
    impl = cfg.conv_impl
    units = {"prep": (input_shape[-1], c0), "layer1": (c0, c1), "res1a": (c1, c1), "res1b": (c1, c1),
             "layer2": (c1, c2), "layer3": (c2, c3), "res3a": (c3, c3), "res3b": (c3, c3)}

    def structure():
        params, state = {}, {}
        for name, (c_in, c_out) in units.items():
            _store(params, state, name, L.unit_init(window, c_in, c_out, batchnorm=cfg.batchnorm))
        params["head"] = L.dense_init(c3, n_classes, bias=False)
        return params, state

    def apply(params, state, x, *, train: bool):
        new_state = {}
        run = lambda name, h: _run_unit(params, state, new_state, name, h, train=train, impl=impl, act=act)
        h = run("prep", x)
        h = L.max_pool(run("layer1", h))
        h = h + run("res1b", run("res1a", h))
        h = L.max_pool(run("layer2", h))
        h = L.max_pool(run("layer3", h))
        h = h + run("res3b", run("res3a", h))
        logits = L.dense_apply(params["head"], L.global_max_pool(h)) * RESNET9_OUT_SCALE
        return logits, new_state

    return L.Model(init=scaled_init(structure, cfg.base_init), apply=apply)


def make_cifar_resnet(cfg: ModelConfig, input_shape: tuple, n_classes: int, depth: int) -> L.Model:
    if depth < 8 or (depth - 2) % 6:
        raise ConfigError(f"--model.name: CIFAR ResNet depth must be 6n+2 >= 8, got {depth}")
    n_blocks = (depth - 2) // 6
    n_spatial = L.spatial_dims(input_shape, cfg.name)
    widths = [L.scaled_channels(c, _width_mult(cfg)) for c in (16, 32, 64)]
    window = (3,) * n_spatial
    act = L.activation(cfg.activation)
    impl = cfg.conv_impl
    # (name, c_in, c_out, stride) per block, in order
    blocks, c_in = [], widths[0]
    for stage, c_out in enumerate(widths):
        for b in range(n_blocks):
            stride = 2 if (stage > 0 and b == 0) else 1
            blocks.append((f"stage{stage + 1}_block{b}", c_in, c_out, stride))
            c_in = c_out

    def structure():
        params, state = {}, {}
        _store(params, state, "stem", L.unit_init(window, input_shape[-1], widths[0], batchnorm=cfg.batchnorm))
        for name, ci, co, _ in blocks:
            p, s = {}, {}
            _store(p, s, "unit1", L.unit_init(window, ci, co, batchnorm=cfg.batchnorm))
            _store(p, s, "unit2", L.unit_init(window, co, co, batchnorm=cfg.batchnorm))
            _store(params, state, name, (p, s))
        params["head"] = L.dense_init(widths[-1], n_classes, bias=True)
        return params, state

    def apply(params, state, x, *, train: bool):
        new_state = {}
        h = _run_unit(params, state, new_state, "stem", x, train=train, impl=impl, act=act)
        for name, ci, co, stride in blocks:
            p, s, ns = params[name], state.get(name, {}), {}
            y = _run_unit(p, s, ns, "unit1", h, train=train, impl=impl, act=act, stride=stride)
            y = _run_unit(p, s, ns, "unit2", y, train=train, impl=impl, act=None)
            h = act(y + _shortcut_a(h, co, stride))
            if ns:
                new_state[name] = ns
        return L.dense_apply(params["head"], L.global_avg_pool(h)), new_state

    return L.Model(init=scaled_init(structure, cfg.base_init), apply=apply)


def _shortcut_a(x: jax.Array, c_out: int, stride: int) -> jax.Array:
    """Option A: identity, or subsample spatially by `stride` and zero-pad channels up to `c_out`."""
    if stride > 1:
        x = x[(slice(None), *(slice(None, None, stride),) * (x.ndim - 2), slice(None))]
    extra = c_out - x.shape[-1]
    if extra:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(extra // 2, extra - extra // 2)])
    return x


def _store(params: dict, state: dict, name: str, params_state: tuple) -> None:
    """Add a sub-tree; its state only if non-empty, so a model without BN has state == {}."""
    params[name], sub_state = params_state
    if sub_state:
        state[name] = sub_state


def _run_unit(params, state, new_state, name, x, **kwargs):
    y, sub_state = L.unit_apply(params[name], state.get(name, {}), x, **kwargs)
    if sub_state:
        new_state[name] = sub_state
    return y


def _width_mult(cfg: ModelConfig) -> float:
    if not cfg.width_mult > 0:
        raise ConfigError(f"--model.width_mult must be > 0, got {cfg.width_mult}")
    return cfg.width_mult


__all__ = ["make_resnet9", "make_cifar_resnet", "CIFAR_RESNET_DEPTHS"]
