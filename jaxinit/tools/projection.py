"""The paper table's cost: its shape, its FLOP count, and its hours projected from measured rates.

The table is the forgetting study's `paper` preset: every optimizer setting (7) x 8 sigma_w x 3 seeds =
24 ResNet-9 members per setting, 200 epochs of 351 steps at b = 128 on CIFAR-10's 45,000 training
images, each epoch (and the initialization) evaluated on train + val + test (45k + 5k + 10k images, or
`train.eval_train_subset` + 15k where the config has that field), a checkpoint every 5 epochs.

FLOPs (full-width ResNet-9 with 6,573,120 parameters, 32 x 32 x 3 inputs, b = 128): one member's training
step 253.8 GFLOP under sgd-like and adam-like settings, 321.0 GFLOP under muon (Newton-Schulz), the forward
pass 0.659 GFLOP per image: XLA's count of the CPU programs, which the backend-independent count of the
traced step (`jaxinit.tools.flops.member_step_flops`) reproduces within 1 % (a test holds both to it).

Hours (`project`): the settings' step times (sgd, momentum, nesterov and sgd_l2 at sgd's measured rate;
adam and adamw at adam's; muon at its own) x steps, plus evaluations x examples x the measured seconds
per example, plus saves x the measured seconds of one setting's save, plus one compile per setting.
"""
from __future__ import annotations

from typing import NamedTuple

MEMBER_STEP_FLOP = {"sgd": 253.8e9, "adam": 253.8e9, "muon": 321.0e9}
FORWARD_FLOP_PER_IMAGE = 0.659e9
RESNET9_PARAMS = 6_573_120
RATE_CLASS = {"sgd": "sgd", "momentum": "sgd", "nesterov": "sgd", "sgd_l2": "sgd", "adam": "adam", "adamw": "adam",
              "muon": "muon"}
CIFAR10_POOL, CIFAR10_TEST = 50_000, 10_000


class PaperTable(NamedTuple):
    settings: tuple[str, ...]
    members: int                 # per setting
    epochs: int
    steps_per_epoch: int
    eval_examples: int           # per member and evaluation: train (or its subset) + val + test
    evaluations: int             # the initialization + every evaluated epoch
    checkpoint_saves: int
    batch_size: int


def paper_table(cfg=None) -> PaperTable:
    """The shape of a `ForgettingConfig` run on CIFAR-10 (default: the `paper` preset)."""
    if cfg is None:
        from jaxinit.forgetting.config import PAPER as cfg
    d, t = cfg.data, cfg.train
    n_val = d.n_val or int(round(CIFAR10_POOL * d.val_fraction))
    n_train = min(d.n_train, CIFAR10_POOL - n_val) if d.n_train else CIFAR10_POOL - n_val
    n_test = min(d.n_test, CIFAR10_TEST) if d.n_test else CIFAR10_TEST
    subset = int(getattr(t, "eval_train_subset", 0) or 0)
    train_eval = min(subset, n_train) if subset > 0 else n_train
    epochs = range(1, t.epochs + 1)
    evaluated = [e for e in epochs if e % t.eval_every == 0 or e == t.epochs]
    saved = [e for e in epochs if t.checkpoint_every and (e % t.checkpoint_every == 0 or e == t.epochs)]
    return PaperTable(tuple(cfg.sweep.optimizers), len(cfg.sweep.sigma_w) * cfg.sweep.seeds, t.epochs,
                      n_train // t.batch_size, train_eval + n_val + n_test, 1 + len(evaluated), len(saved),
                      t.batch_size)


def table_flops(table: PaperTable) -> dict:
    """FLOPs of the table's training steps and evaluations (the constants above)."""
    train = sum(table.members * table.epochs * table.steps_per_epoch * MEMBER_STEP_FLOP[RATE_CLASS[s]]
                for s in table.settings)
    evaluation = (len(table.settings) * table.members * table.evaluations * table.eval_examples
                  * FORWARD_FLOP_PER_IMAGE)
    return {"train_flop": train, "eval_flop": evaluation, "total_flop": train + evaluation}


def project(table: PaperTable, rates: dict) -> dict:
    """Hours of the table from measured rates. ``rates``: ``step_s`` {rate class: seconds of one step of a
    setting's members}, optional ``compile_s`` {rate class: seconds}, ``eval_s_per_example`` (seconds per
    example, all members of a setting), ``checkpoint_s`` and ``checkpoint_bytes`` (one setting's save),
    ``achieved_flops`` (FLOP/s of the measured training step). A missing class takes sgd's rate and is
    named in ``assumed``; a missing evaluation or checkpoint rate leaves its part None."""
    steps = rates.get("step_s") or {}
    if "sgd" not in steps:
        return {"hours": None, "reason": "no measured training step of the sgd setting"}
    assumed, train_s, compile_s = [], 0.0, 0.0
    for s in table.settings:
        cls = RATE_CLASS.get(s, "sgd")
        if cls not in steps:
            assumed.append(f"{s} at sgd's step time (no {cls} measurement)")
            cls = "sgd"
        train_s += steps[cls] * table.steps_per_epoch * table.epochs
        compile_s += (rates.get("compile_s") or {}).get(cls, 0.0)
    n = len(table.settings)
    per_example = rates.get("eval_s_per_example")
    eval_s = None if per_example is None else n * table.evaluations * table.eval_examples * per_example
    save_s = rates.get("checkpoint_s")
    ckpt_s = None if save_s is None else n * table.checkpoint_saves * save_s
    parts = {"train_h": train_s / 3600, "eval_h": _hours(eval_s), "checkpoint_h": _hours(ckpt_s),
             "compile_h": compile_s / 3600}
    flops = table_flops(table)
    achieved = rates.get("achieved_flops")
    size = rates.get("checkpoint_bytes")
    return {**parts, "hours": sum(v for v in parts.values() if v is not None),
            "complete": eval_s is not None and ckpt_s is not None and not assumed,
            "epoch_s": (train_s + (eval_s or 0.0)) / table.epochs, "assumed": assumed,
            "checkpoint_bytes_per_save": None if size is None else size * n,
            **flops, "hours_at_train_flop_rate": flops["total_flop"] / achieved / 3600 if achieved else None,
            "table": table._asdict()}


def _hours(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 3600
