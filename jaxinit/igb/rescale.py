"""Rescale a trained deep MLP to a chosen measured backward factor, then fine-tune it on new classes (issue 19).

The claim under test (Bassi et al. 2026, arXiv 2505.12096): rescaling the weights of a trained network moves it
to the edge of chaos and helps fine-tuning. Conventions of docs/theory.md section 1 (`jaxinit.models.deep.DeepMLP`):
``h_1 = W_1 x + b_1``, ``h_l = W_l psi(h_{l-1}) + b_l`` for l = 2..L, readout ``W_out psi(h_L) + b_out``.

1. Pretrain (phase A, the first digits) from the EOC init (sigma_w2 = `theory.meanfield.eoc(sigma_b2)`), one
   member on the engine (`jaxinit.train.engine`).
2. Rescale: the kernels W_2..W_L are multiplied by per-layer factors a_2..a_L (W_1, every bias and the readout
   are kept; the readout is then replaced, step 3). Layer l's per-node backward gain on inputs x is
       chi_l = a_l^2 (|W_l|_F^2 / n_{l-1}) mean_{x,i} psi'(h_{l-1,i}(x))^2,
   docs/theory.md section 2's chi_1 = sigma_w2 E[psi'(h)^2] (the factor of E[delta^2] per layer, Schoenholz et al.
   2017, arXiv 1611.01232) with sigma_w2 replaced by the kernel's own fan_in x mean(W^2) and the Gaussian
   average by the average over the inputs at the rescaled net. `local_factors` sets every chi_l to one value t,
   layer after layer; `calibrate` searches t until the MEASURED backward factor
       B = mean |delta_1|^2 / mean |delta_L|^2     (`backward_factor`: `nets.backprop_signals`, class-balanced)
   on phase B's training inputs is within a factor (1 + tol) of the target (mean field would give B = t^(L-1)
   exactly). B depends on the readout (delta_L's direction meets trained, anisotropic layers: ~0.7 vs ~1.0 for two
   draws), so the factors are set per seed, on the net each member starts from (its own fresh readout).
3. Fine-tune (phase B, the other digits, fresh readout drawn at the EOC scale) every arm on the engine: each
   rescaling target, the trained net as it is ("trained"), a fresh EOC init ("fresh_eoc"). One model serves
   every arm (`transfer_model`: a member's ``scale`` is (fresh, factors)), so the whole sweep compiles once.
   A member's seed draws its readout and its batches: arms are paired by seed. Each arm's rate is chosen from
   one grid by the fair protocol's rule on selection seeds disjoint from the reported ones (`select_rates`); the
   reported run (`run`) writes metrics.jsonl, checkpoints and summary.json (`jaxinit.igb.summary_rescale`).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxinit.run import runinfo
from jaxinit.errors import ConfigError
from jaxinit.data import Dataset, load_dataset
from jaxinit.igb import summary_rescale as summ
from jaxinit.igb.config_rescale import IGBRescaleConfig
from jaxinit.models import Model, activations
from jaxinit.models.deep import DeepMLP
from jaxinit.shared import case_train, igb_stats as stats, nets, selection
from jaxinit.train import engine
from jaxinit.train.engine import Plan, Study
from jaxinit.train.members import Group, Member
from jaxinit.result import Result
from jaxinit.run.sink import writer_for
from jaxinit.train.step import EvalBatch, member_streams

TRAINED, FRESH = "trained", "fresh_eoc"


# --------------------------------------------------------------------------- data
def _take(x, y, digits: tuple[int, ...], n: int, binarize: bool, where: str, name: str):
    """The first ``n`` images of ``digits`` in a split, flattened; labels: index in ``digits`` (or digit % 2)."""
    y = np.asarray(y)
    keep = np.flatnonzero(np.isin(y, digits))[:n]
    if len(keep) < n:
        raise ConfigError(f"{name}: the {where} split has {len(keep)} images of digits {list(digits)}, {n} asked")
    index = np.zeros(10, np.int64)
    index[list(digits)] = np.arange(len(digits))
    labels = y[keep] % 2 if binarize else index[y[keep]]
    return np.asarray(x)[keep].reshape(n, -1), labels.astype(np.int32)


def load_phases(cfg: IGBRescaleConfig) -> tuple[Dataset, Dataset]:
    """(phase A: train / test, phase B: train / val / test) as engine data sets (flattened, on the sphere as
    ``data.normalize`` says), read with `jaxinit.data.load_dataset` and split by digit."""
    d, p, f = cfg.data, cfg.pretrain, cfg.finetune
    ds = load_dataset(dataclasses.replace(d, binarize=False))
    take = lambda split, digits, n: _take(getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}"), digits, n,
                                          d.binarize, split, d.name)
    a_tr, a_te = take("train", p.digits, p.n_train), take("test", p.digits, p.n_test)
    b_tr, b_va, b_te = take("train", f.digits, f.n_train), take("val", f.digits, f.n_val), take("test", f.digits, f.n_test)
    n_classes = 2 if d.binarize else len(f.digits)

    def dataset(tr, va, te, name):
        arrays = [jnp.asarray(a) for pair in (tr, va, te) for a in pair]
        return Dataset(*arrays, n_classes, (int(tr[0].shape[1]),), name)
    empty = (np.zeros((0, a_tr[0].shape[1]), np.float32), np.zeros((0,), np.int32))
    return dataset(a_tr, empty, a_te, "phase_a"), dataset(b_tr, b_va, b_te, "phase_b")


def check_setup(cfg: IGBRescaleConfig) -> None:
    """Every error `load_phases` would find, before anything trains (what --overwrite checks first)."""
    load_phases(cfg)


# --------------------------------------------------------------------------- the rescaled network
def make_net(cfg: IGBRescaleConfig, n_classes: int, input_dim: int) -> nets.Net:
    m = cfg.model
    return nets.make_net(DeepMLP(n_classes, m.width, m.depth, m.act), (input_dim,))


def eoc_sigma_w2(cfg: IGBRescaleConfig) -> float:
    from theory import meanfield as mf
    return float(mf.eoc(cfg.model.sigma_b2, cfg.model.act))


def rescale_params(params: Any, factors) -> Any:
    """``params`` with hidden kernel W_l (l = 2..L, stacked) multiplied by ``factors[l - 2]``; all else kept."""
    a = jnp.stack(factors) if isinstance(factors, (tuple, list)) else jnp.asarray(factors)
    dense = params["stacked_layers"]["dense"]
    return {**params, "stacked_layers": {"dense": {**dense, "kernel": dense["kernel"] * a[:, None, None]}}}


def arm_scale(factors, fresh: bool = False) -> tuple:
    """A member's ``scale`` for `transfer_model`: (1.0 fresh EOC init | 0.0 rescaled base, per-layer factors)."""
    return (float(fresh), tuple(float(np.float32(a)) for a in factors))


def transfer_model(net: nets.Net, base: Any, sigma_w2: float, sigma_b2: float) -> Model:
    """The engine's model of every arm: ``init(key, (fresh, factors))`` is ``base`` rescaled by ``factors``
    (`rescale_params`) with the readout of a fresh draw, or (``fresh`` = 1) the whole fresh draw; the draw
    (`nets.draw`, `nets.scale`) is W ~ N(0, sigma_w2 / fan_in), b ~ N(0, sigma_b2) from ``key``. No state."""
    def init(key, scale):
        fresh, factors = scale
        draw = nets.scale(nets.draw(net, key), sigma_w2, sigma_b2)
        moved = {**rescale_params(base, factors), "head": draw["head"]}
        return jax.tree.map(lambda d, m: jnp.where(fresh > 0.5, d, m), draw, moved), {}

    return Model(init, net.model.apply, net.module)


@functools.partial(jax.jit, static_argnames="act")
def local_factors(params: Any, x: jax.Array, chi: jax.Array, act: str) -> jax.Array:
    """a_2..a_L (shape (L-1,)) giving every hidden layer the per-node backward gain ``chi`` (module docstring,
    step 2) at the rescaled net on inputs ``x``, set layer after layer from the first."""
    psi = activations.get(act)
    dpsi = lambda h: jax.jvp(psi, (h,), (jnp.ones_like(h),))[1]
    dense = params["stacked_layers"]["dense"]

    def layer(h, wb):
        w, b = wb
        gain = jnp.mean(jnp.square(dpsi(h))) * jnp.sum(jnp.square(w)) / w.shape[0]
        a = jnp.sqrt(chi / gain)
        return a * (psi(h) @ w) + b, a
    h1 = x @ params["embed"]["kernel"] + params["embed"]["bias"]
    return jax.lax.scan(layer, h1, (dense["kernel"], dense["bias"]))[1]


@functools.partial(jax.jit, static_argnames="net")
def backward_factor(net: nets.Net, params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
    """Measured mean |delta_1|^2 / mean |delta_L|^2 (hidden layers 1 and L) of the cross-entropy on (x, y), each
    mean over the samples of a class, then over the classes present (`nets.backprop_signals`)."""
    n_out = net.template["head"]["bias"].shape[-1]
    signals_LB = nets.backprop_signals(net, params, x, y, n_out=n_out)
    onehot_BC = jax.nn.one_hot(y, n_out)
    count_C = onehot_BC.sum(axis=0)
    per_class = signals_LB @ onehot_BC / jnp.maximum(count_C, 1.0)
    mean = jnp.sum(jnp.where(count_C > 0, per_class, 0.0), axis=-1) / jnp.sum(count_C > 0)
    return mean[0] / mean[-2]


class Calibration(NamedTuple):
    target: float
    factors: np.ndarray      # (L-1,) a_2..a_L
    measured: float          # B at the factors, with the calibration readout
    chi: float               # the per-layer gain t
    iterations: int


def calibrate(net: nets.Net, base: Any, x, y, target: float, tol: float, max_iter: int,
              chi0: float | None = None) -> Calibration:
    """Per-layer factors whose measured backward factor (`backward_factor`, readout of ``base``) is within a factor
    (1 + tol) of ``target``: a secant search on log t, started at ``chi0`` (default: mean field's
    t = target^(1/(L-1)))."""
    n = int(base["stacked_layers"]["dense"]["kernel"].shape[0])
    log_target, prev = math.log(target), None
    log_t = math.log(chi0) if chi0 else log_target / n
    measured = float("nan")
    for it in range(1, max_iter + 1):
        factors = np.asarray(local_factors(base, x, jnp.float32(math.exp(log_t)), net.module.activation), np.float32)
        measured = float(backward_factor(net, rescale_params(base, factors), x, y))
        if not (math.isfinite(measured) and measured > 0 and np.all(np.isfinite(factors))):
            break
        err = math.log(measured) - log_target
        if abs(err) <= math.log1p(tol):
            return Calibration(target, factors, measured, math.exp(log_t), it)
        slope = n
        if prev is not None and log_t != prev[0]:
            secant = (math.log(measured) - prev[1]) / (log_t - prev[0])
            slope = secant if n / 8 < secant < 8 * n else n
        prev = (log_t, math.log(measured))
        log_t -= err / slope
    trained = float(backward_factor(net, base, x, y))     # the net as pretraining left it, no rescaling
    if not (math.isfinite(trained) and trained > 0):
        raise ConfigError(f"the pretrained network's measured backward factor is {trained:.4g}: pretraining left it "
                          f"degenerate (saturated or non-finite; see --pretrain.lr, --model.sigma_b2), so no "
                          f"rescaling reaches a target")
    raise ConfigError(f"--rescale.targets={target:g}: the measured backward factor reached {measured:.4g}, not "
                      f"within (1 + {tol:g}) of it, in {max_iter} iterations; choose a nearer target or more "
                      f"--rescale.max_iter")


# --------------------------------------------------------------------------- the engine's pieces
def eval_metrics(model: Model, state, batch: EvalBatch) -> dict[str, jax.Array]:
    """Accuracy, mean loss and f_max of one member on a whole split (`stats.per_class`)."""
    logits, _ = model.apply(state.params, state.model_state, batch.x, train=False)
    out = stats.per_class(logits, batch.y)
    return {k: out[k] for k in ("acc", "loss", "fmax")}


def options(ds: Dataset, batch_size: int, strategy: str, chunk: int) -> dict:
    """`engine.build`'s options: one step per engine epoch, the batch of step s drawn without replacement from
    ``fold_in(data stream of the member's seed, s)`` (paired across arms and rates), `eval_metrics`."""
    n = int(ds.x_train.shape[0])

    def order(seed, epoch):
        key = jax.random.fold_in(member_streams(seed)[1], epoch - 1)
        return jax.random.choice(key, n, (batch_size,), replace=False).astype(jnp.int32)
    return dict(batch_size=batch_size, steps_per_epoch=1, strategy=strategy, chunk=chunk, calib=None, order=order,
                order_key=("rescale_draw", n, batch_size), eval_fn=eval_metrics, eval_key="rescale_metrics",
                conv=False)


def evaluator(sets: dict[str, EvalBatch], info: dict[int, dict]):
    """``evaluator(sweep)`` -> ``evaluate(states, epoch)``: the IGB study's per-member rows
    (`jaxinit.shared.case_train.evaluator`: ``info[member]`` and ``<split>_<metric>``, JSON-ready)."""
    return lambda sweep: case_train.evaluator(sweep, sets, info)


def eval_sets(ds: Dataset, splits: tuple[str, ...]) -> dict[str, EvalBatch]:
    """`jaxinit.shared.case_train.eval_sets` of a data set's splits."""
    return case_train.eval_sets(vars(ds), splits)


class Arm(NamedTuple):
    """One arm; a rescaled arm's factors are set per seed, for the readout that seed draws (`make_arms`)."""
    label: str               # "B=0.1", "trained", "fresh_eoc"
    target: float | None     # the measured backward factor asked for (None: a control)
    scales: dict             # seed -> `arm_scale`
    chi: dict                # seed -> the per-layer gain t (rescaled arms; empty for the controls)


def _groups(arms: list[Arm], model: Model, key: Any, optimizer: str, members: list[tuple], stage: str):
    """One group per arm; ``members``: (arm label, lr, seed) in member-index order."""
    groups, info = [], {}
    for arm in arms:
        mine = []
        for i, (label, lr, seed) in enumerate(members):
            if label == arm.label:
                mine.append(Member(i, arm.label, 1.0, int(seed), lr=float(lr), scale=arm.scales[int(seed)]))
                info[i] = {"stage": stage, "arm": arm.label, "lr": float(lr), "seed": int(seed)}
        groups.append(Group(arm.label, case_train.setting(optimizer, mine[0].lr), mine, key, model))
    return groups, info


# --------------------------------------------------------------------------- the stages
def pretrain(cfg: IGBRescaleConfig, net: nets.Net, phase_a: Dataset, sw2: float, progress: bool):
    """Phase A from the EOC init: (trained params, arrays of its test accuracy per evaluation)."""
    p, zeros = cfg.pretrain, jax.tree.map(jnp.zeros_like, net.template)
    model = transfer_model(net, zeros, sw2, cfg.model.sigma_b2)
    arm = Arm("pretrain", None, {p.seed: arm_scale(np.ones(cfg.model.depth - 1), fresh=True)}, {})
    groups, info = _groups([arm], model, ("igb_rescale", net, "pretrain"), cfg.opt.optimizer,
                           [("pretrain", p.lr, p.seed)], "pretrain")
    study = Study(phase_a, groups, Plan(epochs=p.steps, eval_every=p.eval_every),
                  options(phase_a, p.batch_size, cfg.finetune.strategy, cfg.finetune.chunk),
                  evaluator(eval_sets(phase_a, ("test",)), info))
    res = engine.fit(study, stage="pretrain", progress=progress)
    params = jax.tree.map(lambda x: np.asarray(x[0]), res.states["pretrain"].params)
    curve = summ.curves(res.rows, [0], ("test_acc",))
    if bool(np.asarray(res.states["pretrain"].diverged)[0]):
        raise ConfigError(f"--pretrain.lr={p.lr:g}: pretraining diverged; choose a smaller rate")
    return params, {"pretrain_step": curve["step"], "pretrain_test_acc": curve["test_acc"][:, 0]}


def readout(net: nets.Net, seed: int, sw2: float, sb2: float) -> Any:
    """The fresh readout a member of ``seed`` starts from: the head of `transfer_model`'s draw."""
    return nets.scale(nets.draw(net, member_streams(jnp.uint32(seed))[0]), sw2, sb2)["head"]


def make_arms(cfg: IGBRescaleConfig, net: nets.Net, trained: Any, phase_b: Dataset, sw2: float,
              seeds: list[int]) -> list[Arm]:
    """The rescaled arms and the controls. A rescaled arm's factors are calibrated per seed (`calibrate`) on the
    net its members start from: the trained hidden layers with the fresh readout of that seed."""
    r, ones = cfg.rescale, np.ones(cfg.model.depth - 1)
    x, y = phase_b.x_train[:r.n_calib], phase_b.y_train[:r.n_calib]
    bases = {s: {**trained, "head": readout(net, s, sw2, cfg.model.sigma_b2)} for s in seeds}
    arms = []
    for t in r.targets:
        scales, chi, last = {}, {}, None
        for s in seeds:
            c = calibrate(net, bases[s], x, y, t, r.tol, r.max_iter, chi0=last)
            scales[s], chi[s], last = arm_scale(c.factors), c.chi, c.chi
        arms.append(Arm(f"B={t:g}", t, scales, chi))
    for label in r.controls:
        arms.append(Arm(label, None, {s: arm_scale(ones, fresh=label == FRESH) for s in seeds}, {}))
    return arms


def select_rates(cfg: IGBRescaleConfig, net, model: Model, phase_b: Dataset, arms: list[Arm],
                 progress: bool) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Each arm's rate by the fair protocol's rule (`jaxinit.shared.selection`, the arms as its points): the lowest
    mean validation loss over the selection seeds at ceil(``finetune.select_horizon`` x ``finetune.steps``), a rate
    with a diverged seed excluded, ties to the smaller; also evaluated at the short horizon. Returns (arm -> rate,
    the selection's arrays)."""
    f, lrs = cfg.finetune, selection.rates(cfg.opt.lrs)
    seeds = selection.SEED0 + np.arange(f.select_seeds)
    h = selection.horizons(f.steps, f.select_horizon, f.select_short)
    members = [(a.label, lr, s) for a in arms for lr in lrs for s in seeds]
    groups, info = _groups(arms, model, ("igb_rescale", net), cfg.opt.optimizer, members, "select")
    study = Study(phase_b, groups, case_train.selection_plan(h), options(phase_b, f.batch_size, f.strategy, f.chunk),
                  evaluator(eval_sets(phase_b, ("val",)), info))
    rows = engine.fit(study, stage="selection", progress=progress).rows
    arrays = selection.arrays(case_train.case_arrays(rows, list(range(len(members)))), lrs, len(arms), len(seeds), h)
    return {a.label: float(arrays["point_lr"][i]) for i, a in enumerate(arms)}, arrays


def init_factors(net, model: Model, arms: list[Arm], seeds, x, y) -> dict[str, np.ndarray]:
    """Measured backward factor of every reported member at its fine-tuning init, through the engine's model (what
    the engine trains from; its own readout): (seeds,)."""
    init = jax.jit(model.init)
    f32 = lambda s: jax.tree.map(jnp.float32, s)
    return {a.label: np.array([float(backward_factor(net, init(member_streams(jnp.uint32(s))[0], f32(a.scales[s]))[0], x, y))
                               for s in seeds]) for a in arms}


def run(cfg: IGBRescaleConfig, workdir: str | Path | None = None, *, resume: bool = False,
        progress: bool = True) -> Result:
    """Pretrain, calibrate the arms, choose each arm's rate, then the reported fine-tuning run (files only with a
    ``workdir``): ``summary`` is summary.json, ``arrays`` the per-arm curves and the stages' arrays."""
    phase_a, phase_b = load_phases(cfg)
    net = make_net(cfg, phase_b.n_classes, phase_b.input_shape[0])
    sw2, f = eoc_sigma_w2(cfg), cfg.finetune
    trained, pre_arrays = pretrain(cfg, net, phase_a, sw2, progress)
    seeds = list(range(f.seeds))
    arms = make_arms(cfg, net, trained, phase_b, sw2, seeds + list(selection.SEED0 + np.arange(f.select_seeds)))
    model = transfer_model(net, trained, sw2, cfg.model.sigma_b2)
    chosen, select_arrays = select_rates(cfg, net, model, phase_b, arms, progress)
    x, y = phase_b.x_train[:cfg.rescale.n_calib], phase_b.y_train[:cfg.rescale.n_calib]
    member_factors = init_factors(net, model, arms, seeds, x, y)
    baseline = summ.ridge_baseline(phase_b)
    members = [(a.label, chosen[a.label], s) for a in arms for s in seeds]
    groups, info = _groups(arms, model, ("igb_rescale", net), cfg.opt.optimizer, members, "report")
    plan = Plan(epochs=f.steps, eval_every=f.eval_every, dense_until=f.dense_until,
                checkpoint_every=f.checkpoint_every if workdir is not None else 0)
    context = summ.Context(cfg, arms, select_arrays, member_factors, baseline, pre_arrays,
                           stats_share=summ.majority(phase_b.y_test), sigma_w2=sw2)

    def summarize(sweep, rows):
        return summ.summarize(context, rows, {g.label: [m.index for m in g.members] for g in groups})
    digest, parts = runinfo.fingerprint(cfg)
    study = Study(phase_b, groups, plan, options(phase_b, f.batch_size, f.strategy, f.chunk),
                  evaluator(eval_sets(phase_b, ("val", "test")), info), summarize, digest, parts)
    return engine.fit(study, writer_for(workdir, resume=resume), stage="reported", progress=progress)
