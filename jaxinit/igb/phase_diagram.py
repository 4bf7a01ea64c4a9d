"""Theory phase diagrams over (sigma_w2, sigma_b2): mean field + Initial Guessing Bias (docs/theory.md 2-5).

`compute_panels(cfg)`: per activation the phases of the trainability paper (`theory.phase`), the edge
of chaos (forward and gradient criterion) and the neutrality line c* = 1/2, plus c_l and gamma_l per
layer on both sides of the EOC; `panel_figures(data, cfg)` draws them (`matplotlib.figure.Figure`,
notebook-friendly); `time_phase_diagram` times the vmapped tanh diagram against the per-point
numpy/scipy loop (`baseline_point`, in `jaxinit.igb.phase_baseline`). In memory: `phase_diagrams(cfg)`.
"""
from __future__ import annotations

import math
import os
import platform
import time
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from jaxinit.result import Result
from jaxinit.run import files
from jaxinit.igb.config_phase import GridConfig, PhaseDiagramConfig
from jaxinit.igb.phase_baseline import baseline_point

PHASE_COLORS = ("#3b6fb6", "#2ca02c", "#d62728", "#ff9f40", "#f2e35c", "#9467bd")   # codes 0..5 (theory.phase)
TITLES = {"relu": "ReLU", "tanh": "Tanh", "relu+maxpool": "ReLU+Max", "tanh+maxpool": "Tanh+Max",
          "relu+avgpool": "ReLU+Avg", "tanh+avgpool": "Tanh+Avg"}
FIELDS = ("phase", "chi1", "chi1_tilde", "q_star", "c_star", "c_depth", "gamma_depth")


def grids(g: GridConfig) -> tuple[np.ndarray, np.ndarray]:
    """sigma_w2 in (0, max] (0 is degenerate: no signal), sigma_b2 in [0, max]."""
    return np.linspace(g.sigma_w2_max / g.n, g.sigma_w2_max, g.n), np.linspace(0.0, g.sigma_b2_max, g.n)


def key(act: str, field: str) -> str:
    """npz key of one activation's field (``+`` spelled ``_``)."""
    return f"{act.replace('+', '_')}__{field}"


def _time_first_calls(w, b, depth: int, repeats: int) -> tuple[list[float], dict]:
    from theory import phase
    firsts = []
    for _ in range(repeats):
        phase._diagram.clear_cache()   # so that each first call includes tracing and compilation
        t0 = time.perf_counter()
        result = phase.phase_diagram("tanh", w, b, depth)
        firsts.append(time.perf_counter() - t0)
    return firsts, result


def time_phase_diagram(n_grid: int = 200, depth: int = 100, baseline_points: int = 150, repeats: int = 3,
                       seed: int = 0, sigma_w2_max: float = 6.0, sigma_b2_max: float = 0.5) -> dict:
    """Time the vmapped tanh phase diagram against the per-point numpy/scipy loop, side by side.

    `jax_first_s`: median over `repeats` of a first call (the jit cache cleared before each);
    `jax_second_s`: a call on a shifted grid (no recompilation). The baseline runs on `baseline_points`
    grid points drawn with `seed` and is extrapolated to all `n_grid^2` points; also the largest
    difference between the two on those points (`baseline_max_abs_diff_c_star`, `..._chi1`).
    """
    import jax
    from theory import phase
    w, b = grids(GridConfig(n=n_grid, sigma_w2_max=sigma_w2_max, sigma_b2_max=sigma_b2_max, depth=depth))
    firsts, result = _time_first_calls(w, b, depth, repeats)
    t0 = time.perf_counter()
    phase.phase_diagram("tanh", w * (1.0 + 1e-6), b, depth)
    second = time.perf_counter() - t0
    idx = np.random.default_rng(seed).choice(n_grid * n_grid, size=min(baseline_points, n_grid * n_grid), replace=False)
    iw, ib = np.unravel_index(idx, (n_grid, n_grid))
    t0 = time.perf_counter()
    base = [baseline_point(float(w[i]), float(b[j]), depth) for i, j in zip(iw, ib)]
    per_point = (time.perf_counter() - t0) / len(idx)
    diff = lambda k: float(max(abs(r[k] - float(result[k][i, j])) for r, i, j in zip(base, iw, ib)))
    total, first = per_point * n_grid * n_grid, float(np.median(firsts))
    return {"act": "tanh", "n_grid": n_grid, "points": n_grid * n_grid, "depth": depth,
            "jax_first_s": first, "jax_first_s_all": firsts, "jax_second_s": second,
            "baseline_points": int(len(idx)), "baseline_per_point_s": per_point, "baseline_extrapolated_s": total,
            "speedup_first_call": total / first, "speedup_second_call": total / second,
            "baseline_max_abs_diff_c_star": diff("c_star"), "baseline_max_abs_diff_chi1": diff("chi1"),
            "note": f"baseline timed on {len(idx)} seeded grid points and extrapolated to {n_grid * n_grid}",
            "platform": jax.default_backend(), "cpu_count": os.cpu_count(), "machine": platform.machine()}


def compute_panels(cfg: PhaseDiagramConfig, log=print) -> dict[str, np.ndarray]:
    """Phase diagrams plus EOC / neutrality curves for every panel activation, flat npz-ready arrays."""
    from theory import igb, meanfield, phase
    w, b = grids(cfg.grid)
    out = {"sigma_w2": w, "sigma_b2": b}
    for act in cfg.plot.acts:
        t0 = time.perf_counter()
        res = phase.phase_diagram(act, w, b, cfg.grid.depth, cfg.plot.eoc_tol, cfg.plot.criterion)
        out.update({key(act, f): np.asarray(res[f]) for f in FIELDS})
        out[key(act, "eoc_forward")] = np.asarray(meanfield.eoc(b, act, "forward"))
        out[key(act, "eoc_gradient")] = np.asarray(meanfield.eoc(b, act, "gradient"))
        out[key(act, "neutrality")] = np.asarray(meanfield.neutrality_line(b, act))
        log(f"{act:>13}: {len(w)} x {len(b)} grid, depth {cfg.grid.depth}, curves: {time.perf_counter() - t0:.1f} s")
    p = cfg.plot
    q, c = meanfield.propagate(np.asarray(p.layers_sigma_w2), p.layers_sigma_b2, p.layers_act, p.layers_depth)
    out.update({"layers__sigma_w2": np.asarray(p.layers_sigma_w2), "layers__q": np.asarray(q), "layers__c": np.asarray(c),
                "layers__gamma": np.asarray(igb.gamma_from_c(c)),
                "layers__eoc": np.asarray(meanfield.eoc(p.layers_sigma_b2, p.layers_act, "forward"))})
    return out


def phase_diagrams(cfg: PhaseDiagramConfig, log=print) -> Result:
    """Timing first (so that its first call includes compilation), then every panel; writes nothing."""
    timing = None
    if cfg.timing.enabled:
        t = cfg.timing
        timing = time_phase_diagram(t.n, t.depth, t.baseline_points, t.repeats, t.seed, cfg.grid.sigma_w2_max,
                                    cfg.grid.sigma_b2_max)
    return Result(None, None, timing, arrays=compute_panels(cfg, log))   # arrays: phase_diagram.npz's


# --------------------------------------------------------------------------- figures
def panel_figures(data: dict, cfg: PhaseDiagramConfig) -> dict[str, Figure]:
    """``phase_diagram`` (the panels) and ``c_gamma_layers`` (c_l, gamma_l per layer)."""
    return {"phase_diagram": plot_panels(data, cfg), "c_gamma_layers": plot_layers(data, cfg)}


def _panel(ax, data, act, w, b):
    cmap, norm = ListedColormap(PHASE_COLORS), BoundaryNorm(np.arange(-0.5, len(PHASE_COLORS)), len(PHASE_COLORS))
    ax.pcolormesh(w, b, data[key(act, "phase")].T, cmap=cmap, norm=norm, shading="nearest", rasterized=True)
    fwd, grad, neu = (data[key(act, k)] for k in ("eoc_forward", "eoc_gradient", "neutrality"))
    ax.plot(fwd, b, "k-", lw=1.6, label="EOC (chi1~ = 1)")
    if not np.allclose(fwd, grad, equal_nan=True):
        ax.plot(grad, b, "k--", lw=1.2, label="EOC, gradient (chi1 = 1)")
    if (neu <= w[-1]).any():   # nan where none; Tanh+Max has one only at sigma_w2 ~ 39
        ax.plot(neu, b, color="m", lw=1.6, label="neutrality (c* = 1/2)")
    ax.set(title=TITLES.get(act, act), xlim=(0, w[-1]), ylim=(b[0], b[-1]))
    ax.legend(loc="upper right", fontsize=7, framealpha=0.8)


def plot_panels(data: dict, cfg: PhaseDiagramConfig) -> Figure:
    from theory import phase
    w, b = data["sigma_w2"], data["sigma_b2"]
    acts, cols = cfg.plot.acts, 2
    rows = math.ceil(len(acts) / cols)
    fig = Figure(figsize=(5.2 * cols, 3.6 * rows))
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    for ax, act in zip(axes.flat, acts):
        _panel(ax, data, act, w, b)
    for ax in axes[-1]:
        ax.set_xlabel("sigma_w2")
    for ax in axes[:, 0]:
        ax.set_ylabel("sigma_b2")
    for ax in axes.flat[len(acts):]:
        ax.set_visible(False)
    handles = [Patch(color=PHASE_COLORS[k], label=v) for k, v in phase.PHASE_LEGEND.items()]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Phases at init (classified by {'chi1~' if cfg.plot.criterion == 'forward' else 'chi1'}, "
                 f"EOC band |chi - 1| <= {cfg.plot.eoc_tol}); {len(w)} x {len(b)} grid, depth {cfg.grid.depth}\n"
                 "ReLU family: the whole line chi1~ = 1 is drawn as EOC (the paper calls only its sigma_b2 = 0 end the EOC)",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return fig


def plot_layers(data: dict, cfg: PhaseDiagramConfig) -> Figure:
    p = cfg.plot
    c, gamma, sws = data["layers__c"], data["layers__gamma"], data["layers__sigma_w2"]
    layers = np.arange(1, c.shape[-1] + 1)
    eoc = float(data["layers__eoc"])
    fig = Figure(figsize=(10, 3.8))
    ax_c, ax_g = fig.subplots(1, 2)
    for col, sw, cl, gl in zip(colormaps["coolwarm"](np.linspace(0, 1, len(sws))), sws, c, gamma):
        side = "EOC" if abs(sw - eoc) < 1e-3 * eoc else ("ordered" if sw < eoc else "chaotic")
        ax_c.plot(layers, cl, color=col, lw=1.5, label=f"sigma_w2 = {sw:g} ({side})")
        ax_g.plot(layers, np.where(np.isfinite(gl), gl, np.nan), color=col, lw=1.5)
    ax_c.set(xlabel="layer l", ylabel="c_l", title=f"{TITLES.get(p.layers_act, p.layers_act)}, sigma_b2 = "
             f"{p.layers_sigma_b2:g} (EOC at sigma_w2 = {eoc:.4f})", ylim=(0, 1.02))
    ax_g.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax_g.set(xlabel="layer l", ylabel="gamma_l = c_l / (1 - c_l)", yscale="log",
             title="gamma = 1: neutrality / prejudice boundary")
    ax_c.legend(fontsize=7)
    fig.tight_layout()
    return fig


def save(result: Result, cfg: PhaseDiagramConfig, out: Path) -> list[Path]:
    """phase_diagram.npz, timing.json, figures/*.png under ``out`` (atomically, recorded in its manifest)."""
    from jaxinit.run.manifest import Manifest
    run = Manifest(out)
    run.save_npz(Path(out) / "phase_diagram.npz", result.arrays)
    if result.timing is not None:
        run.write_json(Path(out) / "timing.json", result.timing)
    return _save_figures(result.arrays, cfg, out)


def _save_figures(data: dict, cfg: PhaseDiagramConfig, out: Path) -> list[Path]:
    from jaxinit.run.manifest import Manifest
    run = Manifest(out)
    return [run.save_figure(fig, Path(out) / "figures" / f"{name}.png", dpi=130)
            for name, fig in panel_figures(data, cfg).items()]


def replot(out: Path) -> list[Path]:
    """(``--replot DIR``) The figures again from ``DIR/phase_diagram.npz`` and ``DIR/config.json``."""
    from jaxinit.run.config_parse import from_dict
    from jaxinit.errors import ConfigError
    from jaxinit.run.rundir import read_saved_config
    out = Path(out)
    try:
        cfg = from_dict(PhaseDiagramConfig, read_saved_config(out))
    except (TypeError, ValueError, KeyError) as err:
        raise ConfigError(f"--replot {files.safe_path(out)}: config.json is not a phase-diagram config "
                          f"({type(err).__name__})") from None
    data = files.load_npz(out / "phase_diagram.npz")
    try:
        return _save_figures(data, cfg, out)
    except (KeyError, IndexError, ValueError) as err:
        raise ConfigError(f"--replot {files.safe_path(out)}: phase_diagram.npz does not hold the arrays of "
                          f"this config ({type(err).__name__}: {str(err)[:80]}); rerun the experiment") from None
