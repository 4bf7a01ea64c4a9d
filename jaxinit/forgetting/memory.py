"""Initialization-memory analysis: best-validation selection, spread over sigma_w, tau_interp,
repair gap and forgetting clocks.

Definitions follow THEORY.md §6 (after Das et al. 2026, arXiv 2605.29152, "forgetting-time"):

- *Initialization memory* is the dependence of the validation-selected predictor on the init
  scale `sigma_w`. Its headline number is the **spread**: max - min over `sigma_w` of the test
  accuracy at the best-validation checkpoint, in percentage points.
- The **best epoch** is the first epoch with the lowest validation loss (DESIGN.md).
- `tau_interp` is the first epoch at which the training accuracy reaches 99.5 % (interpolation);
  the **repair gap** is what validation accuracy gains (or loses) after that point.
- **Forgetting clocks** for a step-size sequence `eta_k`, batch size `b` and L2 / weight-decay
  coefficient `lambda`: `T_SGD = (1/b) sum_k eta_k^2`, `T_L2 = lambda sum_k eta_k`,
  `T_adapt = sum_k eta_k`.

Pure python / numpy on the rows of `metrics.jsonl` (no jax), so that figures and summaries can be
recomputed from saved results. Everything returned by `summarize` is plain JSON: python floats,
ints, bools, None (NaN and infinities become None), with no timings, so equal runs give equal files.

Row fields used (one row per evaluation per member): `member`, `optimizer`, `sigma_w`, `seed`,
`epoch` (0 = evaluation at initialization), `train_acc`, `val_loss`, `val_acc`, `test_acc`,
`param_norm`, `diverged`. Losses of a diverged member may be NaN / None; they are ignored.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

INTERP_THRESHOLD = 0.995
# Accuracies are float32 on the device; averaged over batches, an exact 99.5 % can arrive as
# 0.99499999. Without this slack such a member would be reported as never interpolating.
_ACC_SLACK = 1e-6

CLOCKS = ("T_SGD", "T_L2", "T_adapt")


# --------------------------------------------------------------------------- small helpers
def _num(x: Any) -> float:
    """A row value as float; None, non-numbers and non-finite values become NaN."""
    if x is None or isinstance(x, bool):
        return math.nan
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def _opt(x: Any) -> float | None:
    """A value for JSON: finite float or None."""
    v = _num(x)
    return None if math.isnan(v) else v


def _by_epoch(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows of one member sorted by epoch, one per epoch.

    A resumed run may append an epoch twice (the checkpoint lags the metrics file); the later row
    wins because it is the one the finished run continued from.
    """
    last: dict[int, Mapping[str, Any]] = {}
    for r in rows:
        last[int(r["epoch"])] = r
    return [last[e] for e in sorted(last)]


def _row_at(rows: Sequence[Mapping[str, Any]], epoch: int | None) -> Mapping[str, Any] | None:
    if epoch is None:
        return None
    for r in _by_epoch(rows):
        if int(r["epoch"]) == epoch:
            return r
    return None


def _per_member(values: Any, i: int, default: Any = None) -> Any:
    """Member i's scalar (batch size, lambda): from a mapping, a sequence / 1-D array, or one value for all."""
    if values is None:
        return default
    if isinstance(values, Mapping):
        return values.get(i, values.get(str(i), default))
    if isinstance(values, (list, tuple)) or (isinstance(values, np.ndarray) and values.ndim == 1):
        return values[i]
    return values


def _member_etas(etas: Any, i: int) -> Any:
    """Member i's step sizes: from a mapping, a list of sequences, a (members, steps) array, or
    one 1-D array shared by all members (members that train together take the same steps)."""
    if etas is None:
        return None
    if isinstance(etas, Mapping):
        return etas.get(i, etas.get(str(i)))
    if isinstance(etas, np.ndarray):
        return etas[i] if etas.ndim == 2 else etas
    return etas[i]


def to_jsonable(obj: Any) -> Any:
    """Recursively: numpy scalars/arrays -> python, NaN/inf -> None, tuples -> lists."""
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _opt(obj)
    return obj


# --------------------------------------------------------------------------- per-member metrics
def best_epoch(rows: Sequence[Mapping[str, Any]]) -> int | None:
    """The first epoch with the lowest validation loss (DESIGN.md; THEORY.md §6 best-val checkpoint).

    Epoch 0, the evaluation at initialization, is a candidate: the selection rule is "lowest
    validation loss among the evaluated checkpoints", and the init is one of them. Ties go to the
    earliest epoch; NaN / None losses (a diverged member) are ignored; None if no loss is finite.
    """
    best, best_loss = None, math.inf
    for r in _by_epoch(rows):
        loss = _num(r.get("val_loss"))
        if loss < best_loss:  # strict: a later equal loss does not replace the first
            best, best_loss = int(r["epoch"]), loss
    return best


def tau_interp(rows: Sequence[Mapping[str, Any]], threshold: float = INTERP_THRESHOLD) -> int | None:
    """First epoch with training accuracy >= `threshold` (99.5 %: "interpolation"), None if never.

    Accuracies are fractions in [0, 1]; a float32 slack of 1e-6 is allowed (see `_ACC_SLACK`).
    """
    for r in _by_epoch(rows):
        if _num(r.get("train_acc")) >= threshold - _ACC_SLACK:
            return int(r["epoch"])
    return None


def repair_gap(rows: Sequence[Mapping[str, Any]], threshold: float = INTERP_THRESHOLD) -> float | None:
    """Validation accuracy at the final epoch minus validation accuracy at `tau_interp`.

    Positive: training past interpolation still improved generalization ("repair"); negative: it
    hurt. None when the member never interpolates or either accuracy is not finite. A fraction,
    like the accuracies it subtracts.
    """
    ordered = _by_epoch(rows)
    tau = tau_interp(ordered, threshold)
    if tau is None or not ordered:
        return None
    at_tau = _num(_row_at(ordered, tau).get("val_acc"))
    final = _num(ordered[-1].get("val_acc"))
    gap = final - at_tau
    return None if math.isnan(gap) else gap


def clocks(etas: Any, batch_size: int, l2: float) -> dict[str, float]:
    """Forgetting clocks of THEORY.md §6 for the step sizes actually taken.

    `etas`: eta_k for every optimizer step k = 0..steps-1. `batch_size`: b. `l2`: lambda, the coupled
    L2 coefficient or the decoupled weight decay (both shrink weights by ~ eta_k * lambda per step).
    Returns `T_SGD = (1/b) sum eta_k^2` (minibatch / finite-step noise), `T_L2 = lambda sum eta_k`
    (explicit norm decay) and `T_adapt = sum eta_k` (adaptive preconditioning).
    """
    eta = np.asarray(etas, dtype=np.float64).reshape(-1)
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    total = float(eta.sum())
    return {"T_SGD": float(np.square(eta).sum()) / batch_size,
            "T_L2": float(l2) * total,
            "T_adapt": total}


def member_summary(rows: Sequence[Mapping[str, Any]], member_info: Mapping[str, Any],
                   etas: Any, batch_size: int, l2: float) -> dict[str, Any]:
    """The `summary.json` entry of one member (DESIGN.md keys plus a few extras).

    `rows`: this member's metrics rows (any order). `member_info`: at least `optimizer`, `sigma_w`,
    `seed`; an optional `diverged` flag is or-ed with the rows' flags, and an optional `member`
    index is copied. `etas` may be None when the schedule is unknown (clocks are then None).

    Extras beyond DESIGN.md: `member`, `val_acc_at_best`, `param_norm_best` (the norm of the selected
    predictor, which is what radial memory is about), `final_epoch` and `test_acc_final` (to compare
    the selected checkpoint with the last one).
    """
    ordered = _by_epoch(rows)
    best = best_epoch(ordered)
    at_best = _row_at(ordered, best) or {}
    first = ordered[0] if ordered else {}
    last = ordered[-1] if ordered else {}
    diverged = bool(member_info.get("diverged", False)) or any(bool(r.get("diverged")) for r in ordered)
    clk = clocks(etas, batch_size, l2) if etas is not None else dict.fromkeys(CLOCKS)
    out = {
        "optimizer": member_info["optimizer"],
        "sigma_w": float(member_info["sigma_w"]),
        "seed": int(member_info["seed"]),
        "best_epoch": best,
        "test_acc_at_best": _opt(at_best.get("test_acc")),
        "train_acc_at_best": _opt(at_best.get("train_acc")),
        "val_acc_at_best": _opt(at_best.get("val_acc")),
        "tau_interp": tau_interp(ordered),
        "repair_gap": repair_gap(ordered),
        # init = the epoch-0 row (the earliest row if epoch 0 is missing), final = the last row
        "param_norm_init": _opt(first.get("param_norm")),
        "param_norm_best": _opt(at_best.get("param_norm")),
        "param_norm_final": _opt(last.get("param_norm")),
        "final_epoch": int(last["epoch"]) if ordered else None,
        "test_acc_final": _opt(last.get("test_acc")),
        "clocks": clk,
        "diverged": diverged,
    }
    if "member" in member_info:
        out = {"member": int(member_info["member"]), **out}
    return to_jsonable(out)


# --------------------------------------------------------------------------- per-setting spread
def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson r, or None with fewer than 3 points (2 points always give +-1) or zero variance."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def _sigma_key(s: Any) -> float:
    # sigma_w values pass through JSON; rounding makes 0.30000000000000004 and 0.3 one grid point
    return round(float(s), 12)


def acc_curve(members: Sequence[Mapping[str, Any]], label: str,
              key: str = "test_acc_at_best") -> dict[str, list]:
    """Seed statistics of `key` per sigma_w for one setting, non-diverged members only.

    Returns lists aligned on sorted `sigma_w`: `mean`, `std` (ddof=1, NaN with one seed), `min`,
    `max` and `n` (number of seeds that contributed).
    """
    groups: dict[float, list[float]] = {}
    for m in members:
        if m.get("optimizer") != label or m.get("diverged"):
            continue
        v = _num(m.get(key))
        if not math.isnan(v):
            groups.setdefault(_sigma_key(m["sigma_w"]), []).append(v)
    sig = sorted(groups)
    vals = [np.asarray(groups[s]) for s in sig]
    return {"sigma_w": sig,
            "mean": [float(v.mean()) for v in vals],
            "std": [float(v.std(ddof=1)) if v.size >= 2 else math.nan for v in vals],
            "min": [float(v.min()) for v in vals],
            "max": [float(v.max()) for v in vals],
            "n": [int(v.size) for v in vals]}


def _per_seed_spread(members: Sequence[Mapping[str, Any]], key: str) -> dict[int, float]:
    """100 * (max - min over sigma_w) of `key`, per seed; a seed needs >= 2 usable members."""
    by_seed: dict[int, list[float]] = {}
    for m in members:
        v = _num(m.get(key))
        if not math.isnan(v):
            by_seed.setdefault(int(m["seed"]), []).append(v)
    return {s: 100.0 * (max(v) - min(v)) for s, v in sorted(by_seed.items()) if len(v) >= 2}


def spread(members: Sequence[Mapping[str, Any]], label: str) -> dict[str, Any]:
    """Initialization memory of one setting (`optimizer == label`), THEORY.md §6.

    - `spread_pp`: for each seed, 100 * (max - min over sigma_w of `test_acc_at_best`); the mean over
      seeds. Seeds are paired draws, so the spread is taken within a seed before averaging: a
      seed-averaged curve would shrink the spread by averaging noise away. `spread_pp_std`: the
      seed-to-seed standard deviation (ddof=1; None with fewer than 2 seeds). `spread_pp_per_seed`
      lists them; `n_seeds` counts seeds with >= 2 usable members.
    - `spread_pp_final`: the same at the final epoch (`test_acc_final`), to see what selection keeps.
    - `min_test_acc`, `max_test_acc`: min and max over sigma_w of the *seed-averaged* test accuracy
      at best-val (so with several seeds `100*(max-min)` may be below `spread_pp`).
    - `all_interpolated`: every member of the setting, diverged ones included, has a `tau_interp`
      (a diverged member counts only if it got there before diverging). False for no members.
    - `radial_memory`: Pearson r across sigma_w of the seed-averaged final vs initial parameter
      norms (r near 1: the network's radius still remembers the init scale); `radial_memory_best`
      uses the norm at the best epoch. None below 3 sigma_w values or without variance.
    - Diverged members are excluded from everything above except `all_interpolated`, and counted
      in `n_diverged` (of `n_members`).
    - `clocks`: the median over the non-diverged members of each clock (None if none).
    """
    mine = [m for m in members if m.get("optimizer") == label]
    alive = [m for m in mine if not m.get("diverged")]
    per_seed = _per_seed_spread(alive, "test_acc_at_best")
    per_seed_final = _per_seed_spread(alive, "test_acc_final")
    vals = np.asarray(list(per_seed.values()), dtype=np.float64)
    curve = acc_curve(alive, label)
    n_init = acc_curve(alive, label, "param_norm_init")
    n_final = acc_curve(alive, label, "param_norm_final")
    n_best = acc_curve(alive, label, "param_norm_best")

    def radial(other: dict[str, list]) -> float | None:
        common = sorted(set(n_init["sigma_w"]) & set(other["sigma_w"]))
        x = [n_init["mean"][n_init["sigma_w"].index(s)] for s in common]
        y = [other["mean"][other["sigma_w"].index(s)] for s in common]
        return _pearson(x, y)

    clk = {}
    for c in CLOCKS:
        xs = [_num((m.get("clocks") or {}).get(c)) for m in alive]
        xs = [x for x in xs if not math.isnan(x)]
        clk[c] = float(np.median(xs)) if xs else None

    out = {
        "spread_pp": float(vals.mean()) if vals.size else None,
        "spread_pp_std": float(vals.std(ddof=1)) if vals.size >= 2 else None,
        "spread_pp_per_seed": [per_seed[s] for s in per_seed],
        "n_seeds": int(vals.size),
        "spread_pp_final": float(np.mean(list(per_seed_final.values()))) if per_seed_final else None,
        "min_test_acc": min(curve["mean"]) if curve["mean"] else None,
        "max_test_acc": max(curve["mean"]) if curve["mean"] else None,
        "all_interpolated": bool(mine) and all(m.get("tau_interp") is not None for m in mine),
        "radial_memory": radial(n_final),
        "radial_memory_best": radial(n_best),
        "n_members": len(mine),
        "n_diverged": len(mine) - len(alive),
        "clocks": clk,
    }
    return to_jsonable(out)


def setting_labels(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """Setting labels in order of first appearance (member-index order), for deterministic output."""
    seen: list[str] = []
    for m in members:
        if m["optimizer"] not in seen:
            seen.append(m["optimizer"])
    return seen


def summarize(rows: Sequence[Mapping[str, Any]], members_info: Sequence[Mapping[str, Any]] | None,
              etas_by_member: Any, batch_size: Any, l2_by_member: Any) -> dict[str, Any]:
    """The whole `summary.json`: `{"members": [...], "spread": {label: {...}}}`.

    `members_info[i]` describes member i (`optimizer`, `sigma_w`, `seed`, optional `diverged`); if
    None it is read from each member's first row. `etas_by_member`: a mapping {member: etas}, a list
    of per-member sequences, a (members, steps) array, or one 1-D numpy array shared by all members.
    `batch_size`, `l2_by_member`: a mapping, a sequence indexed by member, or one value for all.
    Members are listed in member-index order; the output is JSON-ready and deterministic.
    """
    rows_by_member: dict[int, list[Mapping[str, Any]]] = {}
    for r in rows:
        rows_by_member.setdefault(int(r["member"]), []).append(r)
    if members_info is None:
        members_info = [{k: rows_by_member[i][0][k] for k in ("optimizer", "sigma_w", "seed")}
                        for i in sorted(rows_by_member)]
    members = []
    for i, info in enumerate(members_info):
        member = int(info.get("member", i))
        members.append(member_summary(rows_by_member.get(member, []), {**info, "member": member},
                                      _member_etas(etas_by_member, member),
                                      _per_member(batch_size, member),
                                      _per_member(l2_by_member, member, 0.0)))
    members.sort(key=lambda m: m["member"])
    return to_jsonable({"members": members,
                        "spread": {lab: spread(members, lab) for lab in setting_labels(members)}})


# --------------------------------------------------------------------------- files and tables
def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a `metrics.jsonl` file.

    A killed run may leave a truncated last line: it is dropped. An unparsable line anywhere else
    is corruption and raises ValueError. NaN / Infinity tokens (python's json) are accepted.
    """
    lines = Path(path).read_text().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    rows = []
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines) - 1:
                break  # the partial write of an interrupted run
            raise ValueError(f"{path}: line {n + 1} is not JSON") from None
    return rows


def _fmt(x: Any, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def markdown_table(summary: Mapping[str, Any]) -> str:
    """README table of a summary, one row per setting.

    Columns: setting | n seeds | spread pp (mean ± seed std) | min / max test acc (%, seed-averaged,
    at best val) | all interpolated | median clocks T_SGD, T_L2, T_adapt. Diverged counts are
    appended to the setting name when non-zero.
    """
    head = ("| setting | n seeds | spread (pp) | min / max test acc (%) | all interpolated "
            "| T_SGD | T_L2 | T_adapt |\n|---|---|---|---|---|---|---|---|")
    lines = [head]
    for label, s in summary["spread"].items():
        name = label + (f" ({s['n_diverged']} diverged)" if s.get("n_diverged") else "")
        sp = _fmt(s.get("spread_pp"), ".1f")
        if s.get("spread_pp_std") is not None:
            sp += f" ± {s['spread_pp_std']:.1f}"
        lo, hi = s.get("min_test_acc"), s.get("max_test_acc")
        acc = f"{_fmt(None if lo is None else 100 * lo, '.1f')} / {_fmt(None if hi is None else 100 * hi, '.1f')}"
        clk = s.get("clocks") or {}
        lines.append(f"| {name} | {s.get('n_seeds', 0)} | {sp} | {acc} | "
                     f"{'yes' if s.get('all_interpolated') else 'no'} | "
                     + " | ".join(_fmt(clk.get(c), '.3g') for c in CLOCKS) + " |")
    return "\n".join(lines) + "\n"
