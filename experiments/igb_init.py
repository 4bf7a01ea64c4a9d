"""Bias at initialization: finite networks against mean-field and Initial Guessing Bias theory.

Bassi et al. 2026 (arXiv 2505.12096), Francazi et al. 2024 (arXiv 2306.00809); THEORY.md sections 1-5.
Networks in the THEORY.md convention (W ~ N(0, sigma_w2 / fan_in), b ~ N(0, sigma_b2), no
normalisation): deep MLP, residual MLP (branches x 1/sqrt(depth)), a small ViT with and without
residual connections, a CNN with 2-node max / average pooling over channel pairs. For every
(sigma_w2, sigma_b2) of the grid (vmapped, one draw shared by the grid) and `probe.n_draws` draws:
per-layer c = P/Q, gamma (naive) and gamma_corr = P/(Q-P) against `theory.meanfield.propagate`;
f_max of a binary head (the first two logits) and of all logits against `theory.igb`; per-layer
quantiles of |delta_l|^2 / nodes split by the favoured class (binary head, labels = parity).

Inputs are rescaled to |x|^2/d = 1. Gaussian inputs have c0 = x_a.x_b/d ~ N(0, 1/d), real data a
large mean overlap (digits: ~0.6, pixels are non-negative), so the theory is run from each input
pair's own c0 (16 quantiles of the pair overlaps) and averaged: P/Q is an average over pairs and the
c-map is non-linear, so "propagate the mean c0" is a cruder prediction (also saved: `c_theory_meanc0`).

    python -m experiments.igb_init --out runs/igb_init_cpu            # cpu preset
    python -m experiments.igb_init --preset smoke --out /tmp/igb_init # seconds (tests)
    python -m experiments.igb_init --preset paper --out $OUT/igb_init_paper --data.dir=DATA  # accelerator
    python -m experiments.igb_init --replot runs/igb_init_cpu          # figures from saved results only

Measured (cpu preset: grid sigma_w2 in {1.0, 1.59, 1.99, 2.48, 3.5, 4.97} x sigma_b2 in {0.1, 0.5}, 16
draws, 256 inputs, MLPs width 256 depth 30, ViT width 32 depth 4, CNN 16 channels depth 6; gaussian
and digits, fashion_mnist / cifar10 skipped: not on this machine): 183 s wall on the 2-core CPU (GP
readouts included; 145 s without them). Headline at sigma_b2 = 0.1 (n = 16 draws, mean +- sem):
- per-layer c of the tanh / ReLU MLPs follows `propagate` within 0.011-0.034 (max over 30 layers);
  readout c within 0.006 (tanh) and 0.02-0.035 (ReLU, chaotic side: finite width pulls c below 1).
- binary f_max, tanh MLP, gaussian inputs, measured / 1/2 + arctan(sqrt(gamma))/pi from the mean-field c:
  0.917 +- 0.036 / 0.953 (1.59), 0.836 +- 0.042 / 0.876 (1.99, EOC), 0.761 +- 0.044 / 0.795 (2.48),
  0.640 +- 0.035 / 0.646 (4.97); 10 classes 0.891 / 0.883, 0.716 / 0.689, 0.521 / 0.512, 0.266 / 0.266.
- ReLU, chaotic side (sigma_w2 >= 2.48): samples of the favoured class get a backpropagated signal of
  ~1e-16 at the output, the others ~1 (and ~1e9 at layer 1 at 4.97): class-dependent gradients.
- ViT and CNN: the IGB formula fed with the readout's own c fits binary f_max within 0.07 and
  under-predicts the ViT's 10-class f_max; the CNN's global average pool makes c_readout >= 0.997:
  deeply prejudiced at every grid point.
- With 192 draws (README, "Bias meets trainability"): the residual MLP's apparent excess was draw noise;
  the ViT's gap is real and comes from its readout kernel (input-dependent feature norms, low-rank
  pair correlations): the IGB formula fed with the norm-free mean correlation (`bias.readout_rho`)
  closes most of it and the GP over fresh readouts of each network's own features (`bias.fmax_gp`,
  `probe.gp_readouts`) matches the measurement.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from jaxinit import bias, cli
from jaxinit.igb_plots import plot_init_results as plot_all
from jaxinit.config import ConfigError, DataConfig
from jaxinit.models import cnn, deep, vit

INPUTS = ("gaussian", "digits", "mnist", "fashion_mnist", "cifar10")
MODELS = ("mlp", "resmlp", "vit", "vit_nores", "cnn_max", "cnn_avg")


@dataclass(frozen=True)
class GridConfig:
    sigma_w2: tuple[float, ...] = (1.0, 1.59, 1.99, 2.48, 3.5, 4.97)   # MEASURED.md's tanh points at sigma_b2 0.1
    sigma_b2: tuple[float, ...] = (0.1, 0.5)


@dataclass(frozen=True)
class NetConfig:
    models: tuple[str, ...] = MODELS
    mlp_acts: tuple[str, ...] = ("tanh", "relu")
    mlp_width: int = 256
    mlp_depth: int = 30
    res_act: str = "tanh"
    vit_width: int = 32
    vit_depth: int = 4
    vit_heads: int = 4
    vit_patch: int = 2
    vit_act: str = "gelu"
    cnn_width: int = 16
    cnn_depth: int = 6
    cnn_act: str = "relu"


@dataclass(frozen=True)
class ProbeConfig:
    inputs: tuple[str, ...] = ("gaussian", "digits", "fashion_mnist", "cifar10")
    n_inputs: int = 256
    n_draws: int = 16
    grads: tuple[str, ...] = ("mlp", "resmlp")   # models whose backpropagated signals are measured
    seed: int = 0
    c0_quantiles: int = 16
    theory_samples: int = 1000                    # networks per theory.igb.fmax_samples call (f_max histograms)
    gp_readouts: int = 200                        # fresh readouts per network for bias.fmax_gp (0: off)


@dataclass(frozen=True)
class IGBInitConfig:
    grid: GridConfig = GridConfig()
    net: NetConfig = NetConfig()
    probe: ProbeConfig = ProbeConfig()
    data: DataConfig = DataConfig(name="digits", normalize="sphere", binarize=True)


SMOKE = IGBInitConfig(
    grid=GridConfig(sigma_w2=(1.0, 2.0, 4.0), sigma_b2=(0.1,)),
    net=NetConfig(models=("mlp", "resmlp", "vit", "cnn_max"), mlp_acts=("tanh",), mlp_width=32, mlp_depth=4,
                  vit_width=16, vit_depth=1, vit_heads=2, cnn_width=8, cnn_depth=2),
    probe=ProbeConfig(inputs=("gaussian", "digits"), n_inputs=32, n_draws=2, grads=("mlp",), c0_quantiles=4,
                      theory_samples=100),
)
CPU = IGBInitConfig()
PAPER = IGBInitConfig(
    grid=GridConfig(sigma_w2=(1.0, 1.3, 1.6, 1.8, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0),
                    sigma_b2=(0.05, 0.1, 0.3)),
    net=NetConfig(mlp_acts=("tanh", "relu", "relu+maxpool", "relu+avgpool"), mlp_width=1000, mlp_depth=100,
                  vit_width=128, vit_depth=8, cnn_width=128, cnn_depth=12),
    probe=ProbeConfig(n_inputs=500, n_draws=100, grads=("mlp", "resmlp", "vit", "vit_nores", "cnn_max", "cnn_avg")),
)
PRESETS = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}


def validate(cfg: IGBInitConfig) -> None:
    g, n, p = cfg.grid, cfg.net, cfg.probe
    values = g.sigma_w2 + g.sigma_b2
    if any(not math.isfinite(v) for v in values) or min(g.sigma_w2) <= 0 or min(g.sigma_b2) < 0:
        raise ConfigError(f"--grid: sigma_w2 must be > 0 and sigma_b2 >= 0, got {g.sigma_w2} / {g.sigma_b2}")
    if unknown := set(n.models) - set(MODELS):
        raise ConfigError(f"--net.models: unknown {sorted(unknown)}; choose from {', '.join(MODELS)}")
    if unknown := set(p.inputs) - set(INPUTS):
        raise ConfigError(f"--probe.inputs: unknown {sorted(unknown)}; choose from {', '.join(INPUTS)}")
    if min(n.mlp_width, n.mlp_depth, n.vit_width, n.vit_depth, n.cnn_width, n.cnn_depth) < 1 or n.mlp_depth < 2:
        raise ConfigError("--net: widths must be >= 1, mlp_depth >= 2")
    if n.vit_width % n.vit_heads:
        raise ConfigError(f"--net.vit_width={n.vit_width} must be a multiple of vit_heads={n.vit_heads}")
    if p.n_inputs < 4 or p.n_draws < 1 or p.c0_quantiles < 1 or p.theory_samples < 1 or p.gp_readouts < 0:
        raise ConfigError("--probe: n_inputs >= 4, n_draws, c0_quantiles, theory_samples >= 1, gp_readouts >= 0")
    from jaxinit.models.deep import make_psi
    for act in (*n.mlp_acts, n.res_act, n.vit_act, n.cnn_act):
        try:
            make_psi(act)
        except ValueError as e:
            raise ConfigError(f"--net: {e}") from None


# ----------------------------------------------------------------------------------------- main
def main(cfg: IGBInitConfig, out: Path, resume: bool) -> None:
    """Probe every (input set, model) case, save one .npz per case, summary.json, figures."""
    import jax
    t_start = time.time()
    key = jax.random.key(cfg.probe.seed)
    k_inputs, k_draws, k_theory = jax.random.split(key, 3)
    sw_G, sb_G = grid_points(cfg.grid)
    summary, skipped, timings = {}, {}, {}
    for input_name in cfg.probe.inputs:
        try:
            x, labels = load_inputs(input_name, cfg, jax.random.fold_in(k_inputs, INPUTS.index(input_name)))
        except ConfigError as e:   # real sets that are not on this machine are skipped, and said so
            skipped[input_name] = str(e).splitlines()[0]
            print(f"skip {input_name}: {skipped[input_name]}", flush=True)
            continue
        c0_pairs = bias.input_overlaps(x)
        for case, spec in build_cases(cfg.net, tuple(x.shape[1:])):
            path = out / "results" / f"{input_name}__{case}.npz"
            if resume and path.exists():
                summary[f"{input_name}/{case}"] = summarize(dict(np.load(path)))
                continue
            t0 = time.time()
            xin = x.reshape(len(x), -1) if case.startswith(("mlp", "resmlp")) else x
            res = bias.probe_draws(jax.random.fold_in(k_draws, hash_name(case)), cfg.probe.n_draws, sw_G, sb_G,
                                   xin, labels, spec, with_grads=model_of(case) in cfg.probe.grads,
                                   gp_readouts=cfg.probe.gp_readouts)
            res["n_inputs"] = np.array(len(x))
            res.update(theory_for_case(case, spec, sw_G, sb_G, c0_pairs, res, cfg.probe, k_theory))
            res.update(sigma_w2=sw_G, sigma_b2=sb_G, c0_mean=np.mean(c0_pairs), c0_std=np.std(c0_pairs))
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, **res)
            timings[f"{input_name}/{case}"] = round(time.time() - t0, 2)
            summary[f"{input_name}/{case}"] = summarize(res)
            print(f"{input_name}/{case}: {timings[f'{input_name}/{case}']:.1f} s  " + headline(summary[f"{input_name}/{case}"]), flush=True)
    cli.write_json_atomic(out / "summary.json", {"cases": summary, "skipped": skipped})
    cli.write_json_atomic(out / "run.json", {"seconds_total": round(time.time() - t_start, 1), "seconds_per_case": timings,
                                             "platform": jax.default_backend()})
    for p in plot_all(out):
        print(f"figure {p}")


def grid_points(grid: GridConfig) -> tuple[np.ndarray, np.ndarray]:
    """Flattened cartesian grid: sigma_w2 varies fastest."""
    sb, sw = np.meshgrid(np.asarray(grid.sigma_b2, float), np.asarray(grid.sigma_w2, float), indexing="ij")
    return sw.ravel(), sb.ravel()


def hash_name(name: str) -> int:
    """A stable small integer for fold_in (Python's hash is salted per process)."""
    return sum(ord(ch) * 31 ** i for i, ch in enumerate(name)) % (2 ** 31)


def load_inputs(name: str, cfg: IGBInitConfig, key):
    """(x on the sphere, binary labels): n_inputs Gaussian images shaped like digits, or a data subset."""
    import jax
    import jax.numpy as jnp
    n = cfg.probe.n_inputs
    if name == "gaussian":
        k_x, k_y = jax.random.split(key)
        x = jax.random.normal(k_x, (n, 8, 8, 1))
        return bias.to_sphere(x), jax.random.bernoulli(k_y, 0.5, (n,)).astype(jnp.int32)
    from jaxinit.data import load_dataset
    try:
        ds = load_dataset(replace(cfg.data, name=name, normalize="sphere", binarize=True))
    except (OSError, RuntimeError, ValueError) as e:
        raise ConfigError(f"{name}: not available ({e})") from None
    if ds.x_train.shape[0] < n:
        raise ConfigError(f"{name}: only {ds.x_train.shape[0]} training inputs, --probe.n_inputs={n}")
    idx = jax.random.choice(key, ds.x_train.shape[0], (n,), replace=False)
    x = ds.x_train[idx]
    x = x.reshape(n, *ds.input_shape) if len(ds.input_shape) == 3 else x.reshape(n, -1, 1, 1)
    return bias.to_sphere(x), ds.y_train[idx]


def model_of(case: str) -> str:
    """Model name of a case: mlp_tanh -> mlp, resmlp_tanh -> resmlp, vit_nores -> vit_nores."""
    return case.split("_")[0] if case.startswith(("mlp_", "resmlp_")) else case


def build_cases(net: NetConfig, image_shape: tuple[int, ...]) -> list[tuple[str, object]]:
    """(case name, static spec) per model; n_out = 10 so the first two logits are the binary head."""
    d_in = int(np.prod(image_shape))
    cases = []
    for model in net.models:
        if model == "mlp":
            cases += [(f"mlp_{a}", deep.DeepSpec(d_in, net.mlp_width, net.mlp_depth, 10, a)) for a in net.mlp_acts]
        elif model == "resmlp":
            cases.append((f"resmlp_{net.res_act}", deep.DeepSpec(d_in, net.mlp_width, net.mlp_depth, 10, net.res_act, True)))
        elif model.startswith("vit"):
            if image_shape[0] % net.vit_patch or image_shape[1] % net.vit_patch:
                continue
            cases.append((model, vit.ViTSpec(image_shape, net.vit_patch, net.vit_width, net.vit_depth, net.vit_heads,
                                             2, 10, net.vit_act, model == "vit")))
        else:
            pool = model.split("_")[1]
            cases.append((model, cnn.CNNSpec(image_shape, net.cnn_width, net.cnn_depth, 10, net.cnn_act, pool, "channels")))
    return cases


# ----------------------------------------------------------------------------------------- theory
def c0_representatives(c0_pairs: np.ndarray, n: int) -> np.ndarray:
    """Midpoint quantiles of the pair overlaps: n equally weighted stand-ins for all pairs."""
    return np.quantile(c0_pairs, (np.arange(n) + 0.5) / n)


def theory_act(case: str, spec) -> str | None:
    """The `theory` activation whose mean-field map the case's layers follow (None: no layer theory)."""
    if isinstance(spec, deep.DeepSpec):
        return spec.act
    if isinstance(spec, cnn.CNNSpec) and spec.pool_over == "channels":
        return spec.psi
    return None


def mean_field_c(case: str, spec, sw_G: np.ndarray, sb_G: np.ndarray, c0s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pair-averaged c, c from the mean c0), shape (G, layers): layers 1..L, plus the readout L+1 for MLPs."""
    from theory import meanfield as mf
    act = theory_act(case, spec)
    n_layers = spec.depth + 1 if isinstance(spec, deep.DeepSpec) else spec.depth

    def per_c0(c0_K):   # (G, K, layers)
        if isinstance(spec, deep.DeepSpec) and spec.residual:
            return np.stack([bias.residual_propagate(mf.q_map, mf.c_map, sw, sb, act, spec.depth, 1.0, c0_K)[1].T
                             for sw, sb in zip(sw_G, sb_G)])
        return np.asarray(mf.propagate(sw_G[:, None], sb_G[:, None], act, n_layers, q0=1.0, c0=c0_K[None, :])[1], float)
    return per_c0(c0s).mean(axis=1), per_c0(np.array([np.mean(c0s)]))[:, 0]


GAMMA_RANGE = (1e-3, 1e4)   # theory.igb.fmax_mean's quadrature is checked to ~5e-7 on this range


def gamma_of(c) -> np.ndarray:
    """IGB gamma of a correlation c, with c kept inside [0, 1) where gamma = c / (1 - c) is finite."""
    from theory import igb as tigb
    return np.asarray(tigb.gamma_from_c(np.clip(c, 0.0, 1.0 - 1e-12)), float)


def fmax_predicted(gamma, n_classes: int) -> np.ndarray:
    """E f_max at `gamma` from `theory.igb.fmax_mean`: closed form for 2 classes, deterministic quadrature
    otherwise (gamma clipped to GAMMA_RANGE, where f_max is within 1e-3 of its limits)."""
    from theory import igb as tigb
    gamma = np.asarray(gamma, float)
    if n_classes == 2:
        return np.asarray(tigb.fmax_mean(gamma, 2), float)
    return np.asarray(tigb.fmax_mean(np.clip(gamma, *GAMMA_RANGE), n_classes), float)


def fmax_finite_n(g_samples: np.ndarray, n_inputs: int) -> float:
    """E f_max measured on n inputs when each network's favoured-class probability is G = max(G0, 1 - G0).

    The theory's f_max is the n -> inf fraction; with n inputs the count is Binomial(n, G) and
    max(k, n - k) / n is biased upward (by ~0.8 / sqrt(n) at G = 1/2).
    """
    from scipy.stats import binom
    k = np.arange(n_inputs + 1)
    pmf = binom.pmf(k[None, :], n_inputs, np.asarray(g_samples, float)[:, None])
    return float(np.mean(pmf @ (np.maximum(k, n_inputs - k) / n_inputs)))


def theory_for_case(case, spec, sw_G, sb_G, c0_pairs, res, probe: ProbeConfig, key) -> dict[str, np.ndarray]:
    """Mean-field c per layer and the IGB f_max predictions, stored next to the measurements."""
    import jax
    from theory import igb as tigb
    out = {}
    gamma_readout = gamma_of(res["c_readout"])
    for n_cls, tag in ((2, "2"), (10, "all")):
        out[f"fmax{tag}_theory_readout"] = np.mean(fmax_predicted(gamma_readout, n_cls), axis=0)
    if "rho_readout" in res:   # the same formula fed with the norm-free mean correlation (bias.readout_rho)
        gamma_rho = gamma_of(res["rho_readout"])
        for n_cls, tag in ((2, "2"), (10, "all")):
            out[f"fmax{tag}_theory_rho"] = np.mean(fmax_predicted(gamma_rho, n_cls), axis=0)
    if theory_act(case, spec) is None:
        return out
    c0s = c0_representatives(c0_pairs, probe.c0_quantiles)
    out["c_theory"], out["c_theory_meanc0"] = mean_field_c(case, spec, sw_G, sb_G, c0s)
    if isinstance(spec, deep.DeepSpec):
        gamma_out = gamma_of(out["c_theory"][:, -1])
        out["gamma_theory_out"] = gamma_out
        for n_cls, tag in ((2, "2"), (10, "all")):
            out[f"fmax{tag}_theory_mf"] = fmax_predicted(gamma_out, n_cls)
        out["fmax2_samples_mf"] = np.stack([
            np.asarray(tigb.fmax_samples(jax.random.fold_in(key, g), gamma_out[g], 2, probe.theory_samples), float)
            for g in range(len(gamma_out))])
        n_inputs = int(res["n_inputs"].ravel()[0])
        out["fmax2_theory_mf_n"] = np.array([fmax_finite_n(smp, n_inputs) for smp in out["fmax2_samples_mf"]])
    return out


# ----------------------------------------------------------------------------------------- summary
def summarize(res: dict) -> list[dict]:
    """One JSON row per grid point: measured means (over draws) next to the theory."""
    rows = []
    n_draws = res["fmax_2"].shape[0]
    for g in range(len(res["sigma_w2"])):
        row = {"sigma_w2": float(res["sigma_w2"][g]), "sigma_b2": float(res["sigma_b2"][g]), "n_draws": int(n_draws),
               "n_inputs": int(res["n_inputs"]),
               "c_last_hidden": float(res["c"][:, g, -1].mean()),
               "gamma_corr_last_hidden": float(np.median(res["gamma_corr"][:, g, -1])),
               "gamma_naive_last_hidden": float(np.median(res["gamma"][:, g, -1])),
               "c_readout": float(res["c_readout"][:, g].mean())}
        if "rho_readout" in res:
            row["rho_readout"] = float(res["rho_readout"][:, g].mean())
            row["readout_norm_cv"] = float(res["readout_norm_cv"][:, g].mean())
        for tag in ("2", "all"):
            values = res[f"fmax_{tag}"][:, g]
            row[f"fmax{tag}"] = float(values.mean())
            row[f"fmax{tag}_sem"] = _sem(values)
            row[f"fmax{tag}_theory_readout"] = float(res[f"fmax{tag}_theory_readout"][g])
            if f"fmax_{tag}_gp" in res:
                gp = res[f"fmax_{tag}_gp"][:, g]
                row[f"fmax{tag}_gp"] = float(gp.mean())
                row[f"fmax{tag}_gp_sem"] = _sem(gp)
                row[f"fmax{tag}_theory_rho"] = float(res[f"fmax{tag}_theory_rho"][g])
            if f"fmax{tag}_theory_mf" in res:
                row[f"fmax{tag}_theory_mf"] = float(res[f"fmax{tag}_theory_mf"][g])
        if "fmax2_theory_mf_n" in res:
            row["fmax2_theory_mf_finite_n"] = float(res["fmax2_theory_mf_n"][g])
        if "c_theory" in res:
            n_hidden = res["c"].shape[-1]
            row["c_last_hidden_theory"] = float(res["c_theory"][g, n_hidden - 1])
            row["c_max_abs_err"] = float(np.max(np.abs(res["c"][:, g].mean(axis=0) - res["c_theory"][g, :n_hidden])))
            if res["c_theory"].shape[1] > n_hidden:
                row["c_readout_theory"] = float(res["c_theory"][g, -1])
        if "grad_quantiles" in res:
            med = np.nanmedian(res["grad_quantiles"][:, g, :, :, 2], axis=0)   # (L+1, group): median over draws of the median
            row["grad_median_layer1"] = dict(zip(bias.GROUPS, med[0].tolist()))
            row["grad_median_output"] = dict(zip(bias.GROUPS, med[-1].tolist()))
        rows.append(row)
    return rows


def _sem(values: np.ndarray) -> float:
    """Standard error of the mean over draws (NaN for a single draw)."""
    return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def headline(rows: list[dict]) -> str:
    parts = []
    for r in rows:
        mf = r.get("fmax2_theory_mf", r["fmax2_theory_readout"])
        parts.append(f"sw2={r['sigma_w2']:g},sb2={r['sigma_b2']:g}: fmax2 {r['fmax2']:.3f}/{mf:.3f}")
    return "; ".join(parts)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--replot":
        sys.exit(cli.replot("experiments.igb_init", sys.argv[2], plot_all))
    sys.exit(cli.run_experiment("experiments.igb_init", __doc__, IGBInitConfig, PRESETS, "cpu", main,
                                "runs/igb_init_cpu", validate))
