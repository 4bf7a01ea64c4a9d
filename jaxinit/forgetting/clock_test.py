"""The clock test: which cumulative clock puts runs that got there differently on one curve.

At a fixed number of epochs E on n examples, `T_SGD = E n eta^2 / b^2` and `sum eta = E n eta / b`
move together, so a sweep of the learning rate at fixed E cannot tell them apart (any function of
eta / b collapses it). The clock test breaks the tie with constant-lr runs that reach equal `T_SGD`
with different `sum eta` (lr x epochs 0.2 x 5, 0.1 x 20, 0.05 x 80, 0.025 x 320 at b = 128), equal
`sum eta` with different `T_SGD` (0.2 x 20, 0.1 x 40, 0.05 x 80, 0.025 x 160) and equal lr and steps
with different batch sizes (b = 32 x 20, 64 x 40, 128 x 80 epochs at lr 0.05). Each constant-lr run is
summarised at every horizon T of `HORIZON_GRID` (`horizon.spreads_over_time`: the spread as if it
had stopped at epoch T, under every selection rule), which holds all of those comparisons at once:
the 0.2 run at epoch 5 is the "0.2 x 5" point, at epoch 20 the "0.2 x 20" point.

`collapse_tests` then pools every run's (clock(T), spread(T)) points per group of families and asks
`horizon.clock_collapse` which clock leaves the smaller residual variance about one smooth curve in
log clock, with an interval from resampling seeds:

- "sgd" (sgd, momentum): `T_SGD` against `T_adapt` (= sum eta, the clock that ignores noise);
- "adaptive" (adam, adamw, muon): `T_adapt` = sum eta against the measured update clocks `T_update`
  (sum_k |dW_k|_F / sqrt(P), averaged over kernels) and `T_update2` (its square-summed twin), which
  Adam and Muon can share where `T_adapt` cannot (Muon's update RMS is ~0.09 eta on a 128 x 128
  kernel, Adam's ~eta per coordinate).

Pure numpy on a finished point's rows and its step sizes; `clock_run.run` calls it for every point.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from jaxinit.forgetting import horizon

# Epochs at which each run is summarised: ~sqrt(2) apart, holding the design's lr x epochs points
# (5, 20, 40, 80, 160, 320). A run's own last epoch is always added.
HORIZON_GRID = (1, 2, 3, 5, 7, 10, 14, 20, 28, 40, 56, 80, 113, 160, 226, 320, 453, 640, 905, 1280)
# (group, families pooled, candidate clocks): the first clock is the one the paper assigns the group.
COLLAPSE_GROUPS = (("sgd", ("sgd", "momentum"), ("T_SGD", "T_adapt")),
                   ("adaptive", ("adam", "adamw", "muon"), ("T_adapt", "T_update", "T_update2")))
ENTRY_FIELDS = ("epoch", "setting", "n_seeds", "best_epoch_median", "train_acc_at_best_min", "clocks")


def horizons(epochs: int, eval_every: int = 1, extra: Sequence[int] = ()) -> list[int]:
    """The grid epochs (and `extra` ones) a run of `epochs` epochs was evaluated at, and its last epoch."""
    out = sorted({t for t in (*HORIZON_GRID, *extra) if t <= epochs and t % eval_every == 0})
    return out if out and out[-1] == epochs else out + [epochs]


def point_entries(rows: Sequence[Mapping[str, Any]], etas: Any, batch_size: int, l2: Any, momentum: Any,
                  epochs: int, eval_every: int = 1, batchnorm: bool | None = None,
                  extra: Sequence[int] = ()) -> list[dict[str, Any]]:
    """`horizon.spreads_over_time` of one finished point at `horizons(epochs, eval_every, extra)` (with the
    effective clocks of the BatchNorm-invariant kernels when `batchnorm` is given)."""
    return horizon.spreads_over_time(rows, horizons(epochs, eval_every, extra), etas, batch_size, l2, momentum,
                                     batchnorm)


def group_of(family: str) -> tuple[str, tuple[str, ...]] | None:
    """(group name, its candidate clocks) of a family, or None for a family no group tests (sgd_l2)."""
    return next(((g, clocks) for g, fams, clocks in COLLAPSE_GROUPS if family in fams), None)


def curves(entries: Mapping[str, Sequence[Mapping[str, Any]]], families: Mapping[str, str],
           selection: str = "best_val") -> dict[str, Any]:
    """Per group with at least two points, its points' spread curves: {group: {"names", "clocks", "runs",
    "selection"}}, `runs` being the `horizon.collapse_curve` of each point (the clocks reached at the
    horizon T, the training done; the spread of `selection` at T). What `collapse_tests` tests and
    `clock_plots.plot_collapse` draws."""
    out: dict[str, Any] = {}
    for group, fams, clocks in COLLAPSE_GROUPS:
        names = [n for n in entries if families[n] in fams and entries[n]]
        if len(names) >= 2:
            out[group] = {"names": names, "clocks": clocks, "selection": selection,
                          "runs": [horizon.collapse_curve(entries[n], families[n], clocks, rule=selection)
                                   for n in names]}
    return out


def collapse_tests(groups: Mapping[str, Mapping[str, Any]], n_boot: int | None = None) -> dict[str, Any]:
    """Per group of `curves`: which clock collapses its points' spread curves. Returns {group: {"points":
    [names], "clock_field": "clocks", "selection", **horizon.clock_collapse(...)}}."""
    kw = {} if n_boot is None else {"n_boot": n_boot}
    return {group: {"points": c["names"], "clock_field": "clocks", "selection": c["selection"],
                    **horizon.clock_collapse(c["runs"], c["clocks"], **kw)} for group, c in groups.items()}


def table_rows(entries: Mapping[str, Sequence[Mapping[str, Any]]], selection: str = "best_val") -> list[dict]:
    """One flat row per (point, horizon): the spread of `selection` with its interval, null and p, the
    slope with its interval, and the clocks at T (`horizons.jsonl`, what the README's tables read)."""
    from jaxinit.forgetting.memory import selection_keys
    k = selection_keys(selection)
    rows = []
    for name, mine in entries.items():
        for e in mine:
            rows.append({"point": name, **{f: e.get(f) for f in ENTRY_FIELDS},
                         "spread": e.get(k["spread"]), "ci95": e.get(k["ci"]), "null": e.get(k["null"]),
                         "spread_p": e.get(k["spread_p"]), "slope": e.get(k["slope"]),
                         "slope_ci95": e.get(k["slope_ci"]), "slope_p": e.get(k["slope_p"]),
                         "per_seed": e.get(k["per_seed"]), "seeds": e.get("seeds")})
    return rows
