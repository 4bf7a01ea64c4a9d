"""Configs and presets of the study in training (`jaxinit.igb.train_phases`, `python -m experiments.igb_train`).

Presets: ``smoke`` (tests, seconds), ``cpu`` (default; README numbers, see `CPU`), ``paper`` (the
trainability paper's scale: width 1000, depth 100, MNIST; accelerator, not run). Every field's
docstring is what ``--help`` shows. Sections use the shared keys of every experiment where the concept is
shared: ``model.*`` (the networks), ``opt.*`` (the learning rates), ``sweep.optimizers``, ``train.*``,
``data.*``; ``phases.*`` and ``grid.*`` are this study's own.
"""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Literal

from jaxinit.config import ConfigError, Preset, Presets, check_distinct_float32, check_float32, check_values
from jaxinit.config import IGBDataConfig

Act = Literal["tanh", "relu"]
Optimizer = Literal["sgd", "momentum", "adam"]
ACTS: tuple[str, ...] = typing.get_args(Act)
OPTIMIZERS: tuple[str, ...] = typing.get_args(Optimizer)


@dataclass(frozen=True)
class MLPConfig:
    acts: tuple[Act, ...] = ACTS
    """activations of the deep MLP: tanh (bounded: ordered, EOC, prejudice, neutrality) and relu (unbounded)"""
    width: int = 128
    """hidden width"""
    depths: tuple[int, ...] = (30, 60, 100)
    """hidden layers L; every depth is a separate network (one compile each)"""


@dataclass(frozen=True)
class PhaseConfig:
    sigma_b2: float = 0.1
    """bias variance of the phase points (the paper's ReLU 'EOC' runs use 0.1 too)"""
    ordered_factor: float = 0.75
    """ordered-deep point = ordered_factor x EOC sigma_w2"""
    chaotic_factor: float = 1.5
    """chaotic-deep point (unbounded activations) = chaotic_factor x EOC sigma_w2"""
    neutral_factor: float = 1.5
    """neutrality point (bounded activations) = neutral_factor x the neutrality line's sigma_w2"""
    seeds: int = 3
    """seeds per phase point (paired: a seed is one base draw and its data order is shared)"""


@dataclass(frozen=True)
class GridConfig:
    sigma_w2: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 5.0)
    """weight variances of the grid drawn over the theory phase diagram (overlay figure)"""
    sigma_b2: tuple[float, ...] = (0.02, 0.5)
    """bias variances of the grid (the phase points add a row at phases.sigma_b2)"""
    seeds: int = 1
    """seeds per grid point (0: no grid)"""
    depths: tuple[int, ...] = (100,)
    """depths at which the grid trains, with the first optimizer only"""


@dataclass(frozen=True)
class LrGridConfig:
    sgd_lr: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1)
    """SGD learning rates tried at the EOC (one value: no sweep); the stable rate falls ~1/depth at the EOC"""
    momentum_lr: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
    """heavy-ball (mu = 0.9) learning rates tried at the EOC"""
    adam_lr: tuple[float, ...] = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3)
    """Adam learning rates tried at the EOC"""
    lr_sweep_steps: int = 80
    """steps of each learning-rate sweep run"""
    lr_sweep_seeds: int = 2
    """seeds per learning rate (seeds 1000, 1001, ...: not those of the phase runs)"""

    def lrs(self, optimizer: str) -> tuple[float, ...]:
        """The learning rates tried for ``optimizer`` (a label of `OPTIMIZERS`)."""
        return getattr(self, f"{optimizer}_lr")


@dataclass(frozen=True)
class SweepConfig:
    optimizers: tuple[Optimizer, ...] = ("sgd",)
    """optimizers every phase point trains with; the first is the main one (grid, overlay)"""


@dataclass(frozen=True)
class TrainLoopConfig:
    steps: int = 400
    """training steps of every phase run"""
    batch_size: int = 64
    """minibatch size (indices drawn without replacement from fold_in(data key, step))"""
    eval_every: int = 20
    """evaluate every this many steps after dense_until"""
    dense_until: int = 10
    """evaluate every step up to here (the bias is absorbed early)"""
    eval_train_n: int = 128
    """training inputs on which train accuracy is measured (0 = all)"""
    target_acc: float = 0.85
    """'steps to target' = first evaluated step with test accuracy >= target_acc"""
    absorbed_fmax: float = 0.6
    """absorption time = first evaluated step with test f_max <= absorbed_fmax (binary: chance is 0.5)"""
    seed: int = 0
    """root key of the batches (every case and member sees the same ones; draws come from each member's seed)"""
    checkpoint_every: int = 50
    """steps between checkpoints of the run directory (0 = never): a killed run resumes from the newest"""
    strategy: Literal["vmap", "sequential", "chunked"] = "vmap"
    """how a case's members run (jaxinit.train.members): one vmap per case (default), a loop, or chunks"""
    chunk: int = 4
    """members per vmap chunk when strategy = chunked"""
    phase_res: int = 60
    """theory phase diagram resolution per axis (overlay figure)"""


@dataclass(frozen=True)
class IGBTrainConfig:
    model: MLPConfig = MLPConfig()
    """the deep MLPs"""
    phases: PhaseConfig = PhaseConfig()
    """one point per phase, placed by the theory"""
    grid: GridConfig = GridConfig()
    """a (sigma_w2, sigma_b2) grid for the overlay"""
    opt: LrGridConfig = LrGridConfig()
    """the learning rates swept at the EOC, per optimizer, activation and depth"""
    sweep: SweepConfig = SweepConfig()
    """the optimizers"""
    train: TrainLoopConfig = TrainLoopConfig()
    """the training loop"""
    data: IGBDataConfig = IGBDataConfig(name="digits", normalize="sphere")
    """binarised (label % 2) inputs on the sphere |x|^2/d = 1"""


SMOKE = IGBTrainConfig(
    model=MLPConfig(acts=("tanh",), width=16, depths=(3, 5)),
    phases=PhaseConfig(seeds=1),
    grid=GridConfig(sigma_w2=(1.0, 3.0), sigma_b2=(0.1,), depths=(3,)),
    opt=LrGridConfig(sgd_lr=(0.05, 0.2), adam_lr=(1e-3,), lr_sweep_steps=3, lr_sweep_seeds=1),
    sweep=SweepConfig(optimizers=("sgd", "adam")),
    train=TrainLoopConfig(steps=6, batch_size=32, eval_every=3, dense_until=2, eval_train_n=64, phase_res=8),
    data=IGBDataConfig(name="digits", normalize="sphere", n_train=256, n_test=128),
)
CPU = IGBTrainConfig(sweep=SweepConfig(optimizers=("sgd", "adam")))
"""The README's run: tanh and ReLU MLPs, width 128, depths 30 / 60 / 100, one point per phase at sigma_b2 = 0.1
(3 seeds each), a 5 x 2 (sigma_w2, sigma_b2) grid at depth 100 for SGD, 400 steps of batch 64 on binarised
digits (1,295 train / 143 validation / 359 test), SGD and Adam.

Learning rate, once per (optimizer, activation, depth), held fixed for every phase: grid `LrGridConfig` (SGD
1e-4 .. 0.1, Adam 1e-5 .. 3e-3, factors of ~3), tried at the EOC point for 80 steps on seeds 1000 and
1001; criterion: the highest mean validation accuracy at step 80, a rate with a diverged member excluded,
ties to the smaller rate. Chosen (the sweep's mean validation accuracy in brackets):
  SGD   tanh  d30 3e-2 (0.81)   d60 1e-3 (0.84)   d100 3e-3 (0.79)
        relu  d30 1e-2 (0.86)   d60 3e-4 (0.64)   d100 3e-4 (0.68)
  Adam  tanh  d30 1e-4 (0.93)   d60 1e-4 (0.92)   d100 3e-5 (0.88)
        relu  d30 1e-3 (0.95)   d60 3e-4 (0.91)   d100 3e-4 (0.92)
None at an edge of its grid. The stable SGD rate falls with depth at the EOC (the NTK grows ~linearly with
depth there). Measured: 24 min 04 s wall, 1,378 s CPU on the shared 2-core CPU (load 4-7); results in the
README, "Bias meets trainability".
"""
PAPER = IGBTrainConfig(
    model=MLPConfig(width=1000, depths=(30, 60, 100)),
    phases=PhaseConfig(seeds=5),
    grid=GridConfig(sigma_w2=(0.8, 1.0, 1.3, 1.6, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0),
                    sigma_b2=(0.01, 0.05, 0.1, 0.3, 0.5, 1.0), depths=(100,)),
    opt=LrGridConfig(lr_sweep_steps=300, lr_sweep_seeds=3),
    sweep=SweepConfig(optimizers=("sgd", "momentum", "adam")),
    train=TrainLoopConfig(steps=2000, batch_size=128, eval_every=20, dense_until=50, phase_res=200),
    data=IGBDataConfig(name="mnist", normalize="sphere"),
)
PRESETS = Presets({
    "smoke": Preset(SMOKE, "tests, seconds: tanh width 16, depths 3 and 5, 6 steps, SGD and Adam"),
    "cpu": Preset(CPU, "the README's run: tanh and ReLU, width 128, depths 30/60/100, SGD and Adam; "
                       "~24 min on 2 cores"),
    "paper": Preset(PAPER, "the trainability paper's scale: width 1000, MNIST, 2,000 steps, SGD, momentum and "
                           "Adam; accelerator, not run yet"),
})


def validate(cfg: IGBTrainConfig) -> None:
    """One-line `ConfigError` for values that make no sense (repeated optimizer, depth < 1, width < 1, ...)."""
    from jaxinit.igb.config_init import check_grid_float32
    check_values(cfg)   # also: activations and optimizers among their choices
    m, p, g, o, t, opts = cfg.model, cfg.phases, cfg.grid, cfg.opt, cfg.train, cfg.sweep.optimizers
    if m.width < 1 or not m.depths or min(m.depths) < 1:
        raise ConfigError(f"--model: width and every depth must be >= 1, got width={m.width}, depths={m.depths}")
    if not opts or len(set(opts)) != len(opts) or len(set(m.depths)) != len(m.depths):
        raise ConfigError("--sweep.optimizers (at least one) and --model.depths must not repeat a value")
    if not set(g.depths) <= set(m.depths):
        raise ConfigError(f"--grid.depths={g.depths} must be among --model.depths={m.depths}")
    finite = lambda vs: all(math.isfinite(v) for v in vs)
    if not finite(g.sigma_w2 + g.sigma_b2 + (p.sigma_b2,)) or min(g.sigma_w2) <= 0 or min(g.sigma_b2 + (p.sigma_b2,)) < 0:
        raise ConfigError("--grid / --phases: sigma_w2 must be > 0 and sigma_b2 >= 0 (finite)")
    check_grid_float32("grid", g.sigma_w2, g.sigma_b2)
    check_float32("phases.sigma_b2", p.sigma_b2)
    if not (0 < p.ordered_factor < 1 and p.chaotic_factor > 1 and p.neutral_factor > 1):
        raise ConfigError("--phases: ordered_factor in (0, 1), chaotic_factor and neutral_factor > 1")
    if min(p.seeds, t.steps, t.batch_size, t.eval_every, t.phase_res, o.lr_sweep_steps, o.lr_sweep_seeds) < 1:
        raise ConfigError("--phases.seeds, --train.steps, batch_size, eval_every, phase_res, "
                          "--opt.lr_sweep_steps, lr_sweep_seeds must be >= 1")
    if min(g.seeds, t.eval_train_n, t.dense_until) < 0:
        raise ConfigError("--grid.seeds, --train.eval_train_n and dense_until must be >= 0")
    for name in opts:
        key, lrs = f"opt.{name}_lr", o.lrs(name)
        if not lrs or not all(math.isfinite(v) and v > 0 for v in lrs):
            raise ConfigError(f"--{key}: learning rates must be finite and > 0, got {lrs}")
        for v in lrs:
            check_float32(key, v)
        check_distinct_float32(key, lrs)
    if not 0 < t.target_acc <= 1 or not 0 < t.absorbed_fmax <= 1:
        raise ConfigError("--train: target_acc and absorbed_fmax in (0, 1]")
