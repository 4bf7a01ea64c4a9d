"""One member: its state, its init (BatchNorm calibrated), its training step and its evaluation.

Everything here is single-member and pure, but `batched_train_step`, which runs the single-member step's
pieces (`member_batch`, `member_loss`, `apply_gradient`) over member-stacked arguments with the gradient
taken outside the vmap; `compiled.py` jits them and `members.py` runs them over members (vmap, loop or
chunks). A member's swept values are traced data (`MemberArgs`: seed, init
scale, learning rate, L2, weight decay), so a sweep over any of them compiles the step once; the
optimizer is built inside the member's function from them (`jaxinit.optim.make_optimizer` with
`Hyper`), which also keeps Muon's routing by ``ndim`` on one member's tree, never a stacked one.
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
from jaxinit.optim import Hyper


class TrainState(NamedTuple):
    """Everything one member carries between steps (a pytree; stacked along axis 0 over members)."""
    params: Any
    model_state: Any          # non-params collections (BatchNorm statistics), {} without BatchNorm
    opt_state: Any
    step: jax.Array           # int32: optimizer steps taken (frozen once diverged)
    diverged: jax.Array       # bool
    diverged_step: jax.Array  # int32: the step that went non-finite, -1 if none
    update_sums: Any = None   # (rms, ms): per parameter leaf sum_k |dW_k|_F / sqrt(P) and sum_k |dW_k|_F^2 / P


class MemberArgs(NamedTuple):
    """One member's traced values (stacked along axis 0 over a chunk's members).

    ``scale`` is what the model's ``init(key, scale)`` takes: sigma_w for the registry's models, a
    (sigma_w2, sigma_b2) pair for the IGB study's networks."""
    seed: jax.Array      # uint32: the member's streams (`member_streams`)
    scale: Any           # float32 pytree
    hyper: Hyper         # float32 lr, l2, weight_decay


class StepData(NamedTuple):
    """What every member of a chunk shares in one step: the training split and the step's index."""
    x: jax.Array
    y: jax.Array
    step_in_epoch: jax.Array   # int32


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


def init_member(model, make_tx, member: MemberArgs, x_calib: jax.Array) -> TrainState:
    """``make_tx(hyper) -> optax transform``: the optimizer of the member's traced hyperparameters."""
    params, model_state = model.init(member_streams(member.seed)[0], member.scale)
    model_state = calibrate_statistics(model, params, model_state, x_calib)
    zeros = jax.tree.map(lambda x: jnp.zeros((), jnp.float32), params)
    return TrainState(params, model_state, make_tx(member.hyper).init(params), jnp.int32(0), jnp.bool_(False),
                      jnp.int32(-1), (zeros, zeros))


def add_update_sizes(sums: tuple[Any, Any], new_params: Any, old_params: Any) -> tuple[Any, Any]:
    """The measured update clocks' running sums (`history.measured_clocks`), one step further.

    Per parameter leaf with P entries, the applied update dW = W_new - W_old adds |dW|_F / sqrt(P) (its
    RMS per coordinate) to the first sum and |dW|_F^2 / P to the second: the distance each kernel was
    actually moved, whatever the optimizer made of the learning rate (docs/theory.md section 6).
    """
    ms = jax.tree.map(lambda n, o: jnp.mean(jnp.square((n - o).astype(jnp.float32))), new_params, old_params)
    return (jax.tree.map(lambda a, m: a + jnp.sqrt(m), sums[0], ms), jax.tree.map(jnp.add, sums[1], ms))


def member_batch(batch_size: int, augment: bool, state: TrainState, member: MemberArgs, order: jax.Array,
                 data: StepData) -> tuple[jax.Array, jax.Array]:
    """One member's batch ``data.step_in_epoch`` of the epoch ordered by ``order``, augmented by
    ``fold_in(augment stream, state.step)`` where ``augment``."""
    xb, yb = data_lib.get_batch(data.x, data.y, order, data.step_in_epoch, batch_size)
    if augment:
        xb = data_lib.augment(jax.random.fold_in(member_streams(member.seed)[2], state.step), xb)
    return xb, yb


def member_loss(model, params: Any, model_state: Any, xb: jax.Array, yb: jax.Array) -> tuple[jax.Array, Any]:
    """(mean cross-entropy of one member on its batch, its new BatchNorm statistics): what is differentiated."""
    logits, model_state = model.apply(params, model_state, xb, train=True)
    return metrics.cross_entropy(logits, yb), model_state


def apply_gradient(make_tx, state: TrainState, member: MemberArgs, grads: Any, loss: jax.Array,
                   model_state: Any) -> TrainState:
    """One member's optimizer update from its gradient; a non-finite loss, parameter or statistic flags the
    member and keeps its previous state (a diverged member stays frozen)."""
    updates, opt_state = make_tx(member.hyper).update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    finite = jnp.isfinite(loss) & tree_all_finite(params) & tree_all_finite(model_state)
    proposed = TrainState(params, model_state, opt_state, state.step + 1, state.diverged, state.diverged_step,
                          add_update_sizes(state.update_sums, params, state.params))
    accept = finite & ~state.diverged
    new = jax.tree.map(lambda n, o: jnp.where(accept, n, o), proposed, state)
    newly = ~finite & ~state.diverged
    return new._replace(diverged=state.diverged | newly,
                        diverged_step=jnp.where(newly, state.step, state.diverged_step))


def train_step(model, make_tx, batch_size: int, augment: bool, state: TrainState, member: MemberArgs,
               order: jax.Array, data: StepData) -> tuple[TrainState, jax.Array]:
    """One optimizer step of one member: `member_batch`, the gradient of `member_loss`, `apply_gradient`."""
    xb, yb = member_batch(batch_size, augment, state, member, order, data)
    loss_fn = functools.partial(member_loss, model)
    (loss, model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, state.model_state, xb, yb)
    return apply_gradient(make_tx, state, member, grads, loss, model_state), loss


def batched_train_step(model, make_tx, batch_size: int, augment: bool, state_S: TrainState, member_S: MemberArgs,
                       order_S: jax.Array, data: StepData) -> tuple[TrainState, jax.Array]:
    """`train_step` of S member-stacked members with the gradient taken outside the vmap.

    Batches and the loss are vmapped; ``value_and_grad`` of L(theta_1..S) = sum_m L_m(theta_m) over the
    stacked parameters gives dL/dtheta_m = dL_m/dtheta_m, each member's own gradient (no term couples
    members); the update is vmapped. Where ``vmap(value_and_grad)`` makes every weight gradient of a
    convolution a feature-grouped convolution over the image batch, this form makes it batch-grouped
    (``batch_group_count`` = S), the form GPU convolution libraries compute as a backward-filter call.
    """
    xb_S, yb_S = jax.vmap(functools.partial(member_batch, batch_size, augment),
                          in_axes=(0, 0, 0, None))(state_S, member_S, order_S, data)
    loss_fn = jax.vmap(functools.partial(member_loss, model))

    def summed(params_S):
        loss_S, model_state_S = loss_fn(params_S, state_S.model_state, xb_S, yb_S)
        return jnp.sum(loss_S), (loss_S, model_state_S)

    (_, (loss_S, model_state_S)), grads_S = jax.value_and_grad(summed, has_aux=True)(state_S.params)
    update = jax.vmap(functools.partial(apply_gradient, make_tx))
    return update(state_S, member_S, grads_S, loss_S, model_state_S), loss_S


class EvalBatch(NamedTuple):
    """One padded evaluation batch, shared by every member."""
    x: jax.Array
    y: jax.Array
    mask: jax.Array


def eval_chunk(model, state: TrainState, batch: EvalBatch):
    """Summed cross-entropy and correct count over the unmasked examples of one eval batch."""
    xb, yb, mask = batch
    logits, _ = model.apply(state.params, state.model_state, xb, train=False)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, yb)
    correct = (jnp.argmax(logits, -1) == yb)
    return jnp.sum(jnp.where(mask, ce, 0.0)), jnp.sum(jnp.where(mask, correct, 0))


def norms(params) -> dict:
    return {"param_norm": metrics.param_norm(params), "layers": metrics.layer_norms(params)}


def member_permutation(n: int, seed: jax.Array, epoch: jax.Array) -> jax.Array:
    """The epoch's data order of a member: depends on its seed only (paired across scales)."""
    return data_lib.epoch_permutation(member_streams(seed)[1], epoch, n)


def shared_draw(data_key: jax.Array, batch_size: int, n: int, seed: jax.Array, epoch: jax.Array) -> jax.Array:
    """The batch order of a one-step "epoch" (``epoch`` = step + 1) that every member shares: ``batch_size``
    indices drawn without replacement from ``fold_in(data_key, step)`` (the IGB study's batches; ``seed``
    is unused: all members, whatever their seed, see the same examples)."""
    del seed
    return jax.random.choice(jax.random.fold_in(data_key, epoch - 1), n, (batch_size,), replace=False).astype(jnp.int32)


SHARED_STREAM = 0xda7a    # fold_in tag of the shared batches' key (the IGB and memory studies, both stages)


def shared_order(data_seed: int, batch_size: int, n: int):
    """``order(seed, epoch)`` of the batches every member shares (`shared_draw`): step s of a run draws from
    ``fold_in(fold_in(key(data_seed), SHARED_STREAM), s)``, whatever the member, the case or the stage."""
    key = jax.random.fold_in(jax.random.key(data_seed), SHARED_STREAM)
    return lambda seed, epoch: shared_draw(key, batch_size, n, seed, epoch)

