"""Member-parallel training: one single-member step, run over members by a strategy.

A *member* is (optimizer setting, sigma_w, seed). Members of one setting share one compiled step;
`sigma_w` and `seed` are traced data, so sweeping them never recompiles. Members with the same
seed are *paired*: same base Gaussian draws (params = sigma_w * base draw, see `init.py`), same
data order and same augmentation keys, whatever their scale or optimizer.

Strategies (how the single-member step runs over the members of one setting):
- `vmap`: one jitted `vmap` over all members (best for MLPs on CPU and everything on accelerators);
- `sequential`: a Python loop of one jitted single-member step (best for convs on CPU, where XLA
  turns a vmapped conv with batched kernels into a grouped conv 5-7x slower than a loop);
- `chunked`: vmap over chunks of `train.chunk` members, chunks in a loop (bounds memory).
`auto` picks the default measured fastest on the platform (`default_strategy`, see benchmark).

PRNG: per member `key(seed)` is split once into named streams (init, data, augment); the epoch's
permutation is `fold_in(data, epoch)` and the step's augmentation `fold_in(augment, step)`. No key
lives in the loop state, so a resumed run is bit-identical to an uninterrupted one.
"""
from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxinit import data as data_lib
from jaxinit import distributed
from jaxinit import metrics
from jaxinit.config import ModelConfig
from jaxinit.models import make_model
from jaxinit.optim import OptSetting, make_optimizer

CONV_MODELS = ("resnet9", "resnet20", "resnet56", "resnet110", "cnn")


class Member(NamedTuple):
    index: int
    optimizer: str
    sigma_w: float
    seed: int


class TrainState(NamedTuple):
    """Everything one member carries between steps (a pytree; stacked along axis 0 over members)."""
    params: Any
    model_state: Any          # BatchNorm running statistics, {} without BatchNorm
    opt_state: Any
    step: jax.Array           # int32: optimizer steps taken (frozen once diverged)
    diverged: jax.Array       # bool
    diverged_step: jax.Array  # int32: the step that went non-finite, -1 if none


def make_members(optimizers: Sequence[str], sigma_ws: Sequence[float], n_seeds: int) -> list[Member]:
    """Member-index order: optimizer setting, then seed, then sigma_w."""
    grid = [(o, s, w) for o in optimizers for s in range(n_seeds) for w in sigma_ws]
    return [Member(i, o, float(w), s) for i, (o, s, w) in enumerate(grid)]


def default_strategy(model_name: str, platform: str | None = None) -> str:
    """Fastest strategy measured by `experiments.benchmark` (README table) per platform.

    CPU, conv nets: `sequential` (a vmapped conv with batched kernels becomes a grouped conv, 2-4x
    slower than the loop here, im2col included). CPU, MLPs: `chunked` (chunks of `train.chunk` = 4);
    full vmap batches the matmuls into a form XLA:CPU runs 1.2x slower than a loop once members are
    large (784-512x4 at K = 8), while chunks of 4 were 0.93-0.98x of the loop for both MLPs measured.
    Accelerators: `vmap`.
    """
    platform = platform or jax.default_backend()
    if platform == "cpu":
        return "sequential" if model_name in CONV_MODELS else "chunked"
    return "vmap"


def chunk_size(strategy: str, n_members: int, chunk: int) -> int:
    return {"vmap": n_members, "sequential": 1, "chunked": min(chunk, n_members)}[strategy]


# --------------------------------------------------------------------------- single member
def member_streams(seed: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(init, data, augment) keys of a seed; split once, never carried in state."""
    init_key, data_key, aug_key = jax.random.split(jax.random.key(seed), 3)
    return init_key, data_key, aug_key


def tree_all_finite(tree: Any) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.bool_(True)


def init_member(model, tx, sigma_w: jax.Array, seed: jax.Array) -> TrainState:
    params, model_state = model.init(member_streams(seed)[0], sigma_w)
    return TrainState(params, model_state, tx.init(params), jnp.int32(0), jnp.bool_(False), jnp.int32(-1))


def train_step(model, tx, batch_size: int, augment: bool, state: TrainState, x: jax.Array, y: jax.Array,
               perm: jax.Array, step_in_epoch: jax.Array, seed: jax.Array) -> tuple[TrainState, jax.Array]:
    """One SGD-family step of one member; a non-finite result flags the member and freezes it."""
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
    proposed = TrainState(params, model_state, opt_state, state.step + 1, state.diverged, state.diverged_step)
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


# --------------------------------------------------------------------------- compiled functions
class Compiled(NamedTuple):
    init: Any
    step: Any
    eval: Any
    norms: Any
    perm: Any
    schedule: Any


def member_permutation(seed: jax.Array, epoch: jax.Array, n: int) -> jax.Array:
    """The epoch's data order of a member: depends on its seed only (paired across scales)."""
    return data_lib.epoch_permutation(member_streams(seed)[1], epoch, n)


@functools.lru_cache(maxsize=64)
def compiled_fns(model_cfg: ModelConfig, input_shape: tuple, n_classes: int, setting: OptSetting,
                 steps_per_epoch: int, epochs: int, batch_size: int, augment: bool, batched: bool) -> Compiled:
    """Jitted functions for one setting, cached on structure only (never on swept values)."""
    model = make_model(model_cfg, input_shape, n_classes)
    tx, schedule = make_optimizer(setting, steps_per_epoch, max(epochs, 1))
    init = functools.partial(init_member, model, tx)
    step = functools.partial(train_step, model, tx, batch_size, augment)
    ev = functools.partial(eval_chunk, model)
    nrm, perm = norms, member_permutation
    if batched:
        init = jax.vmap(init)
        step = jax.vmap(step, in_axes=(0, None, None, 0, None, 0))
        ev = jax.vmap(ev, in_axes=(0, 0, None, None, None))
        nrm = jax.vmap(norms)
        perm = jax.vmap(member_permutation, in_axes=(0, None, None))
    return Compiled(jax.jit(init), jax.jit(step, donate_argnums=0), jax.jit(ev), jax.jit(nrm),
                    jax.jit(perm, static_argnums=2), schedule)


# --------------------------------------------------------------------------- groups of members
class Chunk(NamedTuple):
    members: list[Member]
    fns: Compiled
    batched: bool


def split_chunks(members: Sequence[Member], size: int, make_fns) -> list[Chunk]:
    out = []
    for start in range(0, len(members), size):
        part = list(members[start:start + size])
        batched = size > 1
        out.append(Chunk(part, make_fns(batched), batched))
    return out


def chunk_args(chunk: Chunk) -> tuple[jax.Array, jax.Array]:
    sig = jnp.asarray([m.sigma_w for m in chunk.members], jnp.float32)
    seeds = jnp.asarray([m.seed for m in chunk.members], jnp.uint32)
    return (sig, seeds) if chunk.batched else (sig[0], seeds[0])


def init_chunk(chunk: Chunk) -> TrainState:
    return chunk.fns.init(*chunk_args(chunk))


def chunk_to_stacked(chunk: Chunk, state: TrainState) -> TrainState:
    """Member-stacked view (leading axis = members of the chunk)."""
    return state if chunk.batched else jax.tree.map(lambda x: x[None], state)


def stacked_to_chunk(chunk: Chunk, stacked: TrainState) -> TrainState:
    return stacked if chunk.batched else jax.tree.map(lambda x: x[0], stacked)


def run_epoch(chunk: Chunk, state: TrainState, ds, epoch: int, steps_per_epoch: int) -> TrainState:
    """All steps of one epoch for one chunk: a Python loop of the jitted step (no scan: see module doc)."""
    _, seeds = chunk_args(chunk)
    perm = chunk.fns.perm(seeds, jnp.int32(epoch), int(ds.x_train.shape[0]))
    for i in range(steps_per_epoch):
        state, _ = chunk.fns.step(state, ds.x_train, ds.y_train, perm, jnp.int32(i), seeds)
    return state


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


def evaluate_split(chunk: Chunk, state: TrainState, split: EvalSplit) -> tuple[np.ndarray, np.ndarray]:
    """(mean loss, accuracy) per member of the chunk, as numpy arrays of shape (members,)."""
    loss_sum, correct = 0.0, 0
    for s in range(0, split.x.shape[0], split.batch):
        sl = slice(s, s + split.batch)
        l_, c_ = chunk.fns.eval(state.params, state.model_state, split.x[sl], split.y[sl], split.mask[sl])
        loss_sum, correct = loss_sum + l_, correct + c_
    loss_sum, correct = distributed.to_host((loss_sum, correct))
    loss = np.atleast_1d(np.asarray(loss_sum, np.float64)) / split.n
    acc = np.atleast_1d(np.asarray(correct, np.float64)) / split.n
    return loss, acc


def _finite_or_none(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def eval_rows(chunk: Chunk, state: TrainState, splits: dict[str, EvalSplit], epoch: int) -> list[dict]:
    """One metrics row per member of the chunk (DESIGN.md metrics.jsonl schema + per-layer norms)."""
    results = {name: evaluate_split(chunk, state, sp) for name, sp in splits.items()}
    nrm = distributed.to_host(chunk.fns.norms(state.params))
    flags = chunk_to_stacked(chunk, state._replace(params=None, model_state=None, opt_state=None))
    stacked = distributed.to_host(flags)   # only the step counters and divergence flags go to the host
    rows = []
    for j, m in enumerate(chunk.members):
        steps = int(stacked.step[j])
        row = {"member": m.index, "optimizer": m.optimizer, "sigma_w": m.sigma_w, "seed": m.seed,
               "epoch": epoch, "step": steps,
               "lr": float(chunk.fns.schedule(max(steps - 1, 0)))}
        for name, (loss, acc) in results.items():
            row[f"{name}_loss"] = _finite_or_none(loss[j])
            row[f"{name}_acc"] = float(acc[j])
        layer = {k: float(np.atleast_1d(v)[j]) for k, v in nrm["layers"].items()}
        row["param_norm"] = float(np.atleast_1d(nrm["param_norm"])[j])
        row["param_norm_layers"] = layer
        row["diverged"] = bool(stacked.diverged[j])
        row["diverged_step"] = int(stacked.diverged_step[j]) if row["diverged"] else None
        rows.append(row)
    return rows


def learning_rates(schedule, steps: int) -> np.ndarray:
    """eta_k for k = 0..steps-1 along the schedule actually used (input of the forgetting clocks)."""
    if steps <= 0:
        return np.zeros((0,), np.float64)
    return np.asarray(jax.vmap(schedule)(jnp.arange(steps)), np.float64)


# --------------------------------------------------------------------------- the run loop
class Sweep(NamedTuple):
    """Everything static about a run: data, members and their compiled chunks per setting."""
    ds: Any
    members: list[Member]
    settings: dict[str, OptSetting]
    groups: dict[str, list[Chunk]]
    steps_per_epoch: int
    strategy: str


def build_sweep(cfg) -> Sweep:
    """Load data, resolve settings and strategy, and split each setting's members into chunks."""
    from jaxinit.config import ConfigError
    from jaxinit.optim import resolve_setting

    ds = distributed.replicate(data_lib.load_dataset(cfg.data), member_mesh())
    n_train = int(ds.x_train.shape[0])
    if cfg.train.batch_size > n_train:
        raise ConfigError(f"--train.batch_size={cfg.train.batch_size} is larger than the training split ({n_train})")
    spe = data_lib.steps_per_epoch(n_train, cfg.train.batch_size)
    strategy = cfg.train.strategy if cfg.train.strategy != "auto" else default_strategy(cfg.model.name)
    settings = {label: resolve_setting(label, cfg.opt) for label in cfg.sweep.optimizers}
    members = make_members(cfg.sweep.optimizers, cfg.sweep.sigma_w, cfg.sweep.seeds)
    groups = {}
    for label, setting in settings.items():
        ms = [m for m in members if m.optimizer == label]
        make = functools.partial(compiled_fns, cfg.model, tuple(ds.input_shape), int(ds.n_classes), setting,
                                 spe, cfg.train.epochs, cfg.train.batch_size, cfg.data.augment)
        groups[label] = split_chunks(ms, chunk_size(strategy, len(ms), cfg.train.chunk), make)
    return Sweep(ds, members, settings, groups, spe, strategy)


def member_mesh() -> jax.sharding.Mesh | None:
    """1-D mesh named 'members' over every device (all hosts); None on a single device."""
    if jax.device_count() == 1:
        return None
    # Auto axes: XLA propagates the member sharding through the vmapped step (no sharding-in-types).
    return jax.make_mesh((jax.device_count(),), ("members",), axis_types=(jax.sharding.AxisType.Auto,))


def shard_members(chunk: Chunk, state: TrainState, mesh) -> TrainState:
    """Lay a batched chunk's member axis over the mesh; computation then follows the data.

    Built by `distributed.place` from the (identical) host copy, so the same code places it on one
    host or many. A chunk the device count does not divide (or a single member) stays on
    one device on one host, and is replicated over the mesh across hosts (every host then trains
    it, redundantly: choose member counts the device count divides).
    """
    if mesh is None:
        return state
    shardable = chunk.batched and len(chunk.members) % mesh.size == 0
    if not shardable and not distributed.is_multiprocess():
        return state
    spec = jax.sharding.PartitionSpec("members" if shardable else None)
    return distributed.place(state, jax.sharding.NamedSharding(mesh, spec))


def init_states(sweep: Sweep) -> dict[str, list[TrainState]]:
    mesh = member_mesh()
    return {label: [shard_members(c, init_chunk(c), mesh) for c in chunks] for label, chunks in sweep.groups.items()}


def stacked_states(sweep: Sweep, states: dict[str, list[TrainState]]) -> dict[str, TrainState]:
    """{setting: member-stacked state}: the strategy-independent form that is checkpointed."""
    return {label: jax.tree.map(lambda *xs: jnp.concatenate(xs),
                                *[chunk_to_stacked(c, s) for c, s in zip(sweep.groups[label], states[label])])
            for label in sweep.groups}


def chunked_states(sweep: Sweep, stacked: dict[str, TrainState]) -> dict[str, list[TrainState]]:
    out = {}
    for label, chunks in sweep.groups.items():
        parts, start = [], 0
        for c in chunks:
            part = jax.tree.map(lambda x: x[start:start + len(c.members)], stacked[label])
            parts.append(shard_members(c, stacked_to_chunk(c, part), member_mesh()))
            start += len(c.members)
        out[label] = parts
    return out


def eval_splits(ds, batch: int) -> dict[str, EvalSplit]:
    return {"train": pad_split(ds.x_train, ds.y_train, batch), "val": pad_split(ds.x_val, ds.y_val, batch),
            "test": pad_split(ds.x_test, ds.y_test, batch)}


def evaluate_all(sweep: Sweep, states, splits, epoch: int) -> list[dict]:
    rows = [r for label, chunks in sweep.groups.items()
            for c, s in zip(chunks, states[label]) for r in eval_rows(c, s, splits, epoch)]
    return sorted(rows, key=lambda r: r["member"])


def train_epoch(sweep: Sweep, states, epoch: int) -> dict[str, list[TrainState]]:
    return {label: [run_epoch(c, s, sweep.ds, epoch, sweep.steps_per_epoch)
                    for c, s in zip(chunks, states[label])] for label, chunks in sweep.groups.items()}


def member_learning_rates(sweep: Sweep, rows_final: list[dict]) -> dict[int, np.ndarray]:
    """Per member, eta_k over the steps it actually took (a diverged member stops at divergence)."""
    by_member = {r["member"]: r["step"] for r in rows_final}
    out = {}
    for label, chunks in sweep.groups.items():
        schedule = chunks[0].fns.schedule
        for c in chunks:
            for m in c.members:
                out[m.index] = learning_rates(schedule, by_member[m.index])
    return out


# --------------------------------------------------------------------------- files: metrics, checkpoints
def append_rows(path, rows: list[dict]) -> None:
    """Append JSONL rows and flush to disk, so a killed run keeps every finished evaluation."""
    import json
    import os
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def truncate_rows(path, max_epoch: int) -> None:
    """Keep rows with epoch <= max_epoch (those after the restored checkpoint are redone)."""
    import os
    from jaxinit.forgetting.memory import read_metrics
    rows = [r for r in read_metrics(path) if r["epoch"] <= max_epoch] if path.exists() else []
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("")
    append_rows(tmp, rows)
    os.replace(tmp, path)


def show_progress(progress: bool, stream) -> bool:
    """A progress bar only when asked for and on a terminal (logs and CI stay clean)."""
    return bool(progress) and hasattr(stream, "isatty") and stream.isatty()


def fit(cfg, out, resume: bool, progress: bool = True) -> dict:
    """Train every member of `cfg.sweep`, writing metrics.jsonl and checkpoints under `out`.

    Returns run information: the sweep, the metrics rows, per-member learning rates and timings
    (rows and rates None on every process but the writer, see `distributed`).
    """
    import shutil
    import sys
    import time
    from tqdm import tqdm
    from jaxinit.checkpoint import Checkpointer, abstract_like
    from jaxinit.config import ConfigError

    t0 = time.perf_counter()
    sweep = build_sweep(cfg)
    metrics_path, ckpt_dir = out / "metrics.jsonl", out / "checkpoints"
    writer = distributed.is_writer()   # several hosts: process 0 writes the files, orbax coordinates the rest
    if not resume and writer:  # a fresh run owns its directory's results
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        metrics_path.unlink(missing_ok=True)
    distributed.barrier("jaxinit-fit-start")
    ckpt = Checkpointer(ckpt_dir)
    states = init_states(sweep)
    splits = eval_splits(sweep.ds, cfg.train.eval_batch_size)
    start = ckpt.latest_epoch() if resume else None
    if start is not None:
        restored, meta = ckpt.restore(start, abstract_like(stacked_states(sweep, states)))
        if meta.get("n_members") != len(sweep.members):
            raise ConfigError(f"--resume: checkpoint has {meta.get('n_members')} members, config has {len(sweep.members)}")
        states = chunked_states(sweep, restored)
        if writer:
            truncate_rows(metrics_path, start)
    else:
        rows = evaluate_all(sweep, states, splits, 0)
        if writer:   # also on --resume with no checkpoint yet: the run starts over
            metrics_path.unlink(missing_ok=True)
            append_rows(metrics_path, rows)
        if cfg.train.checkpoint_every:
            ckpt.save(0, stacked_states(sweep, states), {"epoch": 0, "n_members": len(sweep.members)})
        start = 0
    t_setup = time.perf_counter() - t0
    epoch_times = []
    bar = tqdm(range(start + 1, cfg.train.epochs + 1), desc="epochs", disable=not show_progress(progress, sys.stderr))
    for epoch in bar:
        t = time.perf_counter()
        states = train_epoch(sweep, states, epoch)
        jax.block_until_ready(states)
        epoch_times.append(time.perf_counter() - t)
        last = epoch == cfg.train.epochs
        if epoch % cfg.train.eval_every == 0 or last:
            rows = evaluate_all(sweep, states, splits, epoch)
            if writer:
                append_rows(metrics_path, rows)
            bar.set_postfix(val_acc=f"{np.mean([r['val_acc'] for r in rows]):.3f}")
        if cfg.train.checkpoint_every and (epoch % cfg.train.checkpoint_every == 0 or last):
            ckpt.save(epoch, stacked_states(sweep, states), {"epoch": epoch, "n_members": len(sweep.members)})
    ckpt.close()
    distributed.barrier("jaxinit-fit-end")   # every host's checkpoint shards are on disk
    steps_done = sweep.steps_per_epoch * len(epoch_times)
    timing = {"platform": jax.default_backend(), "devices": jax.device_count(),
              "processes": jax.process_count(), "strategy": sweep.strategy,
              "setup_s": t_setup, "total_s": time.perf_counter() - t0, "epochs_run": len(epoch_times),
              "first_epoch_s": epoch_times[0] if epoch_times else None,
              "median_epoch_s": float(np.median(epoch_times)) if epoch_times else None,
              "member_steps_per_s": (len(sweep.members) * steps_done / sum(epoch_times)) if epoch_times else None}
    if not writer:   # results live in process 0's files only
        return {"sweep": sweep, "rows": None, "etas": None, "timing": timing}
    from jaxinit.forgetting.memory import read_metrics
    rows = read_metrics(metrics_path)
    last_epoch = max(r["epoch"] for r in rows)
    final = [r for r in rows if r["epoch"] == last_epoch]
    return {"sweep": sweep, "rows": rows, "etas": member_learning_rates(sweep, final), "timing": timing}
