"""Theory phase diagrams over (sigma_w2, sigma_b2): mean field + Initial Guessing Bias (THEORY.md 2-5).

Six panels (ReLU, Tanh, ReLU+Max, Tanh+Max, ReLU+Avg, Tanh+Avg; pooling over k = 2 pre-activations):
the phases of the trainability paper (Bassi et al. 2026, `theory.phase.PHASE_LEGEND`) classified with
the forward criterion chi_1~, the edge of chaos from `theory.meanfield.eoc` (solid: forward, dashed:
gradient criterion where they differ, i.e. pooled ReLU) and the neutrality line c* = 1/2 from
`theory.meanfield.neutrality_line`; plus c_l and gamma_l = c_l / (1 - c_l) against layer for several
sigma_w2 on both sides of the EOC (`propagate`, inputs with q0 = 1, c0 = 0).

    python -m experiments.phase_diagram --out runs/phase_diagram          # default: 200 x 200, depth 100, timing
    python -m experiments.phase_diagram --preset smoke --out /tmp/phase   # seconds (tests)
    python -m experiments.phase_diagram --grid.n=100 --timing.enabled=false

Writes `phase_diagram.npz` (per activation `<act>__<field>`, `+` spelled `_`: phase, chi1, chi1_tilde,
q_star, c_star, c_depth, gamma_depth on the (sigma_w2, sigma_b2) grid, indexed [i_w, i_b]; eoc_forward,
eoc_gradient, neutrality on the sigma_b2 grid; `layers__c`, `layers__gamma`), `figures/phase_diagram.png`,
`figures/c_gamma_layers.png` and, with timing, `timing.json` (see `time_phase_diagram`).
`--resume` recomputes (nothing is long enough to continue).

Runtime (2-core CPU shared with other jobs, jax 0.10.2), default preset 71 s: timing 16 s, Tanh+Max panel
42 s (a 1-D quadrature per kernel evaluation), the other five panels 9 s, figures 3 s. Headline (tanh,
200 x 200, depth 100): 3.5 s for the first call including compilation (median of 3: 3.1-4.7 s), 2.2 s
without; the per-point numpy/scipy loop takes 19.5 ms a point (150 seeded points timed) -> 782 s
extrapolated, 223x slower. Smoke preset: ~15 s.
"""
from __future__ import annotations

import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jaxinit import cli
from jaxinit.config import ConfigError
from theory import activations, igb, meanfield, phase

PANELS = ("relu", "tanh", "relu+maxpool", "tanh+maxpool", "relu+avgpool", "tanh+avgpool")
PHASE_COLORS = ("#3b6fb6", "#2ca02c", "#d62728", "#ff9f40", "#f2e35c")   # codes 0..4


@dataclass(frozen=True)
class GridConfig:
    n: int = 200                    # points per axis
    sigma_w2_max: float = 6.0       # sigma_w2 grid: sigma_w2_max / n .. sigma_w2_max
    sigma_b2_max: float = 0.5       # sigma_b2 grid: 0 .. sigma_b2_max
    depth: int = 100                # layer whose c and gamma are stored (c_depth, gamma_depth)


@dataclass(frozen=True)
class PlotConfig:
    acts: tuple[str, ...] = PANELS
    criterion: str = "forward"      # phases classified by chi_1~ (forward) or chi_1 (gradient)
    eoc_tol: float = 0.01           # |chi - 1| <= eoc_tol is drawn as the EOC band
    layers_act: str = "tanh"
    layers_sigma_b2: float = 0.05   # tanh EOC there: sigma_w2 = 1.760955 (THEORY.md section 4)
    layers_sigma_w2: tuple[float, ...] = (1.2, 1.5, 1.760955, 2.2, 3.0, 5.0)
    layers_depth: int = 100


@dataclass(frozen=True)
class TimingConfig:
    enabled: bool = True
    n: int = 200
    depth: int = 100
    baseline_points: int = 150      # grid points timed with the numpy/scipy loop (extrapolated)
    repeats: int = 3                # jax first calls (each after clearing jax's caches); median
    seed: int = 0


@dataclass(frozen=True)
class PhaseDiagramConfig:
    grid: GridConfig = GridConfig()
    plot: PlotConfig = PlotConfig()
    timing: TimingConfig = TimingConfig()


SMOKE = PhaseDiagramConfig(
    grid=GridConfig(n=12, depth=20),
    plot=PlotConfig(layers_sigma_w2=(1.5, 1.760955, 3.0), layers_depth=20),
    timing=TimingConfig(n=6, depth=5, baseline_points=2, repeats=1))
PRESETS = {"default": PhaseDiagramConfig(), "smoke": SMOKE}


def validate(cfg: PhaseDiagramConfig) -> None:
    g, p, t = cfg.grid, cfg.plot, cfg.timing
    if g.n < 2 or g.depth < 1 or not (g.sigma_w2_max > 0 and math.isfinite(g.sigma_w2_max)):
        raise ConfigError("--grid: n >= 2, depth >= 1 and a finite sigma_w2_max > 0 required")
    if not (g.sigma_b2_max >= 0 and math.isfinite(g.sigma_b2_max)):
        raise ConfigError(f"--grid.sigma_b2_max must be finite and >= 0, got {g.sigma_b2_max}")
    for name in (*p.acts, p.layers_act):
        if name not in activations.ACTIVATIONS:
            raise ConfigError(f"--plot: unknown activation {name!r}; known: {', '.join(activations.NAMES)}")
    if p.criterion not in ("forward", "gradient"):
        raise ConfigError(f"--plot.criterion must be forward or gradient, got {p.criterion!r}")
    if p.eoc_tol < 0 or p.layers_depth < 1 or p.layers_sigma_b2 < 0 or min(p.layers_sigma_w2) <= 0:
        raise ConfigError("--plot: eoc_tol >= 0, layers_depth >= 1, layers_sigma_b2 >= 0, layers_sigma_w2 > 0")
    if t.n < 1 or t.depth < 1 or t.baseline_points < 1 or t.repeats < 1:
        raise ConfigError("--timing: n, depth, baseline_points and repeats must be >= 1")


def grids(g: GridConfig) -> tuple[np.ndarray, np.ndarray]:
    """sigma_w2 in (0, max] (0 is degenerate: no signal), sigma_b2 in [0, max]."""
    return np.linspace(g.sigma_w2_max / g.n, g.sigma_w2_max, g.n), np.linspace(0.0, g.sigma_b2_max, g.n)


# --------------------------------------------------------------------------- per-point numpy/scipy baseline
def _gauss(z):
    return np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _quad_moment(f, q):
    from scipy import integrate
    return integrate.quad(lambda z: f(math.sqrt(q) * z) * _gauss(z), -np.inf, np.inf)[0]


def baseline_point(sigma_w2: float, sigma_b2: float, depth: int, n_gh: int = 60) -> dict:
    """One tanh grid point the pre-jax way: scipy quad (1-D), a numpy n_gh x n_gh Gauss-Hermite grid (2-D),
    brentq for the fixed points; the same quantities as `theory.phase.phase_diagram`."""
    from scipy import optimize
    x, w = np.polynomial.hermite_e.hermegauss(n_gh)
    w = w / math.sqrt(2.0 * math.pi)
    v = lambda q: _quad_moment(lambda u: math.tanh(u) ** 2, q)

    def c_map(c, q):
        s = math.sqrt(max((1.0 - c) * (1.0 + c), 0.0))
        t1 = np.tanh(math.sqrt(q) * x)
        t2 = np.tanh(math.sqrt(q) * (c * x[:, None] + s * x[None, :]))
        k, k1 = w @ (t1 * (t2 @ w)), w @ (t1 * t1)
        return (sigma_w2 * k + sigma_b2) / (sigma_w2 * k1 + sigma_b2)

    g = lambda q: sigma_w2 * v(q) + sigma_b2 - q
    lo = max(sigma_b2, 1e-12)
    q_star = optimize.brentq(g, lo, sigma_b2 + sigma_w2) if g(lo) > 0 else lo
    chi1 = sigma_w2 * _quad_moment(lambda u: (1.0 - math.tanh(u) ** 2) ** 2, q_star)
    c_star = 1.0
    if chi1 > 1.0:
        h = lambda c: c_map(c, q_star) - c
        c_star = optimize.brentq(h, 0.0, 1.0 - 1e-9) if h(0.0) > 0 else 0.0
    q, c = sigma_w2 + sigma_b2, sigma_b2 / (sigma_w2 + sigma_b2)
    for _ in range(depth - 1):
        q, c = sigma_w2 * v(q) + sigma_b2, c_map(c, q)
    return {"q_star": q_star, "c_star": c_star, "chi1": chi1, "c_depth": c}


def time_phase_diagram(n_grid: int = 200, depth: int = 100, baseline_points: int = 150, repeats: int = 3,
                       seed: int = 0, sigma_w2_max: float = 6.0, sigma_b2_max: float = 0.5) -> dict:
    """Time the vmapped tanh phase diagram against the per-point numpy/scipy loop, side by side.

    `jax_first_s`: median over `repeats` of a first call (the phase-diagram program's jit cache is
    cleared before each, so tracing and compilation are included); `jax_second_s`: a call on a shifted grid (no recompilation). The
    baseline (`baseline_point`) runs on `baseline_points` grid points drawn with `seed` and is
    extrapolated to all `n_grid^2` points (a full loop takes ~20 min). Also returns the largest
    difference between the two on those points (`baseline_max_abs_diff_c_star`, `..._chi1`).
    """
    import jax
    g = GridConfig(n=n_grid, sigma_w2_max=sigma_w2_max, sigma_b2_max=sigma_b2_max, depth=depth)
    w, b = grids(g)
    firsts = []
    for _ in range(repeats):
        phase._diagram.clear_cache()
        t0 = time.perf_counter()
        result = phase.phase_diagram("tanh", w, b, depth)
        firsts.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    phase.phase_diagram("tanh", w * (1.0 + 1e-6), b, depth)
    second = time.perf_counter() - t0

    rng = np.random.default_rng(seed)
    idx = rng.choice(n_grid * n_grid, size=min(baseline_points, n_grid * n_grid), replace=False)
    iw, ib = np.unravel_index(idx, (n_grid, n_grid))
    t0 = time.perf_counter()
    base = [baseline_point(float(w[i]), float(b[j]), depth) for i, j in zip(iw, ib)]
    per_point = (time.perf_counter() - t0) / len(idx)
    diff = lambda key: float(max(abs(r[key] - result[key][i, j]) for r, i, j in zip(base, iw, ib)))
    baseline_total = per_point * n_grid * n_grid
    first = float(np.median(firsts))
    return {
        "act": "tanh", "n_grid": n_grid, "points": n_grid * n_grid, "depth": depth,
        "jax_first_s": first, "jax_first_s_all": firsts, "jax_second_s": second,
        "baseline_points": int(len(idx)), "baseline_per_point_s": per_point,
        "baseline_extrapolated_s": baseline_total, "speedup_first_call": baseline_total / first,
        "speedup_second_call": baseline_total / second,
        "baseline_max_abs_diff_c_star": diff("c_star"), "baseline_max_abs_diff_chi1": diff("chi1"),
        "note": f"baseline timed on {len(idx)} seeded grid points and extrapolated to {n_grid * n_grid}",
        "platform": jax.default_backend(), "cpu_count": os.cpu_count(), "machine": platform.machine(),
    }


# --------------------------------------------------------------------------- computation
def _key(act: str, field: str) -> str:
    return f"{act.replace('+', '_')}__{field}"


def compute_panels(cfg: PhaseDiagramConfig) -> dict[str, np.ndarray]:
    """Phase diagrams plus EOC / neutrality curves for every panel activation, flat npz-ready arrays."""
    w, b = grids(cfg.grid)
    out = {"sigma_w2": w, "sigma_b2": b}
    for act in cfg.plot.acts:
        t0 = time.perf_counter()
        res = phase.phase_diagram(act, w, b, cfg.grid.depth, cfg.plot.eoc_tol, cfg.plot.criterion)
        for field in ("phase", "chi1", "chi1_tilde", "q_star", "c_star", "c_depth", "gamma_depth"):
            out[_key(act, field)] = res[field]
        out[_key(act, "eoc_forward")] = meanfield.eoc(b, act, "forward")
        out[_key(act, "eoc_gradient")] = meanfield.eoc(b, act, "gradient")
        out[_key(act, "neutrality")] = meanfield.neutrality_line(b, act)
        print(f"{act:>13}: {len(w)} x {len(b)} grid, depth {cfg.grid.depth}, curves: {time.perf_counter() - t0:.1f} s")
    p = cfg.plot
    q, c = meanfield.propagate(np.asarray(p.layers_sigma_w2), p.layers_sigma_b2, p.layers_act, p.layers_depth)
    out.update({"layers__sigma_w2": np.asarray(p.layers_sigma_w2), "layers__q": q, "layers__c": c,
                "layers__gamma": igb.gamma_from_c(c),
                "layers__eoc": meanfield.eoc(p.layers_sigma_b2, p.layers_act, "forward")})
    return out


# --------------------------------------------------------------------------- figures
def _title(act: str) -> str:
    return {"relu": "ReLU", "tanh": "Tanh", "relu+maxpool": "ReLU+Max", "tanh+maxpool": "Tanh+Max",
            "relu+avgpool": "ReLU+Avg", "tanh+avgpool": "Tanh+Avg"}.get(act, act)


def plot_panels(data: dict, cfg: PhaseDiagramConfig):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    w, b = data["sigma_w2"], data["sigma_b2"]
    acts = cfg.plot.acts
    cols = 2
    rows = math.ceil(len(acts) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False, sharex=True, sharey=True)
    cmap, norm = ListedColormap(PHASE_COLORS), BoundaryNorm(np.arange(-0.5, 5.5), 5)
    for ax, act in zip(axes.flat, acts):
        ax.pcolormesh(w, b, data[_key(act, "phase")].T, cmap=cmap, norm=norm, shading="nearest", rasterized=True)
        fwd, grad, neu = (data[_key(act, k)] for k in ("eoc_forward", "eoc_gradient", "neutrality"))
        ax.plot(fwd, b, "k-", lw=1.6, label="EOC (chi1~ = 1)")
        if not np.allclose(fwd, grad, equal_nan=True):
            ax.plot(grad, b, "k--", lw=1.2, label="EOC, gradient (chi1 = 1)")
        if (neu <= w[-1]).any():   # nan where none; Tanh+Max has one only at sigma_w2 ~ 39
            ax.plot(neu, b, color="m", lw=1.6, label="neutrality (c* = 1/2)")
        ax.set(title=_title(act), xlim=(0, w[-1]), ylim=(b[0], b[-1]))
        ax.legend(loc="upper right", fontsize=7, framealpha=0.8)
    for ax in axes[-1]:
        ax.set_xlabel("sigma_w2")
    for ax in axes[:, 0]:
        ax.set_ylabel("sigma_b2")
    for ax in axes.flat[len(acts):]:
        ax.set_visible(False)
    handles = [Patch(color=PHASE_COLORS[k], label=v) for k, v in phase.PHASE_LEGEND.items()]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Phases at init (classified by {'chi1~' if cfg.plot.criterion == 'forward' else 'chi1'}, "
                 f"EOC band |chi - 1| <= {cfg.plot.eoc_tol}); {len(w)} x {len(b)} grid", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return fig


def plot_layers(data: dict, cfg: PhaseDiagramConfig):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = cfg.plot
    c, gamma, sws = data["layers__c"], data["layers__gamma"], data["layers__sigma_w2"]
    layers = np.arange(1, c.shape[-1] + 1)
    eoc = float(data["layers__eoc"])
    fig, (ax_c, ax_g) = plt.subplots(1, 2, figsize=(10, 3.8))
    colors = plt.cm.coolwarm(np.linspace(0, 1, len(sws)))
    for col, sw, cl, gl in zip(colors, sws, c, gamma):
        side = "EOC" if abs(sw - eoc) < 1e-3 * eoc else ("ordered" if sw < eoc else "chaotic")
        label = f"sigma_w2 = {sw:g} ({side})"
        ax_c.plot(layers, cl, color=col, lw=1.5, label=label)
        ax_g.plot(layers, np.where(np.isfinite(gl), gl, np.nan), color=col, lw=1.5)
    ax_c.set(xlabel="layer l", ylabel="c_l", title=f"{_title(p.layers_act)}, sigma_b2 = {p.layers_sigma_b2:g}"
             f" (EOC at sigma_w2 = {eoc:.4f})", ylim=(0, 1.02))
    ax_g.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax_g.set(xlabel="layer l", ylabel="gamma_l = c_l / (1 - c_l)", yscale="log",
             title="gamma = 1: neutrality / prejudice boundary")
    ax_c.legend(fontsize=7)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- entry point
def main(cfg: PhaseDiagramConfig, out: Path, resume: bool) -> None:
    t0 = time.perf_counter()
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    if cfg.timing.enabled:   # first, so that the "first call" includes compilation
        t = cfg.timing
        timing = time_phase_diagram(t.n, t.depth, t.baseline_points, t.repeats, t.seed,
                                    cfg.grid.sigma_w2_max, cfg.grid.sigma_b2_max)
        cli.write_json_atomic(out / "timing.json", timing)
        print(f"tanh {t.n}x{t.n} depth {t.depth}: jax first call {timing['jax_first_s']:.2f} s, second "
              f"{timing['jax_second_s']:.2f} s; baseline {timing['baseline_per_point_s'] * 1e3:.1f} ms/point "
              f"-> {timing['baseline_extrapolated_s']:.0f} s; speedup {timing['speedup_first_call']:.0f}x "
              f"({timing['note']})")
    data = compute_panels(cfg)
    np.savez_compressed(out / "phase_diagram.npz", **data)
    import matplotlib.pyplot as plt
    for name, fig in (("phase_diagram.png", plot_panels(data, cfg)), ("c_gamma_layers.png", plot_layers(data, cfg))):
        fig.savefig(figures / name, dpi=130)
        plt.close(fig)
    for act in cfg.plot.acts:
        counts = np.bincount(data[_key(act, "phase")].ravel(), minlength=len(phase.PHASE_LEGEND))
        print(f"{act:>13}: eoc(sigma_b2=0) {data[_key(act, 'eoc_forward')][0]:.6g}, phase counts {counts.tolist()}")
    print(f"phase diagrams done in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    sys.exit(cli.run_experiment("experiments.phase_diagram", __doc__, PhaseDiagramConfig, PRESETS, "default", main,
                                "runs/phase_diagram", validate))
