"""Bias meets trainability: mean-field and Initial Guessing Bias theory against finite networks.

Bassi et al. 2026 (arXiv 2505.12096), Francazi et al. 2024 (arXiv 2306.00809); docs/theory.md sections 1-5.
Networks in the mean-field convention (W ~ N(0, sigma_w2/fan_in), b ~ N(0, sigma_b2), no normalisation):
`jaxinit.models.deep.DeepMLP` (plain / residual), `jaxinit.models.vit.ViT`, `jaxinit.models.cnn.CNN`.

Notebook API (everything runs in memory; nothing is written unless you ask):

    from jaxinit import igb
    res = igb.probe_init(igb.init_preset("smoke"))      # jaxinit.result.Result: .arrays (per case), .summary
    figs = igb.init_figures(res.arrays)                  # {name: matplotlib Figure}, shown inline
    run = igb.train_phases(igb.train_preset("smoke"))   # engine Result: .arrays, .summary, .rows
    figs = igb.train_figures(run.results, target_acc=0.85, absorbed_fmax=0.6)
    pd = igb.phase_diagrams(igb.phase_preset("smoke"))  # Result: .arrays (the panels), .timing
    figs = igb.panel_figures(pd.arrays, igb.phase_preset("smoke"))

Presets: ``smoke`` (seconds), ``cpu`` (the README's numbers), ``paper`` (accelerator); each module's
``PRESETS.description(name)`` says what one is for. A config is a frozen dataclass:
``dataclasses.replace(cfg, train=replace(cfg.train, steps=50))``. To save as the
experiments do, pass ``on_case=jaxinit.shared.sink.saver(DIR)`` / ``on_result=jaxinit.shared.sink.saver(DIR)``.

Modules: `probe` (one network at init), `predict` (theory beside the measurements), `study_init`
(`probe_init`), `width` (finite width), `study_train` (`train_phases`: every point's own rate, then the reported
runs), `reported`, `results`, `summary_train`, `absorption`, `baseline`, `rescale` / `summary_rescale` (the
rescaling test), `phase_diagram` (theory diagrams, timing), `plots_init` / `plots_train` (figures),
`config_init` / `config_train` / `config_phase` / `config_rescale` (configs and presets; the data config with
binarised labels is `jaxinit.config.IGBDataConfig`). What the joined study shares with this one (nets, phase
points, the case training pieces, the selection, the IGB statistics, the file sink) is in `jaxinit.shared`.
"""
from __future__ import annotations

from jaxinit.igb import config_init, config_phase, config_train
from jaxinit.igb.config_init import IGBInitConfig
from jaxinit.igb.config_phase import PhaseDiagramConfig
from jaxinit.igb.config_train import IGBTrainConfig
from jaxinit.igb.phase_diagram import panel_figures, phase_diagrams
from jaxinit.igb.plots_init import init_figures
from jaxinit.igb.plots_train import train_figures
from jaxinit.igb.study_init import probe_init
from jaxinit.igb.study_train import train_phases


def init_preset(name: str = "cpu") -> IGBInitConfig:
    """A preset of the study at init (smoke, cpu, paper)."""
    return config_init.PRESETS.pick(name)


def train_preset(name: str = "cpu") -> IGBTrainConfig:
    """A preset of the study in training (smoke, cpu, paper)."""
    return config_train.PRESETS.pick(name)


def phase_preset(name: str = "cpu") -> PhaseDiagramConfig:
    """A preset of the phase diagrams (smoke, cpu)."""
    return config_phase.PRESETS.pick(name)


__all__ = ["probe_init", "train_phases", "phase_diagrams", "init_figures", "train_figures", "panel_figures",
           "init_preset", "train_preset", "phase_preset",
           "IGBInitConfig", "IGBTrainConfig", "PhaseDiagramConfig"]
