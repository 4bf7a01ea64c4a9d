"""Frozen dataclass configs and the `--a.b=value` override parser shared by every experiment.

Structure (model kind, depth, strategy) is static; swept values (`sweep.sigma_w`, seeds) become
traced arrays in `train.py`, so changing them never recompiles.

Each experiment defines a top-level frozen dataclass whose fields are sub-configs (themselves frozen
dataclasses of scalars and tuples). `apply_overrides` parses strings by the field's annotation;
anything unknown or unparsable raises `ConfigError`, which entrypoints turn into one line + exit 2.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any


class ConfigError(ValueError):
    """Bad user input: printed as one line, exit status 2 (see `jaxinit.cli`)."""


# --------------------------------------------------------------------------- sub-configs
@dataclass(frozen=True)
class DataConfig:
    name: str = "mnist1d"          # digits | mnist1d | gaussian | mnist | fashion_mnist | cifar10 | cifar100
    dir: str = ""                  # where real data lives: a tfds data_dir or the original archives
    n_train: int = 0               # 0 = everything left after the validation split
    n_val: int = 0                 # 0 = val_fraction of the training pool
    val_fraction: float = 0.1
    n_test: int = 0                # 0 = the whole test split
    split_seed: int = 0            # seeded permutation that carves validation from train
    binarize: bool = False         # label % 2 (IGB study)
    augment: bool = False          # random crop (pad 4) + horizontal flip, images only
    normalize: str = "standard"    # standard (train mean/std per channel) | sphere (|x|^2/d = 1 per input) | none
    n_samples: int = 4000          # synthetic sets (mnist1d, gaussian): samples generated in total
    dim: int = 64                  # gaussian: input dimension
    n_classes: int = 10            # gaussian: number of classes


@dataclass(frozen=True)
class ModelConfig:
    name: str = "mlp"              # mlp | resnet9 | resnet20 | resnet56 | resnet110 | vit | cnn
    width: int = 256               # mlp hidden width; for conv nets see width_mult
    depth: int = 3                 # mlp hidden layers
    width_mult: float = 1.0        # conv nets: channels x width_mult (tiny CPU variants)
    batchnorm: bool = True
    activation: str = "relu"
    base_init: str = "he_normal"   # he_normal | lecun_normal | glorot_normal | normal_fan_in
    conv_impl: str = "lax"         # lax | im2col (patches + einsum; vmaps without grouped convs)


@dataclass(frozen=True)
class OptConfig:
    """Overrides applied on top of every optimizer setting in the sweep (None = the setting's own)."""
    lr: float | None = None
    weight_decay: float | None = None   # coupled L2 for sgd-family settings, decoupled for adamw/muon
    schedule: str = "constant"          # constant | step | cosine | warmup_cosine
    warmup_epochs: float = 0.0
    momentum: float = 0.9
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    # Per-setting values, "label=value" entries, e.g. --opt.setting_lr=sgd=0.05,adam=1e-3.
    # Precedence: opt.lr / opt.weight_decay (all settings) > these entries > optim.SETTINGS defaults.
    setting_lr: tuple[str, ...] = ()
    setting_weight_decay: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 128
    epochs: int = 10
    strategy: str = "auto"          # auto | vmap | sequential | chunked
    chunk: int = 4                  # members per vmap chunk when strategy == chunked
    eval_every: int = 1             # epochs between evaluations
    checkpoint_every: int = 1       # epochs between checkpoints (0 = never)
    eval_batch_size: int = 1000


@dataclass(frozen=True)
class SweepConfig:
    sigma_w: tuple[float, ...] = (0.1, 0.5, 1.0, 1.5, 2.0, 2.5)
    seeds: int = 1
    optimizers: tuple[str, ...] = ("sgd",)


# --------------------------------------------------------------------------- parsing
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse_scalar(text: str, typ: Any, key: str) -> Any:
    text = text.strip()
    try:
        if typ is bool:
            low = text.lower()
            if low in _TRUE | _FALSE:
                return low in _TRUE
            raise ValueError
        if typ is int:
            return int(text)
        if typ is float:
            value = float(text)
            if math.isnan(value):
                raise ConfigError(f"--{key}: NaN is not a valid value")
            return value
        if typ is str:
            return text
    except ConfigError:
        raise
    except ValueError:
        raise ConfigError(f"--{key}: cannot parse {text!r} as {typ.__name__}") from None
    raise ConfigError(f"--{key}: unsupported field type {typ!r}")


def parse_value(text: str, annotation: Any, key: str) -> Any:
    """Parse `text` by a dataclass field annotation: scalars, `X | None`, `tuple[X, ...]`."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is tuple:
        parts = [p for p in text.split(",") if p.strip()]
        if not parts:
            raise ConfigError(f"--{key}: expected a comma-separated list, got {text!r}")
        return tuple(_parse_scalar(p, args[0], key) for p in parts)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        inner = [a for a in args if a is not type(None)]
        if text.strip().lower() in {"none", "null", ""}:
            return None
        return parse_value(text, inner[0], key)
    return _parse_scalar(text, annotation, key)


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def apply_overrides(cfg: Any, overrides: list[str]) -> Any:
    """Return `cfg` with each `a.b=value` (leading `--` optional) applied. Unknown keys raise."""
    for item in overrides:
        item = item[2:] if item.startswith("--") else item
        if "=" not in item:
            raise ConfigError(f"--{item}: overrides take the form --section.key=value")
        key, text = item.split("=", 1)
        cfg = _set_path(cfg, key.split("."), text, key)
    return cfg


def _set_path(obj: Any, path: list[str], text: str, key: str) -> Any:
    if not dataclasses.is_dataclass(obj):
        raise ConfigError(f"--{key}: unknown config key")
    types = _field_types(type(obj))
    name = path[0]
    if name not in types:
        raise ConfigError(f"--{key}: unknown config key")
    current = getattr(obj, name)
    if len(path) == 1:
        if dataclasses.is_dataclass(current):
            raise ConfigError(f"--{key}: is a section, give one of its keys")
        return dataclasses.replace(obj, **{name: parse_value(text, types[name], key)})
    return dataclasses.replace(obj, **{name: _set_path(current, path[1:], text, key)})


def to_dict(cfg: Any) -> dict:
    """JSON-ready nested dict (tuples become lists)."""
    return dataclasses.asdict(cfg)


def from_dict(cls: type, data: dict) -> Any:
    """Inverse of `to_dict` for nested frozen dataclasses (used by --resume)."""
    types = _field_types(cls)
    kwargs = {}
    for name, value in data.items():
        if name not in types:
            raise ConfigError(f"config.json: unknown key {name!r}")
        typ = types[name]
        if dataclasses.is_dataclass(typ):
            kwargs[name] = from_dict(typ, value)
        elif isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


# --------------------------------------------------------------------------- validation
def validate_common(cfg: Any) -> None:
    """Checks shared by experiments that train (fields absent from a config are skipped)."""
    train = getattr(cfg, "train", None)
    if train is not None:
        if train.batch_size <= 0:
            raise ConfigError(f"--train.batch_size must be positive, got {train.batch_size}")
        if train.epochs < 0:
            raise ConfigError(f"--train.epochs must be >= 0, got {train.epochs}")
        if train.strategy not in {"auto", "vmap", "sequential", "chunked"}:
            raise ConfigError(f"--train.strategy must be auto|vmap|sequential|chunked, got {train.strategy!r}")
        if train.chunk <= 0 or train.eval_every <= 0 or train.checkpoint_every < 0:
            raise ConfigError("--train.chunk and --train.eval_every must be positive, checkpoint_every >= 0")
    sweep = getattr(cfg, "sweep", None)
    if sweep is not None:
        if any(not (s > 0 and math.isfinite(s)) for s in sweep.sigma_w):
            raise ConfigError(f"--sweep.sigma_w values must be finite and > 0, got {sweep.sigma_w}")
        if sweep.seeds <= 0:
            raise ConfigError(f"--sweep.seeds must be a positive number of seeds, got {sweep.seeds}")
    opt = getattr(cfg, "opt", None)
    if opt is not None:
        if opt.lr is not None and not (math.isfinite(opt.lr) and opt.lr > 0):
            raise ConfigError(f"--opt.lr must be finite and > 0, got {opt.lr}")
        if opt.weight_decay is not None and not (math.isfinite(opt.weight_decay) and opt.weight_decay >= 0):
            raise ConfigError(f"--opt.weight_decay must be >= 0, got {opt.weight_decay}")


__all__ = [
    "ConfigError", "DataConfig", "ModelConfig", "OptConfig", "TrainConfig", "SweepConfig",
    "apply_overrides", "parse_value", "to_dict", "from_dict", "validate_common", "field",
]
