"""Per-member metrics: losses, accuracy, parameter norms (IGB statistics: `jaxinit.shared.igb_stats`).

All functions are single-member and pure (vmap them over members).
"""
from __future__ import annotations

from typing import Any

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


def by_path(tree) -> dict[str, Any]:
    """The leaves of a pytree keyed by their '/'-joined path (e.g. 'dense_0/kernel'), in flattening order."""
    return {"/".join(key_name(k) for k in path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def layer_norms(params) -> dict[str, jax.Array]:
    """Frobenius norm per leaf, keyed by its '/'-joined path (e.g. 'dense_0/kernel')."""
    return {name: jnp.sqrt(jnp.sum(jnp.square(leaf))) for name, leaf in by_path(params).items()}
