"""Members and how they run together: strategies, chunks, the member mesh.

A *member* is (group, init scale, seed, learning rate): the group (`Group`) is an optimizer setting (the
forgetting study, `make_groups`) or a (network, optimizer) case (the IGB study). Members whose settings
differ only in traced values share one compiled step (`compiled.Compiler`): sigma_w, seed, lr, L2 and
weight decay are data, so sweeping them never recompiles. Members with the same seed are *paired*: same base
Gaussian draws (params = sigma_w * base draw), same data order and same augmentation keys, whatever
their scale or optimizer.

Strategies (how the single-member step of `step.py` runs over the members of one group):
- `vmap`: one jitted batched step over all members (accelerators; `step.batched_train_step`);
- `sequential`: a Python loop of one jitted single-member step (conv nets on CPU, where XLA turns a
  vmapped conv with batched kernels into a grouped conv, slower there than a loop);
- `chunked`: the batched step over chunks of `train.chunk` members, chunks in a loop (MLPs on CPU; bounds
  memory).
`auto` picks the default measured fastest on the platform (`default_strategy`, see the benchmark);
`split_groups` splits every group of a sweep into chunks of its strategy.

Several devices: a batched chunk's member axis is laid over a 1-D mesh named 'members' spanning every
device of every process (`jaxinit.distributed`); the same code runs on one device or many.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp

from jaxinit import distributed
from jaxinit.optim import Hyper, OptSetting
from jaxinit.train.compiled import Compiled
from jaxinit.train.step import MemberArgs, TrainState


class Member(NamedTuple):
    """One trained network. ``optimizer`` is its group's label (an optimizer setting, or an IGB case);
    ``lr`` its learning rate where the sweep sets one per member (None: the setting's); ``scale`` what the
    model's init takes where that is not ``sigma_w`` (the IGB networks' (sigma_w2, sigma_b2))."""
    index: int
    optimizer: str
    sigma_w: float
    seed: int
    lr: float | None = None
    scale: tuple | None = None


def lr_label(setting: str, lr: float) -> str:
    """The group label of a setting's members at a swept learning rate: ``sgd@0.1``."""
    return f"{setting}@{lr:g}"


def make_members(optimizers: Sequence[str], sigma_ws: Sequence[float], n_seeds: int,
                 lrs: Sequence[float] = ()) -> list[Member]:
    """Member-index order: optimizer setting, then learning rate (where swept: group ``lr_label``), then
    seed, then sigma_w."""
    groups = [(lr_label(o, lr), lr) for o in optimizers for lr in lrs] if lrs else [(o, None) for o in optimizers]
    grid = [(g, lr, s, w) for g, lr in groups for s in range(n_seeds) for w in sigma_ws]
    return [Member(i, g, float(w), s, None if lr is None else float(lr)) for i, (g, lr, s, w) in enumerate(grid)]


class Group(NamedTuple):
    """Members that share a model and an optimizer structure (``setting``: its values are the defaults of
    the members' traced ones); ``model_key`` identifies the model's structure for the compile cache."""
    label: str
    setting: OptSetting
    members: list[Member]
    model_key: Any
    model: Any


def make_groups(settings: Sequence[OptSetting], sigma_ws: Sequence[float], n_seeds: int, lrs: Sequence[float],
                model_key: Any, model: Any) -> list[Group]:
    """The forgetting study's groups, all on one model: one per setting and swept learning rate (`lr_label`; a
    swept rate is the members' traced value, and the group's setting carries it for the clocks and rows), the
    members in `make_members` order."""
    members = make_members([s.label for s in settings], sigma_ws, n_seeds, lrs)
    groups = []
    for setting in settings:
        for lr in (lrs or (None,)):
            s = setting if lr is None else dataclasses.replace(setting, label=lr_label(setting.label, lr), lr=float(lr))
            groups.append(Group(s.label, s, [m for m in members if m.optimizer == s.label], model_key, model))
    return groups


def has_conv(model) -> bool:
    """Any kernel with a spatial window (ndim > 2 once stacked layer axes are set aside)."""
    from jaxinit.init import is_kernel, stacked_axes
    params, _ = jax.eval_shape(model.init, jax.random.key(0), 1.0)
    return any(is_kernel(p) and x.ndim - stacked_axes(p) > 2
               for p, x in jax.tree_util.tree_flatten_with_path(params)[0])


def default_strategy(conv: bool, platform: str | None = None) -> str:
    """Fastest strategy measured by `experiments.benchmark` per platform (docs/accelerators.md, "Member
    strategies on a CPU", holds the measurements behind each choice).

    CPU, conv nets (any kernel with a spatial window): `sequential` (XLA:CPU runs a member-batched
    convolution, grouped by the members, slower than a loop of dense ones). CPU, MLPs: `chunked` (chunks
    of `train.chunk`). Accelerators: `vmap`, whose step takes the gradient of the summed member losses
    (`step.batched_train_step`), never the vmap of the single-member gradient; for conv nets this choice
    awaits its measurement on a GPU (`experiments.accel_check`).
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
    args: MemberArgs      # the members' traced values, stacked when batched (`member_args`)


def member_args(members: Sequence[Member], setting: OptSetting, batched: bool) -> MemberArgs:
    """The traced values of ``members`` (float32; seeds uint32), stacked along axis 0 when ``batched``."""
    f32 = lambda vals: jnp.asarray(vals, jnp.float32)
    scales = [m.scale if m.scale is not None else m.sigma_w for m in members]
    scale = jax.tree.map(lambda *xs: f32(list(xs)), *scales)
    lr = f32([setting.lr if m.lr is None else m.lr for m in members])
    args = MemberArgs(jnp.asarray([m.seed for m in members], jnp.uint32), scale,
                      Hyper(lr, f32([setting.l2] * len(members)), f32([setting.weight_decay] * len(members))))
    return args if batched else jax.tree.map(lambda x: x[0], args)


def split_chunks(members: Sequence[Member], size: int, setting: OptSetting,
                 make_fns: Callable[[bool], Compiled]) -> list[Chunk]:
    out = []
    for start in range(0, len(members), size):
        part = list(members[start:start + size])
        out.append(Chunk(part, make_fns(size > 1), size > 1, member_args(part, setting, size > 1)))
    return out


def split_groups(groups: Sequence[Group], strategy: str, chunk: int, make_fns: Callable[[Group, bool], Compiled],
                 conv: bool | None = None) -> tuple[str, dict[str, list[Chunk]]]:
    """(strategy, {group label: its chunks}): ``strategy`` "auto" resolved (`default_strategy`; ``conv``, where not
    given, read from the first group's model), every group's members split into chunks of the strategy's size,
    each chunk with ``make_fns(group, batched)``."""
    if strategy == "auto":
        strategy = default_strategy(has_conv(groups[0].model) if conv is None else conv)
    chunks = {}
    for g in groups:
        chunks[g.label] = split_chunks(g.members, chunk_size(strategy, len(g.members), chunk), g.setting,
                                       functools.partial(make_fns, g))
    return strategy, chunks


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
    return chunk.fns.init(chunk.args, x_calib)


def init_states(groups: dict[str, list[Chunk]], x_calib: jax.Array) -> dict[str, list[TrainState]]:
    """Every chunk's initial state (`init_chunk`), its member axis laid over the mesh (`shard_members`)."""
    mesh = member_mesh()
    return {label: [shard_members(c, init_chunk(c, x_calib), mesh) for c in chunks] for label, chunks in groups.items()}


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
