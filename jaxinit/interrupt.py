"""SIGINT / SIGTERM stop a run at the next step boundary, never in the middle of a write.

`handled()` installs handlers that only *record* the signal; loops call `check()` at their step
boundaries, which raises `Interrupted` once a signal arrived. The forgetting loop saves a checkpoint
first, so the run continues with ``--resume``; `jaxinit.cli` turns `Interrupted` into one line and
exit status 130 (SIGINT) or 143 (SIGTERM). A second signal while the first is pending means "stop
now": the process exits at once with the same status and one line, without a traceback (anything it
was writing is an atomic temporary file, see `jaxinit.files`).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

_pending: int | None = None
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupted(Exception):
    """A stop was requested by a signal; ``status`` is the exit status to use (130 or 143)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.status = EXIT_STATUS.get(signum, 128 + signum)


def _handler(signum, frame) -> None:
    global _pending
    if _pending is not None:   # the second signal: stop now
        sys.stderr.write(f"{signal.Signals(signum).name} again: stopping now; the last checkpoint is kept\n")
        sys.stderr.flush()
        os._exit(EXIT_STATUS.get(signum, 128 + signum))
    _pending = signum


def pending() -> int | None:
    return _pending


def check() -> None:
    """Raise `Interrupted` if a signal arrived (call at step boundaries)."""
    signum = pending()
    if signum is not None:
        raise Interrupted(signum)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Record SIGINT / SIGTERM instead of raising inside arbitrary code (main thread only)."""
    global _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _pending = None
    previous = {s: signal.signal(s, _handler) for s in EXIT_STATUS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _pending = None
