"""Evaluation rows: losses and accuracies on train / val / test and parameter norms, per member.

One row per member per evaluated epoch, the metrics.jsonl schema of docs/design.md plus `diverged_step`.
Splits are padded once to a whole number of eval batches with a mask, so every batch has one shape
(one compiled evaluation) and every example counts once.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxinit import distributed, metrics
from jaxinit.jsonsafe import finite_or_none
from jaxinit.train.members import Chunk, chunk_to_stacked
from jaxinit.train.step import EvalBatch, TrainState


class EvalSplit(NamedTuple):
    """A split padded to a whole number of eval batches, with a mask (one compiled shape)."""
    x: jax.Array
    y: jax.Array
    mask: jax.Array
    n: int
    batch: int


def pad_split(x: jax.Array, y: jax.Array, batch: int) -> EvalSplit:
    n = int(x.shape[0])
    batch = max(1, min(batch, n))
    total = math.ceil(n / batch) * batch
    pad = total - n
    xp = jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)]) if pad else x
    yp = jnp.concatenate([y, jnp.zeros((pad,), y.dtype)]) if pad else y
    return EvalSplit(xp, yp, jnp.arange(total) < n, n, batch)


# The seed of the train-subset draw: fixed and not a member's, so every member, seed and epoch is scored on
# the same examples (a per-epoch or per-member subset would add sampling noise to the differences the
# study measures).
TRAIN_SUBSET_SEED = 20260529


def train_subset_indices(n_train: int, n: int) -> np.ndarray:
    """The ``n`` training examples that train-set metrics use (``n`` = 0: all), sorted: a numpy PCG64
    permutation of a fixed seed, so the subset is the same on every platform and in every epoch."""
    if n <= 0 or n >= n_train:
        return np.arange(n_train)
    return np.sort(np.random.default_rng(TRAIN_SUBSET_SEED).permutation(n_train)[:n])


def eval_splits(ds, batch: int, train_subset: int = 0) -> dict[str, EvalSplit]:
    """The padded splits; train-set metrics on `train_subset_indices` (``train_subset`` = 0: the whole split,
    the same arrays as before the option existed). Validation and test are always whole: they select
    the epoch and report the result."""
    n_train = int(ds.x_train.shape[0])
    x, y = ds.x_train, ds.y_train
    if 0 < train_subset < n_train:
        idx = jnp.asarray(train_subset_indices(n_train, train_subset))
        x, y = jnp.take(x, idx, axis=0), jnp.take(y, idx, axis=0)
    return {"train": pad_split(x, y, batch), "val": pad_split(ds.x_val, ds.y_val, batch),
            "test": pad_split(ds.x_test, ds.y_test, batch)}


def evaluate_split(chunk: Chunk, state: TrainState, split: EvalSplit) -> tuple[np.ndarray, np.ndarray]:
    """(mean loss, accuracy) per member of the chunk, as numpy arrays of shape (members,)."""
    loss_sum, correct = 0.0, 0
    for s in range(0, split.x.shape[0], split.batch):
        sl = slice(s, s + split.batch)
        l_, c_ = chunk.fns.eval(state, EvalBatch(split.x[sl], split.y[sl], split.mask[sl]))
        loss_sum, correct = loss_sum + l_, correct + c_
    loss_sum, correct = distributed.to_host((loss_sum, correct))
    loss = np.atleast_1d(np.asarray(loss_sum, np.float64)) / split.n
    acc = np.atleast_1d(np.asarray(correct, np.float64)) / split.n
    return loss, acc


def eval_rows(chunk: Chunk, state: TrainState, splits: dict[str, EvalSplit], epoch: int) -> list[dict]:
    """One metrics row per member of the chunk (docs/design.md metrics.jsonl schema + per-layer norms)."""
    results = {name: evaluate_split(chunk, state, sp) for name, sp in splits.items()}
    nrm = distributed.to_host(chunk.fns.norms(state.params))
    flags = chunk_to_stacked(chunk, state._replace(params=None, model_state=None, opt_state=None))
    stacked = distributed.to_host(flags)   # only the step counters and divergence flags go to the host
    update_sums = {field: metrics.by_path(sums)
                   for field, sums in zip(("update_rms_sum", "update_ms_sum"), stacked.update_sums or ())}
    rows = []
    for j, m in enumerate(chunk.members):
        steps = int(stacked.step[j])
        row = {"member": m.index, "optimizer": m.optimizer, "sigma_w": m.sigma_w, "seed": m.seed,
               "epoch": epoch, "step": steps, "lr": float(chunk.fns.schedule(_lr(chunk, j), max(steps - 1, 0)))}
        for name, (loss, acc) in results.items():
            row[f"{name}_loss"] = finite_or_none(loss[j])
            row[f"{name}_acc"] = float(acc[j])
        row["param_norm"] = float(np.atleast_1d(nrm["param_norm"])[j])
        row["param_norm_layers"] = {k: float(np.atleast_1d(v)[j]) for k, v in nrm["layers"].items()}
        for field, named in update_sums.items():
            row[field] = {k: float(np.atleast_1d(v)[j]) for k, v in named.items()}
        row["diverged"] = bool(stacked.diverged[j])
        row["diverged_step"] = int(stacked.diverged_step[j]) if row["diverged"] else None
        rows.append(row)
    return rows


def evaluate_all(groups: dict[str, list[Chunk]], states, splits, epoch: int) -> list[dict]:
    rows = [r for label, chunks in groups.items()
            for c, s in zip(chunks, states[label]) for r in eval_rows(c, s, splits, epoch)]
    return sorted(rows, key=lambda r: r["member"])


def evaluator(sweep, batch: int, train_subset: int = 0):
    """``evaluate(states, epoch) -> rows`` of a sweep (`jaxinit.train.engine.Study`'s evaluation): loss and accuracy
    per split (`eval_splits`), norms and update sums per member (`evaluate_all`)."""
    splits = eval_splits(sweep.ds, batch, train_subset)
    return lambda states, epoch: evaluate_all(sweep.groups, states, splits, epoch)


def _lr(chunk: Chunk, j: int) -> jax.Array:
    """The traced learning rate of the chunk's ``j``-th member (float32)."""
    lr = chunk.args.hyper.lr
    return lr[j] if chunk.batched else lr


def learning_rates(schedule, steps: int) -> np.ndarray:
    """eta_k for k = 0..steps-1 along the schedule actually used (input of the forgetting clocks)."""
    if steps <= 0:
        return np.zeros((0,), np.float64)
    return np.asarray(jax.vmap(schedule)(jnp.arange(steps)), np.float64)


def member_learning_rates(groups: dict[str, list[Chunk]], rows_final: list[dict]) -> dict[int, np.ndarray]:
    """Per member, eta_k over the steps it actually took (a diverged member stops at divergence)."""
    by_member = {r["member"]: r["step"] for r in rows_final}
    out = {}
    for chunks in groups.values():
        for c in chunks:
            for j, m in enumerate(c.members):
                lr = _lr(c, j)
                out[m.index] = learning_rates(lambda count: c.fns.schedule(lr, count), by_member[m.index])
    return out
