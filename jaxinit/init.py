"""Scaled initializers: ``sigma_w`` multiplies a named base initializer of every conv and dense kernel.

What is scaled, exactly:

- every leaf named ``"kernel"`` (conv kernels ``(*window, C_in, C_out)``, dense kernels ``(D_in, D_out)``,
  the classifier included) is ``sigma_w * W_base`` with ``W_base`` drawn from ``base_init``;
- biases (leaves named ``"bias"`` outside a normaliser) are 0, or, in the mean-field convention
  (``bias_init="normal"``), ``sigma_b * N(0, 1)``;
- every other leaf (BatchNorm scale 1 and bias 0, its running statistics 0 / 1, ...) keeps the
  module's own initial value and is never scaled.

Base initializers (untruncated Gaussians, fan_in = prod(window) * C_in, fan_out = prod(window) * C_out):

| name            | variance of W_base        |
|-----------------|---------------------------|
| he_normal       | 2 / fan_in  (default)     |
| lecun_normal    | 1 / fan_in                |
| glorot_normal   | 2 / (fan_in + fan_out)    |
| normal_fan_in   | 1 / fan_in                |

``normal_fan_in`` equals ``lecun_normal``; it is named for the theory: with it ``sigma_w**2`` is
docs/theory.md's ``sigma_w2`` (``W_ij ~ N(0, sigma_w2 / fan_in)``). With ``he_normal``, ``sigma_w = 1``
means ``sigma_w2 = 2``, the ReLU edge of chaos.

Any flax module: its parameter tree is built once (`jaxinit.models.core.from_flax`), then per member
`base_draw` fills the kernels (and, for the mean-field models, the biases) from the member's key and
`scale_params` multiplies them by the traced scales. Weights must be named ``"kernel"`` with the
layout ``(*window, in, out)`` (flax's Dense and Conv), biases ``"bias"``.

Pairing: a model draws its base parameters once from ``key`` (`fill_kernels`: one flat N(0, 1) draw
for all kernels, sliced in the tree's flatten order, i.e. sorted by path) and then multiplies kernels by
``sigma_w``, so members that share a key but differ in ``sigma_w`` have exactly proportional kernels (same
base Gaussian draws). A kernel's draw depends on the paths and sizes of the kernels sorted before it:
renaming a sub-module changes the draws. ``sigma_w`` may be a traced
scalar: init is vmappable over ``(keys, sigma_w)`` and changing ``sigma_w`` never recompiles.

Note (docs/theory.md §6): with BatchNorm after every conv, scaling the kernels does not change the function
at init, only the effective learning rate (~ eta / |W|^2): BN divides the scale out (up to its eps).
In our models the classifier kernel is scaled too and no BN follows it, so at init the BN nets'
logits are exactly ``sigma_w`` times those at ``sigma_w = 1`` (again up to BN's eps).

Scope (``model.sigma_w_scope``, `SIGMA_W_SCOPES`): which kernels ``sigma_w`` multiplies. ``"all"`` (the
default, everything above), ``"hidden"`` (every kernel but the head's; the head keeps its base draw, i.e.
it is drawn at ``sigma_w = 1``) or ``"head"`` (the head's kernels only; the hidden kernels at
``sigma_w = 1``). It separates the memory carried by the hidden layers from the part carried by the
logit scale. The base draws are the same in every scope (paired): a kernel is either ``sigma_w`` times
its draw or its draw itself. The head (`is_head`) is every kernel under a path entry named ``"head"``:
the classifier sub-module of every registry model (mlp, resnets, vit, cnn) and the sub-tree Muon sends
to its Adam branch (`jaxinit.optim.muon_labels`). A user's module must name its classifier ``head``
(``nn.Dense(n_classes, name="head")``) to use the scopes ``"hidden"`` and ``"head"``; a tree without
one is a `ConfigError` there (not a guess: flax's automatic names sort ``Dense_10`` before
``Dense_2``, so "the last kernel in parameter order" is not the classifier in general).
"""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from jaxinit.config import ConfigError

# name -> (variance numerator, fan mode)
_BASE_INITS: dict[str, tuple[float, str]] = {
    "he_normal": (2.0, "fan_in"),
    "lecun_normal": (1.0, "fan_in"),
    "glorot_normal": (2.0, "fan_sum"),
    "normal_fan_in": (1.0, "fan_in"),
}
BASE_INITS = tuple(_BASE_INITS)


def check_base_init(name: str) -> str:
    if name not in _BASE_INITS:
        raise ConfigError(f"--model.base_init must be one of {'|'.join(BASE_INITS)}, got {name!r}")
    return name


def base_std(name: str, shape: tuple[int, ...]) -> float:
    """Standard deviation of the base init for a kernel whose last two axes are (in, out)."""
    numerator, mode = _BASE_INITS[check_base_init(name)]
    receptive = math.prod(shape[:-2])
    fan_in, fan_out = receptive * shape[-2], receptive * shape[-1]
    return math.sqrt(numerator / (fan_in if mode == "fan_in" else fan_in + fan_out))


def fill_kernels(key: jax.Array, params: Any, base_init: str) -> Any:
    """Replace every kernel leaf (its values are ignored, only its shape counts) by base-init draws.

    All kernels come from *one* flat N(0, 1) draw, sliced in tree order and multiplied by each
    kernel's base std: one RNG op to compile instead of one per kernel shape (threefry compiles
    slowly on CPU; docs/design.md, "Pairing"), and the same key gives the same draws at every sigma_w.
    """
    flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    sizes = [math.prod(leaf.shape) if is_kernel(path) else 0 for path, leaf in flat]
    z = jax.random.normal(key, (sum(sizes),), jnp.float32)
    leaves, offset = [], 0
    for (path, leaf), size in zip(flat, sizes):
        if size:
            layer_shape = leaf.shape[stacked_axes(path):]
            leaf = z[offset:offset + size].reshape(leaf.shape) * base_std(base_init, layer_shape)
            offset += size
        leaves.append(leaf)
    return jax.tree_util.tree_unflatten(treedef, leaves)


STACKED_PREFIX = "stacked"


def stacked_axes(path: tuple) -> int:
    """Leading axes of a leaf that index layers, not weights: one per path entry named ``stacked*``.

    A model that keeps L identical layers as one array (``flax.linen.scan`` over a module named e.g.
    ``stacked_layers``, for compile speed at depth 100) has kernels of shape ``(L, in, out)``; their
    fan-in is ``in``, not ``L * in``. Naming the scanned module ``stacked...`` says so.
    """
    return sum(key_name(k).startswith(STACKED_PREFIX) for k in path)


def is_kernel(path: tuple, leaf: Any = None) -> bool:
    """True for conv/dense weights: leaves whose last path entry is named 'kernel'.

    Keyed on the name, not on ``leaf.ndim``, so it also holds on member-stacked trees.
    """
    del leaf
    return bool(path) and key_name(path[-1]) == "kernel"


HEAD = "head"                                # the classifier sub-module of every registry model
SIGMA_W_SCOPES = ("all", "hidden", "head")   # which kernels sigma_w multiplies (module docstring)


def check_sigma_w_scope(scope: str) -> str:
    if scope not in SIGMA_W_SCOPES:
        raise ConfigError(f"--model.sigma_w_scope must be one of {'|'.join(SIGMA_W_SCOPES)}, got {scope!r}")
    return scope


def is_head(path: tuple) -> bool:
    """True for leaves of the classifier: some path entry is named ``"head"``."""
    return any(key_name(k) == HEAD for k in path)


def check_head(params: Any, scope: str) -> None:
    """A scope other than ``"all"`` needs a head kernel and a hidden one (`ConfigError` otherwise)."""
    if check_sigma_w_scope(scope) == "all":
        return
    heads = [is_head(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0] if is_kernel(p)]
    if not any(heads) or all(heads):
        part = "no kernel under a sub-module named 'head'" if not any(heads) else "no kernel outside 'head'"
        raise ConfigError(f"--model.sigma_w_scope={scope} needs a classifier sub-module named 'head' and hidden "
                          f"kernels; this model has {part} (name the classifier nn.Dense(..., name='head'))")


def scale_kernels(params: Any, sigma_w: jax.Array | float, scope: str = "all") -> Any:
    """Multiply the kernels of ``scope`` by ``sigma_w`` (a scalar, possibly traced); other leaves unchanged.

    ``scope``: ``"all"`` every kernel, ``"hidden"`` every kernel outside the head, ``"head"`` the head's
    (`is_head`). A kernel outside the scope keeps its base draw (drawn at ``sigma_w = 1``).
    """
    check_head(params, scope)

    def scale(path, leaf):
        scaled = is_kernel(path, leaf) and (scope == "all" or (scope == "head") == is_head(path))
        return leaf * jnp.asarray(sigma_w, leaf.dtype) if scaled else leaf
    return jax.tree_util.tree_map_with_path(scale, params)


def is_bias(path: tuple, siblings: Any = ()) -> bool:
    """True for additive biases: leaves named 'bias' that are not a normalisation layer's shift.

    A BatchNorm / LayerNorm sub-tree holds {'scale', 'bias'}; a Dense / Conv holds {'kernel', 'bias'};
    a learned offset such as a position embedding holds {'bias'} alone. `siblings` are the leaf names
    of the same sub-tree; a 'bias' next to a 'scale' is a normaliser's shift and is not a bias here.
    """
    return bool(path) and key_name(path[-1]) == "bias" and "scale" not in siblings


def _sibling_names(params: Any) -> dict[tuple, set]:
    """For each leaf path, the names of the leaves that share its parent."""
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    groups: dict[tuple, set] = {}
    for path, _ in flat:
        groups.setdefault(tuple(path[:-1]), set()).add(key_name(path[-1]) if path else "")
    return {tuple(path): groups[tuple(path[:-1])] for path, _ in flat}


def scale_biases(params: Any, sigma_b: jax.Array | float) -> Any:
    """Multiply every bias (see `is_bias`) by ``sigma_b`` (possibly traced); other leaves unchanged."""
    siblings = _sibling_names(params)

    def scale(path, leaf):
        return leaf * jnp.asarray(sigma_b, leaf.dtype) if is_bias(path, siblings[tuple(path)]) else leaf
    return jax.tree_util.tree_map_with_path(scale, params)


def fill_biases(key: jax.Array, params: Any) -> Any:
    """Replace every bias (see `is_bias`) by N(0, 1) draws from one flat draw (the mean-field convention
    ``b ~ N(0, sigma_b2)`` then follows from `scale_biases` with ``sigma_b = sqrt(sigma_b2)``)."""
    siblings = _sibling_names(params)
    flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    sizes = [math.prod(leaf.shape) if is_bias(path, siblings[tuple(path)]) else 0 for path, leaf in flat]
    z = jax.random.normal(key, (sum(sizes),), jnp.float32)
    leaves, offset = [], 0
    for (path, leaf), size in zip(flat, sizes):
        if size:
            leaf = z[offset:offset + size].reshape(leaf.shape).astype(leaf.dtype)
            offset += size
        leaves.append(leaf)
    return jax.tree_util.tree_unflatten(treedef, leaves)


BIAS_INITS = ("zeros", "normal")


def check_bias_init(name: str) -> str:
    if name not in BIAS_INITS:
        raise ConfigError(f"bias_init must be one of {'|'.join(BIAS_INITS)}, got {name!r}")
    return name


def zero_drawn(params: Any) -> Any:
    """Kernels and biases (the leaves `base_draw` redraws) as zeros; every other leaf unchanged."""
    siblings = _sibling_names(params)
    drawn = lambda p: is_kernel(p) or is_bias(p, siblings[tuple(p)])
    return jax.tree_util.tree_map_with_path(lambda p, x: jnp.zeros_like(x) if drawn(p) else x, params)


# Kernels are drawn from the member's key itself (same key, same kernels).
# Biases come from fold_in(key, BIAS_STREAM). With jax's default (partitionable) threefry, fold_in(key, d)
# is threefry at counter (0, d), the counter a draw from `key` uses for its entry d: so d lies beyond
# any kernel draw (< 2**31 entries) and the two streams never share a counter.
BIAS_STREAM = 2**31 - 1


def base_draw(key: jax.Array, template: Any, base_init: str, bias_init: str = "zeros") -> Any:
    """The unscaled parameters of one network: kernels from `base_init` (`fill_kernels`), biases 0
    (``"zeros"``) or N(0, 1) (``"normal"``, the mean-field convention), every other leaf (BatchNorm
    gains, ...) as in ``template``. ``template`` may be any flax parameter tree (its kernel and bias
    values are ignored). Kernels come from ``key``, biases from ``fold_in(key, BIAS_STREAM)``."""
    check_base_init(base_init)
    check_bias_init(bias_init)
    params = fill_kernels(key, template, base_init)
    if bias_init == "normal":
        return fill_biases(jax.random.fold_in(key, BIAS_STREAM), params)
    siblings = _sibling_names(params)
    return jax.tree_util.tree_map_with_path(
        lambda p, x: jnp.zeros_like(x) if is_bias(p, siblings[tuple(p)]) else x, params)


def scale_params(params: Any, sigma_w: jax.Array | float, sigma_b: jax.Array | float | None = None,
                 scope: str = "all") -> Any:
    """Kernels (of ``scope``, see `scale_kernels`) x ``sigma_w`` and, if given, biases x ``sigma_b`` (both
    may be traced: no recompilation).

    With ``base_init="normal_fan_in"`` and ``bias_init="normal"`` this is docs/theory.md section 1:
    ``W ~ N(0, sigma_w2 / fan_in)``, ``b ~ N(0, sigma_b2)`` for ``sigma_w = sqrt(sigma_w2)``,
    ``sigma_b = sqrt(sigma_b2)``.
    """
    params = scale_kernels(params, sigma_w, scope)
    return params if sigma_b is None else scale_biases(params, sigma_b)


def key_name(k: Any) -> str:
    """The plain name of one pytree path entry (dict key, attribute name or sequence index)."""
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)
