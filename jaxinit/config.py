"""Frozen dataclass configs shared by the experiments, their presets, and their checks.

Structure (model kind, depth, strategy) is static; swept values (`sweep.sigma_w`, seeds) become
traced arrays in the run loops, so changing them never recompiles.

Each experiment defines a top-level frozen dataclass whose fields are sub-configs (frozen dataclasses
of scalars and tuples); every field carries a docstring, which `--help` shows. A choice among fixed
strings is typed ``Literal[...]`` (the aliases below), so the parser shows and checks its choices; a
plain ``str`` is an open set (optimizer setting labels, `jaxinit.optim`). Its named settings are
registered as `Presets` of `Preset(config, description)`. Command lines, overrides given in Python and
saved config.json files are read by `jaxinit.run.config_parse` (`parse_overrides`, `override`, `from_dict`);
anything unknown or unparsable raises `jaxinit.errors.ConfigError`, which the entrypoints turn into one
line + exit 2.

Every parsed or loaded config passes `check_values` (floats finite, ints within int32, seeds >= 0,
choices among their Literal) and `from_dict` type-checks a saved config.json field by field;
`validate_common` adds the checks in float32, the training dtype (values that underflow or collide
there), and the memory estimates of `jaxinit.budget`.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Mapping, NamedTuple

import numpy as np

from jaxinit import budget, swept
from jaxinit.budget import INT32_MAX
from jaxinit.errors import ConfigError

FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38   # float32's smallest normal number; below it XLA flushes to zero
# sigma_w's floor: the kernel norms sum squared entries sigma_w^2 x 2/fan_in, which for fan-ins up to 1e7
# stay normal float32 numbers down to sigma_w = 1e-15 (at 1e-46 the kernels themselves are 0.0).
SIGMA_W_MIN = 1e-15

# The choices of the shared fields; each equals its library's registry (tests/test_config.py checks them).
DataName = Literal["digits", "mnist1d", "gaussian", "mnist", "fashion_mnist", "cifar10", "cifar100"]
Normalize = Literal["standard", "sphere", "none"]                    # jaxinit.data.pipeline.NORMALIZE
ModelName = Literal["mlp", "resnet9", "resnet8", "resnet20", "resnet32", "resnet44", "resnet56", "resnet110",
                    "vit", "cnn"]                                      # jaxinit.models.BUILDERS
TheoryActivation = Literal["linear", "relu", "erf", "tanh", "gelu", "silu", "relu+maxpool", "relu+avgpool",
                           "tanh+maxpool", "tanh+avgpool"]             # theory.activations.NAMES
Activation = Literal[TheoryActivation, "elu", "sigmoid"]               # jaxinit.models.activations.NAMES
BaseInit = Literal["he_normal", "lecun_normal", "glorot_normal", "normal_fan_in"]   # jaxinit.init.BASE_INITS
SigmaWScope = Literal["all", "hidden", "head"]                        # jaxinit.init.SIGMA_W_SCOPES
ConvImpl = Literal["lax", "im2col"]                                   # jaxinit.models.layers.CONV_IMPLS
Schedule = Literal["constant", "step", "cosine", "warmup_cosine"]     # jaxinit.optim.SCHEDULES
MuonFirstLayer = Literal["adam", "muon"]                              # jaxinit.optim.MUON_FIRST_LAYER
MuonAux = Literal["current", "reference"]                             # jaxinit.optim.MUON_AUX
Strategy = Literal["auto", "vmap", "sequential", "chunked"]           # jaxinit.train.members
Precision = Literal["float32", "tf32", "bf16"]                        # jaxinit.precision.PRECISIONS


# --------------------------------------------------------------------------- sub-configs
@dataclass(frozen=True)
class DataConfig:
    name: DataName = "mnist1d"
    """the data set: synthetic digits / mnist1d / gaussian, or a real one read from data.dir"""
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
    augment: bool = False
    """random crop (pad 4) + horizontal flip, images only"""
    pool: int = 1
    """images only: average k x k pixel blocks (2: MNIST 28 x 28 -> 14 x 14), a 1/k^2 cheaper convolution"""
    normalize: Normalize = "standard"
    """standard: train mean/std per channel; sphere: |x|^2/d = 1 per input; none"""
    n_samples: int = 4000
    """synthetic sets (mnist1d, gaussian): samples generated in total"""
    dim: int = 64
    """gaussian: input dimension"""
    n_classes: int = 10
    """gaussian: number of classes"""

    @property
    def binarize(self) -> bool:
        """Labels -> label % 2: never here; a study that binarises has a field of this name
        (`IGBDataConfig`), which `jaxinit.data.load_dataset` reads."""
        return False


@dataclass(frozen=True)
class IGBDataConfig(DataConfig):
    """The IGB studies' data: the shared fields plus what only they use (binarised labels); shown only in
    their own --help."""
    binarize: bool = True
    """labels -> label % 2: the studies' two-class task (f_max, per-class metrics)"""


@dataclass(frozen=True)
class ModelConfig:
    name: ModelName = "mlp"
    """the registry's network (jaxinit.models.BUILDERS)"""
    width: int = 256
    """mlp hidden width (vit / cnn: channels); conv nets see width_mult"""
    depth: int = 3
    """mlp hidden layers (vit: blocks, cnn: conv layers)"""
    width_mult: float = 1.0
    """conv nets: channels x width_mult (narrow CPU variants)"""
    batchnorm: bool = True
    """BatchNorm after every hidden dense / conv layer"""
    activation: Activation = "relu"
    """hidden activation (jaxinit.models.activations)"""
    base_init: BaseInit = "he_normal"
    """the kernels' base initializer; sigma_w multiplies it"""
    sigma_w_scope: SigmaWScope = "all"
    """kernels sigma_w multiplies: all; hidden (the head drawn at sigma_w = 1); head (hidden kernels at
    sigma_w = 1); the head is the sub-module named 'head' (jaxinit.init)"""
    conv_impl: ConvImpl = "lax"
    """lax (XLA convolutions) or im2col (patches + einsum; vmaps without grouped convolutions)"""


@dataclass(frozen=True)
class OptConfig:
    """Overrides applied on top of every optimizer setting in the sweep (None = the setting's own)."""
    lr: float | None = None
    """learning rate of every setting (none = each setting's own)"""
    weight_decay: float | None = None
    """L2 / weight decay of every setting: coupled for sgd_l2, decoupled for adamw/muon (none = own)"""
    schedule: Schedule = "constant"
    """learning-rate schedule (jaxinit.optim)"""
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
    muon_first_layer: MuonFirstLayer = "adam"
    """muon: the first layer's kernel goes to the adam branch (Jordan's reference) or to muon"""
    muon_aux: MuonAux = "current"
    """muon's auxiliary Adam: current (lr 0.05 x muon's, opt.b1/b2/eps, no decay by default) | reference
    (Jordan's MuonWithAuxAdam: lr 0.015 x, betas 0.9/0.95, eps 1e-10, decay 0.01 in both groups); optim.py"""


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 128
    """minibatch size b"""
    epochs: int = 10
    """passes over the training split"""
    strategy: Strategy = "auto"
    """how members run (auto = measured fastest per platform)"""
    chunk: int = 4
    """members per vmap chunk when strategy = chunked; a divisor of a setting's members (sigma_w x seeds) keeps
    one compiled shape, otherwise the last, smaller chunk compiles every function again"""
    eval_every: int = 1
    """epochs between evaluations (the last epoch is always evaluated)"""
    checkpoint_every: int = 1
    """epochs between checkpoints (0 = never)"""
    eval_batch_size: int = 1000
    """examples per evaluation batch"""
    precision: Precision = "float32"
    """matmul precision and compute dtype of training and evaluation (jaxinit.precision)"""
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
    """optimizer setting labels: sgd momentum nesterov adam adamw muon sgd_l2 (jaxinit.optim; an open set)"""
    lr: tuple[float, ...] = ()
    """learning rates swept for every setting (empty: each setting's own); a member per (setting, lr), labelled
    setting@lr (e.g. sgd@0.1), all lrs of a setting in one compiled step"""


# --------------------------------------------------------------------------- presets
class Preset(NamedTuple):
    """A named setting of an experiment: its config and one line saying what it is for (``--help``)."""
    config: Any
    description: str


class Presets(Mapping[str, Any]):
    """An experiment's presets, in the order ``--help`` lists them: ``presets[name]`` is the config (a
    frozen dataclass), `description(name)` its line. Every entry is a `Preset` with a one-line description."""

    def __init__(self, entries: Mapping[str, Preset]):
        for name, entry in entries.items():
            if not (isinstance(entry, Preset) and entry.description.strip() and "\n" not in entry.description):
                raise TypeError(f"preset {name!r}: register it as Preset(config, 'what it is for, one line')")
        self._entries = dict(entries)

    def __getitem__(self, name: str) -> Any:
        return self._entries[name].config

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def description(self, name: str) -> str:
        return self._entries[name].description

    def pick(self, name: str) -> Any:
        """The config of ``name``; an unknown name is a one-line `ConfigError` naming the closest presets and
        all of them."""
        if name not in self._entries:
            near = difflib.get_close_matches(name, list(self._entries), n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(near)}? " if near else ""
            raise ConfigError(f"unknown preset {name!r} ({hint}choose from {', '.join(self._entries)})")
        return self[name]


def to_dict(cfg: Any) -> dict:
    """JSON-ready nested dict (tuples become lists); `from_dict` reads it back."""
    return dataclasses.asdict(cfg)


# --------------------------------------------------------------------------- validation
def check_values(cfg: Any, prefix: str = "") -> None:
    """Every field of a config tree: floats finite (config.json, strict JSON, cannot hold inf or NaN, and
    no field here means anything by them), ints within int32 (they count steps, members, examples),
    seeds (``seed``, ``*_seed``) >= 0, a ``Literal`` field's values among its choices. Run by the parser,
    `from_dict` and `validate_common`."""
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        key, value = f"{prefix}{f.name}", getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            check_values(value, f"{key}.")
            continue
        for item in value if isinstance(value, tuple) else (value,):
            _check_scalar(key, item, _scalar_type(hints.get(f.name)))


def _scalar_type(hint: Any) -> Any:
    """int / float / Literal[...] / ... behind Optional[...] and tuple[..., ...]."""
    if typing.get_origin(hint) is Literal:
        return hint
    args = [a for a in typing.get_args(hint) if a is not Ellipsis and a is not type(None)]
    return args[0] if args and typing.get_origin(hint) is not None else hint


def _check_scalar(key: str, value: Any, typ: Any) -> None:
    if typing.get_origin(typ) is Literal and value not in typing.get_args(typ):
        raise ConfigError(f"--{key} must be one of {'|'.join(typing.get_args(typ))}, got {value!r}")
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
    rounded = [float(np.float32(v)) for v in values]
    if len(set(rounded)) != len(rounded):
        same = next(v for i, v in enumerate(values) if rounded[i] in rounded[:i])
        raise ConfigError(f"--{key} has repeated values in float32 (the training dtype) {values}: {same} equals "
                          f"an earlier one there; give distinct values")


def validate_common(cfg: Any) -> None:
    """Checks shared by experiments that train (fields absent from a config are skipped)."""
    check_values(cfg)
    train = getattr(cfg, "train", None)
    if train is not None and hasattr(train, "strategy"):
        if train.batch_size <= 0:
            raise ConfigError(f"--train.batch_size must be positive, got {train.batch_size}")
        if train.epochs < 0:
            raise ConfigError(f"--train.epochs must be >= 0, got {train.epochs}")
        if train.chunk <= 0 or train.eval_every <= 0 or train.checkpoint_every < 0 or train.eval_batch_size <= 0:
            raise ConfigError("--train.chunk, eval_every and eval_batch_size must be positive, checkpoint_every >= 0")
        if getattr(train, "eval_train_subset", 0) < 0:
            raise ConfigError(f"--train.eval_train_subset must be >= 0 (0 = the whole training split), "
                              f"got {train.eval_train_subset}")
    sweep = getattr(cfg, "sweep", None)
    if sweep is not None and hasattr(sweep, "sigma_w"):
        if not sweep.sigma_w or any(not s > 0 for s in sweep.sigma_w):
            raise ConfigError(f"--sweep.sigma_w: give scales > 0, got {sweep.sigma_w}")
        if len(set(sweep.sigma_w)) != len(sweep.sigma_w):
            raise ConfigError(f"--sweep.sigma_w has repeated values {sweep.sigma_w}: a spread needs distinct scales")
        swept.check_points([swept.Point("sweep.sigma_w", f"sigma_w={s!r}", (s,)) for s in sweep.sigma_w])
        if min(sweep.sigma_w) < SIGMA_W_MIN:
            raise ConfigError(f"--sweep.sigma_w={min(sweep.sigma_w)}: below {SIGMA_W_MIN:g} the squared kernel "
                              f"entries underflow float32 (kernel norms read 0); use larger scales")
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

