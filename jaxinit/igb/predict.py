"""Theory predictions next to the measurements at init, and their JSON summaries.

Mean field (`theory.meanfield`) per layer from each input pair's own overlap c0 (real data overlap a
lot: digits ~0.6), averaged over pairs, since P/Q is an average over pairs and the c-map is non-linear
("propagate the mean c0" is the cruder prediction, also saved); the residual MLP's recursion
(`residual_propagate`); IGB f_max (`theory.igb`) from the mean-field gamma at the readout, from the
readout's own c and from its norm-free correlation rho; the finite-input correction of binary f_max
(mean field) and of both heads at the readout c (the IGB model counted on the n inputs probed).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxinit.igb import probe
from jaxinit.intervals import t_interval

TAGS = ((2, "2"), (10, "all"))   # (classes, key tag): the binary head (first two logits) and all ten


def input_overlaps(x_BD) -> np.ndarray:
    """c0_ab = x_a . x_b / d for all pairs a < b of sphere-normalised inputs (q0_ab of real data)."""
    flat = np.asarray(x_BD, np.float64).reshape(x_BD.shape[0], -1)
    gram = flat @ flat.T / flat.shape[1]
    return gram[np.triu_indices(len(flat), k=1)]


def c0_representatives(c0_pairs: np.ndarray, n: int) -> np.ndarray:
    """Midpoint quantiles of the pair overlaps: n equally weighted stand-ins for all pairs."""
    return np.quantile(c0_pairs, (np.arange(n) + 0.5) / n)


def residual_propagate(sigma_w2, sigma_b2, act: str, depth: int, q0=1.0, c0=0.0, q_map=None, c_map=None):
    """(q, c) per layer for the residual `DeepMLP`, layers 1..depth and the readout depth + 1.

    The branch W psi(h) + b is independent of h given the previous layer and has zero mean, so
    q(l+1) = q(l) + alpha^2 q_map(q(l)) and q_ab(l+1) = q_ab(l) + alpha^2 c_map(c(l), q(l)) q_map(q(l)),
    alpha^2 = 1 / depth; layer 1 is the linear embedding and the readout is plain. `q_map` / `c_map`
    default to `theory.meanfield`'s (tests pass closed forms).
    """
    if q_map is None or c_map is None:
        from theory import meanfield as mf
        q_map, c_map = mf.q_map, mf.c_map
    alpha2 = 1.0 / depth
    q = sigma_w2 * q0 + sigma_b2
    qab = sigma_w2 * q0 * c0 + sigma_b2
    qs, cs = [q], [qab / q]
    as64 = lambda v: np.asarray(v, np.float64)   # theory returns float64 jax arrays: keep the recursion in numpy
    for _ in range(depth - 1):
        q_branch = as64(q_map(q, sigma_w2, sigma_b2, act))
        qab = qab + alpha2 * as64(c_map(qab / q, q, sigma_w2, sigma_b2, act)) * q_branch
        q = q + alpha2 * q_branch
        qs.append(q)
        cs.append(qab / q)
    qs.append(as64(q_map(q, sigma_w2, sigma_b2, act)))
    cs.append(as64(c_map(qab / q, q, sigma_w2, sigma_b2, act)))
    return np.asarray(qs, float), np.asarray(cs, float)


def mean_field_c(act: str, depth: int, residual: bool, n_layers: int, sw_G, sb_G, c0s) -> tuple[np.ndarray, np.ndarray]:
    """(pair-averaged c, c from the mean c0), shape (G, n_layers)."""
    from theory import meanfield as mf

    def per_c0(c0_K):   # (G, K, layers)
        if residual:
            return np.stack([residual_propagate(sw, sb, act, depth, 1.0, c0_K)[1].T for sw, sb in zip(sw_G, sb_G)])
        return np.asarray(mf.propagate(sw_G[:, None], sb_G[:, None], act, n_layers, q0=1.0, c0=c0_K[None, :])[1], float)
    return per_c0(np.asarray(c0s)).mean(axis=1), per_c0(np.array([np.mean(c0s)]))[:, 0]


def gamma_of(c) -> np.ndarray:
    """IGB gamma = c / (1 - c) of a correlation c clipped to [0, 1] (inf at c = 1)."""
    from theory import igb as tigb
    return np.asarray(tigb.gamma_from_c(np.clip(np.asarray(c, float), 0.0, 1.0)), float)


def fmax_predicted(gamma, n_classes: int) -> np.ndarray:
    """E f_max at `gamma` from `theory.igb.fmax_mean`: closed form for 2 classes, deterministic quadrature
    otherwise. Not clipped: `fmax_mean` is exact at any gamma, 0 and inf included (the clip to [1e-3, 1e4]
    used before moved the 10-class value by up to 8.7e-3: 0.1085 at 1e-3, 0.9913 at 1e4)."""
    from theory import igb as tigb
    return np.asarray(tigb.fmax_mean(np.asarray(gamma, float), n_classes), float)


def fmax_finite_n(g_samples: np.ndarray, n_inputs: int) -> float:
    """E f_max measured on n inputs when each network's favoured-class probability is G = max(G0, 1 - G0).

    The theory's f_max is the n -> inf fraction; with n inputs the count is Binomial(n, G) and
    max(k, n - k) / n is biased upward (by ~0.8 / sqrt(n) at G = 1/2).
    """
    from scipy.stats import binom
    k = np.arange(n_inputs + 1)
    pmf = binom.pmf(k[None, :], n_inputs, np.asarray(g_samples, float)[:, None])
    return float(np.mean(pmf @ (np.maximum(k, n_inputs - k) / n_inputs)))


def readout_predictions(res: dict) -> dict[str, np.ndarray]:
    """IGB f_max fed with each network's readout c (and, with the GP probes, its readout rho), mean over draws."""
    out = {}
    sources = [("readout", "c_readout")] + ([("rho", "rho_readout")] if "rho_readout" in res else [])
    for name, key in sources:
        gamma = gamma_of(res[key])
        for n_cls, tag in TAGS:
            out[f"fmax{tag}_theory_{name}"] = np.mean(fmax_predicted(gamma, n_cls), axis=0)
    return out


def fmax_igb_finite_n(key, c_D, n_classes: int, n_inputs: int, n_networks: int) -> float:
    """E f_max of the IGB model itself on `n_inputs` inputs, networks spread evenly over the draws' c values.

    The model behind `theory.igb.fmax_mean` (docs/theory.md section 5): per network, centres Z ~ N(0, I) over
    the classes; per input, independent fluctuations e; logits sqrt(c) Z + sqrt(1 - c) e (the IGB
    gamma = c / (1 - c) after rescaling, so c = 0 and c = 1 need no special case). Counting the argmax
    over n inputs instead of taking the n -> inf fractions adds the finite-sample upward bias of the max
    (+0.031 for 10 classes at gamma = 0 and n = 256); measured f_max carries that bias too.
    """
    import jax
    import jax.numpy as jnp
    c = jnp.clip(jnp.asarray(c_D, jnp.float32).reshape(-1), 0.0, 1.0)[:, None, None, None]
    per_draw = -(-n_networks // c.shape[0])
    k_z, k_e = jax.random.split(key)
    z = jax.random.normal(k_z, (c.shape[0], per_draw, 1, n_classes))
    e = jax.random.normal(k_e, (c.shape[0], per_draw, n_inputs, n_classes))
    won = jax.nn.one_hot(jnp.argmax(jnp.sqrt(c) * z + jnp.sqrt(1.0 - c) * e, axis=-1), n_classes)
    return float(won.mean(axis=-2).max(axis=-1).mean())


def readout_finite_n(res: dict, key, n_inputs: int, n_networks: int) -> dict[str, np.ndarray]:
    """`fmax_igb_finite_n` at each draw's readout c, per grid point: the readout prediction on the inputs probed."""
    import jax
    out = {}
    for n_cls, tag in TAGS:
        k_tag = jax.random.fold_in(key, n_cls)
        out[f"fmax{tag}_theory_readout_n"] = np.array([
            fmax_igb_finite_n(jax.random.fold_in(k_tag, g), res["c_readout"][:, g], n_cls, n_inputs, n_networks)
            for g in range(res["c_readout"].shape[1])])
    return out


def layer_predictions(case, sw_G, sb_G, c0_pairs, n_inputs: int, c0_quantiles: int, theory_samples: int,
                      key) -> dict[str, np.ndarray]:
    """Mean-field c per layer and (MLPs) the IGB f_max at the readout's mean-field gamma; `case` is a
    `jaxinit.igb.study_init.Case` with a layer theory."""
    import jax
    from theory import igb as tigb
    c0s = c0_representatives(c0_pairs, c0_quantiles)
    n_layers = case.depth + 1 if case.is_mlp else case.depth
    out = {}
    out["c_theory"], out["c_theory_meanc0"] = mean_field_c(case.net.theory_act, case.depth, case.residual, n_layers,
                                                           sw_G, sb_G, c0s)
    if not case.is_mlp:
        return out
    gamma_out = gamma_of(out["c_theory"][:, -1])
    out["gamma_theory_out"] = gamma_out
    for n_cls, tag in TAGS:
        out[f"fmax{tag}_theory_mf"] = fmax_predicted(gamma_out, n_cls)
    out["fmax2_samples_mf"] = np.stack([
        np.asarray(tigb.fmax_samples(jax.random.fold_in(key, g), gamma_out[g], 2, theory_samples), float)
        for g in range(len(gamma_out))])
    out["fmax2_theory_mf_n"] = np.array([fmax_finite_n(s, n_inputs) for s in out["fmax2_samples_mf"]])
    return out


# --------------------------------------------------------------------------- summaries
def sem(values: np.ndarray) -> float | None:
    """Standard error of the mean over draws (None for a single draw)."""
    values = np.asarray(values, float)
    return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else None


def _fmax_fields(res: dict, g: int) -> dict[str, Any]:
    row = {}
    for _, tag in TAGS:
        values = res[f"fmax_{tag}"][:, g]
        row[f"fmax{tag}"], row[f"fmax{tag}_sem"] = float(values.mean()), sem(values)
        row[f"fmax{tag}_ci95"] = t_interval(values)
        row[f"fmax{tag}_theory_readout"] = float(res[f"fmax{tag}_theory_readout"][g])
        if f"fmax{tag}_theory_readout_n" in res:   # absent from cases saved before it was computed
            row[f"fmax{tag}_theory_readout_finite_n"] = float(res[f"fmax{tag}_theory_readout_n"][g])
        if f"fmax_{tag}_gp" in res:
            row[f"fmax{tag}_gp"] = float(res[f"fmax_{tag}_gp"][:, g].mean())
            row[f"fmax{tag}_gp_sem"] = sem(res[f"fmax_{tag}_gp"][:, g])
            row[f"fmax{tag}_theory_rho"] = float(res[f"fmax{tag}_theory_rho"][g])
        if f"fmax{tag}_theory_mf" in res:
            row[f"fmax{tag}_theory_mf"] = float(res[f"fmax{tag}_theory_mf"][g])
    if "fmax2_theory_mf_n" in res:
        row["fmax2_theory_mf_finite_n"] = float(res["fmax2_theory_mf_n"][g])
    return row


def _layer_fields(res: dict, g: int) -> dict[str, Any]:
    row = {}
    if "c_theory" in res:
        n_hidden = res["c"].shape[-1]
        row["c_last_hidden_theory"] = float(res["c_theory"][g, n_hidden - 1])
        row["c_max_abs_err"] = float(np.max(np.abs(res["c"][:, g].mean(axis=0) - res["c_theory"][g, :n_hidden])))
        if res["c_theory"].shape[1] > n_hidden:
            row["c_readout_theory"] = float(res["c_theory"][g, -1])
    if "grad_quantiles" in res:
        med = np.nanmedian(res["grad_quantiles"][:, g, :, :, 2], axis=0)   # (L+1, group): median of medians
        row["grad_median_layer1"] = dict(zip(probe.GROUPS, med[0].tolist()))
        row["grad_median_output"] = dict(zip(probe.GROUPS, med[-1].tolist()))
    return row


def summarize(res: dict) -> list[dict]:
    """One JSON row per grid point: measured means (over draws) next to the theory."""
    rows = []
    for g in range(len(res["sigma_w2"])):
        row = {"sigma_w2": float(res["sigma_w2"][g]), "sigma_b2": float(res["sigma_b2"][g]),
               "n_draws": int(res["fmax_2"].shape[0]), "n_inputs": int(res["n_inputs"]),
               "c_last_hidden": float(res["c"][:, g, -1].mean()),
               "gamma_corr_last_hidden": float(np.median(res["gamma_corr"][:, g, -1])),
               "gamma_naive_last_hidden": float(np.median(res["gamma"][:, g, -1])),
               "c_readout": float(res["c_readout"][:, g].mean())}
        if "rho_readout" in res:
            row["rho_readout"] = float(res["rho_readout"][:, g].mean())
            row["readout_norm_cv"] = float(res["readout_norm_cv"][:, g].mean())
        rows.append({**row, **_fmax_fields(res, g), **_layer_fields(res, g)})
    return rows


def headline(rows: list[dict]) -> str:
    """One line: measured / predicted binary f_max per grid point."""
    parts = []
    for r in rows:
        mf = r.get("fmax2_theory_mf", r["fmax2_theory_readout"])
        parts.append(f"sw2={r['sigma_w2']:g},sb2={r['sigma_b2']:g}: fmax2 {r['fmax2']:.3f}/{mf:.3f}")
    return "; ".join(parts)
