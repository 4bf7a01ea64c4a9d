"""Per-network IGB statistics (docs/theory.md section 5): class fractions, f_max, per-class metrics, Gram moments.

Single-network and pure (vmap them over members or grid points). The IGB estimator itself is the
theory's (`theory.igb.estimate`): `layer_moments` applies it to every layer of a traced network.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from theory import igb as theory_igb

MOMENT_KEYS = ("q", "p", "c", "gamma", "gamma_corr")


def class_fractions(logits_BC: jax.Array) -> jax.Array:
    """f_c: fraction in [0, 1] of inputs whose argmax is class c, shape (C,)."""
    return jax.nn.one_hot(jnp.argmax(logits_BC, axis=-1), logits_BC.shape[-1]).mean(axis=0)


def f_max(logits_BC: jax.Array) -> jax.Array:
    """Largest class fraction: 1/C for a neutral network, 1 for a deeply prejudiced one."""
    return class_fractions(logits_BC).max()


def per_class(logits_BC: jax.Array, labels_B: jax.Array) -> dict[str, jax.Array]:
    """Accuracy, loss and predicted frequency per class (shape (C,) each), f_max, accuracy, loss.

    ``class_acc[c]`` / ``class_loss[c]``: over the inputs labelled c (NaN if there are none);
    ``class_freq[c]`` = f_c, the fraction of all inputs predicted as c (the authors' logs).
    """
    n_classes = logits_BC.shape[-1]
    label_1h = jax.nn.one_hot(labels_B, n_classes)
    loss_B = optax.softmax_cross_entropy_with_integer_labels(logits_BC, labels_B)
    hit_B = (jnp.argmax(logits_BC, axis=-1) == labels_B).astype(logits_BC.dtype)
    count_C = label_1h.sum(axis=0)
    per = lambda v_B: jnp.where(count_C > 0, label_1h.T @ v_B / jnp.maximum(count_C, 1.0), jnp.nan)
    freq = class_fractions(logits_BC)
    return {"acc": hit_B.mean(), "loss": loss_B.mean(), "fmax": freq.max(), "class_acc": per(hit_B),
            "class_loss": per(loss_B), "class_freq": freq}


def estimate(h_NI: jax.Array) -> dict[str, jax.Array]:
    """`theory.igb.estimate` (traceable; float64 inside) of a (nodes, inputs) array, in the array's dtype:
    q = Q, p = P, c = P/Q, gamma (naive, inflated by ~(1 + gamma)/(n - 1)), gamma_corr = P/(Q - P)."""
    out = theory_igb.estimate(h_NI)
    return {k: out[k].astype(h_NI.dtype) for k in MOMENT_KEYS}


def layer_moments(hs) -> dict[str, jax.Array]:
    """`estimate` per layer of pre-activations stacked (L, B, nodes) or listed [(B, nodes_l)]: arrays (L,)."""
    if isinstance(hs, (list, tuple)):
        stats = [estimate(h.T) for h in hs]
        return {k: jnp.stack([s[k] for s in stats]) for k in MOMENT_KEYS}
    return jax.vmap(lambda h: estimate(h.T))(hs)


def class_split_quantiles(values_B: jax.Array, labels_B: jax.Array, favoured: jax.Array,
                          qs: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)) -> dict[str, jax.Array]:
    """Quantiles of per-sample values over all samples, over those labelled `favoured`, over the rest.

    NaN where a group is empty (a network can favour a class no sample carries).
    """
    q_arr = jnp.asarray(qs)
    is_fav = labels_B == favoured
    masked = lambda mask: jnp.nanquantile(jnp.where(mask, values_B, jnp.nan), q_arr)   # fixed shapes under jit
    return {"all": jnp.quantile(values_B, q_arr), "favoured": masked(is_fav), "others": masked(~is_fav)}


def first_step(steps_E: np.ndarray, hit_EM: np.ndarray) -> np.ndarray:
    """First evaluated step where ``hit`` holds, per member (column); NaN if never."""
    hit = np.asarray(hit_EM, bool)
    first = np.argmax(hit, axis=0)
    return np.where(hit.any(axis=0), np.asarray(steps_E, float)[first], np.nan)


def steps_to_target(steps_E: np.ndarray, acc_EM: np.ndarray, target: float) -> np.ndarray:
    """First evaluated step with accuracy >= target, per member; NaN if never reached."""
    return first_step(steps_E, np.asarray(acc_EM) >= target)


def steps_absorbed(steps_E: np.ndarray, fmax_EM: np.ndarray, threshold: float) -> np.ndarray:
    """Absorption time: first evaluated step with f_max <= threshold, per member; NaN if never."""
    return first_step(steps_E, np.asarray(fmax_EM) <= threshold)


__all__ = ["class_fractions", "f_max", "per_class", "estimate", "layer_moments", "class_split_quantiles",
           "first_step", "steps_to_target", "steps_absorbed", "MOMENT_KEYS"]
