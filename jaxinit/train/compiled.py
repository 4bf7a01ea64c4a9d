"""The compiled functions of a sweep, owned by it: where the single-member code becomes batched programs.

Batched members train with `step.batched_train_step` (the single-member step's pieces, the gradient taken
of the summed member losses outside the vmap); init, evaluation and norms are vmaps of their
single-member functions.

A `Compiler` belongs to one sweep (`jaxinit.train.engine.Sweep`) and caches the jitted functions on
*structure* only: the model's structure, the input shape, the optimizer's structure
(`jaxinit.optim.structure`), the epoch length and count, the batch size, augmentation, the batch order,
whether members are batched (and in which form) and the precision. Every swept value (seed, init scale,
learning rate, L2, weight decay) is traced data (`step.MemberArgs`), so settings that differ only in
those share one program: a sweep over four learning rates compiles the step once. ``traces`` counts how often each
function was traced (incremented in its Python body, which runs only when jax traces it); the tests
read it as a compile counter. Nothing is cached at module level: a new sweep compiles anew (jax's own
compilation cache still serves an unchanged program from disk or memory).
"""
from __future__ import annotations

import collections
import functools
from typing import Any, Callable, NamedTuple

import jax

from jaxinit import precision as precision_lib
from jaxinit.optim import Hyper, OptSetting, make_optimizer, structure
from jaxinit.train import step as step_lib


BATCHED_FORMS = ("sum_grad", "vmap_grad")


class Compiled(NamedTuple):
    """One structure's jitted functions (batched ones take member-stacked arguments)."""
    init: Any        # (member: MemberArgs, x_calib) -> TrainState
    step: Any        # (state, member: MemberArgs, order, data: StepData) -> (state, loss); state donated
    eval: Any        # (state, batch: EvalBatch) -> the client's per-member evaluation
    norms: Any       # params -> {"param_norm", "layers"}
    order: Any       # (seed, epoch) -> the epoch's batch order
    schedule: Any    # (lr, count) -> eta_count, called eagerly (the rows' lr and the clocks' step sizes)


class Compiler:
    """Jitted functions per structure, for one sweep; see the module docstring."""

    def __init__(self):
        self._cache: dict[tuple, Compiled] = {}
        self._models: dict[tuple, Any] = {}   # keeps every model of a key alive with the functions
        self.traces: collections.Counter = collections.Counter()

    def _counted(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def traced(*args, **kwargs):
            self.traces[name] += 1
            return fn(*args, **kwargs)
        return traced

    def fns(self, model_key: Any, model, input_shape: tuple, setting: OptSetting, steps_per_epoch: int, epochs: int,
            batch_size: int, augment: bool, batched: bool, precision: str = "float32",
            order: Callable | None = None, order_key: Any = "epochs", eval_fn: Callable | None = None,
            eval_key: Any = "loss_acc", batched_form: str = "sum_grad") -> Compiled:
        """The jitted functions of one setting's structure.

        ``model_key`` identifies the model's structure (registry models: config, input shape, classes;
        a user's module: the module itself). ``order(seed, epoch)``: the epoch's batch order of a member
        (default: its own permutation of the split, `step.member_permutation`), identified by
        ``order_key``. ``eval_fn(model, state, batch)``: one member's evaluation of an `EvalBatch`
        (default `step.eval_chunk`: summed loss and correct count), identified by ``eval_key``.
        ``precision`` (`jaxinit.precision.bind`): init, step and eval are traced under its matmul precision
        and run the model in its compute dtype; parameters, optimizer state and loss stay float32.
        ``batched_form`` (batched members only, `BATCHED_FORMS`): ``"sum_grad"``, the engine's step
        (`step.batched_train_step`: the gradient of the summed member losses), or ``"vmap_grad"``, the vmap
        of the single-member step (the gradient inside the vmap; kept only to be measured against).
        """
        if batched_form not in BATCHED_FORMS:
            raise ValueError(f"batched_form must be one of {'|'.join(BATCHED_FORMS)}, got {batched_form!r}")
        shape = structure(setting)
        key = (model_key, input_shape, shape, steps_per_epoch, epochs, batch_size, augment, batched, precision,
               order_key, eval_key, batched_form if batched else None)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        epochs = max(epochs, 1)
        stepper = step_lib.batched_train_step if batched and batched_form == "sum_grad" else step_lib.train_step
        init, train = self._counted("init", step_lib.init_member), self._counted("step", stepper)
        ev, nrm, perm = self._setting_free((model_key, input_shape, batched, precision, order_key, eval_key), model,
                                           precision, eval_fn or step_lib.eval_chunk, batched, order)
        init, train = precision_lib.bind(precision, model, init, train)

        def make_tx(hyper: Hyper):
            return make_optimizer(shape, steps_per_epoch, epochs, input_shape, hyper=hyper)[0]

        def schedule(lr, count):
            return make_optimizer(shape, steps_per_epoch, epochs, input_shape, hyper=Hyper(lr, 0.0, 0.0))[1](count)

        init = functools.partial(init, make_tx)
        train = functools.partial(train, make_tx, batch_size, augment)
        if batched:
            init = jax.vmap(init, in_axes=(0, None))
        if batched and batched_form == "vmap_grad":
            # Per member: the state, its traced values and its batch order; shared: the data and the step index.
            train = jax.vmap(train, in_axes=(0, 0, 0, None))
        fns = Compiled(jax.jit(init), jax.jit(train, donate_argnums=0), ev, nrm, perm, schedule)
        self._cache[key] = fns
        self._models[key] = model
        return fns

    def _setting_free(self, key: tuple, model, precision: str, eval_fn: Callable, batched: bool, order) -> tuple:
        """(eval, norms, order), shared by every setting of one model: they do not read the optimizer, so
        five settings compile them once, not five times (~5 s of the cpu preset's set-up)."""
        key = ("setting-free",) + key
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        perm, counted = _order_fn(order, batched), self._counted("eval", eval_fn)
        ev, = precision_lib.bind(precision, model, counted)
        nrm = step_lib.norms
        if batched:
            ev = jax.vmap(ev, in_axes=(0, None))
            nrm = jax.vmap(nrm)
        fns = (jax.jit(ev), jax.jit(nrm), perm)
        self._cache[key] = fns
        return fns


def _order_fn(order: Callable | None, batched: bool) -> Callable:
    """(seeds, epoch, n) -> the batch orders of a chunk's members."""
    if order is None:
        fn = step_lib.member_permutation           # (n, seed, epoch)
        if batched:
            fn = jax.vmap(fn, in_axes=(None, 0, None))
        jitted = jax.jit(fn, static_argnums=0)
        return lambda seeds, epoch, n: jitted(n, seeds, epoch)
    fn = jax.vmap(order, in_axes=(0, None)) if batched else order
    jitted = jax.jit(fn)
    return lambda seeds, epoch, n: jitted(seeds, epoch)
