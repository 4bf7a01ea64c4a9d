"""Finite networks at init, measured for the IGB theory (docs/theory.md sections 1-5).

`probe_network` measures one network draw scaled to (sigma_w2, sigma_b2): per layer the Gram moments
Q, P (so c = P/Q, gamma_corr = P/(Q-P)) and the naive gamma (`theory.igb.estimate`); at the output
f_max for a 2-class head (the first two logits) and for all logits; the readout's exact conditional c
given the last features, and optionally the norm-free mean logit correlation (`readout_rho`) and the
Gaussian-process f_max over fresh readouts of the network's own features (`fmax_gp`), which drop the
single-gamma model's equicorrelated kernel; per-layer quantiles of the squared backpropagated signal
|delta_l|^2 / nodes for the binary head, over all samples, over those labelled with the favoured
class and over the others. `probe_grid` vmaps it over a (sigma_w2, sigma_b2) grid sharing one draw
(paired), so the grid values are traced and never recompile; `probe_draws` stacks draws.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxinit import interrupt
from jaxinit.shared import igb_stats as stats, nets

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
GROUPS = ("all", "favoured", "others")
GP_STREAM = 0x6770   # fold_in tag of the GP readouts' key: the network draw keeps its own key


def readout_c(features_BF: jax.Array, sigma_w2, sigma_b2) -> jax.Array:
    """Exact c of the logits over the readout's own weights, given the features it reads.

    E_W[z_a z_b] = sigma_w2 f_a.f_b / F + sigma_b2, so c_out = (sigma_w2 P_f + sigma_b2) / (sigma_w2 Q_f + sigma_b2).
    """
    m = stats.estimate(features_BF.T)
    return (sigma_w2 * m["p"] + sigma_b2) / (sigma_w2 * m["q"] + sigma_b2)


def readout_kernel(features_BF: jax.Array, sigma_w2, sigma_b2) -> jax.Array:
    """K_ab = E_W[z_a z_b] = sigma_w2 f_a.f_b / F + sigma_b2: the logits' kernel over inputs, shape (B, B)."""
    return sigma_w2 * (features_BF @ features_BF.T) / features_BF.shape[1] + sigma_b2


def readout_rho(features_BF: jax.Array, sigma_w2, sigma_b2) -> jax.Array:
    """Mean over pairs a != b of the logit correlation rho_ab = K_ab / sqrt(K_aa K_bb) (`readout_kernel`).

    The argmax over classes ignores each input's scale, so f_max depends on correlations, not on the
    kernel's entries: c = P/Q (`readout_c`, a ratio of means) equals this mean only when every input
    has the same norm. Where norms vary across inputs (`readout_norm_cv`; large for the ViT's
    features, see README) c underestimates the correlation that sets f_max.
    """
    kernel = readout_kernel(features_BF, sigma_w2, sigma_b2)
    inv_sd = jax.lax.rsqrt(jnp.diag(kernel))
    rho = kernel * inv_sd[:, None] * inv_sd[None, :]
    n = kernel.shape[0]
    return (jnp.sum(rho) - jnp.trace(rho)) / (n * (n - 1))


def fmax_gp(key: jax.Array, features_BF: jax.Array, sigma_w2, sigma_b2, n_classes: int,
            n_readouts: int) -> tuple[jax.Array, jax.Array]:
    """(binary, all-class) E f_max over `n_readouts` fresh readouts of one network's features.

    Given the features, the logits of each class are exactly N(0, K) over inputs (K = `readout_kernel`),
    independent across classes: the Gaussian-process prediction with the network's own kernel, by
    sampling. The single-gamma IGB formula is the special case of an equicorrelated K at infinitely many
    inputs; the gap between the two measures what a heterogeneous kernel and finitely many inputs add.
    """
    n_features = features_BF.shape[1]
    k_w, k_b = jax.random.split(key)
    w_RFC = jax.random.normal(k_w, (n_readouts, n_features, n_classes)) * jnp.sqrt(sigma_w2 / n_features)
    b_RC = jax.random.normal(k_b, (n_readouts, n_classes)) * jnp.sqrt(sigma_b2)
    logits_RBC = jnp.einsum("bf,rfc->rbc", features_BF, w_RFC) + b_RC[:, None, :]
    binary = jax.vmap(lambda lg: stats.f_max(lg[:, :2]))(logits_RBC)
    return binary.mean(), jax.vmap(stats.f_max)(logits_RBC).mean()


def _readout_extras(features, sigma_w2, sigma_b2, n_classes, gp_key, gp_readouts) -> dict[str, jax.Array]:
    sq_norms = jnp.mean(jnp.square(features), axis=1)          # |f_a|^2 / F per input
    gp2, gp_all = fmax_gp(gp_key, features, sigma_w2, sigma_b2, n_classes, gp_readouts)
    return {"rho_readout": readout_rho(features, sigma_w2, sigma_b2),
            "readout_norm_cv": jnp.std(sq_norms) / jnp.mean(sq_norms), "fmax_2_gp": gp2, "fmax_all_gp": gp_all}


def _gradient_quantiles(net, params, x, labels_B, favoured) -> jax.Array:
    signals = nets.backprop_signals(net, params, x, labels_B)
    split = jax.vmap(lambda v: stats.class_split_quantiles(v, labels_B, favoured, QUANTILES))(signals)
    return jnp.stack([split[g] for g in GROUPS], axis=1)   # (L+1, 3, 5)


def probe_network(net: nets.Net, z, sigma_w2, sigma_b2, x, labels_B, with_grads: bool = True, gp_key=None,
                  gp_readouts: int = 0) -> dict[str, jax.Array]:
    """Everything measured on one network draw `z` scaled to (sigma_w2, sigma_b2); labels are binary.

    With `gp_readouts` > 0 also the GP prediction of f_max from this network's own features
    (`fmax_gp`, readouts drawn from `gp_key`) and the norm-free readout correlation (`readout_rho`).
    """
    params = nets.scale(z, sigma_w2, sigma_b2)
    logits, hs, features = nets.forward(net, params, x)
    out = dict(stats.layer_moments(hs))
    out["c_readout"] = readout_c(features, sigma_w2, sigma_b2)
    out["fmax_2"] = stats.f_max(logits[:, :2])
    out["fmax_all"] = stats.f_max(logits)
    if gp_readouts:
        out.update(_readout_extras(features, sigma_w2, sigma_b2, logits.shape[-1], gp_key, gp_readouts))
    favoured = jnp.argmax(stats.class_fractions(logits[:, :2]))
    out["favoured"] = favoured
    out["favoured_share"] = jnp.mean(labels_B == favoured)
    if with_grads:
        out["grad_quantiles"] = _gradient_quantiles(net, params, x, labels_B, favoured)
    return out


@partial(jax.jit, static_argnames=("net", "with_grads", "gp_readouts"))
def probe_grid(net: nets.Net, key, sigma_w2_G, sigma_b2_G, x, labels_B, with_grads: bool = True,
               gp_readouts: int = 0) -> dict[str, jax.Array]:
    """`probe_network` for one draw at every grid point (leading axis G); grid values are traced.

    The GP readouts are the same standard-normal draws at every grid point (scaled by it), as the
    network's own weights are.
    """
    z = nets.draw(net, key)
    probe = partial(probe_network, net, with_grads=with_grads, gp_key=jax.random.fold_in(key, GP_STREAM),
                    gp_readouts=gp_readouts)
    return jax.vmap(probe, in_axes=(None, 0, 0, None, None))(z, sigma_w2_G, sigma_b2_G, x, labels_B)


def probe_draws(net: nets.Net, key, n_draws: int, sigma_w2_G, sigma_b2_G, x, labels_B, with_grads: bool = True,
                gp_readouts: int = 0, progress=None) -> dict[str, np.ndarray]:
    """Stack `probe_grid` over independent draws (fold_in(key, draw)): leading axes (n_draws, G)."""
    rows = []
    for i in range(n_draws):
        interrupt.check()   # SIGINT / SIGTERM stop between draws (finished cases are kept for --resume)
        rows.append(jax.device_get(probe_grid(net, jax.random.fold_in(key, i), sigma_w2_G, sigma_b2_G, x, labels_B,
                                              with_grads, gp_readouts)))
        if progress is not None:
            progress.update(1)
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def summarize_quantiles(q: np.ndarray) -> dict[str, Any]:
    """Medians over draws of the (L+1, group, quantile) gradient quantiles, as nested lists for JSON."""
    return {g: np.nanmedian(q[..., i, :], axis=0).tolist() for i, g in enumerate(GROUPS)}
