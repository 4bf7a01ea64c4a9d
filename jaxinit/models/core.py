"""One model interface for every network: a flax module seen as two pure functions.

Every model of jaxinit (and any user's flax linen module) is ``module(x, train: bool = False) -> logits``
with its weights in the ``params`` collection and, if it has BatchNorm, running statistics in
``batch_stats``. The run loops see it through `Model`:

    init(key, sigma_w, sigma_b=None) -> (params, state)
    apply(params, state, x, *, train) -> (logits, new_state)

``state`` holds every non-``params`` collection (``{}`` without BatchNorm, so training never branches).
`from_flax` builds the pair: the variables are built once from the module (`template_variables`, a
cheap jitted init that keeps the non-drawn leaves such as BatchNorm gains); per member, kernels are
drawn from the member's key with the named base initializer and multiplied by the traced ``sigma_w``
(`jaxinit.init`), so sweeping ``sigma_w`` never recompiles and members sharing a key are paired.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from jaxinit import init as init_lib


class Model(NamedTuple):
    """A model as two pure functions (see the module docstring)."""
    init: Callable
    apply: Callable
    module: Any = None       # the flax module behind them (None for hand-written pairs)


def template_variables(module, input_shape: tuple) -> dict:
    """All variables of ``module`` at a fixed key, kernels and biases zeroed, computed once per
    (module, input shape): flax modules compare by their fields, so building the same model again
    (another sweep in the same notebook, the benchmark's variants) reuses the template. Read-only.

    Kernels and biases are redrawn per member by `jaxinit.init.base_draw`, so only the tree structure
    and the other leaves (BatchNorm gains 1 and shifts 0, statistics 0 / 1, a user's embedding...) are
    kept. Zeroing the drawn leaves inside the jitted init lets XLA drop the module's own kernel
    initializers, whose one RNG op per kernel shape made a full template slow to compile (2-core CPU,
    loaded: 1.7-3.4 s for the MLP and ResNet-9 x0.125 with them, 0.6-1.2 s without). The cheap ``rbg``
    PRNG draws whatever random non-drawn leaf remains.
    """
    try:
        hash(module)
    except TypeError:          # a module with an unhashable field: no caching
        return _template(module, tuple(input_shape))
    return _cached_template(module, tuple(input_shape))


def _template(module, input_shape: tuple) -> dict:
    def variables(key, x):
        out = module.init(key, x, train=False)
        return {**out, "params": init_lib.zero_drawn(out.get("params", {}))}

    x = jnp.zeros((1, *input_shape), jnp.float32)
    return jax.jit(variables)(jax.random.key(0, impl="rbg"), x)


_cached_template = functools.lru_cache(maxsize=32)(_template)


def from_flax(module, input_shape: tuple, base_init: str = "he_normal", bias_init: str = "zeros",
              sigma_w_scope: str = "all") -> Model:
    """`Model` of a flax linen module whose ``__call__(x, train: bool = False)`` returns logits.

    ``base_init``: the kernels' base initializer (`jaxinit.init.BASE_INITS`), multiplied by ``sigma_w``.
    ``bias_init``: ``"zeros"`` (the forgetting study) or ``"normal"`` (mean-field convention: biases
    N(0, 1) x ``sigma_b``). ``sigma_w_scope``: the kernels ``sigma_w`` multiplies, ``"all"``, ``"hidden"``
    or ``"head"`` (`jaxinit.init`; the last two need the classifier sub-module named ``head``). Other
    parameters keep the module's own initial values.
    """
    template = template_variables(module, tuple(input_shape))
    params_t = template.get("params", {})
    state_t = {k: v for k, v in template.items() if k != "params"}
    init_lib.check_base_init(base_init)
    init_lib.check_bias_init(bias_init)
    init_lib.check_head(params_t, sigma_w_scope)

    def init(key: jax.Array, sigma_w: jax.Array | float = 1.0, sigma_b: jax.Array | float | None = None):
        params = init_lib.base_draw(key, params_t, base_init, bias_init)
        return init_lib.scale_params(params, sigma_w, sigma_b, sigma_w_scope), jax.tree.map(jnp.asarray, state_t)

    def apply(params, state, x, *, train: bool):
        variables = {"params": params, **state}
        if train and state:
            logits, new_state = module.apply(variables, x, train=True, mutable=list(state))
            return logits, dict(new_state)
        return module.apply(variables, x, train=train), state

    return Model(init, apply, module)
