"""Progress of a run on stderr: a tqdm bar on a terminal, plain lines otherwise.

Why both: a bar redraws itself with carriage returns, which in a log file (a batch job, ``nohup``, a CI
log, an accelerator machine's captured output) is either nothing until the end or one huge line; plain
lines are what such a log can show. One reporter, `Progress`, counts units ("epoch" or "step", named as
they are) and writes a line whenever the count passes a multiple of ``total / lines`` (and at the end):

    forgetting: epoch 3/80  5 s, ETA 2 min 19 s  val_acc median/best sgd 0.412/0.431 adam 0.502/0.520
    igb_train selection: step 40/300  12 s, ETA 1 min 18 s

the study (`study`: the command line names it after its experiment), the stage, what is counted and how
many, the time since the reporter started and the time left at the rate of the units after the
first (the first compiles), and the latest ``note`` (the engine's: validation accuracy per group, `val_note`).
tqdm is imported only for a terminal, and a machine without it gets the plain lines (it is not needed to
train). ``enabled=False`` or ``JAXINIT_PROGRESS=0`` (also ``off``, ``false``, ``no``) turns both off; the
test session sets it, since its checks count stderr lines.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import os
import statistics
import sys
import time
from typing import Any, Iterable, Iterator, TextIO

ENV = "JAXINIT_PROGRESS"
NOTE_GROUPS = 4            # groups a validation note names (the rest are counted)
_STUDY: contextvars.ContextVar[str] = contextvars.ContextVar("jaxinit_study", default="")


def silenced() -> bool:
    """``JAXINIT_PROGRESS`` asks for no progress output."""
    return os.environ.get(ENV, "").strip().lower() in ("0", "off", "false", "no")


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):   # closed or replaced streams
        return False


@contextlib.contextmanager
def study(name: str) -> Iterator[None]:
    """Reporters made inside name their lines after the study ``name`` (an experiment's, `jaxinit.run.cli`)."""
    token = _STUDY.set(name)
    try:
        yield
    finally:
        _STUDY.reset(token)


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 07 s``, ``2 h 05 min``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def val_note(rows: Iterable[dict], group_of: dict[int, str]) -> str:
    """Median / best validation accuracy of new evaluation ``rows`` per group (``group_of``: member index ->
    group label: an optimizer setting, an IGB case, an arm): ``val_acc median/best sgd 0.412/0.431 ...``;
    "" without validation accuracies. An average over every group would mix optimizers into one number."""
    accs: dict[str, list[float]] = {}
    for r in rows:
        v = r.get("val_acc")
        if isinstance(v, float) and math.isfinite(v):
            accs.setdefault(group_of.get(r.get("member"), "?"), []).append(v)
    if not accs:
        return ""
    parts = [f"{label} {statistics.median(v):.3f}/{max(v):.3f}" for label, v in list(accs.items())[:NOTE_GROUPS]]
    more = f" (+{len(accs) - NOTE_GROUPS} more)" if len(accs) > NOTE_GROUPS else ""
    return "val_acc median/best " + " ".join(parts) + more


class Progress:
    """``total`` units (``unit``: "epoch" or "step") numbered from ``first``; ``close()`` at the end.

    ``stage``: the stage's name, after the study's (`study`). ``desc``: what is counted, in words (default: the
    unit; a ``desc`` that begins with the study's name stands alone). ``enabled``: None or True report (unless
    `silenced`), False never.
    ``lines``: about how many plain lines the run writes (``lines >= total``: one per unit). ``leave``: the
    bar stays on the terminal after `close`.
    """

    def __init__(self, total: int, *, unit: str = "step", desc: str | None = None, stage: str = "", first: int = 1,
                 enabled: bool | None = True, stream: TextIO | None = None, lines: int = 10, leave: bool = True):
        self.stream = sys.stderr if stream is None else stream
        self.total, self.unit, self.first = int(total), unit, first
        self.what = desc or unit
        name = "" if desc and desc.startswith(_STUDY.get()) else _STUDY.get()
        self.label = " ".join(x for x in (name, stage) if x)
        self.enabled = enabled is not False and not silenced()
        self.every = max(1, math.ceil(self.total / max(1, lines)))
        self.done, self.t0, self.t_first, self.bar, self.note = 0, time.perf_counter(), None, None, ""
        if self.enabled and self.total > 0 and is_terminal(self.stream):
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=self.total, desc=" ".join(x for x in (self.label, desc) if x) or f"{unit}s",
                                file=self.stream, leave=leave, unit=unit)

    def update(self, n: int = 1, note: str = "") -> None:
        """``n`` more units done; ``note``: what to say besides (e.g. `val_note`), kept until a newer one and
        shown on every line from then on. A plain line whenever the count passes a multiple of ``total / lines``
        and at the end."""
        if not self.enabled:
            return
        before, self.done = self.done, self.done + n
        self.note = note or self.note
        now = time.perf_counter()
        if before == 0:
            self.t_first = now
        if self.bar is not None:
            self.bar.update(n)
            if note:
                self.bar.set_postfix_str(note)
        elif self.done // self.every > before // self.every or (self.done >= self.total > before):
            self._line(now, self.note)

    def eta(self, now: float) -> float | None:
        """Seconds left at the rate of the units after the first (the first compiles); None before a rate."""
        left = self.total - self.done
        if left <= 0:
            return 0.0
        if self.done >= 2 and self.t_first is not None:
            return (now - self.t_first) / (self.done - 1) * left
        return (now - self.t0) / self.done * left if self.done else None

    def _line(self, now: float, note: str) -> None:
        eta = self.eta(now)
        head = f"{self.label}: " if self.label else ""
        text = (f"{head}{self.what} {self.first + self.done - 1}/{self.first + self.total - 1}  "
                f"{duration(now - self.t0)}, ETA {'?' if eta is None else duration(eta)}" + (f"  {note}" if note else ""))
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):    # a closed stderr never stops training
            self.enabled = False

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
