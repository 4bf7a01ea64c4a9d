"""Initialization memory: how much of the init scale sigma_w survives training, and on which clock.

Das et al. 2026, "Do Deep Networks Forget Initialization?" (arXiv 2605.29152); THEORY.md section 6.
Every member (optimizer setting x sigma_w x seed) trains the same network; the headline number per
setting is the spread (max - min over sigma_w, percentage points) of test accuracy at the epoch of
lowest validation loss, next to the forgetting clocks T_SGD, T_L2, T_adapt of its schedule.

    python -m experiments.forgetting                      # cpu preset (the README's main job)
    python -m experiments.forgetting --preset smoke --out /tmp/f
    python -m experiments.forgetting --preset paper --data.dir=~/tensorflow_datasets   # accelerator
    python -m jaxinit.plotting runs/forgetting_cpu       # redraw the figures without retraining

Choices where the paper is silent (each a config field): sigma_w multiplies He-normal (fan-in) on every
conv/dense kernel, biases 0 and BatchNorm gains 1 (`model.base_init`); validation = 20 % of the
training pool carved by a seeded permutation (`data.n_val`, `data.split_seed`); best epoch = first
epoch of lowest validation loss, the evaluation at init included; interpolation = train accuracy
>= 99.5 %; constant learning rate (`opt.schedule`); the `paper` preset uses crop + flip augmentation.
Measured numbers: README ("Initialization memory").
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from jaxinit import cli
from jaxinit.config import (ConfigError, DataConfig, ModelConfig, OptConfig, SweepConfig, TrainConfig,
                            validate_common)


@dataclass(frozen=True)
class ForgettingConfig:
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    opt: OptConfig = OptConfig()
    train: TrainConfig = TrainConfig()
    sweep: SweepConfig = SweepConfig()


ALL_SETTINGS = ("sgd", "momentum", "nesterov", "adam", "adamw", "muon", "sgd_l2")
SIGMA_GRID = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5)

# CPU scale (MEASURED.md): MLP 3x256 + BatchNorm on mnist1d, 3,200 / 800 / 1,000 examples.
CPU = ForgettingConfig(
    data=DataConfig(name="mnist1d", n_samples=5000, n_val=800),
    model=ModelConfig(name="mlp", width=256, depth=3, batchnorm=True),
    opt=OptConfig(setting_lr=("sgd=0.05", "sgd_l2=0.1", "adam=1e-3", "adamw=1e-3", "muon=0.02"),
                  setting_weight_decay=("sgd_l2=2e-2", "adamw=5e-2")),
    train=TrainConfig(batch_size=128, epochs=80, eval_every=1, checkpoint_every=10),
    sweep=SweepConfig(sigma_w=(0.1, 0.3, 0.6, 1.0, 1.6, 2.5), seeds=2, optimizers=("sgd", "sgd_l2", "adam")),
)

SMOKE = ForgettingConfig(
    data=DataConfig(name="digits", n_val=200, n_train=600),
    model=ModelConfig(name="mlp", width=32, depth=2, batchnorm=True),
    opt=OptConfig(setting_lr=("sgd=0.05", "adam=1e-3")),
    train=TrainConfig(batch_size=64, epochs=2, eval_every=1, checkpoint_every=1),
    sweep=SweepConfig(sigma_w=(0.5, 2.0), seeds=1, optimizers=("sgd", "adam")),
)

# The paper's setting (accelerator): ResNet-9, CIFAR-10, b = 128, every optimizer, 3 seeds.
PAPER = ForgettingConfig(
    data=DataConfig(name="cifar10", n_val=5000, augment=True),
    model=ModelConfig(name="resnet9", batchnorm=True),
    opt=OptConfig(setting_lr=("sgd=0.01", "momentum=0.01", "nesterov=0.01", "adam=1e-3", "adamw=1e-3",
                              "muon=0.02", "sgd_l2=0.1"),
                  setting_weight_decay=("sgd_l2=5e-4", "adamw=5e-2")),
    train=TrainConfig(batch_size=128, epochs=200, eval_every=1, checkpoint_every=5),
    sweep=SweepConfig(sigma_w=SIGMA_GRID, seeds=3, optimizers=ALL_SETTINGS),
)


def _variants() -> dict[str, ForgettingConfig]:
    """Batch-size, depth, long-horizon and L2-strength variants of the cpu and paper presets."""
    out = {}
    for b in (16, 32, 64, 128, 256):
        out[f"cpu_b{b}"] = replace(CPU, train=replace(CPU.train, batch_size=b))
        out[f"paper_b{b}"] = replace(PAPER, train=replace(PAPER.train, batch_size=b))
    for name in ("resnet20", "resnet56", "resnet110"):
        out[f"paper_{name}"] = replace(PAPER, model=replace(PAPER.model, name=name),
                                       sweep=replace(PAPER.sweep, optimizers=("sgd", "adam", "sgd_l2")))
    out["cpu_long"] = replace(CPU, train=replace(CPU.train, epochs=600, checkpoint_every=50, eval_every=5),
                              sweep=replace(CPU.sweep, optimizers=("sgd",), seeds=1))
    for lam in ("5e-4", "5e-3", "2e-2", "5e-2"):
        out[f"cpu_l2_{lam}"] = replace(CPU, opt=replace(CPU.opt, setting_weight_decay=(f"sgd_l2={lam}",)),
                                       sweep=replace(CPU.sweep, optimizers=("sgd_l2",)))
    return out


PRESETS = {"cpu": CPU, "smoke": SMOKE, "paper": PAPER, **_variants()}


def validate(cfg: ForgettingConfig) -> None:
    """Cheap checks before anything is written (data and model are checked again when built)."""
    from jaxinit.optim import resolve_setting
    validate_common(cfg)
    if not cfg.sweep.optimizers or len(set(cfg.sweep.optimizers)) != len(cfg.sweep.optimizers):
        raise ConfigError(f"--sweep.optimizers must list distinct setting labels, got {cfg.sweep.optimizers}")
    for label in cfg.sweep.optimizers:
        resolve_setting(label, cfg.opt)
    if cfg.data.dir and not Path(cfg.data.dir).expanduser().is_dir():
        raise ConfigError(f"--data.dir={cfg.data.dir}: no such directory")


def main(cfg: ForgettingConfig, out: Path, resume: bool) -> None:
    from jaxinit.forgetting import memory, plotting, train

    info = train.fit(cfg, out, resume)
    if info["rows"] is None:   # several hosts: process 0 writes the summary
        return
    sweep = info["sweep"]
    l2 = {m.index: _clock_lambda(sweep.settings[m.optimizer]) for m in sweep.members}
    members_info = [{"member": m.index, "optimizer": m.optimizer, "sigma_w": m.sigma_w, "seed": m.seed}
                    for m in sweep.members]
    summary = memory.summarize(info["rows"], members_info, info["etas"], cfg.train.batch_size, l2)
    cli.write_json_atomic(out / "summary.json", summary)
    cli.write_json_atomic(out / "run.json", info["timing"])
    plotting.make_all(out)
    print(memory.markdown_table(summary))


def _clock_lambda(setting) -> float:
    """lambda of T_L2 = lambda sum eta_k: coupled L2 or decoupled weight decay, whichever is on."""
    return float(setting.l2) + float(setting.weight_decay)


def run(argv: list[str] | None = None) -> int:
    return cli.run_experiment("experiments.forgetting", __doc__, ForgettingConfig, PRESETS, "cpu", main,
                              "runs/forgetting", validate=validate, argv=argv, multihost=True)


if __name__ == "__main__":
    raise SystemExit(run())
