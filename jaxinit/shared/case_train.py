"""A case's members on the engine (`jaxinit.train.engine`), as the IGB and joined studies train them: their splits,
networks as models, batches, per-class evaluation and the arrays a summary reads.

Members differ in (sigma_w2, sigma_b2, seed, learning rate), all traced; a group is one case
(activation, depth, optimizer). Members with the same seed share their base draw (`jaxinit.shared.nets.draw`
through `jaxinit.shared.nets.Net.model`), so phase points are paired. Every member of every case sees the same
batches: one training step is one engine "epoch" whose batch is drawn without replacement from
``fold_in(data_key, step)`` (the engine's ``shared_batches``, `jaxinit.train.step.shared_order`). The optimizers are the registry's (`jaxinit.optim.SETTINGS`:
sgd; momentum = heavy ball, mu 0.9; adam; sgd_l2), built inside the member's function from its traced rate. A
member whose update is non-finite is frozen and flagged (the engine's ``diverged``; ``alive`` in the
arrays). Evaluations record, per member, accuracy, loss, f_max and per-class accuracy, loss and predicted
frequency (`jaxinit.shared.igb_stats.per_class`); the evaluation of epoch 0 (the initial states) adds the squared
backpropagated signal per layer and label class (`init_signals`), whose layer-1 / layer-L ratio is the
measured chi_1^(L-1).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxinit import distributed
from jaxinit.errors import ConfigError
from jaxinit.data import load_dataset
from jaxinit.jsonsafe import finite_or_none
from jaxinit.models import Model
from jaxinit.optim import SETTINGS, OptSetting
from jaxinit.shared import igb_stats as stats, nets, selection
from jaxinit.train import engine
from jaxinit.train.engine import Plan, Study
from jaxinit.train.members import Group, Member
from jaxinit.train.step import EvalBatch

EVAL_SETS = ("test", "train", "val", "gauss")   # gauss: unlabelled off-distribution inputs, where a study adds them


def setting(optimizer: str, lr: float, l2: float | None = None) -> OptSetting:
    """The registry's setting ``optimizer`` (`jaxinit.optim.SETTINGS`: sgd; momentum = heavy ball, mu = 0.9; adam
    (0.9, 0.999, 1e-8); sgd_l2, ...) at the constant rate ``lr``, with coupled L2 ``l2`` where given."""
    if optimizer not in SETTINGS:
        raise ConfigError(f"unknown optimizer {optimizer!r}; choose from {', '.join(SETTINGS)}")
    base = SETTINGS[optimizer]
    return dataclasses.replace(base, lr=float(lr), l2=base.l2 if l2 is None else float(l2))


def load_splits(data_cfg, eval_train_n: int) -> tuple[dict, int, tuple]:
    """(flattened splits with a fixed training-evaluation subset of ``eval_train_n`` inputs (0: all), n_classes,
    input shape) of the data set ``data_cfg`` (`jaxinit.data.load_dataset`). A validation split is required: the
    learning rates (and the IGB study's linear baseline) are chosen on it."""
    ds = load_dataset(data_cfg)
    if not ds.x_val.shape[0]:
        raise ConfigError(f"this study needs a validation split (rates are chosen on it); --data.name="
                          f"{data_cfg.name} gave none: raise --data.n_val or the data size")
    flat = lambda x: x.reshape(x.shape[0], -1)
    data = {"x_train": flat(ds.x_train), "y_train": ds.y_train, "x_val": flat(ds.x_val), "y_val": ds.y_val,
            "x_test": flat(ds.x_test), "y_test": ds.y_test}
    n_eval = eval_train_n or ds.x_train.shape[0]
    data.update(x_train_eval=data["x_train"][:n_eval], y_train_eval=data["y_train"][:n_eval])
    return data, ds.n_classes, (data["x_train"].shape[1],)


def reported_members(points: dict[str, np.ndarray], point_lr) -> dict[str, np.ndarray]:
    """The reported members of one case: each point's ``seeds`` seeds (0, 1, ...) at the point's chosen rate,
    with the point's fields (theory included) repeated per member."""
    p = np.repeat(np.arange(len(points["role"])), points["seeds"])
    table = {k: v[p] for k, v in points.items() if k != "seeds"}
    return {**table, "point": p, "seed": np.concatenate([np.arange(n) for n in points["seeds"]]).astype(np.int32),
            "lr": np.asarray(point_lr, float)[p]}


def eval_per_class(model: Model, state, batch: EvalBatch) -> dict[str, jax.Array]:
    """`stats.per_class` of one member on a whole split (``batch.mask`` is all true: no padding)."""
    logits, _ = model.apply(state.params, state.model_state, batch.x, train=False)
    return stats.per_class(logits, batch.y)


def eval_sets(data: dict, splits: tuple[str, ...] = EVAL_SETS) -> dict[str, EvalBatch]:
    """The evaluated splits, those of ``splits`` that ``data`` holds as ``x_<split>``, ``y_<split>`` (train: the
    fixed subset ``x_train_eval`` where given), in the order of ``splits``."""
    out = {}
    for split in splits:
        if split == "train":
            x, y = data.get("x_train_eval", data["x_train"]), data.get("y_train_eval", data["y_train"])
        elif f"x_{split}" in data:
            x, y = data[f"x_{split}"], data[f"y_{split}"]
        else:
            continue
        out[split] = EvalBatch(x, y, jnp.ones(y.shape, bool))
    return out


class SignalProbe(NamedTuple):
    """What the evaluation at epoch 0 measures `init_signals` with: each group's network and the inputs."""
    nets: dict          # group label -> `nets.Net`
    x: Any
    y: Any


def evaluator(sweep, sets: dict[str, EvalBatch], info: dict[int, dict], probe: SignalProbe | None = None):
    """``evaluate(states, epoch) -> rows``: one row per member (``info[member]``: its case, role, point,
    seed, rate) with ``<split>_<metric>`` scalars and per-class lists, JSON-ready (NaN as None), so rows
    read back from metrics.jsonl on a resume are the rows computed here. Given a ``probe``, the rows of
    epoch 0 (the initial states: also on a resume, which evaluates epoch 0 again) hold ``init_signal``,
    the member's `init_signals` (layers + 1 lists of per-class values)."""
    def evaluate(states, epoch: int) -> list[dict]:
        rows = []
        for label, chunks in sweep.groups.items():
            for c, state in zip(chunks, states[label]):
                out = {split: distributed.to_host(c.fns.eval(state, batch)) for split, batch in sets.items()}
                diverged = np.atleast_1d(distributed.to_host(state.diverged))
                signals = None
                if probe is not None and epoch == 0:
                    params = state.params if c.batched else jax.tree.map(lambda a: a[None], state.params)
                    signals = init_signals(probe.nets[label], params, probe.x, probe.y)
                for j, m in enumerate(c.members):
                    row = {"member": m.index, "epoch": epoch, "step": epoch, **info[m.index],
                           "diverged": bool(diverged[j])}
                    for split, metrics in out.items():
                        for k, v in metrics.items():
                            v = np.asarray(v)[j] if c.batched else np.asarray(v)
                            row[f"{split}_{k}"] = [finite_or_none(x) for x in v] if v.ndim else finite_or_none(v)
                    if signals is not None:
                        row["init_signal"] = [[finite_or_none(x) for x in layer] for layer in signals[j]]
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
    """``step`` (evals,), ``alive`` (evals, members), every ``<split>_<metric>`` (evals, members[, classes]) and,
    where the rows of epoch 0 hold it, ``init_signal`` (members, layers + 1, classes) of the rows of ``members``
    (global indices, in the case's order); None (NaN in JSON) becomes NaN."""
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
    first = [r for r in mine if int(r["epoch"]) == steps[0] and "init_signal" in r]
    if first:      # (members, layers + 1, classes), float32 as measured (JSON holds each float32 exactly)
        signal = {index[r["member"]]: r["init_signal"] for r in first}
        out["init_signal"] = np.array([[[np.nan if x is None else x for x in layer] for layer in signal[j]]
                                       for j in range(len(members))], np.float32)
    return out


class Flat:
    """Flattened splits as the engine reads a data set: x_train, y_train, input_shape (a pytree)."""

    def __init__(self, x_train, y_train):
        self.x_train, self.y_train = x_train, y_train
        self.input_shape = (int(x_train.shape[1]),)


jax.tree_util.register_pytree_node(Flat, lambda f: ((f.x_train, f.y_train), None), lambda _, xs: Flat(*xs))


def group(name: str, optimizer: str, net: nets.Net, members: list):
    """One case as an engine group: its members (`jaxinit.train.members.Member` with ``scale`` =
    (sigma_w2, sigma_b2) and their rates), the optimizer's setting and the network (`nets.Net.model`)."""
    return Group(name, setting(optimizer, members[0].lr), list(members), ("igb_net", net), net.model)


def options(*, batch_size: int, data_seed: int, strategy: str = "vmap", chunk: int = 4, eval_fn=None,
            eval_key: str = "per_class") -> dict:
    """`jaxinit.train.engine.build`'s options of the study: one training step per engine epoch on the batches
    every member shares (``shared_batches``: `jaxinit.train.step.shared_order` of ``data_seed``), the per-class
    evaluation (``eval_fn``, default `eval_per_class`, compiled under ``eval_key``), no BatchNorm to calibrate (one
    example), no convolution."""
    return dict(batch_size=batch_size, steps_per_epoch=1, strategy=strategy, chunk=chunk, calib=1,
                shared_batches=data_seed, eval_fn=eval_fn or eval_per_class, eval_key=eval_key, conv=False)


def member_groups(tables: dict[str, dict], cases: dict, nets_: dict[str, nets.Net],
                  setting_of=setting, model_of=None) -> tuple[list, dict[int, dict]]:
    """Engine groups (one per case) of the member tables (``role``, ``point``, ``sigma_w2``, ``sigma_b2``, ``seed``,
    ``lr`` per member) and each member's row fields (global member index -> fields). ``setting_of(optimizer,
    lr)``: the case's optimizer setting (default `setting`). ``model_of(net)``: the group's model (default
    ``net.model``); a table with a ``centre`` column passes it as the third entry of every member's scale
    (sigma_w2, sigma_b2, centre), for a ``model_of`` whose init reads it."""
    groups, info, index = [], {}, 0
    for name, m in tables.items():
        c = cases[name]
        members = []
        for j in range(len(m["role"])):
            sw2, sb2, seed, lr = float(m["sigma_w2"][j]), float(m["sigma_b2"][j]), int(m["seed"][j]), float(m["lr"][j])
            scale = (sw2, sb2) + ((float(m["centre"][j]),) if "centre" in m else ())
            members.append(Member(index, name, float(np.sqrt(sw2)), seed, lr=lr, scale=scale))
            info[index] = {"case": name, "act": c.act, "depth": c.depth, "optimizer": c.optimizer, "width": c.width,
                           "role": str(m["role"][j]), "point": int(m["point"][j]), "sigma_w2": sw2, "sigma_b2": sb2,
                           "seed": seed, "lr": lr, "in_case": j}
            index += 1
        net = nets_[f"{c.act}__d{c.depth}"]
        model, key = (net.model, ("igb_net", net)) if model_of is None else (model_of(net), ("igb_net", net, model_of))
        groups.append(Group(name, setting_of(c.optimizer, members[0].lr), members, key, model))
    return groups, info


def members_of(sweep, label: str) -> list[int]:
    """Global indices of a group's members, in the case's order."""
    return [m.index for c in sweep.groups[label] for m in c.members]


def study(data: dict, tables: dict[str, dict], cases: dict, nets_: dict, plan, opts: dict, *,
          splits: tuple[str, ...] = EVAL_SETS, setting_of=setting, summarize=None, fingerprint: str | None = None,
          parts: dict | None = None, signals: int = 0, model_of=None):
    """The engine's `jaxinit.train.engine.Study` of the member ``tables`` (`member_groups` with ``setting_of`` and
    ``model_of``) on
    ``data`` with `options` ``opts``, evaluated per member (`evaluator` on the ``splits`` of `eval_sets`; with
    ``signals`` > 0, `init_signals` at epoch 0 on the first ``signals`` training inputs), with the study's
    ``summarize`` hook and fingerprint."""
    sets, ds = eval_sets(data, splits), Flat(data["x_train"], data["y_train"])
    groups, info = member_groups(tables, cases, nets_, setting_of, model_of)
    probe = None
    if signals:
        by_case = {name: nets_[f"{c.act}__d{c.depth}"] for name, c in cases.items()}
        probe = SignalProbe(by_case, data["x_train"][:signals], data["y_train"][:signals])
    return Study(ds, groups, plan, evaluator=lambda sweep: evaluator(sweep, sets, info, probe), options=opts,
                 summarize=summarize, fingerprint=fingerprint, parts=parts)


def selection_plan(h: selection.Horizons):
    """The selection run's `jaxinit.train.engine.Plan`: ``h.steps`` steps, evaluated at init, at ``h.short`` (if
    any) and at ``h.steps``."""
    return Plan(epochs=h.steps, eval_every=h.steps, dense_until=h.short, dense_every=max(h.short, 1))


def selection_arrays(sweep, rows: list[dict], cases: dict, grids: dict, n_seeds: int,
                     h: selection.Horizons) -> dict[str, dict]:
    """`selection.arrays` at the horizons ``h`` of every case in ``grids`` (case name -> its rates) from a selection
    run's rows."""
    return {name: selection.arrays(case_arrays(rows, members_of(sweep, name)), lrs, len(cases[name].points["role"]),
                                   n_seeds, h) for name, lrs in grids.items()}


def build(data: dict, groups: list, plan, *, batch_size: int, data_seed: int, strategy: str = "vmap",
          chunk: int = 4):
    """The engine sweep of ``groups`` (`options`), without training it."""
    return engine.build(Flat(data["x_train"], data["y_train"]), groups, plan,
                        **options(batch_size=batch_size, data_seed=data_seed, strategy=strategy, chunk=chunk))
