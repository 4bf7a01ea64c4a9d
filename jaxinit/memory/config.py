"""Configs and presets of the joined study (`jaxinit.memory.study`, `python -m experiments.memory_phases`).

Plain deep MLPs initialised at the phase points of `jaxinit.shared.phases` (all at ``phases.sigma_b2``, so they and
the ``phases.line`` points x EOC lie on one line of the phase diagram), every point of a line at one learning rate
per optimizer (the line's rate, `jaxinit.memory.line`: one clock per line), trained with low-LR SGD, Adam and
SGD + L2 on 10-class data. Presets: ``smoke`` (tests, seconds), ``cpu`` (default, one CPU core), ``paper``
(accelerator, not run). Every field's docstring is what ``--help`` shows. Shared keys where the concept is shared (``model.*``, ``opt.*``, ``sweep.optimizers``, ``train.*``,
``data.*``); ``phases.*`` is this study's own.
"""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Literal

from jaxinit.config import DataConfig, Preset, Presets, check_distinct_float32, check_float32, check_values
from jaxinit.errors import ConfigError
from jaxinit.shared.selection import SelectionConfig

Act = Literal["tanh", "relu"]
Optimizer = Literal["sgd", "adam", "sgd_l2"]
Phase = Literal["ordered-deep", "EOC", "prejudice", "neutrality", "chaotic-deep"]
"""the phases of `jaxinit.shared.phases` for bounded (tanh) and unbounded (ReLU) activations"""
OPTIMIZERS: tuple[str, ...] = typing.get_args(Optimizer)


@dataclass(frozen=True)
class MLPConfig:
    acts: tuple[Act, ...] = ("tanh",)
    """activations of the plain deep MLP: tanh (ordered, EOC, prejudice, neutrality) and relu (ordered, EOC,
    chaotic-deep)"""
    width: int = 128
    """hidden width"""
    depths: tuple[int, ...] = (40,)
    """hidden layers L; each depth a separate network (one compile per depth and optimizer)"""


@dataclass(frozen=True)
class PhaseConfig:
    sigma_b2: float = 0.1
    """bias variance of every point: the phase points and the line lie at this sigma_b2"""
    ordered_factor: float = 0.75
    """ordered-deep point = ordered_factor x EOC sigma_w2"""
    chaotic_factor: float = 1.5
    """chaotic-deep point (relu) = chaotic_factor x EOC sigma_w2"""
    neutral_factor: float = 1.5
    """neutrality point (tanh) = neutral_factor x the neutrality line's sigma_w2"""
    names: tuple[Phase, ...] = ("ordered-deep", "EOC", "prejudice")
    """phases trained (empty: every phase of the activation)"""
    line: tuple[float, ...] = (0.9,)
    """extra points sigma_w2 = f x EOC on the same line ('<f>xEOC'): the phase coordinate of the slope statistic"""
    seeds: int = 6
    """reported seeds per point (0, 1, ...): paired base draws and shared data order across points"""


@dataclass(frozen=True)
class LrGridConfig(SelectionConfig):
    sgd_lr: tuple[float, ...] = (3e-3, 1e-2, 3e-2)
    """low-LR SGD rates tried on the whole line; the line trains at the one with the lowest mean validation loss
    over its points and selection seeds (one value: no selection)"""
    adam_lr: tuple[float, ...] = (3e-5, 1e-4, 3e-4)
    """Adam rates tried on the whole line"""
    sgd_l2_lr: tuple[float, ...] = (3e-3, 1e-2, 3e-2)
    """SGD + L2 rates tried on the whole line"""
    l2: float = 5e-2
    """coupled L2 coefficient of sgd_l2 (jaxinit.optim.SETTINGS['sgd_l2'])"""

    def lrs(self, optimizer: str) -> tuple[float, ...]:
        """The rates tried for ``optimizer`` (a label of `OPTIMIZERS`)."""
        return getattr(self, f"{optimizer}_lr")


@dataclass(frozen=True)
class SweepConfig:
    optimizers: tuple[Optimizer, ...] = ("sgd", "adam", "sgd_l2")
    """optimizer settings every point trains with: sgd (low rate), adam, sgd_l2 (larger rate + coupled L2)"""


@dataclass(frozen=True)
class TrainLoopConfig:
    steps: int = 2000
    """training steps of every reported run"""
    batch_size: int = 16
    """minibatch size (indices drawn without replacement from fold_in(data key, step), shared by all members)"""
    eval_every: int = 100
    """evaluate every this many steps; the selected step is the first with the lowest validation loss"""
    plateau_frac: float = 0.2
    """plateau window: a member has reached its plateau when the last plateau_frac of its run lowered its best
    validation loss by at most plateau_tol x its total decrease since init (jaxinit.memory.line)"""
    plateau_tol: float = 0.05
    """plateau tolerance, a fraction of the member's total validation-loss decrease"""
    eval_train_n: int = 256
    """training inputs on which train accuracy (interpolation) is measured (0 = all)"""
    n_off: int = 512
    """off-distribution inputs: Gaussian with the training inputs' mean |x|^2 / d"""
    seed: int = 0
    """root key of the batches and of the off-distribution inputs"""
    checkpoint_every: int = 0
    """steps between checkpoints of the run directory (0 = never)"""
    strategy: Literal["vmap", "sequential", "chunked"] = "vmap"
    """how a case's members run (jaxinit.train.members)"""
    chunk: int = 4
    """members per vmap chunk when strategy = chunked"""
    phase_res: int = 60
    """theory phase diagram resolution per axis (overlay figure)"""


@dataclass(frozen=True)
class MemoryPhasesConfig:
    model: MLPConfig = MLPConfig()
    """the plain deep MLPs"""
    phases: PhaseConfig = PhaseConfig()
    """the points: one per phase and the line, all at phases.sigma_b2"""
    opt: LrGridConfig = LrGridConfig()
    """the rate grids of the fair protocol, per optimizer"""
    sweep: SweepConfig = SweepConfig()
    """the optimizers"""
    train: TrainLoopConfig = TrainLoopConfig()
    """the training loop and the evaluations"""
    data: DataConfig = DataConfig(name="mnist1d", normalize="sphere")
    """10-class inputs on the sphere |x|^2/d = 1"""


SMOKE = MemoryPhasesConfig(
    model=MLPConfig(acts=("tanh",), width=16, depths=(3,)),
    phases=PhaseConfig(names=("ordered-deep", "EOC", "neutrality"), line=(), seeds=3),
    opt=LrGridConfig(sgd_lr=(0.05, 0.2), adam_lr=(1e-3,), sgd_l2_lr=(0.1,)),
    sweep=SweepConfig(optimizers=("sgd", "adam", "sgd_l2")),
    train=TrainLoopConfig(steps=6, batch_size=32, eval_every=3, eval_train_n=64, n_off=64, phase_res=8),
    data=DataConfig(name="mnist1d", normalize="sphere", n_samples=400, n_val=64, n_test=64),
)
CPU = MemoryPhasesConfig(data=DataConfig(name="mnist1d", normalize="sphere", n_samples=4000))
"""Default (the field defaults). tanh, depth 40, width 128, sigma_b2 = 0.1: ordered-deep (0.75 x EOC), 0.9 x EOC,
EOC and prejudice, whose L / xi_c differ (summary.json, per point); 6 seeds; SGD, Adam and SGD + L2 (lambda 0.05),
each line at one rate chosen from 3 (3 rates x 2 selection seeds x 1,000 steps); 2,000 reported steps of batch 16
on mnist1d (4,000 samples: 2,880 train, 320 validation, 800 test), evaluated every 100 steps on test,
validation, 256 training and 512 off-distribution inputs. Size: 72 reported members x 2,000 steps and 72
selection members x 1,000 steps."""
PAPER = MemoryPhasesConfig(
    model=MLPConfig(acts=("tanh",), width=512, depths=(30, 50)),
    phases=PhaseConfig(names=(), line=(0.6, 0.9, 1.1, 2.0), seeds=16),
    opt=LrGridConfig(sgd_lr=(1e-3, 3e-3, 1e-2, 3e-2, 0.1), adam_lr=(1e-5, 3e-5, 1e-4, 3e-4, 1e-3),
                     sgd_l2_lr=(1e-3, 3e-3, 1e-2, 3e-2, 0.1)),
    train=TrainLoopConfig(steps=40000, batch_size=16, eval_every=500, n_off=2048, eval_train_n=2000),
    data=DataConfig(name="mnist1d", normalize="sphere", n_samples=10000),
)
PRESETS = Presets({
    "smoke": Preset(SMOKE, "tests, seconds: tanh width 16 depth 3, three phases, 3 seeds, 6 steps; decides nothing"),
    "cpu": Preset(CPU, "tanh depth 40 width 128, 4 points with L/xi_c 0-5.4, 6 seeds, SGD / Adam / SGD+L2 at one "
                       "rate per line, 2,000 steps: H1, H2, H3 through the SGD+L2 arm (T_L2 ~ 1); ~1 h on one core"),
    "paper": Preset(PAPER, "width 512, depths 30/50, every phase + a line, 16 seeds, 40,000 steps: H3 on the SGD arm "
                           "too (T_SGD ~ 0.6 needs ~10^4-10^5 steps at the rates depth 40 trains at); accelerator"),
})


def validate(cfg: MemoryPhasesConfig) -> None:
    """One-line `ConfigError` for values that make no sense."""
    check_values(cfg)
    m, p, o, t, opts = cfg.model, cfg.phases, cfg.opt, cfg.train, cfg.sweep.optimizers
    if m.width < 1 or not m.depths or min(m.depths) < 1 or len(set(m.depths)) != len(m.depths):
        raise ConfigError(f"--model: width and every depth must be >= 1 (depths distinct), got {m.width}, {m.depths}")
    if not opts or len(set(opts)) != len(opts) or not m.acts or len(set(m.acts)) != len(m.acts):
        raise ConfigError("--sweep.optimizers and --model.acts: at least one each, no value repeated")
    if not (math.isfinite(p.sigma_b2) and p.sigma_b2 >= 0):
        raise ConfigError(f"--phases.sigma_b2 must be finite and >= 0, got {p.sigma_b2}")
    check_float32("phases.sigma_b2", p.sigma_b2)
    if not (0 < p.ordered_factor < 1 and p.chaotic_factor > 1 and p.neutral_factor > 1):
        raise ConfigError("--phases: ordered_factor in (0, 1), chaotic_factor and neutral_factor > 1")
    if not all(math.isfinite(f) and f > 0 for f in p.line) or len(set(p.line)) != len(p.line) or 1.0 in p.line:
        raise ConfigError(f"--phases.line: distinct factors > 0 other than 1 (the EOC is a phase point), got {p.line}")
    if len(set(p.names)) != len(p.names):
        raise ConfigError(f"--phases.names must not repeat a phase, got {p.names}")
    from jaxinit.shared.phases import check_names
    for act in m.acts:
        check_names(act, p.names)
    if min(p.seeds, t.steps, t.batch_size, t.eval_every, t.n_off, t.phase_res, t.chunk) < 1:
        raise ConfigError("--phases.seeds, --train.steps, batch_size, eval_every, n_off, phase_res and chunk must be "
                          ">= 1")
    if not (0 < t.plateau_frac < 1 and 0 <= t.plateau_tol < 1):
        raise ConfigError(f"--train.plateau_frac must lie in (0, 1) and plateau_tol in [0, 1), got {t.plateau_frac} "
                          f"and {t.plateau_tol}")
    o.check("opt")
    if t.eval_train_n < 0 or t.checkpoint_every < 0:
        raise ConfigError("--train.eval_train_n and checkpoint_every must be >= 0")
    if not (math.isfinite(o.l2) and o.l2 > 0):
        raise ConfigError(f"--opt.l2 must be finite and > 0, got {o.l2}")
    for name in opts:
        key, lrs = f"opt.{name}_lr", o.lrs(name)
        if not lrs or not all(math.isfinite(v) and v > 0 for v in lrs):
            raise ConfigError(f"--{key}: give at least one learning rate, each finite and > 0, got {lrs}")
        for v in lrs:
            check_float32(key, v)
        check_distinct_float32(key, lrs)


__all__ = ["MemoryPhasesConfig", "MLPConfig", "PhaseConfig", "LrGridConfig", "SweepConfig", "TrainLoopConfig",
           "PRESETS", "SMOKE", "CPU", "PAPER", "validate", "OPTIMIZERS"]
