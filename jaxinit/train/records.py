"""metrics.jsonl as a sink: appended and fsync-ed per evaluation, checked and rebuilt on resume.

A run appends one row per member per evaluated epoch and flushes it to disk, so a killed run keeps
every finished evaluation. On resume the file is read line by line (`scan`): a line that does not
parse (a truncated tail, a damaged middle) is reported, never skipped in silence. `plan_rows` then
decides which rows survive: rows after the restored checkpoint are dropped (they are redone), the
rows of the restored epoch and of epoch 0 are regenerated from the restored and the initial state
(evaluations are deterministic), and every other evaluated epoch up to the checkpoint must be
complete; if one is not, an older checkpoint is needed (`MissingRows` says which epochs).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from jaxinit import files
from jaxinit.config import ConfigError


class MissingRows(Exception):
    """Evaluations before the checkpoint are lost (their epochs), so this checkpoint cannot be used."""

    def __init__(self, epochs: list[int]):
        super().__init__(f"rows of epoch(s) {epochs[:5]} are missing or damaged")
        self.epochs = epochs


def append_rows(path: Path, rows: Iterable[dict]) -> None:
    """Append JSONL rows and flush them to disk, so a killed run keeps every finished evaluation."""
    text = "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in rows)
    try:
        with open(path, "a") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        raise ConfigError(files.describe_os_error(err, path)) from None


def scan(path: Path) -> tuple[list[dict], list[int]]:
    """(rows that parse, 1-based numbers of lines that do not); a missing file raises ConfigError."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        raise ConfigError(f"--resume: {files.safe_path(path)} is missing: the evaluations before the last "
                          f"checkpoint cannot be regenerated; rerun with --overwrite") from None
    rows, bad = [], []
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not {"member", "epoch"} <= set(row):
                raise ValueError
            rows.append(row)
        except ValueError:
            bad.append(n)
    return rows, bad


def expected_epochs(upto: int, plan) -> list[int]:
    """Evaluated epochs in [0, upto] under ``plan`` (`jaxinit.train.engine.Plan.evaluated`)."""
    return [e for e in range(upto + 1) if plan.evaluated(e)]


def plan_rows(rows: list[dict], n_members: int, ckpt_epoch: int, regenerated: set[int], plan) -> list[dict]:
    """The rows to keep when resuming from a checkpoint at the end of `ckpt_epoch`.

    Rows of epochs in `regenerated` are dropped (the caller evaluates them again); every other
    evaluated epoch <= ckpt_epoch must have exactly one row per member, else `MissingRows`.
    """
    by_key = {}
    for r in rows:
        by_key[(int(r["epoch"]), int(r["member"]))] = r     # a repeated row: the later one wins
    missing = [e for e in expected_epochs(ckpt_epoch, plan)
               if e not in regenerated and any((e, m) not in by_key for m in range(n_members))]
    if missing:
        raise MissingRows(missing)
    keep = [r for (e, m), r in by_key.items() if e <= ckpt_epoch and e not in regenerated]
    return sorted(keep, key=lambda r: (int(r["epoch"]), int(r["member"])))

