"""Progress of a run on stderr: a tqdm bar on a terminal, plain lines otherwise.

Why both: a bar redraws itself with carriage returns, which in a log file (a batch job, ``nohup``, a CI
log, an accelerator machine's captured output) is either nothing until the end or one huge line; plain
lines are what such a log can show. One reporter, `Progress`, counts units (epochs or steps):
``epoch(e, seconds, val_acc)`` writes one line per epoch (``epoch 3/80  1.8 s  val_acc 0.412``, the
forgetting study), ``update(n)`` (tqdm's call, the IGB studies) one line per tenth of the total
(``igb_train steps 480/4800  12 s``). tqdm is imported only for a terminal, and a machine without it
gets the plain lines (it is not needed to train). ``enabled=False`` or ``JAXINIT_PROGRESS=0`` (also
``off``, ``false``, ``no``) turns both off; the test session sets it, since its checks count stderr lines.
"""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, TextIO

ENV = "JAXINIT_PROGRESS"


def silenced() -> bool:
    """``JAXINIT_PROGRESS`` asks for no progress output."""
    return os.environ.get(ENV, "").strip().lower() in ("0", "off", "false", "no")


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):   # closed or replaced streams
        return False


class Progress:
    """``total`` units (``unit``: "epoch" or "step") numbered from ``first``; ``close()`` at the end.

    ``enabled``: None or True report (unless `silenced`), False never. ``lines``: about how many plain
    lines `update` writes over the run. ``leave``: the bar stays on the terminal after `close`.
    """

    def __init__(self, total: int, *, unit: str = "step", desc: str | None = None, first: int = 1,
                 enabled: bool | None = True, stream: TextIO | None = None, lines: int = 10, leave: bool = True):
        self.stream = sys.stderr if stream is None else stream
        self.total, self.unit, self.desc = int(total), unit, desc or f"{unit}s"
        self.last = first + self.total - 1
        self.enabled = enabled is not False and not silenced()
        self.every = max(1, math.ceil(self.total / max(1, lines)))
        self.done, self.t0, self.bar = 0, time.perf_counter(), None
        if self.enabled and self.total > 0 and is_terminal(self.stream):
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=self.total, desc=self.desc, file=self.stream, leave=leave)

    def update(self, n: int = 1) -> None:
        """``n`` more units done; a plain line whenever the count passes a multiple of ``total / lines``
        (and at the end)."""
        if not self.enabled:
            return
        before, self.done = self.done, self.done + n
        if self.bar is not None:
            self.bar.update(n)
        elif self.done // self.every > before // self.every or (self.done >= self.total > before):
            self._line(f"{self.desc} {self.done}/{self.total}  {time.perf_counter() - self.t0:.0f} s")

    def epoch(self, epoch: int, seconds: float, val_acc: float | None = None) -> None:
        """Epoch ``epoch`` done in ``seconds``: one line (with the validation accuracy when evaluated)."""
        if not self.enabled:
            return
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
            if val_acc is not None:
                self.bar.set_postfix(val_acc=f"{val_acc:.3f}")
            return
        tail = "" if val_acc is None else f"  val_acc {val_acc:.3f}"
        self._line(f"epoch {epoch}/{self.last}  {seconds:.1f} s{tail}")

    def _line(self, text: str) -> None:
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


class EpochProgress(Progress):
    """Epochs ``first..last`` of a training loop (``epoch(e, seconds, val_acc)`` after each): a bar
    named "epochs" on a terminal, one line per epoch otherwise."""

    def __init__(self, first: int, last: int, enabled: bool = True, stream: TextIO | None = None):
        super().__init__(max(0, last - first + 1), unit="epoch", first=first, enabled=bool(enabled),
                         stream=stream)
        self.last = last
