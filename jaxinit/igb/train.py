"""Member-parallel training across phases: one jitted, vmapped step over members that differ in
(sigma_w2, sigma_b2, seed, learning rate).

Members with the same seed share their base draw (`jaxinit.igb.nets.draw`), so phase points are paired;
every member sees the same batches (indices from ``fold_in(data_key, step)`` inside the step). The
optimizer (sgd, momentum = heavy ball mu 0.9, adam) is built inside the vmap from the member's traced
learning rate, so a learning-rate sweep is one program. A member whose update is non-finite is frozen
and flagged (`alive`). Evaluations record, per member, accuracy, loss, f_max and per-class accuracy,
loss and predicted frequency (`jaxinit.igb.stats.per_class`); at init the squared backpropagated signal
per layer and label class (`init_signals`), whose layer-1 / layer-L ratio is the measured chi_1^(L-1).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxinit import interrupt
from jaxinit.config import ConfigError
from jaxinit.igb import nets, stats

MOMENTUM = 0.9
EVAL_SETS = ("test", "train", "val")


class Members(NamedTuple):
    """One row per member; all traced (no recompilation when they change)."""
    sigma_w2: jax.Array
    sigma_b2: jax.Array
    seed: jax.Array
    lr: jax.Array


def make_optimizer(name: str, lr) -> optax.GradientTransformation:
    """sgd, momentum (heavy ball, mu = 0.9) or adam at learning rate ``lr`` (may be traced)."""
    if name == "sgd":
        return optax.sgd(lr)
    if name == "momentum":
        return optax.sgd(lr, momentum=MOMENTUM)
    if name == "adam":
        return optax.adam(lr)
    raise ConfigError(f"unknown optimizer {name!r}; choose from sgd, momentum, adam")


@partial(jax.jit, static_argnames=("net", "optimizer"))
def init_members(net: nets.Net, optimizer: str, key: jax.Array, members: Members):
    """Params and optimizer state with a leading member axis; equal seeds share the base draw."""
    def one(sw2, sb2, seed, lr):
        params = nets.scale(nets.draw(net, jax.random.fold_in(key, seed)), sw2, sb2)
        return params, make_optimizer(optimizer, lr).init(params)
    return jax.vmap(one)(*members)


def _loss(params, net: nets.Net, x, y):
    logits = net.module.apply({"params": params}, x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


@partial(jax.jit, static_argnames=("net", "optimizer", "batch_size"), donate_argnums=(0, 1))
def train_step(params, opt_state, alive, lr_M, step, data_key, x_train, y_train, *, net: nets.Net,
               optimizer: str, batch_size: int):
    """One step for every member on the same batch; a member whose update is non-finite freezes."""
    idx = jax.random.choice(jax.random.fold_in(data_key, step), x_train.shape[0], (batch_size,), replace=False)
    x, y = x_train[idx], y_train[idx]

    def one(p, s, ok, lr):
        loss, g = jax.value_and_grad(_loss)(p, net, x, y)
        updates, s_new = make_optimizer(optimizer, lr).update(g, s, p)
        p_new = optax.apply_updates(p, updates)
        finite = ok & jnp.isfinite(loss) & jnp.isfinite(optax.global_norm(p_new))
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)
        return keep(p_new, p), keep(s_new, s), finite
    return jax.vmap(one)(params, opt_state, alive, lr_M)


@partial(jax.jit, static_argnames="net")
def evaluate(params, x, y, net: nets.Net) -> dict[str, jax.Array]:
    """`stats.per_class` per member: (M,) and (M, C) arrays."""
    return jax.vmap(lambda p: stats.per_class(net.module.apply({"params": p}, x), y))(params)


@partial(jax.jit, static_argnames="net")
def init_signals(params, x, y, net: nets.Net) -> jax.Array:
    """Mean |delta_l|^2 / nodes over the inputs of each label class, per member: (M, L + 1, C); the
    cross-entropy is over all logits, the last layer is the output."""
    n_classes = net.template["head"]["bias"].shape[-1]
    label_1h = jax.nn.one_hot(y, n_classes)

    def one(p):
        signals = nets.backprop_signals(net, p, x, y, n_out=n_classes)    # (L + 1, B)
        return signals @ label_1h / jnp.maximum(label_1h.sum(axis=0), 1.0)
    return jax.vmap(one)(params)


def eval_steps(n_steps: int, every: int, dense_until: int) -> list[int]:
    """Steps at which to evaluate: every step up to `dense_until` (bias is absorbed early), then every `every`."""
    return sorted(set(range(min(dense_until, n_steps) + 1)) | set(range(0, n_steps + 1, every)) | {n_steps})


def eval_sets(data: dict) -> dict[str, tuple[jax.Array, jax.Array]]:
    """(x, y) per evaluated split: test, train (``x_train_eval`` if given: a fixed subset), val if given."""
    sets = {"test": (data["x_test"], data["y_test"]),
            "train": (data.get("x_train_eval", data["x_train"]), data.get("y_train_eval", data["y_train"]))}
    if "x_val" in data:
        sets["val"] = (data["x_val"], data["y_val"])
    return sets


def _record(hist: dict, params, alive, sets: dict, net: nets.Net) -> None:
    for split, (x, y) in sets.items():
        for k, v in evaluate(params, x, y, net).items():
            hist.setdefault(f"{split}_{k}", []).append(v)
    hist.setdefault("alive", []).append(alive)


def train_members(net: nets.Net, optimizer: str, members: Members, data: dict, n_steps: int, batch_size: int,
                  steps_to_eval: list[int], key: jax.Array, n_signal: int = 256, progress=None) -> dict[str, np.ndarray]:
    """Train every member on the same batches; arrays (evals, members[, classes]) of the measurements,
    named ``<split>_<metric>`` (`eval_sets`, `stats.per_class`), plus ``alive``, ``step`` and
    ``init_signal`` (M, L + 1, C): `init_signals` on the first ``n_signal`` training inputs."""
    init_key, data_key = jax.random.split(key)
    params, opt_state = init_members(net, optimizer, init_key, members)
    alive = jnp.ones(members.seed.shape, bool)
    signal = init_signals(params, data["x_train"][:n_signal], data["y_train"][:n_signal], net)
    sets, hist, wanted = eval_sets(data), {}, set(steps_to_eval)
    for step in range(n_steps + 1):
        if step in wanted:
            _record(hist, params, alive, sets, net)
        if step == n_steps:
            break
        interrupt.check()   # SIGINT / SIGTERM stop at a step boundary (finished runs are kept for --resume)
        params, opt_state, alive = train_step(params, opt_state, alive, members.lr, step, data_key, data["x_train"],
                                              data["y_train"], net=net, optimizer=optimizer, batch_size=batch_size)
        if progress is not None:
            progress.update(1)
    out = {k: np.asarray(jax.device_get(jnp.stack(v))) for k, v in hist.items()}
    return {"step": np.array(sorted(s for s in wanted if s <= n_steps)), "init_signal": np.asarray(signal), **out}
