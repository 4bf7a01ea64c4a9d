"""Progress of a run's epochs on stderr: a tqdm bar on a terminal, one plain line per epoch otherwise.

Why both: a bar redraws itself with carriage returns, which in a log file (a batch job, ``nohup``, a CI
log, an accelerator machine's captured output) is either nothing until the end or one huge line; a
line per epoch (``epoch 3/80  1.8 s  val_acc 0.412``) is what such a log can show. tqdm is imported only
for a terminal, and a machine without it gets the plain lines (it is not needed to train).
``JAXINIT_PROGRESS=0`` turns both off (the test session sets it: its checks count stderr lines).
"""
from __future__ import annotations

import os
import sys
from typing import Any, TextIO


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):   # closed or replaced streams
        return False


class EpochProgress:
    """``epoch(e, seconds, val_acc)`` after every epoch ``first..last``; ``close()`` at the end."""

    def __init__(self, first: int, last: int, enabled: bool = True, stream: TextIO | None = None):
        self.stream = sys.stderr if stream is None else stream
        quiet = os.environ.get("JAXINIT_PROGRESS", "").strip().lower() in ("0", "off", "false", "no")
        self.last, self.enabled, self.bar = last, bool(enabled) and not quiet, None
        if self.enabled and _is_terminal(self.stream) and last >= first:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=last - first + 1, desc="epochs", file=self.stream)

    def epoch(self, epoch: int, seconds: float, val_acc: float | None = None) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
            if val_acc is not None:
                self.bar.set_postfix(val_acc=f"{val_acc:.3f}")
            return
        tail = "" if val_acc is None else f"  val_acc {val_acc:.3f}"
        try:
            print(f"epoch {epoch}/{self.last}  {seconds:.1f} s{tail}", file=self.stream, flush=True)
        except (OSError, ValueError):    # a closed stderr never stops training
            self.enabled = False

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
