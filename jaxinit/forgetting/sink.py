"""The files of a run directory, written by `fit(config, workdir)`: metrics.jsonl, checkpoints/, summary.json.

`RunFiles.start` either begins a fresh run (epoch-0 rows, checkpoint 0) or resumes: the newest
checkpoint that is intact, belongs to this config and whose earlier metrics rows are all present
(`records.plan_rows`) is restored; the rows of epoch 0 and of the restored epoch are evaluated again
(evaluations are deterministic, so they come out as written); metrics.jsonl is rewritten with exactly
the surviving rows. A stale summary.json and figures/ are removed before any row is appended, so a
summary never sits next to metrics it was not computed from; `finish` writes the new one.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from jaxinit import distributed, files
from jaxinit.checkpoint import Checkpointer, Corrupt, abstract_like
from jaxinit.config import ConfigError
from jaxinit.forgetting import records
from jaxinit.forgetting.evaluate import evaluate_all
from jaxinit.forgetting.members import stack, unstack

FRESH_OK = {"config.json", ".lock"}     # what a fresh run may find in its directory (the CLI wrote them)


class RunFiles:
    def __init__(self, out: Path, cfg, sweep, fingerprint: str, resume: bool):
        self.out, self.cfg, self.sweep, self.fingerprint, self.resume = out, cfg, sweep, fingerprint, resume
        self.writer = distributed.is_writer()
        self.metrics = out / "metrics.jsonl"
        if not resume:
            self._check_fresh()
        self.ckpt = Checkpointer(out / "checkpoints") if cfg.train.checkpoint_every else None

    # ------------------------------------------------------------------ start
    def start(self, states, splits) -> tuple[int, int, Any, list[dict]]:
        """(completed epoch, step within the next epoch, states, rows so far)."""
        if self.resume and self.ckpt is not None and self.ckpt.steps():
            return self._resume(states, splits)
        rows = evaluate_all(self.sweep.groups, states, splits, 0)
        self._clear_stale()
        if self.writer:
            records.rewrite(self.metrics, rows)
        self.save(states, 0, 0)
        return 0, 0, states, rows

    def _check_fresh(self) -> None:
        if self.writer and self.out.exists():
            extra = sorted(p.name for p in self.out.iterdir() if p.name not in FRESH_OK)
            if extra:
                raise ConfigError(f"{files.safe_path(self.out)} already holds {', '.join(extra[:3])}; "
                                  f"resume that run or choose another directory")

    def _clear_stale(self) -> None:
        if self.writer:
            (self.out / "summary.json").unlink(missing_ok=True)
            shutil.rmtree(self.out / "figures", ignore_errors=True)

    def _resume(self, states, splits):
        rows, bad = records.scan(self.metrics)
        if bad and self.writer:
            print(f"{files.safe_path(self.metrics)}: line(s) {bad[:5]} unreadable; those evaluations are redone "
                  f"from a checkpoint", file=sys.stderr)
        n = len(self.sweep.members)
        planned: dict[str, Any] = {}

        def accept(meta: dict) -> None:
            if meta.get("config_fingerprint") != self.fingerprint or meta.get("n_members") != n:
                raise ConfigError("--resume: the checkpoints belong to another config than config.json; "
                                  "rerun with --overwrite")
            epoch, step = int(meta["epoch"]), int(meta["step_in_epoch"])
            regen = {0} | ({epoch} if step == 0 else set())
            try:
                planned["rows"] = records.plan_rows(rows, n, epoch, regen, self.cfg.train.eval_every,
                                                    self.cfg.train.epochs)
            except records.MissingRows as why:
                raise Corrupt(f"metrics.jsonl lost the {why}") from None
            planned["regen"] = regen

        found = self.ckpt.restore_newest(abstract_like(stack(self.sweep.groups, states)), accept)
        _, restored, meta = found
        epoch, step = int(meta["epoch"]), int(meta["step_in_epoch"])
        restored_states = unstack(self.sweep.groups, restored)
        kept = planned["rows"]
        expected = set(records.expected_epochs(epoch, self.cfg.train.eval_every, self.cfg.train.epochs))
        for e in sorted(planned["regen"] & expected):
            kept += evaluate_all(self.sweep.groups, states if e == 0 else restored_states, splits, e)
        kept.sort(key=lambda r: (int(r["epoch"]), int(r["member"])))
        distributed.barrier("jaxinit-rows-planned")   # every host read the old file before it changes
        self._clear_stale()
        if self.writer:
            records.rewrite(self.metrics, kept)
        return epoch, step, restored_states, kept

    # ------------------------------------------------------------------ during and after
    def append(self, rows: list[dict]) -> None:
        if self.writer:
            records.append_rows(self.metrics, rows)

    def save(self, states, epoch: int, step_in_epoch: int) -> None:
        if self.ckpt is None:
            return
        step = epoch * self.sweep.steps_per_epoch + step_in_epoch
        if step in self.ckpt.steps():   # a stop right after a scheduled save: that state is on disk
            return
        meta = {"epoch": epoch, "step_in_epoch": step_in_epoch, "n_members": len(self.sweep.members),
                "config_fingerprint": self.fingerprint}
        self.ckpt.save(step, stack(self.sweep.groups, states), meta)

    def finish(self, summary: dict | None) -> None:
        if self.ckpt is not None:
            self.ckpt.close()
        distributed.barrier("jaxinit-fit-end")   # every host's checkpoint shards are on disk
        if self.writer and summary is not None:
            files.write_json(self.out / "summary.json", summary)
