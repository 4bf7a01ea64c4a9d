"""Models as pure ``(init, apply)`` pairs, built by name from a `ModelConfig`.

``make_model(cfg, input_shape, n_classes)`` returns a `Model` with
``init(key, sigma_w) -> (params, state)`` and ``apply(params, state, x, *, train) -> (logits, state)``;
``input_shape`` is one example's shape, channels last (``(28, 28, 1)``, ``(40, 1)``, ``(64,)``).

Adding a model: write ``make_<name>(cfg, input_shape, n_classes) -> Model`` in its own module, name
every conv/dense weight ``"kernel"`` (so `jaxinit.init.scale_kernels` scales it) and the classifier
``"head"`` (Muon sends it to its Adam branch), and add one ``"module:function"`` line to `BUILDERS`.
Builders are imported on first use, so a model module can import `Model` from here.
"""
from __future__ import annotations

import functools
import importlib
from typing import Callable

from jaxinit.config import ConfigError, ModelConfig
from jaxinit.models.layers import CONV_IMPLS, Model

BUILDERS: dict[str, str] = {
    "mlp": "jaxinit.models.mlp:make_mlp",
    "resnet9": "jaxinit.models.resnet:make_resnet9",
    **{f"resnet{d}": f"jaxinit.models.resnet:make_cifar_resnet:{d}" for d in (20, 32, 44, 56, 110)},
    "vit": "jaxinit.models.vit:make_vit",
    "cnn": "jaxinit.models.cnn:make_cnn",
}


def make_model(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> Model:
    """Build the model named ``cfg.name``; unknown names and bad settings raise `ConfigError`."""
    if cfg.conv_impl not in CONV_IMPLS:
        raise ConfigError(f"--model.conv_impl must be one of {'|'.join(CONV_IMPLS)}, got {cfg.conv_impl!r}")
    if n_classes < 1:
        raise ConfigError(f"a model needs n_classes >= 1, got {n_classes}")
    return _builder(cfg.name)(cfg, tuple(input_shape), n_classes)


def _builder(name: str) -> Callable[..., Model]:
    if name not in BUILDERS:
        raise ConfigError(f"--model.name must be one of {'|'.join(BUILDERS)}, got {name!r}")
    module, func, *args = BUILDERS[name].split(":")
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"--model.name={name}: {module}.{func} is not available ({err})") from None
    return functools.partial(fn, depth=int(args[0])) if args else fn


__all__ = ["Model", "make_model", "BUILDERS"]
