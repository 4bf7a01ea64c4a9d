"""Per-member metrics: losses, accuracy, parameter norms, class fractions and IGB statistics.

All functions are single-member and pure (vmap them over members).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxinit.init import key_name


def cross_entropy(logits_BC: jax.Array, labels_B: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy over the batch."""
    return optax.softmax_cross_entropy_with_integer_labels(logits_BC, labels_B).mean()


def accuracy(logits_BC: jax.Array, labels_B: jax.Array) -> jax.Array:
    """Fraction in [0, 1] of argmax predictions equal to the label."""
    return (jnp.argmax(logits_BC, axis=-1) == labels_B).mean()


def param_norm(params) -> jax.Array:
    """Frobenius norm of all parameters together."""
    return optax.global_norm(params)


def layer_norms(params) -> dict[str, jax.Array]:
    """Frobenius norm per leaf, keyed by its '/'-joined path (e.g. 'dense_0/kernel')."""
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {"/".join(key_name(k) for k in path): jnp.sqrt(jnp.sum(jnp.square(leaf)))
            for path, leaf in flat}


# --------------------------------------------------------------------------- Initial Guessing Bias
# Conventions of THEORY.md section 5. Kept free of `theory` imports so training code can use them;
# `tests/test_bias.py` checks they agree with `theory.igb.estimate`.

def class_fractions(logits_BC: jax.Array) -> jax.Array:
    """f_c: fraction in [0, 1] of inputs whose argmax is class c, shape (C,)."""
    n_classes = logits_BC.shape[-1]
    return jax.nn.one_hot(jnp.argmax(logits_BC, axis=-1), n_classes).mean(axis=0)


def f_max(logits_BC: jax.Array) -> jax.Array:
    """Largest class fraction: 1/C for a neutral network, 1 for a deeply prejudiced one."""
    return class_fractions(logits_BC).max()


def gram_moments(h_NI: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(Q, P) of G = H^T H / N: Q = mean_a G_aa, P = mean_{a != b} G_ab, in O(N n) without G."""
    n_nodes, n_inputs = h_NI.shape
    sq_norms_I = jnp.sum(jnp.square(h_NI), axis=0) / n_nodes
    total = jnp.sum(jnp.square(jnp.sum(h_NI, axis=1))) / n_nodes   # sum_{a,b} G_ab
    q = sq_norms_I.mean()
    p = (total - sq_norms_I.sum()) / (n_inputs * (n_inputs - 1))
    return q, p


def igb_stats(h_NI: jax.Array) -> dict[str, jax.Array]:
    """IGB statistics of one network's pre-activations H (nodes x inputs).

    sigma_mu2 = Var_i(mu_i) with mu_i = mean_a h_ia, sigma_y2 = mean_i Var_a(h_ia), gamma =
    sigma_mu2 / sigma_y2 (naive, inflated by about (1 + gamma) / (n - 1) at n inputs, as
    `theory.igb.estimate`), gamma_corr = P / (Q - P) so that c = P / Q equals
    gamma_corr / (1 + gamma_corr) exactly.
    """
    n_inputs = h_NI.shape[1]
    q, p = gram_moments(h_NI)
    mu_N = h_NI.mean(axis=1)
    sigma_mu2 = jnp.var(mu_N)
    sigma_y2 = jnp.mean(jnp.var(h_NI, axis=1))
    return {"sigma_mu2": sigma_mu2, "sigma_y2": sigma_y2, "gamma": sigma_mu2 / sigma_y2,
            "gamma_corr": p / (q - p), "q": q, "p": p, "c": p / q, "n_inputs": jnp.asarray(n_inputs)}


def class_split_quantiles(values_B: jax.Array, labels_B: jax.Array, favoured: jax.Array,
                          qs: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)) -> dict[str, jax.Array]:
    """Quantiles of per-sample values over all samples, over those labelled `favoured`, over the rest.

    NaN where a group is empty (a network can favour a class no sample carries).
    """
    q_arr = jnp.asarray(qs)
    is_fav = labels_B == favoured
    return {"all": jnp.quantile(values_B, q_arr),
            "favoured": _masked_quantile(values_B, is_fav, q_arr),
            "others": _masked_quantile(values_B, ~is_fav, q_arr)}


def _masked_quantile(values_B: jax.Array, mask_B: jax.Array, q_arr: jax.Array) -> jax.Array:
    # Fixed shapes under jit: masked entries become NaN and nanquantile skips them.
    return jnp.nanquantile(jnp.where(mask_B, values_B, jnp.nan), q_arr)
