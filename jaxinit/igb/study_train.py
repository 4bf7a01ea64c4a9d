"""`train_phases(cfg, workdir=None) -> Result`: deep MLPs trained from every phase of the theory, on the engine.

For every activation, depth and optimizer (a *case*): (1) the learning rate is chosen once by a short
sweep at the EOC (`sweep_lrs`: ``cfg.opt.<optimizer>_lr`` tried for ``opt.lr_sweep_steps`` steps
on ``opt.lr_sweep_seeds`` seeds that the phase runs do not use; criterion: the highest mean validation accuracy
at the last sweep step, any diverged member disqualifying its rate, ties to the smaller rate) and then
held fixed for every phase, so that no phase gets its own tuning; (2) one point per phase
(`jaxinit.igb.phases`, ``phases.seeds`` seeds, paired draws) and, for the first optimizer at
``grid.depths``, a (sigma_w2, sigma_b2) grid. Both stages are one engine sweep each
(`jaxinit.train.engine`), every case a group of traced members (one compile per case, whatever its
rates), every case on the same batches, each stage one `jaxinit.train.engine.Study` handed to `engine.fit`.
The first stage runs in memory (it is short and deterministic: a resumed run repeats it exactly); the
second (`phase_study`), given a ``workdir``, writes metrics.jsonl per evaluation and step-level
checkpoints, so a run killed anywhere resumes to the same bytes. The
result's ``arrays`` hold one dict of arrays per case (``"<act>__d<depth>__<optimizer>"``), the schema of
`jaxinit.igb.results` that the summary and the figures read.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxinit import runinfo
from jaxinit.igb import nets, phases, summary_train, train
from jaxinit.igb.config_train import ACTS, IGBTrainConfig
from jaxinit.models.deep import DeepMLP
from jaxinit.train import engine
from jaxinit.train.engine import Group, Plan, Result
from jaxinit.train.members import Member, chunk_to_stacked, init_chunk

SWEEP_SEED0 = 1000      # sweep seeds: 1000, 1001, ... (phase runs use 0, 1, ...)


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


def cases(cfg: IGBTrainConfig):
    """(name, act, depth, optimizer) of every case, in the order of the results."""
    for act in cfg.model.acts:
        for depth in cfg.model.depths:
            for optimizer in cfg.sweep.optimizers:
                yield result_name(act, depth, optimizer), act, depth, optimizer


def case_members(act: str, depth: int, optimizer: str, lr: float, cfg: IGBTrainConfig) -> dict[str, np.ndarray]:
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


def _groups(table: dict[str, dict], nets_: dict[str, nets.Net], cfg) -> tuple[list[Group], dict[int, dict]]:
    """Engine groups (one per case) of the member tables, and each member's row fields."""
    groups, info, index = [], {}, 0
    for name, m in table.items():
        act, depth, optimizer = name.split("__")[0], int(name.split("__")[1][1:]), name.split("__")[2]
        members = []
        for j in range(len(m["role"])):
            members.append(Member(index, name, float(np.sqrt(m["sigma_w2"][j])), int(m["seed"][j]),
                                  lr=float(m["lr"][j]), scale=(float(m["sigma_w2"][j]), float(m["sigma_b2"][j]))))
            info[index] = {"case": name, "act": act, "depth": depth, "optimizer": optimizer, "width": cfg.model.width,
                           "role": str(m["role"][j]), "sigma_w2": float(m["sigma_w2"][j]),
                           "sigma_b2": float(m["sigma_b2"][j]), "seed": int(m["seed"][j]), "lr": float(m["lr"][j]),
                           "in_case": j}
            index += 1
        groups.append(train.group(name, optimizer, nets_[f"{act}__d{depth}"], members))
    return groups, info


def sweep_lrs(cfg: IGBTrainConfig, data: dict, nets_: dict, progress: bool) -> dict[str, tuple[float, dict]]:
    """Per case: the learning rate for every phase, chosen at the EOC, and the sweep's arrays."""
    table, grids = {}, {}
    for name, act, depth, optimizer in cases(cfg):
        lrs = np.asarray(cfg.opt.lrs(optimizer), float)
        grids[name] = lrs
        if len(lrs) < 2:
            continue
        eoc = dict(phases.phase_points(act, cfg.phases.sigma_b2))["EOC"]
        seeds = SWEEP_SEED0 + np.arange(cfg.opt.lr_sweep_seeds)
        lr_M, seed_M = np.repeat(lrs, len(seeds)), np.tile(seeds, len(lrs))
        k = len(lr_M)
        table[name] = {"role": np.array(["sweep"] * k), "sigma_w2": np.full(k, eoc),
                       "sigma_b2": np.full(k, cfg.phases.sigma_b2), "seed": seed_M.astype(np.int32), "lr": lr_M}
    chosen = {name: (float(lrs[0]), {}) for name, lrs in grids.items() if len(lrs) < 2}
    if not table:
        return chosen
    groups, info = _groups(table, nets_, cfg)
    n = cfg.opt.lr_sweep_steps

    def summarize(sweep, rows):
        return None, {g.label: sweep_arrays(rows, g, grids[g.label], cfg.opt.lr_sweep_seeds) for g in groups}
    spec = train.study(cfg.train, data, groups, Plan(epochs=n, eval_every=n), info, summarize)
    for name, out in engine.fit(spec, progress=progress).arrays.items():
        chosen[name] = (float(out["sweep_lr"][choose_lr(out["sweep_val_acc"], out["sweep_alive"])]), out)
    return chosen


def sweep_arrays(rows: list[dict], group: Group, lrs: np.ndarray, n_seeds: int) -> dict[str, np.ndarray]:
    """A case's sweep at its last step, (rates x seeds): validation accuracy (test where there is no validation
    split), test accuracy and whether each member is alive."""
    arr = train.case_arrays(rows, [m.index for m in group.members])
    shape = (len(lrs), n_seeds)
    score_split = "val" if "val_acc" in arr else "test"
    return {"sweep_lr": lrs, "sweep_val_acc": arr[f"{score_split}_acc"][-1].reshape(shape),
            "sweep_test_acc": arr["test_acc"][-1].reshape(shape), "sweep_alive": arr["alive"][-1].reshape(shape)}


def choose_lr(val_acc, alive) -> int:
    """Index of the rate with the highest mean validation accuracy over seeds (rates x seeds arrays), a rate
    with a diverged member excluded, ties to the smaller rate (the first)."""
    score = np.where(np.asarray(alive).all(axis=1), np.asarray(val_acc).mean(axis=1), -np.inf)
    return int(np.argmax(score))


def train_phases(cfg: IGBTrainConfig, workdir: str | Path | None = None, *, resume: bool = False,
                 progress: bool = True) -> Result:
    """Every case of ``cfg`` (see the module docstring); files only with a ``workdir``."""
    data, n_classes, shape = load_data(cfg)
    nets_ = {f"{act}__d{depth}": nets.make_net(DeepMLP(n_classes, cfg.model.width, depth, act), shape)
             for act in cfg.model.acts for depth in cfg.model.depths}
    chosen = sweep_lrs(cfg, data, nets_, progress)
    spec = phase_study(cfg, data, nets_, chosen, checkpoints=workdir is not None)
    return engine.fit(spec, workdir, resume=resume, progress=progress)


def phase_study(cfg: IGBTrainConfig, data: dict, nets_: dict, chosen: dict, checkpoints: bool) -> engine.Study:
    """The second stage as the engine runs it: every case's members (`case_members`) at its chosen rate, the
    run's fingerprint (`jaxinit.runinfo.fingerprint`: config and numeric environment) and the summary: per
    case the arrays of `jaxinit.igb.results` (`_results`, with the members' signals at init) and summary.json
    (`summary_train.summarize_all`)."""
    table = {name: case_members(act, depth, opt, chosen[name][0], cfg) for name, act, depth, opt in cases(cfg)}
    groups, info = _groups(table, nets_, cfg)
    t = cfg.train
    plan = Plan(epochs=t.steps, eval_every=t.eval_every, dense_until=t.dense_until,
                checkpoint_every=t.checkpoint_every if checkpoints else 0)

    def summarize(sweep, rows):
        results = _results(cfg, sweep, rows, table, chosen, _init_signals(sweep, data, nets_))
        return summary_train.summarize_all(results, cfg.train), results
    digest, parts = runinfo.fingerprint(cfg)
    return train.study(t, data, groups, plan, info, summarize, digest, parts)


def _init_signals(sweep, data: dict, nets_: dict) -> dict[str, np.ndarray]:
    """Per case, `train.init_signals` of its members at init on the first 256 training inputs (one chunk's initial
    state at a time, beside the trained ones)."""
    x, y = data["x_train"][:256], data["y_train"][:256]
    out = {}
    for label, chunks in sweep.groups.items():
        net = nets_["__".join(label.split("__")[:2])]
        out[label] = np.concatenate([train.init_signals(net, chunk_to_stacked(c, init_chunk(c, sweep.x_calib)).params,
                                                        x, y) for c in chunks])
    return out


def _results(cfg, sweep, rows: list[dict], table: dict, chosen: dict, signals: dict) -> dict[str, dict]:
    results = {}
    for name, act, depth, optimizer in cases(cfg):
        members = [m.index for c in sweep.groups[name] for m in c.members]
        res = {**table[name], **train.case_arrays(rows, members), "init_signal": signals[name], **chosen[name][1],
               "act": np.array(act), "depth": np.array(depth), "optimizer": np.array(optimizer),
               "width": np.array(cfg.model.width)}
        if (table[name]["role"] == "grid").any():
            m = table[name]
            res.update(theory_diagram(act, depth, m["sigma_w2"], m["sigma_b2"], cfg.train.phase_res))
        results[name] = res
    return results


def theory_diagram(act: str, depth: int, sigma_w2, sigma_b2, res: int) -> dict[str, np.ndarray]:
    """Theory phase diagram (``res`` x ``res``) on a grid spanning the trained points ``sigma_w2``, ``sigma_b2`` (the
    case's grid and phase points; saved, so figures need no theory run)."""
    from theory import meanfield as mf
    from theory import phase
    sw = np.geomspace(np.min(sigma_w2) / 1.3, np.max(sigma_w2) * 1.3, res)
    sb = np.geomspace(max(np.min(sigma_b2), 1e-3) / 1.5, np.max(sigma_b2) * 1.5, res)
    codes = sorted(phase.PHASE_LEGEND)
    return {"pd_sigma_w2": sw, "pd_sigma_b2": sb, "pd_phase": np.asarray(phase.phase_diagram(act, sw, sb, depth)["phase"]),
            "pd_codes": np.array(codes), "pd_names": np.array([phase.PHASE_LEGEND[c] for c in codes]),
            "pd_eoc": np.asarray(mf.eoc(sb, act), float), "pd_neutral": np.asarray(mf.neutrality_line(sb, act), float)}
