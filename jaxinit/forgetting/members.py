"""Members and how they run together: strategies, chunks, the member mesh.

A *member* is (optimizer setting, sigma_w, seed). Members of one setting share one compiled step;
`sigma_w` and `seed` are traced data, so sweeping them never recompiles. Members with the same seed
are *paired*: same base Gaussian draws (params = sigma_w * base draw), same data order and same
augmentation keys, whatever their scale or optimizer.

Strategies (how the single-member step of `step.py` runs over the members of one setting):
- `vmap`: one jitted `vmap` over all members (accelerators);
- `sequential`: a Python loop of one jitted single-member step (conv nets on CPU, where XLA turns a
  vmapped conv with batched kernels into a grouped conv 5-7x slower than a loop);
- `chunked`: vmap over chunks of `train.chunk` members, chunks in a loop (MLPs on CPU; bounds memory).
`auto` picks the default measured fastest on the platform (`default_strategy`, see the benchmark).

Several devices: a batched chunk's member axis is laid over a 1-D mesh named 'members' spanning every
device of every process (`jaxinit.distributed`); the same code runs on one device or many.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from jaxinit import distributed
from jaxinit.forgetting.step import Compiled, TrainState


class Member(NamedTuple):
    index: int
    optimizer: str
    sigma_w: float
    seed: int


def make_members(optimizers: Sequence[str], sigma_ws: Sequence[float], n_seeds: int) -> list[Member]:
    """Member-index order: optimizer setting, then seed, then sigma_w."""
    grid = [(o, s, w) for o in optimizers for s in range(n_seeds) for w in sigma_ws]
    return [Member(i, o, float(w), s) for i, (o, s, w) in enumerate(grid)]


def default_strategy(conv: bool, platform: str | None = None) -> str:
    """Fastest strategy measured by `experiments.benchmark` (README table) per platform.

    CPU, conv nets (any kernel with a spatial window): `sequential` (a vmapped conv with batched
    kernels becomes a grouped conv, 1.8-5x slower than the loop here; im2col 1.3-1.8x). CPU, MLPs:
    `chunked` (chunks of `train.chunk`): full vmap batches the matmuls into a form XLA:CPU runs up to
    1.25x slower than a loop for large members, chunks of 4 were 0.91-0.93x (README, "Benchmark").
    Accelerators: `vmap`.
    """
    platform = platform or jax.default_backend()
    if platform == "cpu":
        return "sequential" if conv else "chunked"
    return "vmap"


def chunk_size(strategy: str, n_members: int, chunk: int) -> int:
    return {"vmap": n_members, "sequential": 1, "chunked": min(chunk, n_members)}[strategy]


class Chunk(NamedTuple):
    members: list[Member]
    fns: Compiled
    batched: bool


def split_chunks(members: Sequence[Member], size: int, make_fns: Callable[[bool], Compiled]) -> list[Chunk]:
    out = []
    for start in range(0, len(members), size):
        part = list(members[start:start + size])
        out.append(Chunk(part, make_fns(size > 1), size > 1))
    return out


def chunk_args(chunk: Chunk) -> tuple[jax.Array, jax.Array]:
    sig = jnp.asarray([m.sigma_w for m in chunk.members], jnp.float32)
    seeds = jnp.asarray([m.seed for m in chunk.members], jnp.uint32)
    return (sig, seeds) if chunk.batched else (sig[0], seeds[0])


def chunk_to_stacked(chunk: Chunk, state: TrainState) -> TrainState:
    """Member-stacked view (leading axis = members of the chunk)."""
    return state if chunk.batched else jax.tree.map(lambda x: x[None], state)


def stacked_to_chunk(chunk: Chunk, stacked: TrainState) -> TrainState:
    return stacked if chunk.batched else jax.tree.map(lambda x: x[0], stacked)


def member_mesh() -> jax.sharding.Mesh | None:
    """1-D mesh named 'members' over every device (all hosts); None on a single device."""
    if jax.device_count() == 1:
        return None
    # Auto axes: XLA propagates the member sharding through the vmapped step (no sharding-in-types).
    return jax.make_mesh((jax.device_count(),), ("members",), axis_types=(jax.sharding.AxisType.Auto,))


def shard_members(chunk: Chunk, state: TrainState, mesh) -> TrainState:
    """Lay a batched chunk's member axis over the mesh; computation then follows the data.

    A chunk the device count does not divide (or a single member) stays on one device on one host,
    and is replicated over the mesh across hosts (every host then trains it, redundantly: choose
    member counts the device count divides).
    """
    if mesh is None:
        return state
    shardable = chunk.batched and len(chunk.members) % mesh.size == 0
    if not shardable and not distributed.is_multiprocess():
        return state
    spec = jax.sharding.PartitionSpec("members" if shardable else None)
    return distributed.place(state, jax.sharding.NamedSharding(mesh, spec))


def init_chunk(chunk: Chunk, x_calib: jax.Array) -> TrainState:
    return chunk.fns.init(x_calib, *chunk_args(chunk))


def stack(groups: dict[str, list[Chunk]], states: dict[str, list[TrainState]]) -> dict[str, TrainState]:
    """{setting: member-stacked state}: the strategy-independent form that is checkpointed."""
    return {label: jax.tree.map(lambda *xs: jnp.concatenate(xs),
                                *[chunk_to_stacked(c, s) for c, s in zip(groups[label], states[label])])
            for label in groups}


def unstack(groups: dict[str, list[Chunk]], stacked: dict[str, Any]) -> dict[str, list[TrainState]]:
    out = {}
    mesh = member_mesh()
    for label, chunks in groups.items():
        parts, start = [], 0
        for c in chunks:
            part = jax.tree.map(lambda x: x[start:start + len(c.members)], stacked[label])
            parts.append(shard_members(c, stacked_to_chunk(c, part), mesh))
            start += len(c.members)
        out[label] = parts
    return out
