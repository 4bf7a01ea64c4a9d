"""Per-member metrics of the initialization-memory study, from one member's history of metrics rows.

Selection (`best_epoch`, `best_epoch_interpolated`), interpolation (`tau_interp`, `repair_gap`),
divergence (`diverged_step`, `after_divergence`), kernel norms (`kernel_norm`), forgetting clocks on
the effective step (`clocks`, `clocks_at_step`) and measured from the updates (`measured_clocks`),
matched progress (`at_train_acc`) and the member's `summary.json` entry
(`member_summary`); `memory` builds the per-setting spreads on top. Definitions: `memory`'s docstring
and docs/theory.md §6. Pure python / numpy (no jax).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from jaxinit.jsonsafe import finite_or_none, to_json
from jaxinit.run.runs import read_jsonl


INTERP_THRESHOLD = 0.995
# Accuracies are float32 on the device; averaged over batches, an exact 99.5 % can arrive as
# 0.99499999. Without this slack such a member would be reported as never interpolating.
_ACC_SLACK = 1e-6

CLOCKS = ("T_SGD", "T_L2", "T_adapt")
# Clocks measured from the updates the optimizer actually made (rows' `update_rms_sum` / `update_ms_sum`).
MEASURED_CLOCKS = {"T_update": "update_rms_sum", "T_update2": "update_ms_sum"}
# Matched progress: test accuracy at the first epoch a member reaches each train accuracy.
PROGRESS_THRESHOLDS = (0.8, 0.9, 0.95, 0.995)


# --------------------------------------------------------------------------- small helpers
def as_float(x: Any) -> float:
    """A row value as float; None, bools, non-numbers and non-finite values become NaN."""
    v = finite_or_none(x)
    return math.nan if v is None else v


def by_epoch(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows of one member sorted by epoch, one per epoch.

    A resumed run may append an epoch twice (the checkpoint lags the metrics file); the later row
    wins because it is the one the finished run continued from.
    """
    last: dict[int, Mapping[str, Any]] = {}
    for r in rows:
        last[int(r["epoch"])] = r
    return [last[e] for e in sorted(last)]


def row_at(rows: Sequence[Mapping[str, Any]], epoch: int | None) -> Mapping[str, Any] | None:
    """The row of `epoch` (the later one of duplicates), None if absent or `epoch` is None."""
    if epoch is None:
        return None
    for r in by_epoch(rows):
        if int(r["epoch"]) == epoch:
            return r
    return None


def rows_by_member(rows: Iterable[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    """{member index: its rows}, in sorted member order."""
    out: dict[int, list[Mapping[str, Any]]] = {}
    for r in rows:
        out.setdefault(int(r["member"]), []).append(r)
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- per-member metrics
def best_epoch(rows: Sequence[Mapping[str, Any]]) -> int | None:
    """The first epoch with the lowest validation loss (docs/design.md; docs/theory.md §6 best-val checkpoint).

    Epoch 0, the evaluation at initialization, is a candidate: the selection rule is "lowest
    validation loss among the evaluated checkpoints", and the init is one of them. Ties go to the
    earliest epoch; NaN / None losses (a diverged member) are ignored; None if no loss is finite.
    """
    best, best_loss = None, math.inf
    for r in by_epoch(rows):
        loss = as_float(r.get("val_loss"))
        if loss < best_loss:  # strict: a later equal loss does not replace the first
            best, best_loss = int(r["epoch"]), loss
    return best


def _interpolates(row: Mapping[str, Any], threshold: float) -> bool:
    return as_float(row.get("train_acc")) >= threshold - _ACC_SLACK


def best_epoch_interpolated(rows: Sequence[Mapping[str, Any]], threshold: float = INTERP_THRESHOLD) -> int | None:
    """The first epoch with the lowest validation loss among those with train accuracy >= `threshold`.

    Rows evaluated after the member diverged (`after_divergence`) are not candidates: they show the
    frozen state of a member that stopped training. None if no candidate has a finite validation loss.
    """
    ordered = by_epoch(rows)
    div_step = diverged_step(ordered)
    return best_epoch([r for r in ordered if _interpolates(r, threshold) and not after_divergence(r, div_step)])


def tau_interp(rows: Sequence[Mapping[str, Any]], threshold: float = INTERP_THRESHOLD) -> int | None:
    """First epoch with training accuracy >= `threshold` (99.5 %: "interpolation"), None if never.

    Accuracies are fractions in [0, 1]; a float32 slack of 1e-6 is allowed (see `_ACC_SLACK`).
    """
    for r in by_epoch(rows):
        if _interpolates(r, threshold):
            return int(r["epoch"])
    return None


def repair_gap(rows: Sequence[Mapping[str, Any]], threshold: float = INTERP_THRESHOLD) -> float | None:
    """Validation accuracy at the final epoch minus validation accuracy at `tau_interp`.

    Positive: training past interpolation still improved generalization ("repair"); negative: it
    hurt. None when the member never interpolates or either accuracy is not finite. A fraction,
    like the accuracies it subtracts.
    """
    ordered = by_epoch(rows)
    tau = tau_interp(ordered, threshold)
    if tau is None or not ordered:
        return None
    at_tau = as_float(row_at(ordered, tau).get("val_acc"))
    final = as_float(ordered[-1].get("val_acc"))
    gap = final - at_tau
    return None if math.isnan(gap) else gap


def diverged_step(rows: Sequence[Mapping[str, Any]]) -> int | None:
    """The step that went non-finite, from the first row that records one (None if none does)."""
    for r in by_epoch(rows):
        if r.get("diverged_step") is not None:
            return int(r["diverged_step"])
    return None


def after_divergence(row: Mapping[str, Any], div_step: int | None) -> bool:
    """Whether `row` evaluates a member after it diverged, i.e. its frozen state.

    True when the row is flagged `diverged` (the run loop freezes the member and its step counter at
    the step that went non-finite, so such rows have `step == diverged_step`) or its `step` is
    beyond `div_step` (histories whose step counter runs on).
    """
    if row.get("diverged"):
        return True
    step = as_float(row.get("step"))
    return div_step is not None and not math.isnan(step) and step > div_step


def kernel_norm(row: Mapping[str, Any]) -> float | None:
    """Frobenius norm over conv and dense kernels: sqrt of the summed squares of the row's
    `param_norm_layers` entries whose key ends in the component `kernel`.

    Keys are '/'-joined parameter paths (`dense_0/kernel`, `stage1_block0/unit1/conv/kernel`,
    `params/Dense_0/kernel`); only the last component is matched, so BatchNorm `scale` / `bias` and
    dense / conv `bias` are left out and the head's kernel is in. None when the row has no
    `param_norm_layers`, no kernel among them, or a non-finite kernel norm.
    """
    layers = row.get("param_norm_layers")
    if not isinstance(layers, Mapping):
        return None
    vals = [as_float(v) for k, v in layers.items() if str(k).rsplit("/", 1)[-1] == "kernel"]
    if not vals:
        return None
    return finite_or_none(math.sqrt(sum(v * v for v in vals)))


def clocks(etas: Any, batch_size: int, l2: float, momentum: float = 0.0) -> dict[str, float]:
    """Forgetting clocks of docs/theory.md §6 for the step sizes actually taken, on the effective step.

    `etas`: eta_k for every optimizer step k = 0..steps-1. `batch_size`: b. `l2`: lambda, the coupled
    L2 coefficient or the decoupled weight decay. `momentum`: the heavy-ball mu of momentum and
    Nesterov members, 0 for everyone else. Returns `T_SGD = (1/b) sum eta_eff_k^2` (minibatch /
    finite-step noise), `T_L2 = lambda sum eta_eff_k` (explicit norm decay) and
    `T_adapt = sum eta_eff_k` (adaptive preconditioning), with `eta_eff_k = eta_k / (1 - mu)`.

    Why eta / (1 - mu). The heavy ball runs in PyTorch form (optim.py): m_{k+1} = mu m_k + g_k,
    w_{k+1} = w_k - eta_k m_{k+1}. Unrolled, the gradient g_j of step j moves the weights at steps
    j, j+1, ... by eta g_j, eta mu g_j, eta mu^2 g_j, ..., in total eta / (1 - mu) g_j, delivered
    within ~1/(1 - mu) steps; Nesterov (w_{k+1} = w_k - eta_k (g_k + mu m_{k+1})) gives
    eta (1 + mu / (1 - mu)) = eta / (1 - mu) as well. On time scales longer than 1/(1 - mu) steps
    (10 at mu = 0.9) momentum is therefore SGD with step eta_eff = eta / (1 - mu): the drift per step
    is eta_eff g; the minibatch noise of each step enters the weights with weight eta_eff, so its
    variance per step is eta_eff^2 / b (T_SGD); coupled L2 adds lambda w to g, passes through the
    buffer and shrinks the weights by eta_eff lambda per step (T_L2). At mu = 0.9, T_SGD is 100x and
    T_L2, T_adapt 10x those of plain SGD with the same eta. The approximation assumes eta_k varies
    slowly over 1/(1 - mu) steps; the first ~1/(1 - mu) steps, while the buffer fills, are
    overcounted (relative error ~ 1 / ((1 - mu) K) over K steps). Decoupled weight decay would bypass
    the buffer (decay eta_k wd per step); the heavy-ball settings here take coupled L2 only
    (optim.resolve_setting). Adam's and Muon's momenta are EMAs with (1 - beta) inside, whose
    weights sum to 1: for them mu = 0.
    """
    eta = np.asarray(etas, dtype=np.float64).reshape(-1)
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    mu = 0.0 if momentum is None else float(momentum)
    if not 0.0 <= mu < 1.0:
        raise ValueError(f"momentum must lie in [0, 1), got {momentum}")
    eta = eta / (1.0 - mu)
    total = float(eta.sum())
    return {"T_SGD": float(np.square(eta).sum()) / batch_size,
            "T_L2": float(l2) * total,
            "T_adapt": total}


def clocks_at_step(etas: Any, step: Any, batch_size: int, l2: float, momentum: float = 0.0) -> dict[str, Any]:
    """`clocks` of the first `step` entries of `etas` (the clocks at the row with that `step`).

    All None when `etas` or `step` is unknown, or `step` exceeds the steps `etas` covers.
    """
    s = as_float(step)
    if etas is None or math.isnan(s):
        return dict.fromkeys(CLOCKS)
    eta = np.asarray(etas, dtype=np.float64).reshape(-1)
    if s > eta.size:
        return dict.fromkeys(CLOCKS)
    return clocks(eta[:int(s)], batch_size, l2, momentum)


def measured_clocks(row: Mapping[str, Any]) -> dict[str, float | None]:
    """The update-size clocks of a row: the mean over kernels of the row's running sums.

    The engine writes per kernel k (a `param_norm_layers` key ending in `kernel`, P_k weights)
    `update_rms_sum[k] = sum_{steps so far} |dW_k|_F / sqrt(P_k)` and `update_ms_sum[k] = sum |dW_k|_F^2 / P_k`.
    `T_update` is the mean over kernels of the first: the distance the weights were actually moved,
    per coordinate, whatever the optimizer (SGD: eta times the gradient's RMS per step; Adam: about eta;
    Muon's orthogonalised update: about eta / sqrt(max(fan_in, fan_out)) before any shape scaling), so
    one clock can hold for Adam and Muon where T_adapt = sum eta cannot. `T_update2`: the same of the
    second, the random-walk twin (a sum of squares, like T_SGD). None when the row lacks the field (runs before it existed) or a value is not finite.
    """
    out: dict[str, float | None] = {}
    for name, field in MEASURED_CLOCKS.items():
        sums = row.get(field)
        vals = ([as_float(v) for k, v in sums.items() if str(k).rsplit("/", 1)[-1] == "kernel"]
                if isinstance(sums, Mapping) else [])
        out[name] = float(np.mean(vals)) if vals and not any(math.isnan(v) for v in vals) else None
    return out


def progress_key(threshold: float) -> str:
    """The JSON key of a matched-progress threshold: 0.8 -> "0.8", 0.995 -> "0.995"."""
    return f"{threshold:g}"


def at_train_acc(rows: Sequence[Mapping[str, Any]],
                 thresholds: Sequence[float] = PROGRESS_THRESHOLDS) -> tuple[dict[str, Any], dict[str, Any]]:
    """Matched progress: ({threshold: test accuracy}, {threshold: epoch}) at the first evaluated epoch whose
    train accuracy reaches the threshold (float32 slack as `tau_interp`), None where it never does.

    Rows after divergence (`after_divergence`, the frozen state) are not candidates. Comparing
    members at equal train accuracy separates "slower to train" from "trained into another predictor".
    """
    ordered = by_epoch(rows)
    div_step = diverged_step(ordered)
    live = [r for r in ordered if not after_divergence(r, div_step)]
    accs, epochs = {}, {}
    for t in thresholds:
        first = next((r for r in live if _interpolates(r, t)), None)
        accs[progress_key(t)] = None if first is None else finite_or_none(first.get("test_acc"))
        epochs[progress_key(t)] = None if first is None else int(first["epoch"])
    return accs, epochs


def member_summary(rows: Sequence[Mapping[str, Any]], member_info: Mapping[str, Any],
                   etas: Any, batch_size: int, l2: float, momentum: float = 0.0) -> dict[str, Any]:
    """The `summary.json` entry of one member (docs/design.md keys plus a few extras).

    `rows`: this member's metrics rows (any order). `member_info`: at least `optimizer`, `sigma_w`,
    `seed`; an optional `diverged` flag is or-ed with the rows' flags, and an optional `member`
    index is copied. `etas` may be None when the schedule is unknown (clocks are then None).
    `momentum`: the heavy-ball mu of the clocks (`clocks`).

    Per selection: `best_epoch`, `test_acc_at_best`, `train_acc_at_best`, `val_acc_at_best`,
    `clocks_at_best` (best_val); `best_epoch_interpolated`, `test_acc_at_best_interpolated`,
    `clocks_at_best_interpolated` (best_val_interpolated); `final_epoch`, `test_acc_final`, `clocks`
    (final, and the clocks of the whole run). Clocks at a selected epoch accumulate the first `step`
    step sizes, `step` being that row's; every clocks dict also holds the measured `T_update`,
    `T_update2` of that row (`measured_clocks`; None for rows without update sums). Norms at init
    (the epoch-0 row, or the earliest), best and final: `param_norm_*` (all parameters) and `kernel_norm_*` (conv and dense kernels,
    `kernel_norm`), and `kernel_norm_best_interpolated` at the interpolated selection. Matched progress
    (`at_train_acc`): `test_acc_at_train_acc` and `epoch_at_train_acc`, {"0.8": .., "0.9": ..,
    "0.95": .., "0.995": ..}. `diverged_step` (None if it never diverged or the rows do not say) and
    `diverged_before_best`: the best_val row shows the frozen state of a diverged member
    (`after_divergence`); such a member is left out of the spreads.
    """
    ordered = by_epoch(rows)
    best = best_epoch(ordered)
    best_i = best_epoch_interpolated(ordered)
    at_best = row_at(ordered, best) or {}
    at_best_i = row_at(ordered, best_i) or {}
    first = ordered[0] if ordered else {}
    last = ordered[-1] if ordered else {}
    div_step = diverged_step(ordered)
    diverged = bool(member_info.get("diverged", False)) or any(bool(r.get("diverged")) for r in ordered)
    clk = clocks(etas, batch_size, l2, momentum) if etas is not None else dict.fromkeys(CLOCKS)
    acc_at, epoch_at = at_train_acc(ordered)
    out = {
        "optimizer": member_info["optimizer"],
        "sigma_w": float(member_info["sigma_w"]),
        "seed": int(member_info["seed"]),
        "best_epoch": best,
        "test_acc_at_best": finite_or_none(at_best.get("test_acc")),
        "train_acc_at_best": finite_or_none(at_best.get("train_acc")),
        "val_acc_at_best": finite_or_none(at_best.get("val_acc")),
        "best_epoch_interpolated": best_i,
        "test_acc_at_best_interpolated": finite_or_none(at_best_i.get("test_acc")),
        "tau_interp": tau_interp(ordered),
        "repair_gap": repair_gap(ordered),
        "param_norm_init": finite_or_none(first.get("param_norm")),
        "param_norm_best": finite_or_none(at_best.get("param_norm")),
        "param_norm_final": finite_or_none(last.get("param_norm")),
        "kernel_norm_init": kernel_norm(first),
        "kernel_norm_best": kernel_norm(at_best),
        "kernel_norm_best_interpolated": kernel_norm(at_best_i),
        "kernel_norm_final": kernel_norm(last),
        "final_epoch": int(last["epoch"]) if ordered else None,
        "test_acc_final": finite_or_none(last.get("test_acc")),
        "test_acc_at_train_acc": acc_at,
        "epoch_at_train_acc": epoch_at,
        "clocks": {**clk, **measured_clocks(last)},
        "clocks_at_best": {**clocks_at_step(etas, at_best.get("step"), batch_size, l2, momentum),
                           **measured_clocks(at_best)},
        "clocks_at_best_interpolated": {**clocks_at_step(etas, at_best_i.get("step"), batch_size, l2, momentum),
                                        **measured_clocks(at_best_i)},
        "diverged": diverged,
        "diverged_step": div_step,
        "diverged_before_best": bool(at_best) and after_divergence(at_best, div_step),
    }
    if "member" in member_info:
        out = {"member": int(member_info["member"]), **out}
    return to_json(out)


# --------------------------------------------------------------------------- files
# Rows of a metrics.jsonl: a truncated last line dropped, corruption elsewhere one ValueError naming the line.
read_metrics = read_jsonl
