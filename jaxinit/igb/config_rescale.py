"""Configs and presets of the rescaling test (`jaxinit.igb.rescale`, `python -m experiments.igb_rescale`).

Presets: ``smoke`` (tests, seconds: sklearn's 8 x 8 digits, depth 4), ``cpu`` (default: MNIST, the brief's
depth-20 width-256 tanh net; sized for ~12 min on the shared 2-core CPU). Every field's docstring is what
``--help`` shows. Sections: ``model.*`` (the network), ``pretrain.*`` (phase A), ``finetune.*`` (phase B),
``opt.*`` (the optimizer and the fine-tuning rate grid), ``rescale.*`` (the arms), ``data.*``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from jaxinit.config import (ConfigError, IGBDataConfig, Preset, Presets, check_distinct_float32, check_float32,
                            check_values)

Act = Literal["tanh", "erf"]                       # smooth, single-node: the local chi_1 needs psi'
Optimizer = Literal["sgd", "momentum", "adam"]
Control = Literal["trained", "fresh_eoc"]


@dataclass(frozen=True)
class NetConfig:
    act: Act = "tanh"
    """hidden activation"""
    width: int = 256
    """hidden width"""
    depth: int = 20
    """hidden layers L (>= 2: layers 2..L are the ones rescaled)"""
    sigma_b2: float = 0.1
    """bias variance; sigma_w2 is the EOC value at it (theory.meanfield.eoc), for the init and every fresh readout"""


@dataclass(frozen=True)
class PretrainConfig:
    digits: tuple[int, ...] = (0, 1, 2, 3, 4)
    """the classes of phase A"""
    n_train: int = 3000
    """training images of phase A (the first of these digits in the training split)"""
    n_test: int = 1000
    """test images of phase A (pretraining accuracy only)"""
    steps: int = 600
    """SGD steps of pretraining, one seed, from the EOC init"""
    batch_size: int = 64
    """minibatch size"""
    lr: float = 0.03
    """learning rate of pretraining (fixed, not tuned: pretraining only has to give a trained net)"""
    seed: int = 2000
    """the pretrained net's draw and batches (not a fine-tuning seed)"""
    eval_every: int = 100
    """evaluate phase A's test split every this many steps"""


@dataclass(frozen=True)
class FinetuneConfig:
    digits: tuple[int, ...] = (5, 6, 7, 8, 9)
    """the classes of phase B (as many as phase A with digit labels: one network serves both)"""
    n_train: int = 2000
    """training images of phase B"""
    n_val: int = 500
    """validation images of phase B (from the validation split): the rate is chosen on them"""
    n_test: int = 1000
    """test images of phase B: every reported number"""
    steps: int = 200
    """fine-tuning steps of every member"""
    batch_size: int = 64
    """minibatch size (a member's batches come from its seed: paired across arms and rates)"""
    eval_every: int = 10
    """evaluate every this many steps after dense_until"""
    dense_until: int = 0
    """evaluate every step up to here (0: the target is reached after ~40 steps, dense early evaluations buy nothing)"""
    seeds: int = 8
    """reported seeds per arm (0, 1, ...): the fresh readout's draw and the batch order"""
    select_seeds: int = 2
    """seeds per (arm, rate) of the rate selection (1000, 1001, ...: disjoint from the reported ones)"""
    target_fraction: float = 0.95
    """'steps to target' = first evaluation with test accuracy >= target_fraction x the ridge baseline's"""
    checkpoint_every: int = 50
    """steps between checkpoints of the reported run (0 = never)"""
    strategy: Literal["vmap", "sequential", "chunked"] = "sequential"
    """how an arm's members run (jaxinit.train.members); a loop is fastest for this MLP on 2 CPU cores"""
    chunk: int = 4
    """members per vmap chunk when strategy = chunked"""


@dataclass(frozen=True)
class OptConfig:
    optimizer: Optimizer = "sgd"
    """optimizer of both phases (constant rate; the IGB study's first optimizer is sgd)"""
    lrs: tuple[float, ...] = (3e-3, 1e-2, 3e-2, 0.1, 0.3)
    """fine-tuning rates: the same grid for every arm, each arm's rate chosen on validation"""


@dataclass(frozen=True)
class RescaleConfig:
    targets: tuple[float, ...] = (0.1, 1.0, 10.0)
    """measured backward factors |delta_1|^2 / |delta_L|^2 the rescaled arms are set to (one arm each)"""
    controls: tuple[Control, ...] = ("trained", "fresh_eoc")
    """control arms: the trained net un-rescaled, a fresh EOC init"""
    n_calib: int = 512
    """phase-B training inputs on which the backward factor is measured and the factors are set (per seed: the
    member's own fresh readout is part of the measured net)"""
    tol: float = 0.05
    """a target is hit when the measured factor is within a factor (1 + tol) of it"""
    max_iter: int = 30
    """iterations of the search on the per-layer target (a miss is an error)"""


@dataclass(frozen=True)
class IGBRescaleConfig:
    model: NetConfig = NetConfig()
    """the deep MLP"""
    pretrain: PretrainConfig = PretrainConfig()
    """phase A: pretraining on the first digits"""
    finetune: FinetuneConfig = FinetuneConfig()
    """phase B: fine-tuning on the other digits, fresh readout"""
    opt: OptConfig = OptConfig()
    """the optimizer and the fine-tuning rate grid"""
    rescale: RescaleConfig = RescaleConfig()
    """the rescaled arms and the controls"""
    data: IGBDataConfig = IGBDataConfig(name="mnist", normalize="sphere", binarize=False)
    """MNIST on the sphere |x|^2/d = 1; binarize=false: labels are the digit's index in its phase
    (5 classes), binarize=true: label % 2"""


SMOKE = IGBRescaleConfig(
    model=NetConfig(width=16, depth=4),
    pretrain=PretrainConfig(n_train=200, n_test=100, steps=20, batch_size=32, lr=0.05, eval_every=10),
    finetune=FinetuneConfig(n_train=200, n_val=60, n_test=100, steps=8, batch_size=32, eval_every=4,
                            dense_until=2, seeds=2, select_seeds=1, checkpoint_every=4),
    opt=OptConfig(lrs=(0.03, 0.1)),
    rescale=RescaleConfig(targets=(0.3, 3.0), n_calib=128),
    data=IGBDataConfig(name="digits", normalize="sphere", binarize=False),
)
CPU = IGBRescaleConfig()
"""The run of docs/igb.md, "The rescaling remark": depth 20, width 256, tanh, sigma_b2 0.1 at the EOC; 600 SGD steps of
pretraining on 3,000 images of digits 0-4 (5 classes); fine-tuning on digits 5-9 (2,000 train / 500 val / 1,000
test) for 200 steps, batch 64, fresh readout; arms: measured backward factor 0.1 / 1 / 10 (factors set per seed),
the trained net, a fresh EOC init; SGD rates 3e-3 .. 0.3 chosen per arm on 2 validation seeds, 8 reported seeds.
Measured: 8 min 27 s wall (455 s CPU) on the shared 2-core Xeon; every arm chose 0.03 (interior of the grid)."""
PRESETS = Presets({
    "smoke": Preset(SMOKE, "tests, seconds: sklearn digits, depth 4 width 16, 8 fine-tuning steps"),
    "cpu": Preset(CPU, "MNIST 0-4 -> 5-9, depth 20 width 256 tanh, 5 arms x 5 rates, 8 seeds; ~12 min on 2 cores"),
})


def validate(cfg: IGBRescaleConfig) -> None:
    """One-line `ConfigError` for values that make no sense (empty rate grid, target <= 0, ...)."""
    check_values(cfg)
    m, p, f, o, r = cfg.model, cfg.pretrain, cfg.finetune, cfg.opt, cfg.rescale
    if m.width < 1 or m.depth < 2:
        raise ConfigError(f"--model: width >= 1 and depth >= 2 (layers 2..L are rescaled), got {m.width}, {m.depth}")
    if not (math.isfinite(m.sigma_b2) and m.sigma_b2 >= 0):
        raise ConfigError(f"--model.sigma_b2 must be finite and >= 0, got {m.sigma_b2}")
    _check_digits(p.digits, f.digits, cfg.data.binarize)
    counts = {"pretrain.n_train": p.n_train, "pretrain.n_test": p.n_test, "pretrain.steps": p.steps,
              "pretrain.batch_size": p.batch_size, "pretrain.eval_every": p.eval_every,
              "finetune.n_train": f.n_train, "finetune.n_val": f.n_val, "finetune.n_test": f.n_test,
              "finetune.steps": f.steps, "finetune.batch_size": f.batch_size, "finetune.eval_every": f.eval_every,
              "finetune.seeds": f.seeds, "finetune.select_seeds": f.select_seeds, "finetune.chunk": f.chunk,
              "rescale.n_calib": r.n_calib, "rescale.max_iter": r.max_iter}
    for key, value in counts.items():
        if value < 1:
            raise ConfigError(f"--{key} must be >= 1, got {value}")
    if min(f.dense_until, f.checkpoint_every) < 0:
        raise ConfigError("--finetune.dense_until and checkpoint_every must be >= 0")
    if p.batch_size > p.n_train or f.batch_size > f.n_train:
        raise ConfigError("--pretrain/--finetune.batch_size must not exceed its n_train (batches are drawn "
                          "without replacement)")
    _check_rates("opt.lrs", o.lrs)
    _check_rates("pretrain.lr", (p.lr,))
    if not 0 < f.target_fraction <= 1:
        raise ConfigError(f"--finetune.target_fraction must lie in (0, 1], got {f.target_fraction}")
    if not r.targets and not r.controls:
        raise ConfigError("--rescale.targets and --rescale.controls are both empty: no arm to fine-tune")
    if any(not (math.isfinite(t) and t > 0) for t in r.targets):
        raise ConfigError(f"--rescale.targets: backward factors must be finite and > 0, got {r.targets}")
    if len({f'{t:g}' for t in r.targets}) != len(r.targets) or len(set(r.controls)) != len(r.controls):
        raise ConfigError("--rescale.targets and --rescale.controls must not repeat a value")
    if not (math.isfinite(r.tol) and r.tol > 0):
        raise ConfigError(f"--rescale.tol must be finite and > 0, got {r.tol}")


def _check_digits(a: tuple[int, ...], b: tuple[int, ...], binarize: bool) -> None:
    for key, digits in (("pretrain.digits", a), ("finetune.digits", b)):
        if not digits or len(set(digits)) != len(digits) or not all(0 <= d <= 9 for d in digits):
            raise ConfigError(f"--{key} must be distinct digits in 0..9, got {digits}")
    if set(a) & set(b):
        raise ConfigError(f"--pretrain.digits {a} and --finetune.digits {b} must not share a digit")
    if not binarize and len(a) != len(b):
        raise ConfigError(f"with digit labels both phases need as many classes (one network): {a} vs {b}")
    n_classes = (lambda d: len({x % 2 for x in d})) if binarize else len
    if min(n_classes(a), n_classes(b)) < 2:
        rule = "both parities (data.binarize)" if binarize else "two digits"
        raise ConfigError(f"each phase needs two classes: {rule}; got {a} and {b}")


def _check_rates(key: str, rates: tuple[float, ...]) -> None:
    if not rates:
        raise ConfigError(f"--{key} is empty: give at least one learning rate")
    if not all(math.isfinite(v) and v > 0 for v in rates):
        raise ConfigError(f"--{key}: learning rates must be finite and > 0, got {rates}")
    for v in rates:
        check_float32(key, v)
    check_distinct_float32(key, rates)
