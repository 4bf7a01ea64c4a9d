"""Frozen dataclass configs shared by the experiments, and their one parser (tyro).

Structure (model kind, depth, strategy) is static; swept values (`sweep.sigma_w`, seeds) become
traced arrays in the run loops, so changing them never recompiles.

Each experiment defines a top-level frozen dataclass whose fields are sub-configs (frozen dataclasses
of scalars and tuples); every field carries a docstring, which `--help` shows. Command lines are
parsed by tyro (`parse_overrides`) with a few conventions the project fixed before tyro:
`--a.b=value` and `--a.b value` both work, tuples are comma-separated (`--sweep.sigma_w=0.5,1,2`),
booleans take `true/false/1/0/yes/no`, optional values take `none`. Anything unknown or unparsable
raises `ConfigError`, which the entrypoints turn into one line + exit status 2.

Every parsed or loaded config passes `check_values` (floats finite, ints within int32, seeds >= 0) and
`from_dict` type-checks a saved config.json field by field; `validate_common` adds the checks in float32,
the training dtype (values that underflow or collide there), and the memory estimates of `jaxinit.budget`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import types
import typing
from dataclasses import dataclass, field
from typing import Any

FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38   # float32's smallest normal number; below it XLA flushes to zero
INT32_MAX = 2**31 - 1
# sigma_w's floor: the kernel norms sum squared entries sigma_w^2 x 2/fan_in, which for fan-ins up to 1e7
# stay normal float32 numbers down to sigma_w = 1e-15 (at 1e-46 the kernels themselves are 0.0).
SIGMA_W_MIN = 1e-15


class ConfigError(ValueError):
    """Bad user input: printed as one line, exit status 2 (see `jaxinit.cli`)."""


# --------------------------------------------------------------------------- sub-configs
@dataclass(frozen=True)
class DataConfig:
    name: str = "mnist1d"
    """digits | mnist1d | gaussian | mnist | fashion_mnist | cifar10 | cifar100"""
    dir: str = ""
    """where real data lives: a tfds data_dir or the original archives (~ is expanded)"""
    n_train: int = 0
    """training examples (0 = everything left after the validation split)"""
    n_val: int = 0
    """validation examples carved from the training pool (0 = val_fraction of it)"""
    val_fraction: float = 0.1
    """validation share of the training pool when n_val = 0"""
    n_test: int = 0
    """test examples (0 = the whole test split)"""
    split_seed: int = 0
    """seed of the permutation that carves validation from train"""
    binarize: bool = False
    """labels -> label % 2 (IGB study)"""
    augment: bool = False
    """random crop (pad 4) + horizontal flip, images only"""
    normalize: str = "standard"
    """standard (train mean/std per channel) | sphere (|x|^2/d = 1 per input) | none"""
    n_samples: int = 4000
    """synthetic sets (mnist1d, gaussian): samples generated in total"""
    dim: int = 64
    """gaussian: input dimension"""
    n_classes: int = 10
    """gaussian: number of classes"""


@dataclass(frozen=True)
class ModelConfig:
    name: str = "mlp"
    """mlp | resnet9 | resnet8 | resnet20 | resnet32 | resnet44 | resnet56 | resnet110 | vit | cnn"""
    width: int = 256
    """mlp hidden width (vit / cnn: channels); conv nets see width_mult"""
    depth: int = 3
    """mlp hidden layers (vit: blocks, cnn: conv layers)"""
    width_mult: float = 1.0
    """conv nets: channels x width_mult (narrow CPU variants)"""
    batchnorm: bool = True
    """BatchNorm after every hidden dense / conv layer"""
    activation: str = "relu"
    """activation name (jaxinit.models.activations)"""
    base_init: str = "he_normal"
    """he_normal | lecun_normal | glorot_normal | normal_fan_in; sigma_w multiplies it"""
    sigma_w_scope: str = "all"
    """kernels sigma_w multiplies: all | hidden (the head drawn at sigma_w = 1) | head (hidden kernels at
    sigma_w = 1); the head is the sub-module named 'head' (jaxinit.init)"""
    conv_impl: str = "lax"
    """lax | im2col (patches + einsum; vmaps without grouped convolutions)"""


@dataclass(frozen=True)
class OptConfig:
    """Overrides applied on top of every optimizer setting in the sweep (None = the setting's own)."""
    lr: float | None = None
    """learning rate of every setting (none = each setting's own)"""
    weight_decay: float | None = None
    """L2 / weight decay of every setting: coupled for sgd_l2, decoupled for adamw/muon (none = own)"""
    schedule: str = "constant"
    """constant | step | cosine | warmup_cosine"""
    warmup_epochs: float = 0.0
    """linear warmup length (warmup_cosine only)"""
    momentum: float = 0.9
    """heavy-ball / Nesterov mu of the momentum and nesterov settings"""
    b1: float = 0.9
    """Adam beta1"""
    b2: float = 0.999
    """Adam beta2"""
    eps: float = 1e-8
    """Adam epsilon"""
    setting_lr: tuple[str, ...] = ()
    """per-setting learning rates, label=value entries (e.g. sgd=0.05,adam=1e-3); opt.lr wins"""
    setting_weight_decay: tuple[str, ...] = ()
    """per-setting L2 / weight decay, label=value entries; opt.weight_decay wins"""
    muon_first_layer: str = "adam"
    """muon: the first layer's kernel goes to the adam branch (Jordan's reference) or to muon"""
    muon_aux: str = "current"
    """muon's auxiliary Adam: current (lr 0.05 x muon's, opt.b1/b2/eps, no decay by default) | reference
    (Jordan's MuonWithAuxAdam: lr 0.015 x, betas 0.9/0.95, eps 1e-10, decay 0.01 in both groups); optim.py"""


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 128
    """minibatch size b"""
    epochs: int = 10
    """passes over the training split"""
    strategy: str = "auto"
    """auto | vmap | sequential | chunked: how members run (auto = measured fastest per platform)"""
    chunk: int = 4
    """members per vmap chunk when strategy = chunked; a divisor of a setting's members (sigma_w x seeds) keeps
    one compiled shape, otherwise the last, smaller chunk compiles every function again"""
    eval_every: int = 1
    """epochs between evaluations (the last epoch is always evaluated)"""
    checkpoint_every: int = 1
    """epochs between checkpoints (0 = never)"""
    eval_batch_size: int = 1000
    """examples per evaluation batch"""
    precision: str = "float32"
    """float32 | tf32 | bf16: matmul precision and compute dtype of training and evaluation (jaxinit.precision)"""
    eval_train_subset: int = 0
    """train-set metrics on a fixed, seeded subset of this many training examples (0 = the whole split);
    validation and test are always whole"""
    async_checkpoint: bool = False
    """checkpoints written (and digested) in a background thread after a device-to-host copy (one process only)"""


@dataclass(frozen=True)
class SweepConfig:
    sigma_w: tuple[float, ...] = (0.1, 0.5, 1.0, 1.5, 2.0, 2.5)
    """init scales, comma-separated: sigma_w multiplies the base init of every kernel"""
    seeds: int = 1
    """number of seeds (paired: one base draw and data order per seed)"""
    optimizers: tuple[str, ...] = ("sgd",)
    """optimizer setting labels: sgd momentum nesterov adam adamw muon sgd_l2"""
    lr: tuple[float, ...] = ()
    """learning rates swept for every setting (empty: each setting's own); a member per (setting, lr), labelled
    setting@lr (e.g. sgd@0.1), all lrs of a setting in one compiled step"""


# --------------------------------------------------------------------------- parsing (tyro)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _scalar(typ: Any, text: str) -> Any:
    """One scalar from text by type; NaN is never a valid value."""
    text = text.strip()
    if typ is bool:
        low = text.lower()
        if low not in _TRUE | _FALSE:
            raise ValueError(f"expected true or false, got {text!r}")
        return low in _TRUE
    if typ is float:
        value = float(text)
        if math.isnan(value):
            raise ValueError("NaN is not a valid value")
        return value
    return typ(text)


def _registry():
    """tyro constructor rules for the project's spellings of bools, optionals and tuples."""
    import tyro
    from tyro.constructors import PrimitiveConstructorSpec

    registry = tyro.constructors.ConstructorRegistry()

    def spec(metavar, parse, is_instance, show):
        return PrimitiveConstructorSpec(nargs=1, metavar=metavar, instance_from_str=lambda parts: parse(parts[0]),
                                        is_instance=is_instance, str_from_instance=lambda v: [show(v)])

    @registry.primitive_rule
    def rules(info):
        t, origin, args = info.type, typing.get_origin(info.type), typing.get_args(info.type)
        if t is bool:
            return spec("true|false", lambda s: _scalar(bool, s), lambda v: isinstance(v, bool), lambda v: str(v).lower())
        if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
            inner = next(a for a in args if a is not type(None))
            parse = lambda s: None if s.strip().lower() in ("none", "null", "") else _scalar(inner, s)
            return spec(f"{inner.__name__.upper()}|none", parse, lambda v: v is None or isinstance(v, inner),
                        lambda v: "none" if v is None else str(v))
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            inner = args[0]

            def parse(s):
                items = [p for p in s.split(",") if p.strip()]
                if not items:
                    raise ValueError(f"expected a comma-separated list, got {s!r}")
                return tuple(_scalar(inner, p) for p in items)
            return spec(f"{inner.__name__.upper()},...", parse, lambda v: isinstance(v, tuple),
                        lambda v: ",".join(str(x) for x in v))
        return None
    return registry


def _condense(text: str) -> str:
    """tyro's boxed error as one line: the box's first content lines, frame characters removed."""
    lines = []
    for raw in text.splitlines():
        s = raw.strip().strip("│╭╮╰╯").strip()
        if s.startswith("─"):
            if lines:
                break
            continue
        if s:
            lines.append(s)
    return " ".join(lines) or "could not parse the command line"


def _tyro():
    """tyro, imported on first use: only the command line's overrides need it, never training."""
    try:
        import tyro
    except ImportError:
        raise ConfigError("the package tyro is not installed and the command line needs it for --help and "
                          "--a.b=value overrides: pip install tyro") from None
    return tyro


def parse_overrides(cfg: Any, args: list[str], prog: str = "jaxinit", description: str | None = None) -> Any:
    """``cfg`` with the dotted overrides in ``args`` applied (tyro, project spellings).

    ``--help`` in ``args`` prints every field with its default (from ``cfg``) and raises SystemExit(0).
    Any parse error raises `ConfigError` with one line. Without ``args`` tyro is not needed (the
    preset as it is); with them and without tyro installed, one line says how to install it.
    """
    if not args:
        check_values(cfg)
        return cfg
    tyro = _tyro()
    if "-h" in args or "--help" in args:
        tyro.cli(type(cfg), default=cfg, args=["--help"], prog=prog, description=description,
                 use_underscores=True, registry=_registry(), config=(tyro.conf.FlagConversionOff,))
    err = io.StringIO()
    old_columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "1000"   # one rendered line per message, so it condenses to one line
    try:
        with contextlib.redirect_stderr(err):
            parsed = tyro.cli(type(cfg), default=cfg, args=list(args), prog=prog, use_underscores=True,
                              registry=_registry(), config=(tyro.conf.FlagConversionOff,))
    except SystemExit as exit_:
        if exit_.code in (0, None):
            raise
        raise ConfigError(_condense(err.getvalue())) from None
    finally:
        if old_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_columns
    check_values(parsed)
    return parsed


def apply_overrides(cfg: Any, overrides: list[str]) -> Any:
    """Return ``cfg`` with each ``--a.b=value`` (leading ``--`` optional) applied. Unknown keys raise."""
    args = [f"--{o}" if not o.startswith("-") and "." in o.split("=", 1)[0] and "=" in o else o for o in overrides]
    return parse_overrides(cfg, args) if args else cfg


def to_dict(cfg: Any) -> dict:
    """JSON-ready nested dict (tuples become lists)."""
    return dataclasses.asdict(cfg)


def from_dict(cls: type, data: dict, prefix: str = "") -> Any:
    """Inverse of `to_dict` for nested frozen dataclasses (used by --resume). Missing keys take the
    class defaults (configs saved before a field existed); unknown keys, and values whose JSON type is
    not the field's (a hand-edited ``"epochs": "3"``), raise `ConfigError` naming the dotted key."""
    if not isinstance(data, dict):
        raise ConfigError(f"config.json: expected an object for {prefix[:-1] or cls.__name__}, got {_shown(data)}")
    types_ = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if name not in types_:
            raise ConfigError(f"config.json: unknown key {key!r}")
        kwargs[name] = _typed(key, types_[name], value)
    cfg = cls(**kwargs)
    if not prefix:
        check_values(cfg)
    return cfg


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _typed(key: str, typ: Any, value: Any) -> Any:
    """``value`` (from JSON) as annotation ``typ`` wants it; anything else is a `ConfigError`."""
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if dataclasses.is_dataclass(typ):
        return from_dict(typ, value, f"{key}.")
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return None if value is None else _typed(key, inner[0], value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config.json: {key} must be a list, got {_shown(value)}; correct the file")
        return tuple(_typed(f"{key}[{i}]", args[0], v) for i, v in enumerate(value))
    ok = {bool: lambda v: isinstance(v, bool),
          int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str)}.get(typ)
    if ok is None:
        return value
    if not ok(value):
        raise ConfigError(f"config.json: {key} must be {_KINDS[typ]}, got {_shown(value)}; correct the file")
    return float(value) if typ is float else value


def _shown(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, list, dict)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------- validation
def check_values(cfg: Any, prefix: str = "") -> None:
    """Every field of a config tree: floats finite (config.json, strict JSON, cannot hold inf or NaN, and
    no field here means anything by them), ints within int32 (they count steps, members, examples),
    seeds (``seed``, ``*_seed``) >= 0. Run by the parser, `from_dict` and `validate_common`."""
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        key, value = f"{prefix}{f.name}", getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            check_values(value, f"{key}.")
            continue
        for item in value if isinstance(value, tuple) else (value,):
            _check_scalar(key, item, _scalar_type(hints.get(f.name)))


def _scalar_type(hint: Any) -> Any:
    """int / float / ... behind Optional[...] and tuple[..., ...] (None if it is neither)."""
    args = [a for a in typing.get_args(hint) if a is not Ellipsis and a is not type(None)]
    return args[0] if args and typing.get_origin(hint) is not None else hint


def _check_scalar(key: str, value: Any, typ: Any) -> None:
    if typ is float and isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"--{key}={value}: must be a finite number")
    if typ is int and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > INT32_MAX:
            raise ConfigError(f"--{key}={value}: out of range, |value| must be < 2**31")
        if (key.rsplit(".", 1)[-1] == "seed" or key.endswith("_seed")) and value < 0:
            raise ConfigError(f"--{key}={value}: a seed must lie in [0, 2**31 - 1]")


def check_float32(key: str, value: float | None) -> None:
    """Values that reach float32 arrays must be finite there (1e39 passes a float64 check, not this)
    and, unless exactly 0, normal numbers: a subnormal or underflowed one trains as 0 (flush to zero)."""
    if value is None:
        return
    if not (math.isfinite(value) and abs(value) <= FLOAT32_MAX):
        raise ConfigError(f"--{key}={value}: must be finite in float32 (|x| <= 3.4e38)")
    if value != 0 and abs(value) < FLOAT32_TINY:
        raise ConfigError(f"--{key}={value}: underflows float32 (smallest normal 1.2e-38), so it trains as 0; "
                          f"use 0 or a larger value")


def check_distinct_float32(key: str, values: tuple[float, ...]) -> None:
    """Swept values are traced in float32: two that round to one float32 are one member twice."""
    import numpy as np
    rounded = [float(np.float32(v)) for v in values]
    if len(set(rounded)) != len(rounded):
        same = next(v for i, v in enumerate(values) if rounded[i] in rounded[:i])
        raise ConfigError(f"--{key} has repeated values in float32 (the training dtype) {values}: {same} equals "
                          f"an earlier one there; give distinct values")


def validate_common(cfg: Any) -> None:
    """Checks shared by experiments that train (fields absent from a config are skipped)."""
    from jaxinit import budget
    check_values(cfg)
    train = getattr(cfg, "train", None)
    if train is not None and hasattr(train, "strategy"):
        if train.batch_size <= 0:
            raise ConfigError(f"--train.batch_size must be positive, got {train.batch_size}")
        if train.epochs < 0:
            raise ConfigError(f"--train.epochs must be >= 0, got {train.epochs}")
        if train.strategy not in {"auto", "vmap", "sequential", "chunked"}:
            raise ConfigError(f"--train.strategy must be auto|vmap|sequential|chunked, got {train.strategy!r}")
        if train.chunk <= 0 or train.eval_every <= 0 or train.checkpoint_every < 0 or train.eval_batch_size <= 0:
            raise ConfigError("--train.chunk, eval_every and eval_batch_size must be positive, checkpoint_every >= 0")
        if hasattr(train, "precision"):
            from jaxinit.precision import check_precision
            check_precision(train.precision)
        if getattr(train, "eval_train_subset", 0) < 0:
            raise ConfigError(f"--train.eval_train_subset must be >= 0 (0 = the whole training split), "
                              f"got {train.eval_train_subset}")
    sweep = getattr(cfg, "sweep", None)
    if sweep is not None and hasattr(sweep, "sigma_w"):
        for s in sweep.sigma_w:
            check_float32("sweep.sigma_w", s)
        if any(not s > 0 for s in sweep.sigma_w):
            raise ConfigError(f"--sweep.sigma_w values must be > 0, got {sweep.sigma_w}")
        if min(sweep.sigma_w) < SIGMA_W_MIN:
            raise ConfigError(f"--sweep.sigma_w={min(sweep.sigma_w)}: below {SIGMA_W_MIN:g} the squared kernel "
                              f"entries underflow float32 (kernel norms read 0); use larger scales")
        if len(set(sweep.sigma_w)) != len(sweep.sigma_w):
            raise ConfigError(f"--sweep.sigma_w has repeated values {sweep.sigma_w}: a spread needs distinct scales")
        check_distinct_float32("sweep.sigma_w", sweep.sigma_w)
        if sweep.seeds <= 0:
            raise ConfigError(f"--sweep.seeds must be a positive number of seeds, got {sweep.seeds}")
    opt = getattr(cfg, "opt", None)
    if opt is not None and hasattr(opt, "weight_decay"):
        for key in ("lr", "weight_decay", "warmup_epochs", "eps"):
            check_float32(f"opt.{key}", getattr(opt, key))
        if opt.lr is not None and not opt.lr > 0:
            raise ConfigError(f"--opt.lr must be > 0, got {opt.lr}")
        if opt.weight_decay is not None and not opt.weight_decay >= 0:
            raise ConfigError(f"--opt.weight_decay must be >= 0, got {opt.weight_decay}")
    data, model = getattr(cfg, "data", None), getattr(cfg, "model", None)
    if isinstance(data, DataConfig):
        budget.check_data(data)
        if isinstance(train, TrainConfig):
            budget.check_steps(train.epochs, train.batch_size, data)
        if isinstance(model, ModelConfig) and isinstance(sweep, SweepConfig):
            if not model.width_mult > 0:
                raise ConfigError(f"--model.width_mult must be > 0, got {model.width_mult}")
            members = len(sweep.optimizers) * len(sweep.sigma_w) * sweep.seeds
            budget.check_members(members, model, data)


__all__ = [
    "ConfigError", "DataConfig", "ModelConfig", "OptConfig", "TrainConfig", "SweepConfig",
    "parse_overrides", "apply_overrides", "to_dict", "from_dict", "validate_common", "check_float32",
    "check_distinct_float32", "check_values", "field",
]
