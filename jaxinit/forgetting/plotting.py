"""Figures of the initialization-memory study, from saved results only.

Reads `summary.json` and `metrics.jsonl` of a `python -m experiments.forgetting` run; never imports
the training code or jax, so figures can be redrawn anywhere without retraining:

    python -m jaxinit.forgetting.plotting RUN_DIR [RUN_DIR ...] [--out DIR] [--selection NAME]
                                          [--clock-basis at_best|end]

writes `RUN_DIR/figures/{acc_vs_sigma,norm_trajectories,spread_vs_clocks}.png` for each run; with
several runs also one combined spread-vs-clock figure (`--out DIR/spread_vs_clocks.png`, or
`figures/spread_vs_clocks_combined.png` in the first run). `--selection` is the spread's selection
rule (`best_val` default, `best_val_interpolated`, `final`: `memory.SELECTION_RULES`);
`--clock-basis` the clocks it is plotted against (`at_best` default: accumulated to the selected
epoch; `end`: to the end of the run). A bad directory, an unknown rule, or a `summary.json` that
does not match its `metrics.jsonl` (a stale summary) is one line on stderr and exit status 2.

Figures are built on `matplotlib.figure.Figure` and rendered by the Agg canvas at `savefig`; pyplot
is not used, so importing this module changes no global backend state and leaks no figures.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from jaxinit.forgetting.figures import (_check_basis, plot_acc_vs_sigma, plot_norm_trajectories,
                                        plot_spread_vs_clocks)
from jaxinit.shared.history import as_float
from jaxinit.forgetting.memory import selection_keys
from jaxinit.shared.history import best_epoch, by_epoch, row_at, rows_by_member
from jaxinit.run import files
from jaxinit.run.rundir import check_outside_runs
from jaxinit.run.runs import read_json, read_rows

# test accuracies in summary.json are the rows' values passed through float(); anything above this is stale
_ACC_TOL = 1e-9


class StaleSummaryError(ValueError):
    """summary.json does not describe the rows of its metrics.jsonl (one line; exit 2 in the CLI)."""


# --------------------------------------------------------------------------- loading and checking a run
def check_consistent(summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], where: str = "summary.json") -> None:
    """Raise StaleSummaryError unless `summary` describes `rows`.

    Per summary member, the best epoch and the test accuracy there are recomputed from its rows
    (`memory.best_epoch`) and compared, and its `final_epoch` with its last epoch; a member without
    rows or rows of a member the summary lacks are a mismatch too.
    """
    by_member = rows_by_member(rows)
    listed = []
    for i, m in enumerate(summary.get("members", [])):
        idx = int(m.get("member", i))
        listed.append(idx)
        problem = _member_mismatch(m, by_member.get(idx))
        if problem:
            raise StaleSummaryError(f"{where} does not match metrics.jsonl: member {idx} {problem} (stale summary?)")
    extra = sorted(set(by_member) - set(listed))
    if extra:
        raise StaleSummaryError(f"{where} does not match metrics.jsonl: rows of member {extra[0]}, "
                                f"which the summary lacks (stale summary?)")


def _member_mismatch(m: Mapping[str, Any], member_rows: Sequence[Mapping[str, Any]] | None) -> str | None:
    if not member_rows:
        return "has no rows"
    best = best_epoch(member_rows)
    if m.get("best_epoch") != best:
        return f"has best_epoch {m.get('best_epoch')} in the summary, {best} from the rows"
    acc_rows = as_float((row_at(member_rows, best) or {}).get("test_acc"))
    acc_summary = as_float(m.get("test_acc_at_best"))
    same = (math.isnan(acc_rows) and math.isnan(acc_summary)) or abs(acc_rows - acc_summary) <= _ACC_TOL
    if not same:
        return f"has test_acc_at_best {m.get('test_acc_at_best')} in the summary, {acc_rows} from the rows"
    last = int(by_epoch(member_rows)[-1]["epoch"])
    if "final_epoch" in m and m["final_epoch"] != last:
        return f"has final_epoch {m['final_epoch']} in the summary, {last} from the rows"
    return None


def _load_run(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    d = Path(run_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such run directory")
    _check_experiment(d)
    for name in ("summary.json", "metrics.jsonl"):
        if not (d / name).is_file():
            raise FileNotFoundError(f"{d}: no {name} (not a finished forgetting run?)")
    try:
        summary = json.loads((d / "summary.json").read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{d / 'summary.json'}: not JSON ({e.msg})") from None
    _check_summary_shape(summary, d / "summary.json")
    summary.setdefault("spread", {})
    rows = read_rows(d / "metrics.jsonl")        # damage named by file and line (jaxinit.run.runs)
    check_consistent(summary, rows, str(d / "summary.json"))
    return summary, rows


def _check_experiment(d: Path) -> None:
    """A run of another experiment (run.json's name, or its config.json's sections) is refused by name."""
    from jaxinit.run.registry import experiment_of
    try:
        found = experiment_of(read_json(d / "config.json"), read_json(d / "run.json") if (d / "run.json").is_file()
                              else {})
    except ValueError:
        return                  # no readable config.json: the files below say what is missing
    if found not in (None, "forgetting"):
        raise ValueError(f"{d} holds a run of {found}, not of the forgetting study (its figures: python -m "
                         f"experiments.{found} --replot {d})")


def _check_summary_shape(summary: Any, path: Path) -> None:
    """A hand-made or foreign summary.json is one line, not a TypeError deep in a figure."""
    if not isinstance(summary, dict) or "members" not in summary:
        raise ValueError(f"{path}: no 'members' (not a forgetting summary)")
    members = summary["members"]
    if not isinstance(members, list) or not all(isinstance(m, dict) for m in members):
        raise ValueError(f"{path}: 'members' must be a list of member objects, got {json.dumps(members)[:60]}")
    if not isinstance(summary.get("spread", {}), dict):
        raise ValueError(f"{path}: 'spread' must be an object of settings, got {json.dumps(summary['spread'])[:60]}")


def _epochs_from_rows(rows: Sequence[Mapping[str, Any]]) -> int | None:
    return max((int(r["epoch"]) for r in rows), default=None)


def make_all(run_dir: str | Path, selection: str = "best_val", clock_basis: str = "at_best") -> list[Path]:
    """Write `run_dir/figures/*.png` from `summary.json` and `metrics.jsonl`; return the paths.

    Raises ConfigError for an unknown selection rule, FileNotFoundError / ValueError for a missing
    directory or unreadable files, StaleSummaryError (a ValueError) when the summary does not match
    the rows.
    """
    selection_keys(selection)
    _check_basis(clock_basis)
    summary, rows = _load_run(run_dir)
    return _draw_run(run_dir, summary, rows, selection, clock_basis)


def _draw_run(run_dir: str | Path, summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
              selection: str, clock_basis: str) -> list[Path]:
    out = files.check_inside(run_dir, Path(run_dir) / "figures")   # never through a figures/ linked out of the run
    return [plot_acc_vs_sigma(summary, out / "acc_vs_sigma.png"),
            plot_norm_trajectories(rows, out / "norm_trajectories.png"),
            plot_spread_vs_clocks([(Path(run_dir).name, summary, _epochs_from_rows(rows))],
                                  out / "spread_vs_clocks.png", selection, clock_basis)]


def _record_in_runs(dirs: Sequence[str], written: Sequence[Path]) -> None:
    """Figures redrawn into a run directory with a manifest become its own files (`jaxinit.run.rundir`), so a
    later resume or --overwrite replaces them instead of keeping them as a user's."""
    from jaxinit.run import runinfo
    from jaxinit.run.manifest import Manifest
    for d in dirs:
        inside = [p for p in written if Path(p).resolve().is_relative_to(Path(d).resolve())]
        if inside and Manifest(d).exists():
            runinfo.record_written(Path(d), inside)


def _parser():
    """argparse, with errors as exceptions (one line, exit 2 in `main`) instead of usage + exit."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise ValueError(f"{message} (usage: {' '.join(self.format_usage().split()[1:])})")
    p = Parser(prog="python -m jaxinit.forgetting.plotting", description="Figures of finished forgetting runs.",
               allow_abbrev=False)
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (summary.json + metrics.jsonl)")
    p.add_argument("--out", help="folder of the combined spread-vs-clocks figure (several runs)")
    p.add_argument("--selection", default="best_val", help="best_val | best_val_interpolated | final")
    p.add_argument("--clock-basis", dest="clock_basis", default="at_best", help="at_best | end")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI (module docstring); returns the exit status: 0, or 2 after one line on stderr."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        _parser().print_help()
        return 0
    try:
        parsed = _parser().parse_args(args)
        dirs, opts = [os.path.expanduser(d) for d in parsed.run_dirs], vars(parsed)
        opts["out"] = os.path.expanduser(opts["out"]) if opts["out"] else None
        if opts["out"]:
            check_outside_runs(Path(opts["out"]), "the figures")   # no run, nor inside one (jaxinit.run.rundir)
        selection_keys(opts["selection"])
        _check_basis(opts["clock_basis"])
        loaded = [(d, *_load_run(d)) for d in dirs]  # check every directory before drawing anything
        written = [p for d, summary, rows in loaded
                   for p in _draw_run(d, summary, rows, opts["selection"], opts["clock_basis"])]
        runs = [(Path(d).resolve().name, summary, _epochs_from_rows(rows)) for d, summary, rows in loaded]
        if len(runs) > 1:
            target = (Path(opts["out"]) / "spread_vs_clocks.png" if opts["out"]
                      else Path(dirs[0]) / "figures" / "spread_vs_clocks_combined.png")
            written.append(plot_spread_vs_clocks(runs, target, opts["selection"], opts["clock_basis"]))
        _record_in_runs(dirs, written)
    except (OSError, ValueError) as e:  # ConfigError and StaleSummaryError are ValueErrors
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
