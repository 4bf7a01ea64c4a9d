"""One model interface for every network: a flax module seen as two pure functions.

Every model of jaxinit (and any user's flax linen module) is ``module(x, train: bool = False) -> logits``
with its weights in the ``params`` collection and, if it has BatchNorm, running statistics in
``batch_stats``. The run loops see it through `Model`:

    init(key, sigma_w, sigma_b=None) -> (params, state)
    apply(params, state, x, *, train) -> (logits, new_state)

``state`` holds every non-``params`` collection (``{}`` without BatchNorm, so training never branches).
`from_flax` builds the pair: the parameter tree is traced once from the module (``jax.eval_shape``
plus one cheap concrete init for non-kernel leaves such as BatchNorm gains); per member, kernels are
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
    """All variables of ``module`` at a fixed key, computed once on the host.

    A cheap PRNG (``rbg``) is used: only the tree structure and the non-kernel, non-bias leaves
    (BatchNorm gains 1 and shifts 0, statistics 0 / 1) of this template are kept; kernels and biases are
    redrawn per member by `jaxinit.init.base_draw`.
    """
    x = jnp.zeros((1, *input_shape), jnp.float32)
    key = jax.random.key(0, impl="rbg")
    return jax.jit(functools.partial(module.init, train=False))(key, x)


def from_flax(module, input_shape: tuple, base_init: str = "he_normal", bias_init: str = "zeros") -> Model:
    """`Model` of a flax linen module whose ``__call__(x, train: bool = False)`` returns logits.

    ``base_init``: the kernels' base initializer (`jaxinit.init.BASE_INITS`), multiplied by ``sigma_w``.
    ``bias_init``: ``"zeros"`` (the forgetting study) or ``"normal"`` (mean-field convention: biases
    N(0, 1) x ``sigma_b``). Other parameters keep the module's own initial values.
    """
    init_lib.check_base_init(base_init)
    template = template_variables(module, tuple(input_shape))
    params_t = template["params"]
    state_t = {k: v for k, v in template.items() if k != "params"}

    def init(key: jax.Array, sigma_w: jax.Array | float = 1.0, sigma_b: jax.Array | float | None = None):
        params = init_lib.base_draw(key, params_t, base_init, bias_init)
        return init_lib.scale_params(params, sigma_w, sigma_b), jax.tree.map(jnp.asarray, state_t)

    def apply(params, state, x, *, train: bool):
        variables = {"params": params, **state}
        if train and state:
            logits, new_state = module.apply(variables, x, train=True, mutable=list(state))
            return logits, dict(new_state)
        return module.apply(variables, x, train=train), state

    return Model(init, apply, module)
