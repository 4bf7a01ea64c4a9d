"""The device check's parent: each variant in a process of its own, one at a time, under its own time limit.

The parent never imports jax (nor torch): a variant that hangs in XLA's autotuning, exhausts the device's
memory or aborts takes only its own process with it. For each variant of `jaxinit.tools.accel_plan`, in
order, the parent starts ``python -m jaxinit.tools.accel_variant SPEC`` (or ``accel_torch``) in a new
process group, reads its ``@accel`` lines as they come and appends each at once to ``accel.jsonl``
(written and flushed line by line, with the variant's name), and at the variant's limit kills the whole
group and goes on with the next. The child's stderr and other output go to ``accel.log``. On a GPU,
XLA's autotuning results are dumped by every variant and merged into ``xla_autotune.textproto``, which
each later variant loads (as can a later run: ``--xla_gpu_load_autotune_results_from=FILE`` in XLA_FLAGS);
an XLA that does not know these flags fails the preflight, which then runs again without them.
At the end: ``table.md`` and the table printed (`accel_report`).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from jaxinit.tools import accel_report
from jaxinit.tools.accel_plan import Plan, Variant, first_variants, later_variants, winner

PREFIX = "@accel "
AUTOTUNE = "xla_autotune.textproto"
MODULES = {"torch": "jaxinit.tools.accel_torch"}


class Child:
    """One variant's process: its lines as they arrive, its end (ok, crashed, timeout)."""

    def __init__(self, argv: list[str], env: dict, log, on_record):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, env=env, text=True,
                                     start_new_session=True)
        self.log, self.on_record = log, on_record
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(PREFIX):
                try:
                    self.on_record(json.loads(line[len(PREFIX):]))
                    continue
                except json.JSONDecodeError:
                    pass
            self.log.write(line)
            self.log.flush()

    def wait(self, timeout: float) -> tuple[str, int | None]:
        try:
            rc = self.proc.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)      # the whole group: compiler threads, helpers
            self.proc.wait()
            self.reader.join(timeout=5)
            return "timeout", None
        self.reader.join(timeout=5)
        return ("ok" if rc == 0 else "crashed"), rc


def why(status: str, rc: int | None, limit: float, last_line: str) -> str:
    """A failed variant in one line: how it ended, and its last line of output."""
    if status == "timeout":
        head = f"killed with its process group at its limit of {limit:.0f} s"
    elif rc is not None and rc < 0:
        head = f"ended by signal {signal.Signals(-rc).name}"
    else:
        head = f"exit status {rc}"
    return f"{head}; last output: {last_line}" if last_line else head


class Check:
    """One run of the check into ``out`` (accel.jsonl, accel.log, table.md, xla_autotune.textproto)."""

    def __init__(self, plan: Plan, out: Path, deadline_s: float, t0: float, python: str = sys.executable,
                 only: tuple[str, ...] = (), say=print):
        self.plan, self.out, self.deadline_s, self.t0 = plan, Path(out), deadline_s, t0
        self.python, self.only, self.say = python, only, say
        self.records: list[dict] = []
        self.autotune = True          # XLA's autotune dump / load flags (harmless where nothing is autotuned)
        self.log_start = 0
        self.scratch = Path(tempfile.mkdtemp(prefix="jaxinit_accel_"))
        self.jsonl = open(self.out / "accel.jsonl", "w")
        self.log = open(self.out / "accel.log", "w")

    def left(self) -> float:
        return self.deadline_s - (time.monotonic() - self.t0)

    def record(self, variant: str, rec: dict) -> None:
        rec = {"variant": variant, "t_s": round(time.monotonic() - self.t0, 2), **rec}
        self.jsonl.write(json.dumps(rec, default=str) + "\n")
        self.jsonl.flush()
        self.records.append(rec)
        line = accel_report.line(rec)
        if line:
            self.say(line, flush=True)

    def env(self) -> dict:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if self.autotune:
            flags = [env.get("XLA_FLAGS", ""), f"--xla_gpu_dump_autotune_results_to={self.scratch / 'dump.textproto'}"]
            if (self.out / AUTOTUNE).exists():
                flags.append(f"--xla_gpu_load_autotune_results_from={self.out / AUTOTUNE}")
            env["XLA_FLAGS"] = " ".join(f for f in flags if f)
        return env

    def run_variant(self, v: Variant) -> str:
        """Run ``v`` in its own process under min(its limit, what the deadline leaves); its end is a record."""
        limit = min(v.timeout_s, self.left() - self.plan.reserve_s)
        if limit < self.plan.min_start_s and v.kind not in ("hang", "crash"):
            self.record(v.name, {"record": "end", "status": "not run", "reason": f"{self.left():.0f} s left"})
            return "not run"
        spec = json.dumps({"plan": self.plan._asdict(), "variant": v._asdict(), "deadline_at": time.time() + limit})
        module = MODULES.get(v.kind, "jaxinit.tools.accel_variant")
        self.log.write(f"===== {v.name} (limit {limit:.0f} s)\n")
        self.log.flush()
        self.log_start = self.log.tell()
        t = time.monotonic()
        child = Child([self.python, "-m", module, spec], self.env(), self.log, lambda r: self.record(v.name, r))
        status, rc = child.wait(limit)
        end = {"record": "end", "status": status, "rc": rc, "wall_s": round(time.monotonic() - t, 2),
               "limit_s": round(limit, 1)}
        if status != "ok":
            end["error"] = why(status, rc, limit, self.last_error())
        self.record(v.name, end)
        self.merge_autotune()
        return status

    def autotune_failed(self) -> bool:
        """Whether the variant that just crashed names XLA's autotune flags or files; if so, no later variant
        gets them (an XLA that does not know the flags, a results file it cannot read)."""
        text = self.last_error()
        if self.autotune and ("Unknown flag" in text or "autotun" in text.lower()):
            self.autotune = False
            return True
        return False

    def last_error(self) -> str:
        """The last line the current variant wrote to the log ("" if none)."""
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            f.seek(self.log_start)
            lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""

    def merge_autotune(self) -> None:
        dump = self.scratch / "dump.textproto"
        if dump.exists():
            target = self.out / AUTOTUNE
            old = target.read_text() if target.exists() else ""
            target.write_text(accel_report.merge_autotune(old, dump.read_text()))
            dump.unlink()

    def step_times(self) -> dict[str, float]:
        return {r["variant"]: r["step_s"] for r in self.records if r.get("record") == "timed"}

    def run(self) -> list[dict]:
        try:
            for v in self.selected(first_variants(self.plan)):
                if self.run_variant(v) == "crashed" and self.autotune_failed() and v.kind == "preflight":
                    self.run_variant(v)
            best = winner(first_variants(self.plan), self.step_times())
            for v in self.selected(later_variants(self.plan, best)):
                if self.run_variant(v) == "crashed":
                    self.autotune_failed()
        finally:
            self.jsonl.close()
            self.log.close()
            shutil.rmtree(self.scratch, ignore_errors=True)
        return self.records

    def selected(self, variants: list[Variant]) -> list[Variant]:
        return [v for v in variants if not self.only or v.name in self.only or v.kind in self.only]
