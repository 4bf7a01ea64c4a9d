"""Bias meets trainability in training: does the edge of chaos absorb the initial bias fastest?

Bassi et al. 2026 (arXiv 2505.12096); THEORY.md section 5. Deep MLPs (ReLU and tanh) in the
mean-field convention, trained with Adam as vmapped members on binarised data (label % 2, inputs on
the sphere |x|^2/d = 1). Members: (a) one point per phase at `phases.sigma_b2`, chosen from the
theory (`eoc`, `neutrality_line`, checked against `phase_diagram`) with `phases.seeds` seeds each;
(b) a (sigma_w2, sigma_b2) grid, whose "steps to reach `train.target_acc` test accuracy" is drawn
over the theory phase diagram (the overlay figure). Per evaluated step: test f_max, train and test
accuracy and loss. The claim under test: the EOC starts deeply prejudiced, absorbs the bias fastest
and learns best; neutrality learns poorly.

Phase points (sigma_w2 at sigma_b2): ordered-deep = `ordered_factor` x EOC; EOC; prejudice =
geometric mean of EOC and the neutrality line (tanh); neutrality = `neutral_factor` x neutrality
line (tanh); chaotic-deep = `chaotic_factor` x EOC (ReLU, unbounded).

    python -m experiments.igb_train --out runs/igb_train_cpu            # cpu preset
    python -m experiments.igb_train --preset smoke --out /tmp/igb_train # seconds (tests)
    python -m experiments.igb_train --preset paper --out $OUT/igb_train_paper   # accelerator
    python -m experiments.igb_train --replot runs/igb_train_cpu          # figures from saved results

Measured (cpu preset: tanh and ReLU, width 128, depth 30, Adam lr 1e-4, batch 128, 300 steps,
binarised digits 1,295 train / 359 test, 3 seeds per phase point at sigma_b2 = 0.1, 10 grid members
per activation): 321 s wall on the 2-core CPU while other jobs shared it (load ~5), 190 s of CPU time.
Steps to 85 % test accuracy (per seed; evaluated every step to 20, then every 20) and final test accuracy:
  tanh ordered-deep (1.49)  f_max0 0.98   17, 40, 19   0.987 +- 0.001
       EOC (1.99)           f_max0 0.88   17, 10, 16   0.981 +- 0.008
       prejudice (2.41)     f_max0 0.82   20, 14, 15   0.952 +- 0.005
       neutrality (4.39)    f_max0 0.69   never        0.598 +- 0.029
  relu ordered-deep (1.5)   f_max0 1.00   60, 60, 40   0.975 +- 0.010   (bias absorbed, f_max <= 0.6, at 40, 40, 40)
       EOC (2.0)            f_max0 1.00   40, 40, 19   0.972 +- 0.006   (absorbed at 18, 7, 6)
       chaotic-deep (3.0)   f_max0 0.94   never        0.770 +- 0.034
Verdict at this scale: neutrality (and the ReLU chaotic side) learns poorly, as claimed; the EOC is
among the fastest and absorbs the bias faster than the ordered net for ReLU, but it does not learn
best: the ordered net matches or beats it by the end. Its backward factor chi_1^30 is 0.018 (tanh,
chi_1 = 0.87) and 2e-4 (ReLU, 0.75), but Adam rescales every parameter's step, so a uniformly vanishing
gradient slows it only a little. Just past the neutrality line (tanh, sigma_b2 = 0.02, sigma_w2 = 2)
training is as fast as at the EOC. README "Bias meets trainability" has the full table.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jaxinit import bias, cli
from jaxinit.igb_plots import plot_train_results as plot_all
from jaxinit.config import ConfigError, DataConfig
from jaxinit.models import deep

ACTS = ("tanh", "relu")


@dataclass(frozen=True)
class NetConfig:
    acts: tuple[str, ...] = ACTS
    width: int = 128
    depth: int = 30


@dataclass(frozen=True)
class PhaseConfig:
    sigma_b2: float = 0.1
    ordered_factor: float = 0.75
    chaotic_factor: float = 1.5
    neutral_factor: float = 1.5
    seeds: int = 3


@dataclass(frozen=True)
class GridConfig:
    sigma_w2: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 5.0)
    sigma_b2: tuple[float, ...] = (0.02, 0.5)   # the phase points add a row at phases.sigma_b2
    seeds: int = 1


@dataclass(frozen=True)
class TrainLoopConfig:
    steps: int = 300
    batch_size: int = 128
    lr: float = 1e-4
    eval_every: int = 20
    dense_until: int = 20          # evaluate every step up to here: the bias is absorbed early
    eval_train_n: int = 512        # training inputs on which train accuracy is measured (0 = all)
    target_acc: float = 0.85
    absorbed_fmax: float = 0.6     # "bias absorbed" = first step with test f_max below this
    seed: int = 0
    phase_res: int = 60            # theory phase diagram resolution per axis (overlay figure)


@dataclass(frozen=True)
class IGBTrainConfig:
    net: NetConfig = NetConfig()
    phases: PhaseConfig = PhaseConfig()
    grid: GridConfig = GridConfig()
    train: TrainLoopConfig = TrainLoopConfig()
    data: DataConfig = DataConfig(name="digits", normalize="sphere", binarize=True)


SMOKE = IGBTrainConfig(
    net=NetConfig(acts=("tanh",), width=16, depth=4),
    phases=PhaseConfig(seeds=1),
    grid=GridConfig(sigma_w2=(1.0, 3.0), sigma_b2=(0.1,)),
    train=TrainLoopConfig(steps=6, batch_size=32, lr=1e-3, eval_every=3, dense_until=2, phase_res=8),
    data=DataConfig(name="digits", normalize="sphere", binarize=True, n_train=256, n_test=128),
)
CPU = IGBTrainConfig()
PAPER = IGBTrainConfig(
    net=NetConfig(width=1000, depth=100),
    phases=PhaseConfig(seeds=5),
    grid=GridConfig(sigma_w2=(0.8, 1.0, 1.3, 1.6, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0), sigma_b2=(0.01, 0.05, 0.1, 0.3, 0.5, 1.0)),
    train=TrainLoopConfig(steps=2000, lr=1e-5, eval_every=20, dense_until=50, phase_res=200),
    data=DataConfig(name="mnist", normalize="sphere", binarize=True),
)
PRESETS = {"smoke": SMOKE, "cpu": CPU, "paper": PAPER}


def validate(cfg: IGBTrainConfig) -> None:
    n, p, g, t = cfg.net, cfg.phases, cfg.grid, cfg.train
    if unknown := set(n.acts) - set(ACTS):
        raise ConfigError(f"--net.acts: unknown {sorted(unknown)}; choose from {', '.join(ACTS)}")
    if n.width < 1 or n.depth < 2:
        raise ConfigError(f"--net: width >= 1 and depth >= 2, got {n.width}, {n.depth}")
    if any(not math.isfinite(v) or v <= 0 for v in g.sigma_w2) or any(not math.isfinite(v) or v < 0 for v in g.sigma_b2 + (p.sigma_b2,)):
        raise ConfigError("--grid / --phases: sigma_w2 must be > 0 and sigma_b2 >= 0 (finite)")
    if not (0 < p.ordered_factor < 1 and p.chaotic_factor > 1 and p.neutral_factor > 1):
        raise ConfigError("--phases: ordered_factor in (0, 1), chaotic_factor and neutral_factor > 1")
    if min(p.seeds, t.steps, t.batch_size, t.eval_every, t.phase_res) < 1 or min(g.seeds, t.eval_train_n) < 0:
        raise ConfigError("--phases.seeds, --train.steps, batch_size, eval_every, phase_res must be >= 1")
    if not (0 < t.lr and math.isfinite(t.lr)) or not 0 < t.target_acc <= 1 or not 0 < t.absorbed_fmax <= 1:
        raise ConfigError("--train: lr > 0, target_acc and absorbed_fmax in (0, 1]")


# ----------------------------------------------------------------------------------------- members
def phase_points(act: str, p: PhaseConfig) -> list[tuple[str, float]]:
    """(phase name, sigma_w2) at sigma_b2 = p.sigma_b2, placed by the theory (never hard-coded)."""
    from theory import meanfield as mf
    eoc = float(mf.eoc(p.sigma_b2, act))
    points = [("ordered-deep", p.ordered_factor * eoc), ("EOC", eoc)]
    neutral = float(mf.neutrality_line(p.sigma_b2, act))
    if math.isfinite(neutral) and neutral > eoc:
        points += [("prejudice", math.sqrt(eoc * neutral)), ("neutrality", p.neutral_factor * neutral)]
    else:   # unbounded activations: no neutral region, the chaotic side stays deeply prejudiced
        points.append(("chaotic-deep", p.chaotic_factor * eoc))
    return points


def theory_phase_names(act: str, sw: np.ndarray, sb: np.ndarray, depth: int) -> list[str]:
    """The theory's own label of each (sigma_w2, sigma_b2) point, to check the placement above."""
    from theory import phase
    names = []
    for w, b in zip(sw, sb):
        code = int(np.asarray(phase.phase_diagram(act, np.array([w]), np.array([b]), depth)["phase"]).ravel()[0])
        names.append(phase.PHASE_LEGEND[code])
    return names


def build_members(act: str, cfg: IGBTrainConfig) -> dict[str, np.ndarray]:
    """Phase members (several seeds) then grid members; equal seeds share their base draw."""
    rows = [(name, sw, cfg.phases.sigma_b2, s) for name, sw in phase_points(act, cfg.phases)
            for s in range(cfg.phases.seeds)]
    rows += [("grid", sw, sb, s) for sb in cfg.grid.sigma_b2 for sw in cfg.grid.sigma_w2 for s in range(cfg.grid.seeds)]
    role, sw, sb, seed = zip(*rows)
    return {"role": np.array(role), "sigma_w2": np.array(sw, float), "sigma_b2": np.array(sb, float),
            "seed": np.array(seed, np.int32)}


def load_flat(data_cfg: DataConfig) -> dict:
    from jaxinit.data import load_dataset
    ds = load_dataset(data_cfg)
    flat = lambda x: x.reshape(x.shape[0], -1)
    return {"x_train": flat(ds.x_train), "y_train": ds.y_train, "x_test": flat(ds.x_test), "y_test": ds.y_test,
            "n_classes": ds.n_classes}


# ----------------------------------------------------------------------------------------- main
def main(cfg: IGBTrainConfig, out: Path, resume: bool) -> None:
    import jax
    import jax.numpy as jnp
    import optax
    t_start = time.time()
    data = load_flat(cfg.data)
    if cfg.train.eval_train_n:
        data["x_train_eval"] = data["x_train"][:cfg.train.eval_train_n]
        data["y_train_eval"] = data["y_train"][:cfg.train.eval_train_n]
    key = jax.random.key(cfg.train.seed)
    steps_eval = bias.eval_steps(cfg.train.steps, cfg.train.eval_every, cfg.train.dense_until)
    results, timings = {}, {}
    for i, act in enumerate(cfg.net.acts):
        path = out / "results" / f"{act}.npz"
        if resume and path.exists():
            results[act] = dict(np.load(path))
            continue
        t0 = time.time()
        m = build_members(act, cfg)
        m["theory_phase"] = np.array(theory_phase_names(act, m["sigma_w2"], m["sigma_b2"], cfg.net.depth))
        spec = deep.DeepSpec(data["x_train"].shape[1], cfg.net.width, cfg.net.depth, data["n_classes"], act)
        members = bias.Members(jnp.asarray(m["sigma_w2"], jnp.float32), jnp.asarray(m["sigma_b2"], jnp.float32),
                               jnp.asarray(m["seed"]))
        hist = bias.train_members(jax.random.fold_in(key, i), members, spec, optax.adam(cfg.train.lr),
                                  {k: v for k, v in data.items() if k != "n_classes"}, cfg.train.steps,
                                  cfg.train.batch_size, steps_eval)
        results[act] = {**m, **hist, **theory_diagram(act, cfg)}
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **results[act])
        timings[act] = round(time.time() - t0, 1)
        print(f"{act}: {len(m['role'])} members x {cfg.train.steps} steps in {timings[act]} s", flush=True)
    write_metrics_jsonl(out / "metrics.jsonl", results)
    summary = {act: summarize(r, cfg.train) for act, r in results.items()}
    cli.write_json_atomic(out / "summary.json", summary)
    cli.write_json_atomic(out / "run.json", {"seconds_total": round(time.time() - t_start, 1), "seconds_per_act": timings,
                                             "platform": jax.default_backend()})
    for act, s in summary.items():
        for row in s["phases"]:
            print(f"{act} {row['phase']:>13} sw2={row['sigma_w2']:.3f}: fmax0 {row['fmax0_mean']:.2f}, "
                  f"absorbed at {row['steps_absorbed']}, target at {row['steps_to_target']}, "
                  f"final test acc {row['final_test_acc_mean']:.3f} +- {row['final_test_acc_std']:.3f}", flush=True)
    for p in plot_all(out):
        print(f"figure {p}")


def theory_diagram(act: str, cfg: IGBTrainConfig) -> dict[str, np.ndarray]:
    """Theory phase diagram on a grid spanning the trained one (saved, so figures need no theory run)."""
    from theory import meanfield as mf
    from theory import phase
    sw_all = cfg.grid.sigma_w2 + tuple(w for _, w in phase_points(act, cfg.phases))
    sb_all = cfg.grid.sigma_b2 + (cfg.phases.sigma_b2,)
    sw = np.geomspace(min(sw_all) / 1.3, max(sw_all) * 1.3, cfg.train.phase_res)
    sb = np.geomspace(max(min(sb_all), 1e-3) / 1.5, max(sb_all) * 1.5, cfg.train.phase_res)
    diagram = phase.phase_diagram(act, sw, sb, cfg.net.depth)
    codes = sorted(phase.PHASE_LEGEND)
    names = [phase.PHASE_LEGEND[c] for c in codes]
    eoc_line = np.asarray(mf.eoc(sb, act), float)                 # vectorised over sigma_b2
    neutral_line = np.asarray(mf.neutrality_line(sb, act), float)
    return {"pd_sigma_w2": sw, "pd_sigma_b2": sb, "pd_phase": np.asarray(diagram["phase"]),
            "pd_codes": np.array(codes), "pd_names": np.array(names), "pd_eoc": eoc_line, "pd_neutral": neutral_line}


# ----------------------------------------------------------------------------------------- results
def write_metrics_jsonl(path: Path, results: dict) -> None:
    """One row per evaluation per member (accuracies as fractions in [0, 1])."""
    with open(path, "w") as f:
        for act, r in results.items():
            for e, step in enumerate(r["step"]):
                for j in range(len(r["role"])):
                    f.write(json.dumps({"act": act, "member": j, "role": str(r["role"][j]),
                                        "sigma_w2": float(r["sigma_w2"][j]), "sigma_b2": float(r["sigma_b2"][j]),
                                        "seed": int(r["seed"][j]), "step": int(step),
                                        **{k: float(r[k][e, j]) for k in ("train_acc", "test_acc", "train_fmax",
                                                                           "test_fmax", "train_loss", "test_loss")},
                                        "diverged": not bool(r["alive"][e, j])}) + "\n")


def _stats(values: np.ndarray) -> tuple[float, float]:
    return float(np.nanmean(values)), float(np.nanstd(values))


def summarize(r: dict, t: TrainLoopConfig) -> dict:
    """Per phase (over seeds) and per grid point: initial f_max, steps to absorb the bias and to the target."""
    reach = bias.steps_to_target(r["step"], r["test_acc"], t.target_acc)
    absorbed = bias.steps_to_target(r["step"], -r["test_fmax"], -t.absorbed_fmax)   # first step with f_max <= threshold
    phases, grid = [], []
    for role in dict.fromkeys(r["role"]):
        idx = np.flatnonzero(r["role"] == role)
        row = lambda j: {"sigma_w2": float(r["sigma_w2"][j]), "sigma_b2": float(r["sigma_b2"][j]),
                         "theory_phase": str(r["theory_phase"][j])}
        if role == "grid":
            grid += [{**row(j), "seed": int(r["seed"][j]), "fmax0": float(r["test_fmax"][0, j]),
                      "steps_to_target": _none_if_nan(reach[j]), "final_test_acc": float(r["test_acc"][-1, j]),
                      "diverged": not bool(r["alive"][-1, j])} for j in idx]
            continue
        final, best = r["test_acc"][-1, idx], r["test_acc"][:, idx].max(axis=0)
        phases.append({"phase": str(role), **row(idx[0]), "n_seeds": len(idx),
                       "fmax0_mean": float(r["test_fmax"][0, idx].mean()),
                       "steps_absorbed": [_none_if_nan(v) for v in absorbed[idx]],
                       "steps_to_target": [_none_if_nan(v) for v in reach[idx]],
                       "final_test_acc_mean": _stats(final)[0], "final_test_acc_std": _stats(final)[1],
                       "best_test_acc_mean": _stats(best)[0], "final_test_fmax_mean": float(r["test_fmax"][-1, idx].mean()),
                       "diverged": int((~r["alive"][-1, idx]).sum())})
    return {"target_acc": t.target_acc, "absorbed_fmax": t.absorbed_fmax, "final_step": int(r["step"][-1]),
            "phases": phases, "grid": grid}


def _none_if_nan(v) -> float | None:
    return None if not np.isfinite(v) else int(v)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--replot":
        sys.exit(cli.replot("experiments.igb_train", sys.argv[2], plot_all))
    sys.exit(cli.run_experiment("experiments.igb_train", __doc__, IGBTrainConfig, PRESETS, "cpu", main,
                                "runs/igb_train_cpu", validate))
