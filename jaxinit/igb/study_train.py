"""`train_phases(cfg) -> TrainResult`: deep MLPs trained from every phase of the theory, in memory.

For every activation, depth and optimizer: (1) the learning rate is chosen once by a short sweep at
the EOC (`sweep_lr`: ``cfg.opt.<optimizer>_lr`` tried for ``opt.lr_sweep_steps`` steps on ``opt.lr_sweep_seeds``
seeds that the phase runs do not use; criterion: the highest mean validation accuracy at the last
sweep step, any diverged member disqualifying its rate, ties to the smaller rate) and then held fixed
for every phase, so that no phase gets its own tuning; (2) one point per phase
(`jaxinit.igb.phases`, ``phases.seeds`` seeds, paired draws) and, for the first optimizer at
``grid.depths``, a (sigma_w2, sigma_b2) grid, trained as vmapped members (`jaxinit.igb.train`).
SGD and Adam runs at one (activation, depth) share draws and batches. Nothing is written:
``on_result(name, arrays)`` receives each finished run (``"<act>__d<depth>__<optimizer>"``), ``cached``
holds runs to reuse (``--resume``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxinit.igb import sink, nets, phases, summary_train, train
from jaxinit.igb import results as results_schema
from jaxinit.igb.config_train import ACTS, IGBTrainConfig
from jaxinit.models.deep import DeepMLP

SWEEP_STREAM = 0x5eeb   # fold_in tag of the learning-rate sweep's key
SWEEP_SEED0 = 1000      # sweep seeds: 1000, 1001, ... (phase runs use 0, 1, ...)


@dataclass
class TrainResult:
    """``results``: arrays per run name; ``summary``: summary.json's dict; ``rows``: metrics.jsonl's rows."""
    results: dict[str, dict[str, np.ndarray]]
    summary: dict
    rows: list[dict]
    seconds: dict[str, float]


def result_name(act: str, depth: int, optimizer: str) -> str:
    return f"{act}__d{depth}__{optimizer}"


def load_data(cfg: IGBTrainConfig) -> tuple[dict, int, tuple]:
    """(flattened splits with a fixed training-evaluation subset, n_classes, input shape)."""
    from jaxinit.data import load_dataset
    ds = load_dataset(cfg.data)
    flat = lambda x: x.reshape(x.shape[0], -1)
    data = {"x_train": flat(ds.x_train), "y_train": ds.y_train, "x_test": flat(ds.x_test), "y_test": ds.y_test}
    if ds.x_val.shape[0]:
        data.update(x_val=flat(ds.x_val), y_val=ds.y_val)
    n_eval = cfg.train.eval_train_n or ds.x_train.shape[0]
    data.update(x_train_eval=data["x_train"][:n_eval], y_train_eval=data["y_train"][:n_eval])
    return data, ds.n_classes, (data["x_train"].shape[1],)


def check_setup(cfg: IGBTrainConfig) -> None:
    """Every error `load_data` would find (data sizes, files) before anything is trained: what
    ``--overwrite`` checks before it deletes a finished run."""
    load_data(cfg)


def _members(sigma_w2, sigma_b2, seed, lr) -> train.Members:
    as32 = lambda v: jnp.asarray(np.asarray(v, float), jnp.float32)
    return train.Members(as32(sigma_w2), as32(sigma_b2), jnp.asarray(np.asarray(seed), jnp.int32), as32(lr))


def sweep_lr(net, optimizer: str, act: str, cfg: IGBTrainConfig, data: dict, key) -> tuple[float, dict]:
    """The learning rate for every phase of (act, depth, optimizer), chosen at the EOC; the sweep's arrays."""
    lrs = np.asarray(cfg.opt.lrs(optimizer), float)
    if len(lrs) == 1:
        return float(lrs[0]), {}
    eoc = dict(phases.phase_points(act, cfg.phases.sigma_b2))["EOC"]
    seeds = SWEEP_SEED0 + np.arange(cfg.opt.lr_sweep_seeds)
    lr_M, seed_M = np.repeat(lrs, len(seeds)), np.tile(seeds, len(lrs))
    members = _members(np.full(len(lr_M), eoc), np.full(len(lr_M), cfg.phases.sigma_b2), seed_M, lr_M)
    n = cfg.opt.lr_sweep_steps
    hist = train.train_members(net, optimizer, members, data, n, cfg.train.batch_size, [0, n],
                               jax.random.fold_in(key, SWEEP_STREAM))
    shape = (len(lrs), len(seeds))
    score_split = "val" if "val_acc" in hist else "test"
    sweep = {"sweep_lr": lrs, "sweep_val_acc": hist[f"{score_split}_acc"][-1].reshape(shape),
             "sweep_test_acc": hist["test_acc"][-1].reshape(shape), "sweep_alive": hist["alive"][-1].reshape(shape)}
    score = np.where(sweep["sweep_alive"].all(axis=1), sweep["sweep_val_acc"].mean(axis=1), -np.inf)
    return float(lrs[int(np.argmax(score))]), sweep


def build_members(act: str, depth: int, optimizer: str, lr: float, cfg: IGBTrainConfig) -> dict[str, np.ndarray]:
    """Phase members (several seeds), then grid members (first optimizer at grid.depths only)."""
    p, g = cfg.phases, cfg.grid
    points = phases.phase_points(act, p.sigma_b2, p.ordered_factor, p.chaotic_factor, p.neutral_factor)
    rows = [(name, sw, p.sigma_b2, s) for name, sw in points for s in range(p.seeds)]
    if optimizer == cfg.sweep.optimizers[0] and depth in g.depths:
        rows += [("grid", sw, sb, s) for sb in g.sigma_b2 for sw in g.sigma_w2 for s in range(g.seeds)]
    role, sw, sb, seed = zip(*rows)
    sw, sb = np.array(sw, float), np.array(sb, float)
    return {"role": np.array(role), "sigma_w2": sw, "sigma_b2": sb, "seed": np.array(seed, np.int32),
            "lr": np.full(len(rows), lr), "theory_phase": np.array(phases.theory_phase_names(act, sw, sb, depth)),
            "chi1_pow": phases.backward_factor(act, sw, sb, depth - 1),
            "backward_product": phases.backward_product(act, sw, sb, depth)}


def train_run(act: str, depth: int, optimizer: str, cfg: IGBTrainConfig, data: dict, n_classes: int, key,
              progress=None) -> dict[str, np.ndarray]:
    """One (activation, depth, optimizer): the learning-rate sweep, then every phase (and grid) member."""
    net = nets.make_net(DeepMLP(n_classes, cfg.model.width, depth, act), (data["x_train"].shape[1],))
    lr, sweep = sweep_lr(net, optimizer, act, cfg, data, key)
    m = build_members(act, depth, optimizer, lr, cfg)
    steps = train.eval_steps(cfg.train.steps, cfg.train.eval_every, cfg.train.dense_until)
    hist = train.train_members(net, optimizer, _members(m["sigma_w2"], m["sigma_b2"], m["seed"], m["lr"]), data,
                               cfg.train.steps, cfg.train.batch_size, steps, key, progress=progress)
    res = {**m, **hist, **sweep, "act": np.array(act), "depth": np.array(depth), "optimizer": np.array(optimizer),
           "width": np.array(cfg.model.width)}
    if (m["role"] == "grid").any():
        res.update(theory_diagram(act, depth, cfg))
    return res


def theory_diagram(act: str, depth: int, cfg: IGBTrainConfig) -> dict[str, np.ndarray]:
    """Theory phase diagram on a grid spanning the trained one (saved, so figures need no theory run)."""
    from theory import meanfield as mf
    from theory import phase
    points = phases.phase_points(act, cfg.phases.sigma_b2, cfg.phases.ordered_factor, cfg.phases.chaotic_factor,
                                 cfg.phases.neutral_factor)
    sw_all = cfg.grid.sigma_w2 + tuple(w for _, w in points)
    sb_all = cfg.grid.sigma_b2 + (cfg.phases.sigma_b2,)
    sw = np.geomspace(min(sw_all) / 1.3, max(sw_all) * 1.3, cfg.train.phase_res)
    sb = np.geomspace(max(min(sb_all), 1e-3) / 1.5, max(sb_all) * 1.5, cfg.train.phase_res)
    codes = sorted(phase.PHASE_LEGEND)
    return {"pd_sigma_w2": sw, "pd_sigma_b2": sb, "pd_phase": np.asarray(phase.phase_diagram(act, sw, sb, depth)["phase"]),
            "pd_codes": np.array(codes), "pd_names": np.array([phase.PHASE_LEGEND[c] for c in codes]),
            "pd_eoc": np.asarray(mf.eoc(sb, act), float), "pd_neutral": np.asarray(mf.neutrality_line(sb, act), float)}


def _runs(cfg: IGBTrainConfig):
    for act in cfg.model.acts:
        for depth in cfg.model.depths:
            for optimizer in cfg.sweep.optimizers:
                yield act, depth, optimizer


def _total_steps(cfg: IGBTrainConfig) -> int:
    return len(list(_runs(cfg))) * cfg.train.steps


def train_phases(cfg: IGBTrainConfig, on_result: Callable[[str, dict], None] | None = None,
                 cached: dict[str, dict] | None = None, progress: bool | None = None) -> TrainResult:
    """Every (activation, depth, optimizer) run of ``cfg`` (see the module docstring); writes nothing itself."""
    cached = cached or {}
    results_schema.check_train(cached)   # a saved run of another shape is refused before any work
    data, n_classes, _ = load_data(cfg)
    root = jax.random.key(cfg.train.seed)
    results, seconds = {}, {}
    bar = sink.progress_bar(_total_steps(cfg), "igb_train steps", progress)
    for act, depth, optimizer in _runs(cfg):
        name, t0 = result_name(act, depth, optimizer), time.perf_counter()
        if name in cached:
            results[name] = cached[name]
            bar.update(cfg.train.steps)
            continue
        key = jax.random.fold_in(jax.random.fold_in(root, ACTS.index(act)), depth)   # shared by the optimizers
        results[name] = train_run(act, depth, optimizer, cfg, data, n_classes, key, bar)
        seconds[name] = round(time.perf_counter() - t0, 1)
        if on_result is not None:
            on_result(name, results[name])
    bar.close()
    summary = summary_train.summarize_all(results, cfg.train)
    return TrainResult(results, summary, summary_train.metric_rows(results), seconds)
