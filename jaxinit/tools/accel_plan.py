"""What the staged accelerator check (`jaxinit.tools.accel`) runs and at what sizes: its stages in order,
the `Plan` of a check (`FULL`: the paper's shape; `TINY`: seconds on a CPU) and the training precisions
it times (`Mode`, `precision_modes`). Every name here is importable from `jaxinit.tools.accel` too.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

STAGES = ("preflight", "train", "strategy", "optimizers", "eval", "checkpoint", "benchmark", "projection")
SIGMA_GRID = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5)    # forgetting.config.SIGMA_GRID (the paper's)


@dataclass(frozen=True)
class Plan:
    """Sizes of one check. `FULL`: the paper's ResNet-9 at full width, CIFAR-10 shape, b = 128, one
    setting's 24 members; `TINY`: the same path with a CIFAR ResNet-8 at 1/4 width (4-8-16 channels, BatchNorm,
    shortcuts) and 4 members, so that every stage runs in seconds on a CPU (ResNet-9's compiles alone take
    ~2 min there: XLA's compile time grows with the layers, not the width)."""
    name: str = "full"
    model: str = "resnet9"
    width_mult: float = 1.0
    image_size: int = 32
    batch_size: int = 128
    sigma_w: tuple[float, ...] = SIGMA_GRID
    seeds: int = 3
    n_train: int = 45_000                    # synthetic training split on the device (the paper's 45k)
    steps: int = 20                          # timed steps of each measurement
    block_steps: int = 5                     # steps between blocks and deadline checks
    chunk: int = 8                           # members per call of the chunked strategy
    eval_batch: int = 1000                   # the paper's train.eval_batch_size
    eval_examples: int = 5000                # examples of the timed evaluation pass (the stand-in's val split)
    n_val: int = 5000
    cifar_per_batch: int = 10_000            # stand-in: images per CIFAR-10 batch file (5 train + 1 test)
    mnist_sizes: tuple[int, int] = (60_000, 10_000)
    compile_workers: int = 4                 # threads compiling the stages' variants at once before any timing
    precisions: bool = True                  # the other precisions after the main one (tf32, ...)
    optional: bool = True                    # bf16 / highest precision and chunked, while time remains
    optional_reserve_s: float = 100.0        # ... only with this much of the deadline left
    measure_s: float = 40.0                  # a compile-and-time measurement starts only with this much left
    start_s: tuple[tuple[str, float], ...] = (("train", 60.0), ("strategy", 45.0), ("optimizers", 45.0),
                                              ("eval", 30.0), ("checkpoint", 15.0), ("benchmark", 40.0))
    deadline_s: float = 300.0

    def needs(self, stage: str) -> float:
        return dict(self.start_s).get(stage, 0.0)

    @property
    def members(self) -> int:
        return len(self.sigma_w) * self.seeds

    @property
    def steps_per_epoch(self) -> int:
        return self.n_train // self.batch_size


FULL = Plan()
TINY = Plan(name="tiny", model="resnet8", width_mult=0.25, batch_size=4, sigma_w=(0.5, 2.0), seeds=2, n_train=16,
            steps=2, block_steps=1, chunk=2, eval_batch=8, eval_examples=16, n_val=8, cifar_per_batch=8,
            mnist_sizes=(16, 8), compile_workers=1, precisions=False, optional=False, optional_reserve_s=0.0,
            measure_s=0.0, start_s=(), deadline_s=300.0)


class Mode(NamedTuple):
    """A training precision: its label, the matmul precision set while tracing (None: the config's or
    jax's own), whether the config carries it (`TrainConfig.precision`) and whether it is optional."""
    label: str
    context: str | None
    by_config: bool
    optional: bool


def precision_modes() -> list[Mode]:
    """The main mode first. With a `TrainConfig.precision` field: float32, tf32 (and bf16, optional) by
    config, its default first. Without: jax's default precision ("float32"), then tf32 under
    `jax.default_matmul_precision("tensorfloat32")`; bf16 and the highest float32 precision optional."""
    from jaxinit.config import TrainConfig
    if "precision" in {f.name for f in fields(TrainConfig)}:
        default = TrainConfig().precision
        order = [default] + [m for m in ("float32", "tf32", "bf16") if m != default]
        return [Mode(m, None, True, m == "bf16" and m != default) for m in order]
    return [Mode("float32", None, False, False), Mode("tf32", "tensorfloat32", False, False),
            Mode("bf16", "bfloat16", False, True), Mode("float32_highest", "float32", False, True)]
