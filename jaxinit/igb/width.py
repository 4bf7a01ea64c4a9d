"""Finite width: c and gamma of a deep MLP measured against its width, at phase points of the theory.

At each width the same phase points (placed by `jaxinit.shared.phases`) share one draw per draw index;
measured at the last hidden layer: c = P/Q, the naive gamma (inflated by about (1 + gamma)/(n - 1) at n
inputs) and the bias-corrected gamma_corr = P/(Q - P), against the mean-field c and gamma from the
inputs' own overlaps. The error of gamma_corr should vanish with width; the naive one keeps the
finite-input floor at any width.
"""
from __future__ import annotations

import jax
import numpy as np

from jaxinit.igb import predict, probe
from jaxinit.igb.config_init import WidthConfig
from jaxinit.models.deep import DeepMLP
from jaxinit.shared import nets, phases

INPUT_SHAPE = (8, 8, 1)   # the gaussian inputs of the probes at init


def width_points(w: WidthConfig) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(phase names, sigma_w2, sigma_b2) of the requested phase points of ``w.act``."""
    points = [(n, sw) for n, sw in phases.phase_points(w.act, w.sigma_b2) if n in w.phases]
    names = [n for n, _ in points]
    return names, np.array([sw for _, sw in points], float), np.full(len(points), w.sigma_b2)


def gaussian_inputs(key, n: int) -> np.ndarray:
    """n Gaussian inputs shaped like digits, on the sphere |x|^2/d = 1."""
    from jaxinit.data import normalize
    return normalize([np.asarray(jax.random.normal(key, (n, *INPUT_SHAPE)))], "sphere")[0]


def width_sweep(w: WidthConfig, key, progress=None) -> dict[str, np.ndarray]:
    """Measured c, gamma, gamma_corr (width, draw, point, layer) and the mean-field c, gamma (point, layer)."""
    names, sw, sb = width_points(w)
    k_x, k_draw = jax.random.split(key)
    x = gaussian_inputs(k_x, w.n_inputs)
    labels = np.arange(w.n_inputs) % 2
    measured = {k: [] for k in ("c", "gamma", "gamma_corr")}
    for width in w.widths:
        net = nets.make_net(DeepMLP(10, width=width, depth=w.depth, activation=w.act), INPUT_SHAPE)
        res = probe.probe_draws(net, k_draw, w.n_draws, sw, sb, x, labels, with_grads=False, progress=progress)
        for k in measured:
            measured[k].append(res[k])
    c0s = predict.input_overlaps(x)
    c_mf = predict.mean_field_c(w.act, w.depth, False, w.depth, sw, sb, c0s)[0]
    return {"widths": np.array(w.widths), "phase": np.array(names), "sigma_w2": sw, "sigma_b2": sb,
            "n_inputs": np.array(w.n_inputs), **{k: np.stack(v) for k, v in measured.items()},
            "c_theory": c_mf, "gamma_theory": predict.gamma_of(c_mf)}


def summarize_width(res: dict) -> list[dict]:
    """Per (phase point, width), at the last hidden layer: measured means / medians over draws and errors."""
    rows = []
    for g, name in enumerate(res["phase"]):
        c_th, gamma_th = float(res["c_theory"][g, -1]), float(res["gamma_theory"][g, -1])
        for i, width in enumerate(res["widths"]):
            c = res["c"][i, :, g, -1]
            naive, corr = (float(np.median(res[k][i, :, g, -1])) for k in ("gamma", "gamma_corr"))
            rows.append({"phase": str(name), "sigma_w2": float(res["sigma_w2"][g]), "width": int(width),
                         "n_draws": int(len(c)), "c": float(c.mean()), "c_sem": predict.sem(c),
                         "c_sd": float(c.std(ddof=1)) if len(c) > 1 else None, "c_theory": c_th,
                         "c_abs_err": abs(float(c.mean()) - c_th), "gamma_naive": naive, "gamma_corr": corr,
                         "gamma_theory": gamma_th, "gamma_naive_rel_err": abs(naive / gamma_th - 1.0),
                         "gamma_corr_rel_err": abs(corr / gamma_th - 1.0)})
    return rows


__all__ = ["width_sweep", "summarize_width", "width_points", "gaussian_inputs"]
