"""One member: its state, its init (BatchNorm calibrated), its training step and its evaluation.

Everything here is single-member and pure; `members.py` runs it over members (vmap, loop or chunks).
A member's randomness: `key(seed)` is split once into named streams (init, data, augment); the
epoch's permutation is `fold_in(data, epoch)`, the step's augmentation `fold_in(augment, step)`. No key
lives in the state, so a resumed run is bit-identical to an uninterrupted one.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxinit import data as data_lib
from jaxinit import metrics
from jaxinit import precision as precision_lib
from jaxinit.optim import OptSetting, make_optimizer


class TrainState(NamedTuple):
    """Everything one member carries between steps (a pytree; stacked along axis 0 over members)."""
    params: Any
    model_state: Any          # non-params collections (BatchNorm statistics), {} without BatchNorm
    opt_state: Any
    step: jax.Array           # int32: optimizer steps taken (frozen once diverged)
    diverged: jax.Array       # bool
    diverged_step: jax.Array  # int32: the step that went non-finite, -1 if none
    update_sums: Any = None   # (rms, ms): per parameter leaf sum_k |dW_k|_F / sqrt(P) and sum_k |dW_k|_F^2 / P


def member_streams(seed: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(init, data, augment) keys of a seed; split once, never carried in state."""
    init_key, data_key, aug_key = jax.random.split(jax.random.key(seed), 3)
    return init_key, data_key, aug_key


def tree_all_finite(tree: Any) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


def calibrate_statistics(model, params, state, x_calib: jax.Array):
    """Running statistics set to the batch statistics of ``x_calib``, parameters untouched.

    Why: BatchNorm's running statistics start at mean 0 / var 1, so an evaluation at init would score a
    network that training never sees (val loss 85 instead of 4.3 for the cpu MLP at sigma_w = 2.5).
    Every running statistic is an EMA, s' = m s + (1 - m) b. One train-mode pass from s = 0 and one
    from s = 1 give s0 = (1 - m) b and s1 = m + (1 - m) b, hence m = s1 - s0 and b = s0 / (1 - m),
    whatever the module's momentum. The layers see the batch statistics of the layers below, exactly
    as in a training step on this batch.
    """
    if not state:
        return state
    zeros = jax.tree.map(jnp.zeros_like, state)
    ones = jax.tree.map(jnp.ones_like, state)
    _, s0 = model.apply(params, zeros, x_calib, train=True)
    _, s1 = model.apply(params, ones, x_calib, train=True)
    return jax.tree.map(lambda a, b: a / (1.0 - (b - a)), s0, s1)


def init_member(model, tx, x_calib: jax.Array, sigma_w: jax.Array, seed: jax.Array) -> TrainState:
    params, model_state = model.init(member_streams(seed)[0], sigma_w)
    model_state = calibrate_statistics(model, params, model_state, x_calib)
    zeros = jax.tree.map(lambda x: jnp.zeros((), jnp.float32), params)
    return TrainState(params, model_state, tx.init(params), jnp.int32(0), jnp.bool_(False), jnp.int32(-1),
                      (zeros, zeros))


def add_update_sizes(sums: tuple[Any, Any], new_params: Any, old_params: Any) -> tuple[Any, Any]:
    """The measured update clocks' running sums (`history.measured_clocks`), one step further.

    Per parameter leaf with P entries, the applied update dW = W_new - W_old adds |dW|_F / sqrt(P) (its
    RMS per coordinate) to the first sum and |dW|_F^2 / P to the second: the distance each kernel was
    actually moved, whatever the optimizer made of the learning rate (THEORY.md section 6).
    """
    ms = jax.tree.map(lambda n, o: jnp.mean(jnp.square((n - o).astype(jnp.float32))), new_params, old_params)
    return (jax.tree.map(lambda a, m: a + jnp.sqrt(m), sums[0], ms), jax.tree.map(jnp.add, sums[1], ms))


def train_step(model, tx, batch_size: int, augment: bool, state: TrainState, x: jax.Array, y: jax.Array,
               perm: jax.Array, step_in_epoch: jax.Array, seed: jax.Array) -> tuple[TrainState, jax.Array]:
    """One optimizer step of one member; a non-finite result flags the member and freezes it."""
    xb, yb = data_lib.get_batch(x, y, perm, step_in_epoch, batch_size)
    if augment:
        xb = data_lib.augment(jax.random.fold_in(member_streams(seed)[2], state.step), xb)

    def loss_fn(params):
        logits, model_state = model.apply(params, state.model_state, xb, train=True)
        return metrics.cross_entropy(logits, yb), model_state

    (loss, model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    finite = jnp.isfinite(loss) & tree_all_finite(params) & tree_all_finite(model_state)
    proposed = TrainState(params, model_state, opt_state, state.step + 1, state.diverged, state.diverged_step,
                          add_update_sizes(state.update_sums, params, state.params))
    accept = finite & ~state.diverged
    new = jax.tree.map(lambda n, o: jnp.where(accept, n, o), proposed, state)
    newly = ~finite & ~state.diverged
    return new._replace(diverged=state.diverged | newly,
                        diverged_step=jnp.where(newly, state.step, state.diverged_step)), loss


def eval_chunk(model, params, model_state, xb: jax.Array, yb: jax.Array, mask: jax.Array):
    """Summed cross-entropy and correct count over the unmasked examples of one eval batch."""
    logits, _ = model.apply(params, model_state, xb, train=False)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, yb)
    correct = (jnp.argmax(logits, -1) == yb)
    return jnp.sum(jnp.where(mask, ce, 0.0)), jnp.sum(jnp.where(mask, correct, 0))


def norms(params) -> dict:
    return {"param_norm": metrics.param_norm(params), "layers": metrics.layer_norms(params)}


def member_permutation(seed: jax.Array, epoch: jax.Array, n: int) -> jax.Array:
    """The epoch's data order of a member: depends on its seed only (paired across scales)."""
    return data_lib.epoch_permutation(member_streams(seed)[1], epoch, n)


class Compiled(NamedTuple):
    init: Any
    step: Any
    eval: Any
    norms: Any
    perm: Any
    schedule: Any


_COMPILED: dict[tuple, tuple[Any, Compiled]] = {}
_SHARED: dict[tuple, tuple[Any, tuple]] = {}


def _setting_free_fns(model_key: Any, model, batched: bool, precision: str = "float32") -> tuple:
    """(eval, norms, perm), jitted once per model structure and precision and shared by every setting: they
    do not read the optimizer, so five settings compile them once, not five times (~5 s of the cpu preset's
    set-up). ``model`` computes in ``precision``'s dtype already (`jaxinit.precision.policy_model`)."""
    key = (model_key, batched, precision)
    hit = _SHARED.get(key)
    if hit is not None:
        return hit[1]
    ev, nrm, perm = precision_lib.under(precision, functools.partial(eval_chunk, model)), norms, member_permutation
    if batched:
        ev = jax.vmap(ev, in_axes=(0, 0, None, None, None))
        nrm = jax.vmap(norms)
        perm = jax.vmap(member_permutation, in_axes=(0, None, None))
    fns = (jax.jit(ev), jax.jit(nrm), jax.jit(perm, static_argnums=2))
    _SHARED[key] = (model, fns)
    return fns


def compiled_fns(model_key: Any, model, input_shape: tuple, setting: OptSetting, steps_per_epoch: int, epochs: int,
                 batch_size: int, augment: bool, batched: bool, precision: str = "float32") -> Compiled:
    """Jitted functions for one setting, cached on structure only (never on swept values).

    ``model_key`` identifies the model's structure (its `ModelConfig`, input shape and classes for
    registry models; the module object for a user's module, kept alive by the cache entry). ``precision``
    (`jaxinit.precision`, part of the key): init, step and eval are traced under its matmul precision and
    run the model in its compute dtype; parameters, optimizer state and loss stay float32.
    """
    key = (model_key, input_shape, setting, steps_per_epoch, epochs, batch_size, augment, batched, precision)
    hit = _COMPILED.get(key)
    if hit is not None:
        return hit[1]
    tx, schedule = make_optimizer(setting, steps_per_epoch, max(epochs, 1), input_shape)
    model = precision_lib.policy_model(model, precision)
    init = precision_lib.under(precision, functools.partial(init_member, model, tx))
    step = precision_lib.under(precision, functools.partial(train_step, model, tx, batch_size, augment))
    if batched:
        init = jax.vmap(init, in_axes=(None, 0, 0))
        step = jax.vmap(step, in_axes=(0, None, None, 0, None, 0))
    ev, nrm, perm = _setting_free_fns((model_key, input_shape), model, batched, precision)
    fns = Compiled(jax.jit(init), jax.jit(step, donate_argnums=0), ev, nrm, perm, schedule)
    _COMPILED[key] = (model, fns)
    return fns
