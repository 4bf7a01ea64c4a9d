"""The IGB study's training on the engine (`jaxinit.train.engine`): its networks as models, its batches, its
per-class evaluation and the arrays its summary reads.

Members differ in (sigma_w2, sigma_b2, seed, learning rate), all traced; a group is one case
(activation, depth, optimizer). Members with the same seed share their base draw (`jaxinit.igb.nets.draw`
through `net_model`), so phase points are paired. Every member of every case sees the same batches: one
training step is one engine "epoch" whose batch is drawn without replacement from ``fold_in(data_key,
step)`` (`jaxinit.train.step.shared_draw`). The optimizers are the registry's (`jaxinit.optim.SETTINGS`:
sgd; momentum = heavy ball, mu 0.9; adam), built inside the member's function from its traced rate. A
member whose update is non-finite is frozen and flagged (the engine's ``diverged``; ``alive`` in the
arrays). Evaluations record, per member, accuracy, loss, f_max and per-class accuracy, loss and predicted
frequency (`jaxinit.igb.stats.per_class`); at init, the squared backpropagated signal per layer and label
class (`init_signals`), whose layer-1 / layer-L ratio is the measured chi_1^(L-1).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxinit import distributed
from jaxinit.config import ConfigError
from jaxinit.igb import nets, stats
from jaxinit.jsonsafe import finite_or_none
from jaxinit.models import Model
from jaxinit.optim import SETTINGS, OptSetting
from jaxinit.train.step import EvalBatch

OPTIMIZERS = ("sgd", "momentum", "adam")
EVAL_SETS = ("test", "train", "val")


def setting(optimizer: str, lr: float) -> OptSetting:
    """sgd, momentum (heavy ball, mu = 0.9) or adam (0.9, 0.999, 1e-8) at ``lr``, constant."""
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optimizer!r}; choose from {', '.join(OPTIMIZERS)}")
    return dataclasses.replace(SETTINGS[optimizer], lr=float(lr))


def net_model(net: nets.Net) -> Model:
    """The network as the engine's (init, apply) pair: ``init(key, (sigma_w2, sigma_b2))`` scales one base
    draw (`nets.draw`, `nets.scale`); no state (no BatchNorm)."""
    def init(key, scale):
        return nets.scaled_draw(net, key, *scale), {}

    def apply(params, state, x, train: bool = False):
        return net.module.apply({"params": params}, x), state
    return Model(init, apply, net.module)


def eval_per_class(model: Model, state, batch: EvalBatch) -> dict[str, jax.Array]:
    """`stats.per_class` of one member on a whole split (``batch.mask`` is all true: no padding)."""
    logits, _ = model.apply(state.params, state.model_state, batch.x, train=False)
    return stats.per_class(logits, batch.y)


def eval_sets(data: dict) -> dict[str, EvalBatch]:
    """The evaluated splits: test, train (``x_train_eval`` if given: a fixed subset), val if given."""
    pairs = {"test": (data["x_test"], data["y_test"]),
             "train": (data.get("x_train_eval", data["x_train"]), data.get("y_train_eval", data["y_train"]))}
    if "x_val" in data:
        pairs["val"] = (data["x_val"], data["y_val"])
    return {k: EvalBatch(x, y, jnp.ones(y.shape, bool)) for k, (x, y) in pairs.items()}


def evaluator(sweep, sets: dict[str, EvalBatch], info: dict[int, dict]):
    """``evaluate(states, epoch) -> rows``: one row per member (``info[member]``: its case, role, point,
    seed, rate) with ``<split>_<metric>`` scalars and per-class lists, JSON-ready (NaN as None), so rows
    read back from metrics.jsonl on a resume are the rows computed here."""
    def evaluate(states, epoch: int) -> list[dict]:
        rows = []
        for label, chunks in sweep.groups.items():
            for c, state in zip(chunks, states[label]):
                out = {split: distributed.to_host(c.fns.eval(state, batch)) for split, batch in sets.items()}
                diverged = np.atleast_1d(distributed.to_host(state.diverged))
                for j, m in enumerate(c.members):
                    row = {"member": m.index, "epoch": epoch, "step": epoch, **info[m.index],
                           "diverged": bool(diverged[j])}
                    for split, metrics in out.items():
                        for k, v in metrics.items():
                            v = np.asarray(v)[j] if c.batched else np.asarray(v)
                            row[f"{split}_{k}"] = [finite_or_none(x) for x in v] if v.ndim else finite_or_none(v)
                    rows.append(row)
        return sorted(rows, key=lambda r: r["member"])
    return evaluate


@functools.partial(jax.jit, static_argnames="net")
def _signals(params, x, y, net: nets.Net) -> jax.Array:
    n_classes = net.template["head"]["bias"].shape[-1]
    label_1h = jax.nn.one_hot(y, n_classes)

    def one(p):
        signals = nets.backprop_signals(net, p, x, y, n_out=n_classes)    # (L + 1, B)
        return signals @ label_1h / jnp.maximum(label_1h.sum(axis=0), 1.0)
    return jax.vmap(one)(params)


def init_signals(net: nets.Net, params_M, x, y) -> np.ndarray:
    """Mean |delta_l|^2 / nodes over the inputs of each label class, per member: (M, L + 1, C); the
    cross-entropy is over all logits, the last layer is the output."""
    signals = _signals(params_M, x, y, net)
    return np.asarray(distributed.to_host(signals))


def case_arrays(rows: list[dict], members: list[int]) -> dict[str, np.ndarray]:
    """``step`` (evals,), ``alive`` (evals, members) and every ``<split>_<metric>`` (evals, members[, classes])
    of the rows of ``members`` (global indices, in the case's order); None (NaN in JSON) becomes NaN."""
    index = {m: j for j, m in enumerate(members)}
    mine = [r for r in rows if r["member"] in index]
    steps = sorted({int(r["epoch"]) for r in mine})
    at = {s: e for e, s in enumerate(steps)}
    metrics = [k for k in mine[0] if k.startswith(tuple(f"{s}_" for s in EVAL_SETS))]
    out: dict[str, Any] = {"step": np.asarray(steps)}
    alive = np.zeros((len(steps), len(members)), bool)
    for k in metrics:
        width = len(mine[0][k]) if isinstance(mine[0][k], list) else None
        out[k] = np.full((len(steps), len(members)) + ((width,) if width else ()), np.nan)
    for r in mine:
        e, j = at[int(r["epoch"])], index[r["member"]]
        alive[e, j] = not r["diverged"]
        for k in metrics:
            v = r[k]
            out[k][e, j] = [np.nan if x is None else x for x in v] if isinstance(v, list) else (np.nan if v is None else v)
    out["alive"] = alive
    return out


DATA_STREAM = 0xda7a    # fold_in tag of the batches' key (shared by every case and both stages)


class Flat:
    """Flattened splits as the engine reads a data set: x_train, y_train, input_shape (a pytree)."""

    def __init__(self, x_train, y_train):
        self.x_train, self.y_train = x_train, y_train
        self.input_shape = (int(x_train.shape[1]),)


jax.tree_util.register_pytree_node(Flat, lambda f: ((f.x_train, f.y_train), None), lambda _, xs: Flat(*xs))


def group(name: str, optimizer: str, net: nets.Net, members: list) -> "Group":
    """One case as an engine group: its members (`jaxinit.train.members.Member` with ``scale`` =
    (sigma_w2, sigma_b2) and their rates), the optimizer's setting and the network."""
    from jaxinit.train.engine import Group
    return Group(name, setting(optimizer, members[0].lr), list(members), ("igb_net", net), net_model(net))


def options(data: dict, *, batch_size: int, data_seed: int, strategy: str = "vmap", chunk: int = 4) -> dict:
    """`jaxinit.train.engine.build`'s options of the study: one training step per engine epoch, the batch of step
    s drawn from ``fold_in(fold_in(key(data_seed), DATA_STREAM), s)`` for every member (`step.shared_draw`), the
    per-class evaluation (`eval_per_class`), no BatchNorm to calibrate (one example), no convolution."""
    from jaxinit.train.step import shared_draw
    key = jax.random.fold_in(jax.random.key(data_seed), DATA_STREAM)
    n = int(data["x_train"].shape[0])
    order = lambda seed, epoch: shared_draw(key, batch_size, n, seed, epoch)
    return dict(batch_size=batch_size, steps_per_epoch=1, strategy=strategy, chunk=chunk, calib=1, order=order,
                order_key=("shared_draw", data_seed, batch_size), eval_fn=eval_per_class, eval_key="per_class",
                conv=False)


def make_nets(cases: dict, n_classes: int, input_shape: tuple) -> dict[str, nets.Net]:
    """One network per (activation, depth) of the cases (`jaxinit.igb.phases.Case`), keyed ``"<act>__d<depth>"``."""
    from jaxinit.models.deep import DeepMLP
    return {f"{c.act}__d{c.depth}": nets.make_net(DeepMLP(n_classes, c.width, c.depth, c.act), input_shape)
            for c in cases.values()}


def member_groups(tables: dict[str, dict], cases: dict, nets_: dict[str, nets.Net]) -> tuple[list, dict[int, dict]]:
    """Engine groups (one per case, `group`) of the member tables (``role``, ``point``, ``sigma_w2``, ``sigma_b2``,
    ``seed``, ``lr`` per member) and each member's row fields (global member index -> fields)."""
    from jaxinit.train.members import Member
    groups, info, index = [], {}, 0
    for name, m in tables.items():
        c = cases[name]
        members = []
        for j in range(len(m["role"])):
            sw2, sb2, seed, lr = float(m["sigma_w2"][j]), float(m["sigma_b2"][j]), int(m["seed"][j]), float(m["lr"][j])
            members.append(Member(index, name, float(np.sqrt(sw2)), seed, lr=lr, scale=(sw2, sb2)))
            info[index] = {"case": name, "act": c.act, "depth": c.depth, "optimizer": c.optimizer, "width": c.width,
                           "role": str(m["role"][j]), "point": int(m["point"][j]), "sigma_w2": sw2, "sigma_b2": sb2,
                           "seed": seed, "lr": lr, "in_case": j}
            index += 1
        groups.append(group(name, c.optimizer, nets_[f"{c.act}__d{c.depth}"], members))
    return groups, info


def members_of(sweep, label: str) -> list[int]:
    """Global indices of a group's members, in the case's order."""
    return [m.index for c in sweep.groups[label] for m in c.members]


def initial_signals(sweep, data: dict, nets_: dict[str, nets.Net], n: int = 256) -> dict[str, np.ndarray]:
    """Per case, `init_signals` of its members at init on the first ``n`` training inputs (one chunk's initial state
    at a time, beside the trained ones)."""
    from jaxinit.train.members import chunk_to_stacked, init_chunk
    x, y = data["x_train"][:n], data["y_train"][:n]
    return {label: np.concatenate([init_signals(nets_["__".join(label.split("__")[:2])],
                                                chunk_to_stacked(c, init_chunk(c, sweep.x_calib)).params, x, y)
                                   for c in chunks]) for label, chunks in sweep.groups.items()}


def study(t, data: dict, tables: dict[str, dict], cases: dict, nets_: dict, plan, summarize=None,
          fingerprint: str | None = None, parts: dict | None = None):
    """The engine's `jaxinit.train.engine.Study` of the member ``tables`` (`member_groups`) on ``data`` under the
    study's training config ``t`` (`jaxinit.igb.config_train.TrainLoopConfig`: batch size, data seed, strategy,
    chunk; `options`), evaluated per member (`evaluator` on `eval_sets`), with the study's ``summarize`` hook and
    fingerprint."""
    from jaxinit.train.engine import Study
    sets, ds = eval_sets(data), Flat(data["x_train"], data["y_train"])
    opts = options(data, batch_size=t.batch_size, data_seed=t.seed, strategy=t.strategy, chunk=t.chunk)
    groups, info = member_groups(tables, cases, nets_)
    return Study(ds, groups, plan, evaluator=lambda sweep: evaluator(sweep, sets, info), options=opts,
                 summarize=summarize, fingerprint=fingerprint, parts=parts)


def build(data: dict, groups: list, plan, *, batch_size: int, data_seed: int, strategy: str = "vmap",
          chunk: int = 4):
    """The engine sweep of ``groups`` (`options`), without training it."""
    from jaxinit.train import engine
    return engine.build(Flat(data["x_train"], data["y_train"]), groups, plan,
                        **options(data, batch_size=batch_size, data_seed=data_seed, strategy=strategy, chunk=chunk))
