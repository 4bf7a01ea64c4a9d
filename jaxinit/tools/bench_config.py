"""The member-strategy benchmark's config (`experiments.benchmark`'s sections, read by tyro) and what it
says for each model: its `ModelConfig`, width multiplier, input shape, batch size and steps per timed epoch.

`jaxinit.tools.bench` measures with it; every name here is importable from there too.
"""
from __future__ import annotations

from dataclasses import dataclass

from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError

STRATEGIES = ("sequential", "vmap", "chunked")


@dataclass(frozen=True)
class BenchSection:
    enabled: bool = True
    """false: only the phase-diagram timing"""
    models: tuple[str, ...] = ("mlp", "resnet20", "resnet9")
    """models to time (jaxinit.models registry names)"""
    members: tuple[int, ...] = (1, 4, 8, 16)
    """member counts K, run in this order (a spent budget_s cuts the last ones)"""
    strategies: tuple[str, ...] = STRATEGIES
    """member strategies to time: sequential | vmap | chunked (sequential is every ratio's reference)"""
    conv_impls: tuple[str, ...] = ("lax", "im2col")
    """conv implementations, conv nets only: lax (the default, every ratio's reference) | im2col"""
    chunk: int = 4
    """members per vmap call of the chunked strategy"""
    batch_size: int = 128
    """MLP minibatch size"""
    conv_batch_size: int = 128
    """conv-net minibatch size"""
    optimizer: str = "sgd"
    """optimizer setting label (jaxinit.optim) of every member"""
    mlp_width: int = 512
    """MLP hidden width"""
    mlp_depth: int = 4
    """MLP hidden layers"""
    mlp_input: int = 784
    """MLP input dimension (784-512x4-10, the MLP of the CPU measurements in docs/benchmark.md)"""
    width_mult: float = 1.0
    """conv-net channels x width_mult"""
    model_width_mult: tuple[str, ...] = ()
    """per-model name=value entries overriding width_mult (e.g. resnet9=0.125)"""
    image_size: int = 32
    """conv-net inputs are (image_size, image_size, 3)"""
    steps: int = 2
    """MLP train steps per timed epoch"""
    conv_steps: int = 2
    """conv-net train steps per timed epoch"""
    repeats: int = 5
    """timed epochs per variant (the median is reported)"""
    max_epoch_s: float = 120.0
    """skip a variant whose epoch, extrapolated from a smaller K, would take longer than this"""
    budget_s: float = 0.0
    """> 0: start no new (model, K) group after this many seconds (0 = no limit)"""
    require_accelerator: bool = False
    """refuse to start on a CPU (full-width presets would run for hours there)"""


@dataclass(frozen=True)
class PhaseSection:
    enabled: bool = True
    """time the vmapped theory phase diagram against the per-point numpy/scipy baseline"""
    n_grid: int = 200
    """grid points per axis of the jax phase diagram"""
    depth: int = 100
    """layers the diagram propagates through"""
    baseline_points: int = 20
    """points the per-point baseline times (extrapolated to the whole grid)"""
    repeats: int = 3
    """first calls of the jax diagram (caches cleared before each; the median is reported)"""


@dataclass(frozen=True)
class BenchmarkConfig:
    bench: BenchSection = BenchSection()
    """the training-step cases: models, member counts, strategies, sizes, repeats"""
    phase: PhaseSection = PhaseSection()
    """the phase-diagram timing"""


def model_config(b: BenchSection, name: str, conv_impl: str | None) -> ModelConfig:
    if name == "mlp":
        return ModelConfig(name="mlp", width=b.mlp_width, depth=b.mlp_depth, batchnorm=True)
    return ModelConfig(name=name, width_mult=width_mult(b, name), conv_impl=conv_impl, batchnorm=True)


def width_mult(b: BenchSection, name: str) -> float:
    """`bench.model_width_mult` entry of `name` if any, else `bench.width_mult`."""
    return model_width_mults(b).get(name, b.width_mult)


def model_width_mults(b: BenchSection) -> dict[str, float]:
    out = {}
    for entry in b.model_width_mult:
        name, _, value = entry.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--bench.model_width_mult: expected name=value entries, got {entry!r}") from None
    return out


def input_shape(b: BenchSection, name: str) -> tuple:
    return (b.mlp_input,) if name == "mlp" else (b.image_size, b.image_size, 3)


def batch_size(b: BenchSection, name: str) -> int:
    return b.batch_size if name == "mlp" else b.conv_batch_size


def steps(b: BenchSection, name: str) -> int:
    return b.steps if name == "mlp" else b.conv_steps
