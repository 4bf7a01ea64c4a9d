"""The joined study's per-member measures (single-member, pure) and the statistics of the favoured class.

Evaluation (`eval_memory`, the engine's ``eval_fn``): on one split, the IGB instrument
(`jaxinit.shared.igb_stats.per_class`: accuracy, loss, f_max, per-class accuracy and predicted frequency), the
measured c and gamma of the last hidden layer's pre-activations h_L (`jaxinit.shared.igb_stats.estimate`: c = P / Q,
gamma = gamma_corr, docs/theory.md section 5) and the kernel norm (Frobenius over the dense kernels, head
included, biases not: the forgetting study's). The off-distribution split (`off_distribution_inputs`) is Gaussian
at the data's mean |x|^2 / d: the inputs of the theory (q0 as the data's, c0 = 0), on which a prejudice of the
function itself shows without any class structure of the data.

Favoured class: the argmax of the class frequencies on the off-distribution inputs. Its identity statistic over
a set of members is the share whose favoured class at one time (after training) equals that at another (init);
`identity_test` compares it with shuffled labels (the favoured classes after training permuted among the members
of a stratum): the chance level is the exact mean of that null (1/C when the favoured classes are uniform), the
p-value one-sided (more matches than chance).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxinit.models import deep
from jaxinit.shared import igb_stats as stats

N_DRAWS = 10_000      # random permutations of the identity test: p resolves down to 1e-4
SEED = 0              # their Generator seed: equal inputs give equal p-values


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


def identity_statistic(fav_a, fav_b) -> float:
    """Share of members whose favoured class in ``fav_a`` equals that in ``fav_b``."""
    a, b = np.asarray(fav_a), np.asarray(fav_b)
    return float(np.mean(a == b)) if a.size else float("nan")


def chance_level(fav_a, fav_b, strata=None) -> float:
    """E[`identity_statistic`] when ``fav_b`` is permuted within each stratum: sum_k n_a(k) n_b(k) / n per stratum."""
    a, b = np.asarray(fav_a), np.asarray(fav_b)
    s = np.zeros(a.shape, int) if strata is None else np.asarray(strata)
    total = 0.0
    for g in np.unique(s):
        ag, bg = a[s == g], b[s == g]
        total += sum(np.sum(ag == k) * np.sum(bg == k) for k in np.unique(ag)) / ag.size
    return total / a.size if a.size else float("nan")


def identity_test(fav_a, fav_b, strata=None, n_draws: int = N_DRAWS, seed: int = SEED) -> dict:
    """``match`` (`identity_statistic`), ``chance`` (`chance_level`), ``p`` = (1 + #{null >= match}) / (1 + N)
    over N random within-stratum permutations of ``fav_b``, ``n`` members. Members with no favoured class (-1 in
    either) are left out."""
    a, b = np.asarray(fav_a), np.asarray(fav_b)
    s = np.zeros(a.shape, int) if strata is None else np.asarray(strata)
    ok = (a >= 0) & (b >= 0)
    a, b, s = a[ok], b[ok], s[ok]
    if a.size < 2:
        return {"match": identity_statistic(a, b) if a.size else None, "chance": None, "p": None, "n": int(a.size)}
    rng = np.random.default_rng(seed)
    shuffled = np.broadcast_to(b, (n_draws, b.size)).copy()
    for g in np.unique(s):
        idx = np.flatnonzero(s == g)
        shuffled[:, idx] = b[idx][np.argsort(rng.random((n_draws, idx.size)), axis=1)]
    match = identity_statistic(a, b)
    null = (shuffled == a).mean(axis=1)
    p = (1 + int(np.sum(null >= match - 1e-12))) / (1 + n_draws)
    return {"match": match, "chance": chance_level(a, b, s), "p": p, "n": int(a.size)}


__all__ = ["kernel_norm", "last_hidden", "measure", "eval_memory", "off_distribution_inputs", "favoured",
           "class_spread", "identity_statistic", "chance_level", "identity_test"]
