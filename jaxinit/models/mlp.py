"""MLP: flatten -> cfg.depth x [dense(cfg.width) -> BatchNorm? -> activation] -> dense(n_classes).

Hidden dense layers carry a bias only without BatchNorm (BN's own bias makes it redundant); the
classifier (``head``) always has one. All biases start at 0.
"""
from __future__ import annotations

import math

from jaxinit.config import ConfigError, ModelConfig
from jaxinit.init import scaled_init
from jaxinit.models import layers as L


def make_mlp(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> L.Model:
    if cfg.depth < 0 or cfg.width < 1:
        raise ConfigError(f"--model.depth must be >= 0 and --model.width >= 1, got {cfg.depth}, {cfg.width}")
    d_in = math.prod(input_shape)
    act = L.activation(cfg.activation)
    names = [f"dense_{i}" for i in range(cfg.depth)] + ["head"]
    dims = [d_in] + [cfg.width] * cfg.depth + [n_classes]

    def structure():
        params, state = {}, {}
        for i, name in enumerate(names[:-1]):
            params[name] = L.dense_init(dims[i], dims[i + 1], bias=not cfg.batchnorm)
            if cfg.batchnorm:
                params[f"bn_{i}"], state[f"bn_{i}"] = L.bn_init(dims[i + 1])
        params["head"] = L.dense_init(dims[-2], n_classes, bias=True)
        return params, state

    def apply(params, state, x, *, train: bool):
        h = x.reshape(x.shape[0], -1)
        new_state = {}
        for i, name in enumerate(names[:-1]):
            h = L.dense_apply(params[name], h)
            if cfg.batchnorm:
                h, new_state[f"bn_{i}"] = L.bn_apply(params[f"bn_{i}"], state[f"bn_{i}"], h, train=train)
            h = act(h)
        return L.dense_apply(params["head"], h), new_state

    return L.Model(init=scaled_init(structure, cfg.base_init), apply=apply)


__all__ = ["make_mlp"]
