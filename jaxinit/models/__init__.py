"""Models: flax linen modules built by name from a `ModelConfig`, seen by the run loops as a `Model`.

``make_module(cfg, input_shape, n_classes)`` returns the flax module (``module(x, train=False) -> logits``);
``make_model(cfg, input_shape, n_classes)`` wraps it with `from_flax` into a `Model` with
``init(key, sigma_w) -> (params, state)`` and ``apply(params, state, x, *, train) -> (logits, state)``
(``state`` = ``{}`` without BatchNorm, else ``{"batch_stats": ...}``). ``input_shape`` is one example's
shape, channels last (``(28, 28, 1)``, ``(40, 1)``, ``(64,)``).

Adding a model: write a flax module whose ``__call__(x, train: bool = False)`` returns logits, name every
conv/dense weight ``"kernel"`` with layout ``(*window, in, out)`` (flax's Dense and Conv do; so
`jaxinit.init` scales it by ``sigma_w``) and the classifier sub-module ``"head"`` (Muon sends it to its
Adam branch; ``model.sigma_w_scope`` tells it from the hidden kernels); add ``make_<name>(cfg, input_shape, n_classes) -> nn.Module`` and one
``"module:function"`` line to `BUILDERS` (a trailing ``:<int>`` is passed as ``depth=``). Builders are
imported on first use; a builder that does not import is a one-line `ConfigError`. A module of one's
own needs no registration: ``from_flax(module, input_shape)``.
"""
from __future__ import annotations

import functools
import importlib
from typing import Callable

import flax.linen as nn

from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError
from jaxinit.models.core import Model, from_flax
from jaxinit.models.layers import CONV_IMPLS

BUILDERS: dict[str, str] = {
    "mlp": "jaxinit.models.mlp:make_mlp",
    "resnet9": "jaxinit.models.resnet:make_resnet9",
    **{f"resnet{d}": f"jaxinit.models.resnet:make_cifar_resnet:{d}" for d in (8, 20, 32, 44, 56, 110)},
    "vit": "jaxinit.models.vit:make_vit",
    "cnn": "jaxinit.models.cnn:make_cnn",
}
# Conv nets: on CPU the run loop runs their members sequentially (a vmapped conv with batched kernels
# becomes a grouped conv there); every other model is vmapped.
CONV_MODELS: tuple[str, ...] = tuple(n for n in BUILDERS if n.startswith("resnet")) + ("cnn",)


def make_module(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> nn.Module:
    """The flax module named ``cfg.name``; unknown names and bad settings raise `ConfigError`."""
    if cfg.conv_impl not in CONV_IMPLS:
        raise ConfigError(f"--model.conv_impl must be one of {'|'.join(CONV_IMPLS)}, got {cfg.conv_impl!r}")
    if n_classes < 1:
        raise ConfigError(f"a model needs n_classes >= 1, got {n_classes}")
    return _builder(cfg.name)(cfg, tuple(input_shape), n_classes)


def make_model(cfg: ModelConfig, input_shape: tuple, n_classes: int) -> Model:
    """`make_module` seen as ``(init, apply)``: kernels (those of ``cfg.sigma_w_scope``) are ``sigma_w`` x
    ``cfg.base_init`` draws."""
    module = make_module(cfg, input_shape, n_classes)
    return from_flax(module, tuple(input_shape), cfg.base_init, sigma_w_scope=cfg.sigma_w_scope)


def _builder(name: str) -> Callable[..., nn.Module]:
    if name not in BUILDERS:
        raise ConfigError(f"--model.name must be one of {'|'.join(BUILDERS)}, got {name!r}")
    module, func, *args = BUILDERS[name].split(":")
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"--model.name={name}: {module}.{func} is not available ({reason})") from None
    return functools.partial(fn, depth=int(args[0])) if args else fn


__all__ = ["Model", "from_flax", "make_model", "make_module", "BUILDERS", "CONV_MODELS", "CONV_IMPLS"]
