"""The joined study's per-member measures (single-member, pure).

Evaluation (`eval_memory`, the engine's ``eval_fn``): on one split, the IGB instrument
(`jaxinit.shared.igb_stats.per_class`: accuracy, loss, f_max, per-class accuracy and predicted frequency), the
measured c and gamma of the last hidden layer's pre-activations h_L (`jaxinit.shared.igb_stats.estimate`: c = P / Q,
gamma = gamma_corr, docs/theory.md section 5) and the kernel norm (Frobenius over the dense kernels, head
included, biases not: the forgetting study's). The off-distribution split (`off_distribution_inputs`) is Gaussian
at the data's mean |x|^2 / d: the inputs of the theory (q0 as the data's, c0 = 0), on which a prejudice of the
function itself shows without any class structure of the data.

Favoured class (`favoured`): the argmax of the class frequencies on the off-distribution inputs, a descriptive
label; whether a network's own preference survives training is measured on the whole frequency vector
(`jaxinit.memory.identity`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxinit.models import deep
from jaxinit.shared import igb_stats as stats



def kernel_norm(params) -> jax.Array:
    """Frobenius norm over every leaf named ``kernel`` (dense kernels, head included; biases not)."""
    leaves = [x for path, x in jax.tree_util.tree_flatten_with_path(params)[0]
              if getattr(path[-1], "key", None) == "kernel"]
    return jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in leaves))


def last_hidden(module, params, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(logits (B, C), last hidden pre-activations h_L (B, nodes)) of a `jaxinit.models.deep.DeepMLP`."""
    logits, state = module.apply({"params": params}, x, mutable=["intermediates"])
    return logits, deep.preactivations(state["intermediates"])[-1]


def measure(module, params, x: jax.Array, y: jax.Array) -> dict[str, jax.Array]:
    """`stats.per_class` of the logits, ``c`` and ``gamma`` (bias-corrected) of h_L, ``kernel_norm``."""
    logits, h_L = last_hidden(module, params, x)
    moments = stats.estimate(h_L.T)
    return {**stats.per_class(logits, y), "c": moments["c"], "gamma": moments["gamma_corr"],
            "kernel_norm": kernel_norm(params)}


def eval_memory(model, state, batch) -> dict[str, jax.Array]:
    """The engine's ``eval_fn``: `measure` of one member on a whole split (no padding)."""
    return measure(model.module, state.params, batch.x, batch.y)


def off_distribution_inputs(key: jax.Array, x_ref: jax.Array, n: int) -> jax.Array:
    """``n`` Gaussian inputs of ``x_ref``'s dimension with its mean |x|^2 / d (q0 of the theory), c0 = 0."""
    x_ref = jnp.asarray(x_ref).reshape(x_ref.shape[0], -1)
    q0 = jnp.mean(jnp.sum(jnp.square(x_ref), axis=1)) / x_ref.shape[1]
    return jnp.sqrt(q0) * jax.random.normal(key, (n, x_ref.shape[1]), x_ref.dtype)


def favoured(class_freq) -> np.ndarray:
    """The favoured class of each member: argmax over the last axis of the class frequencies (-1 where NaN)."""
    f = np.asarray(class_freq, float)
    bad = ~np.isfinite(f).all(axis=-1)
    return np.where(bad, -1, np.argmax(np.nan_to_num(f, nan=-1.0), axis=-1))


def class_spread(class_acc) -> np.ndarray:
    """Per-class accuracy spread: max - min over the classes present (NaN-free), per member."""
    a = np.asarray(class_acc, float)
    with np.errstate(all="ignore"):
        return np.nanmax(a, axis=-1) - np.nanmin(a, axis=-1)


__all__ = ["kernel_norm", "last_hidden", "measure", "eval_memory", "off_distribution_inputs", "favoured",
           "class_spread"]
