"""Forgetting on its own clock: each optimizer family swept along the clock the paper gives it.

Das et al. 2026 (docs/theory.md section 6): memory of sigma_w should decay on each mechanism's cumulative
clock, not with the epoch count: `T_SGD = (1/b) sum eta_k^2` (minibatch noise; plain SGD and, with the
effective step eta / (1 - mu), heavy-ball momentum), `T_L2 = lambda sum eta_k` (explicit decay, sgd_l2)
and `T_adapt = sum eta_k` (adaptive preconditioning: adam, adamw, muon). A *point* is one run of the
forgetting study (`fit`) with one setting at one (lr, decay, batch size, epochs); each family is swept
over its own clock by varying what its clock is made of (lr and batch size for sgd, lambda for sgd_l2,
lr and epochs for the adaptive family). Every point is its own run directory under `DIR/points/`, so an
interrupted sweep continues where it stopped.

Outputs per point (`clock_lines.line`): the setting, its clock's name, the median clock over members at the
selected epoch (`clock_value`) and at the end (`clock_value_end`), the spread under the paper's rule
with its t interval, the interpolated-selection and final spreads, n seeds and the point's knobs.
`clock_lines.verdicts`: per family, the clock value where the spread first falls below half of low-LR SGD's
(the `reference` point) and below 5 pp (`crossings`: log-linear interpolation between the bracketing
points, tied clock values at their mean spread), or None within the swept range, each with a 95 %
interval from resampling every point's seeds; `clock_lines.collapse`: for each pair of families the largest spread difference
where their clock ranges overlap (interpolated in log clock) -- the paper's organising claim is that
families put on their own clocks fall on one curve. Point directories are named by the exact values
(`_tag`), and a design with no point or with a point twice is refused (`validate`).

The clock test (presets `clock_test`, `adaptive_test`; `clock_test.py`): extra sgd points at other
epochs and batch sizes (`sgd_lr_epochs`, "lr@epochs[@batch]") whose horizons hold equal T_SGD at
different sum eta, equal sum eta at different T_SGD, and equal lr and steps at different noise.
Training and writing the sweep: `clock_run.py`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, NamedTuple

import numpy as np

from jaxinit.config import DataConfig, ModelConfig, OptConfig, SweepConfig, TrainConfig, check_float32
from jaxinit.errors import ConfigError
from jaxinit.forgetting.config import AnalysisConfig, ForgettingConfig, CPU_BASE
from jaxinit.forgetting.design_config import DesignConfig

FAMILY_CLOCK = {"sgd": "T_SGD", "momentum": "T_SGD", "sgd_l2": "T_L2", "adam": "T_adapt", "adamw": "T_adapt",
                "muon": "T_adapt"}


@dataclass(frozen=True)
class ClockSweep:
    families: tuple[str, ...] = ("sgd", "momentum", "sgd_l2", "adam", "adamw", "muon")
    """families to sweep (each along its own clock): sgd momentum sgd_l2 adam adamw muon"""
    sgd_lr: tuple[float, ...] = (0.0125, 0.025, 0.05, 0.1, 0.2)
    """sgd learning rates at the base batch size (T_SGD = lr^2 x steps / b)"""
    sgd_batch: tuple[int, ...] = (16, 32, 64, 256)
    """sgd batch sizes at the reference lr (more steps per epoch and more noise per step)"""
    sgd_lr_epochs: tuple[str, ...] = ()
    """extra sgd points lr@epochs or lr@epochs@batch (e.g. 0.2@20, 0.05@20@32): the clock test's runs"""
    momentum_lr: tuple[float, ...] = (0.00125, 0.0025, 0.005, 0.01, 0.02)
    """momentum (mu = opt.momentum) learning rates; the clock uses eta / (1 - mu)"""
    sgd_l2_lambda: tuple[float, ...] = (1e-4, 5e-4, 2e-3, 5e-3, 2e-2, 5e-2)
    """sgd_l2 coupled L2 coefficients at lr sgd_l2_lr (T_L2 = lambda x lr x steps)"""
    sgd_l2_lr: float = 0.1
    """sgd_l2 learning rate"""
    sgd_l2_runs: tuple[str, ...] = ()
    """extra sgd_l2 points lr@lambda@epochs or lr@lambda@epochs@batch (e.g. 0.05@0.04@100): equal T_L2 apart"""
    adaptive_lr: tuple[float, ...] = (2.5e-5, 1e-4, 4e-4, 1.6e-3, 6.4e-3, 2.5e-2)
    """adam / adamw / muon learning rates (T_adapt = lr x steps)"""
    adam_lr_epochs: tuple[str, ...] = ()
    """extra adam points lr@epochs (e.g. 0.0064@20): T_adapt reached with fewer / more steps"""
    adamw_weight_decay: float = 5e-2
    """adamw's decoupled weight decay at every point"""
    reference_lr: float = 0.05
    """low-LR SGD: the sgd point at this lr and the base batch size is the reference spread"""


@dataclass(frozen=True)
class ClocksConfig:
    data: DataConfig = CPU_BASE.data
    """data set and splits (shared by every point)"""
    model: ModelConfig = CPU_BASE.model
    """the network"""
    opt: OptConfig = OptConfig()
    """optimizer options shared by every point (schedule, momentum mu, Adam betas)"""
    train: TrainConfig = CPU_BASE.train
    """base batch size and epochs; points change one of them where their sweep says so"""
    sweep: SweepConfig = replace(CPU_BASE.sweep, optimizers=())
    """sigma_w values and seeds of every point (optimizers come from the families)"""
    clocks: ClockSweep = ClockSweep()
    """the per-family sweeps"""
    analysis: AnalysisConfig = AnalysisConfig()
    """selection rule of the figure and verdicts"""
    design: DesignConfig = DesignConfig()
    """replication over data splits and the design's verdicts (jaxinit.forgetting.design)"""


class Point(NamedTuple):
    name: str             # directory name under points/
    family: str           # setting label
    clock: str            # the family's own clock
    lr: float
    weight_decay: float   # L2 (sgd_l2) or decoupled decay (adamw); 0 otherwise
    batch_size: int
    epochs: int
    reference: bool = False


def _tag(x: float) -> str:
    """A value as it appears in a point's directory name: python's shortest round-trip repr, so two
    different floats never share a directory (0.05 -> "0.05", 0.050001 -> "0.050001", 2.5e-05 -> "2.5e-05")."""
    return repr(float(x)).replace("+", "")


def points(cfg: ClocksConfig) -> list[Point]:
    """Every point of the sweep, in family order (names are stable: they are directory names)."""
    c, b, e = cfg.clocks, cfg.train.batch_size, cfg.train.epochs
    out: list[Point] = []
    for fam in c.families:
        if fam == "sgd":
            out += [Point(f"sgd_lr{_tag(lr)}_b{b}", fam, "T_SGD", lr, 0.0, b, e, lr == c.reference_lr)
                    for lr in c.sgd_lr]
            out += [Point(f"sgd_lr{_tag(c.reference_lr)}_b{bb}", fam, "T_SGD", c.reference_lr, 0.0, bb, e)
                    for bb in c.sgd_batch if bb != b]
            out += [Point(f"sgd_lr{_tag(lr)}_b{bb or b}_e{ee}", fam, "T_SGD", lr, 0.0, bb or b, ee)
                    for lr, ee, bb in map(sgd_run, c.sgd_lr_epochs)]
        elif fam == "momentum":
            out += [Point(f"momentum_lr{_tag(lr)}_b{b}", fam, "T_SGD", lr, 0.0, b, e) for lr in c.momentum_lr]
        elif fam == "sgd_l2":
            out += [Point(f"sgd_l2_lam{_tag(lam)}", fam, "T_L2", c.sgd_l2_lr, lam, b, e) for lam in c.sgd_l2_lambda]
            out += [Point(f"sgd_l2_lr{_tag(lr)}_lam{_tag(lam)}_b{bb or b}_e{ee}", fam, "T_L2", lr, lam, bb or b, ee)
                    for lr, lam, ee, bb in map(l2_run, c.sgd_l2_runs)]
        else:
            wd = c.adamw_weight_decay if fam == "adamw" else 0.0
            out += [Point(f"{fam}_lr{_tag(lr)}_e{e}", fam, "T_adapt", lr, wd, b, e) for lr in c.adaptive_lr]
            if fam == "adam":
                out += [Point(f"adam_lr{_tag(lr)}_e{ee}", fam, "T_adapt", lr, 0.0, b, ee)
                        for lr, ee in map(lr_at_epochs, c.adam_lr_epochs)]
    return out


def lr_at_epochs(text: str, field: str = "adam_lr_epochs") -> tuple[float, int]:
    """``"0.0064@20"`` -> (0.0064, 20); anything else is a one-line ConfigError naming ``--clocks.<field>``."""
    lr, sep, epochs = text.partition("@")
    try:
        value, n = float(lr), int(epochs)
    except ValueError:
        raise ConfigError(f"--clocks.{field}: expected lr@epochs, got {text!r}") from None
    if not sep or not value > 0 or n < 1:
        raise ConfigError(f"--clocks.{field}: expected lr@epochs with lr > 0 and epochs >= 1, got {text!r}")
    return value, n


def sgd_run(text: str) -> tuple[float, int, int | None]:
    """``"0.2@20"`` -> (0.2, 20, None): the base batch size; ``"0.05@20@32"`` -> (0.05, 20, 32)."""
    head, _, batch = text.rpartition("@") if text.count("@") == 2 else (text, "", None)
    lr, epochs = lr_at_epochs(head, "sgd_lr_epochs")
    if batch is None:
        return lr, epochs, None
    if not batch.isdigit() or int(batch) < 1:
        raise ConfigError(f"--clocks.sgd_lr_epochs: expected lr@epochs@batch with batch >= 1, got {text!r}")
    return lr, epochs, int(batch)


def l2_run(text: str) -> tuple[float, float, int, int | None]:
    """``"0.05@0.04@100"`` -> (lr 0.05, lambda 0.04, 100 epochs, None: the base batch); ``"...@100@16"``: b = 16."""
    parts = text.split("@")
    try:
        lr, lam, epochs = float(parts[0]), float(parts[1]), int(parts[2])
        batch = int(parts[3]) if len(parts) == 4 else None
    except (ValueError, IndexError):
        raise ConfigError(f"--clocks.sgd_l2_runs: expected lr@lambda@epochs[@batch], got {text!r}") from None
    if len(parts) > 4 or not (lr > 0 and lam > 0 and epochs >= 1 and (batch is None or batch >= 1)):
        raise ConfigError(f"--clocks.sgd_l2_runs: expected lr@lambda@epochs[@batch] with lr, lambda > 0, "
                          f"epochs, batch >= 1, got {text!r}")
    return lr, lam, epochs, batch


EVAL_STEPS = (1, 2, 5, 10, 20, 40)


def eval_every(cfg: ClocksConfig, epochs: int) -> int:
    """A point's evaluation cadence: train.eval_every, coarsened for long points when design.evals is set."""
    base, n = cfg.train.eval_every, cfg.design.evals
    if n <= 0 or epochs <= n:
        return base
    return max(base, next((k for k in EVAL_STEPS if k * n >= epochs), EVAL_STEPS[-1]))


def point_dir(p: Point, split: int = 0) -> str:
    """A point's directory under points/: its name on split 0, name_split<k> on the others."""
    return p.name if split == 0 else f"{p.name}_split{split}"


def point_config(cfg: ClocksConfig, p: Point, split: int = 0) -> ForgettingConfig:
    """The forgetting-study config of one point (one setting, its lr and decay, batch size, epochs) on data
    split `split` (data.split_seed + split)."""
    decay = (f"{p.family}={p.weight_decay}",) if p.family in ("sgd_l2", "adamw", "muon") else ()
    opt = replace(cfg.opt, lr=None, weight_decay=None, setting_lr=(f"{p.family}={p.lr}",), setting_weight_decay=decay)
    train = replace(cfg.train, batch_size=p.batch_size, epochs=p.epochs, eval_every=eval_every(cfg, p.epochs),
                    checkpoint_every=min(cfg.train.checkpoint_every, p.epochs) if cfg.train.checkpoint_every else 0)
    data = replace(cfg.data, split_seed=cfg.data.split_seed + split) if split else cfg.data
    return ForgettingConfig(data=data, model=cfg.model, opt=opt, train=train,
                            sweep=replace(cfg.sweep, optimizers=(p.family,)), analysis=cfg.analysis)


def _refuse_duplicates(c: ClockSweep) -> None:
    """Two equal values in one sweep would train one point twice into one directory: refused. Values
    equal in float32 (the precision the device uses) count as equal; "lr@epochs" pairs compare as pairs."""
    for name in ("sgd_lr", "sgd_batch", "momentum_lr", "sgd_l2_lambda", "adaptive_lr", "adam_lr_epochs",
                 "sgd_lr_epochs", "sgd_l2_runs"):
        values = getattr(c, name)
        if name == "adam_lr_epochs":
            keys = [(float(np.float32(lr)), n) for lr, n in map(lr_at_epochs, values)]
        elif name == "sgd_lr_epochs":
            keys = [(float(np.float32(lr)), n, bb) for lr, n, bb in map(sgd_run, values)]
        elif name == "sgd_l2_runs":
            keys = [(float(np.float32(lr)), float(np.float32(lam)), n, bb) for lr, lam, n, bb in map(l2_run, values)]
        else:
            keys = [float(np.float32(v)) for v in values]
        if len(set(keys)) != len(keys):
            dup = next(v for v, k in zip(values, keys) if keys.count(k) > 1)
            raise ConfigError(f"--clocks.{name}: duplicate value {dup} in {tuple(values)}; every point must differ")


def validate(cfg: ClocksConfig) -> None:
    from jaxinit.forgetting.config import validate as validate_point
    c = cfg.clocks
    if not c.families:
        raise ConfigError(f"--clocks.families is empty: the clock design has no point; give some of "
                          f"{', '.join(FAMILY_CLOCK)}")
    unknown = [f for f in c.families if f not in FAMILY_CLOCK]
    if unknown or len(set(c.families)) != len(c.families):
        raise ConfigError(f"--clocks.families: unknown or repeated family in {c.families}; "
                          f"known: {', '.join(FAMILY_CLOCK)}")
    for name in ("sgd_lr", "momentum_lr", "sgd_l2_lambda", "adaptive_lr"):
        values = getattr(c, name)
        if any(not v > 0 for v in values):
            raise ConfigError(f"--clocks.{name}: values must be > 0, got {values}")
        for v in values:
            check_float32(f"clocks.{name}", v)
    if any(v < 1 for v in c.sgd_batch):
        raise ConfigError("--clocks.sgd_batch values must be >= 1")
    for text in c.adam_lr_epochs:
        lr_at_epochs(text)
    for text in c.sgd_lr_epochs:
        lr, _, _ = sgd_run(text)
        check_float32("clocks.sgd_lr_epochs", lr)
    for text in c.sgd_l2_runs:
        lr, lam, _, _ = l2_run(text)
        check_float32("clocks.sgd_l2_runs", lr)
        check_float32("clocks.sgd_l2_runs", lam)
    d = cfg.design
    if d.splits < 1 or d.evals < 0 or not 0 <= d.trained <= 1:
        raise ConfigError(f"--design: splits >= 1, evals >= 0 and 0 <= trained <= 1, got splits={d.splits}, "
                          f"evals={d.evals}, trained={d.trained}")
    _refuse_duplicates(c)
    empty = [f for f in c.families if not any(p.family == f for p in points(cfg))]
    if empty:
        raise ConfigError(f"--clocks: the sweep of {empty[0]} is empty; give its values")
    if "sgd" in c.families and c.reference_lr not in c.sgd_lr:
        raise ConfigError(f"--clocks.reference_lr={c.reference_lr} must be one of --clocks.sgd_lr {c.sgd_lr}")
    names = [p.name for p in points(cfg)]
    runs = [(p.family, float(np.float32(p.lr)), p.weight_decay, p.batch_size, p.epochs) for p in points(cfg)]
    names += [p.name for p, r in zip(points(cfg), runs) if runs.count(r) > 1]   # one run under two names
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:   # e.g. an adam lr@epochs pair that the lr sweep already has at the base epochs
        raise ConfigError(f"--clocks: point {twice[0]} appears twice in the design; every point must differ")
    for p in points(cfg):
        validate_point(point_config(cfg, p))
    parse_pairs(cfg)


# --------------------------------------------------------------------------- parsing the design's contrasts
def _cell_ref(text: str, names: Mapping[str, Any], what: str) -> tuple[str, int]:
    name, sep, epoch = text.strip().rpartition("@")
    if not sep or name not in names or not epoch.isdigit():
        raise ConfigError(f"--design.{what}: {text!r} is not point@epoch of a point of this design")
    return name, int(epoch)


def parse_pairs(cfg) -> tuple[list[tuple[str, tuple, tuple]], list[tuple[str, list[tuple]]]]:
    """(pairs [(label, (A, epoch), (B, epoch))], series [(label, [(point, epoch), ...])]) of `cfg.design`;
    a reference to no point, or to an epoch its point does not summarise, is a one-line ConfigError."""
    from jaxinit.forgetting.clock_test import horizons
    pts = {p.name: p for p in points(cfg)}

    def check(ref, what):
        p = pts[ref[0]]
        if ref[1] not in horizons(p.epochs, eval_every(cfg, p.epochs), cfg.design.horizons):
            raise ConfigError(f"--design.{what}: {ref[0]}@{ref[1]} is not a horizon of that point")
        return ref

    pairs, series = [], []
    for text in cfg.design.pairs:
        label, sep, rest = text.partition("=")
        a, slash, b = rest.partition("/")
        if not sep or not slash:
            raise ConfigError(f"--design.pairs: expected label=A@epoch/B@epoch, got {text!r}")
        pairs.append((label, check(_cell_ref(a, pts, "pairs"), "pairs"), check(_cell_ref(b, pts, "pairs"), "pairs")))
    for text in cfg.design.batch_series:
        label, sep, rest = text.partition("=")
        refs = [check(_cell_ref(r, pts, "batch_series"), "batch_series") for r in rest.split(",")] if sep else []
        if len(refs) < 2 or len({pts[n].batch_size for n, _ in refs}) < 2:
            raise ConfigError(f"--design.batch_series: expected label=A@epoch,B@epoch,... over >= 2 batch sizes, "
                              f"got {text!r}")
        series.append((label, refs))
    return pairs, series
