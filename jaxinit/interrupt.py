"""SIGINT / SIGTERM stop a run promptly, never in the middle of a write.

`handled()` installs handlers for the whole run. Two modes, chosen per phase:

- *deferred* (the default inside `handled()`, and `deferred()`): the signal is only recorded; loops call
  `check()` at their step boundaries, which raises `Interrupted` once a signal arrived. The
  forgetting loop saves a checkpoint first, so the run continues with ``--resume``.
- *prompt* (`prompt()`): for phases with no half-done state to protect -- set-up, data generation,
  the summary, figures -- the first signal raises `Interrupted` at once, wherever the code is (Python
  runs a handler between bytecodes, so a long numpy or XLA call finishes first). A signal recorded
  earlier raises on entry. Results files are atomic temporaries (`jaxinit.run.files`), so an exception
  there leaves the old file or none; wrap a section that must finish (a checkpoint save) in
  `deferred()` inside a prompt phase.

`jaxinit.run.cli` turns `Interrupted` into one line and exit status 130 (SIGINT) or 143 (SIGTERM); a
signal still pending when the experiment returns stops it with that status too (`check()` after the
summary), never exit 0. A second signal while the first is pending means "stop now": the process
exits at once with the same status and one line, without a traceback.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

_pending: int | None = None
_modes: list[str] = []          # innermost last: "prompt" or "deferred"; empty = deferred
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupted(BaseException):
    """A stop was requested by a signal; ``status`` is the exit status to use (130 or 143).

    A `BaseException`, like `KeyboardInterrupt`: code that turns any ``Exception`` into a one-line error
    (orbax wrappers, data readers) must not turn a stop into "corrupt checkpoint" or exit status 2.
    """

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
    if _modes and _modes[-1] == "prompt":
        raise Interrupted(signum)


def pending() -> int | None:
    return _pending


def check() -> None:
    """Raise `Interrupted` if a signal arrived (call at step boundaries and between phases)."""
    signum = pending()
    if signum is not None:
        raise Interrupted(signum)


@contextlib.contextmanager
def _mode(mode: str) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield                  # signals reach the main thread only
        return
    _modes.append(mode)
    try:
        if mode == "prompt":
            check()
        yield
    finally:
        _modes.pop()


def prompt() -> contextlib.AbstractContextManager[None]:
    """A phase where the first SIGINT / SIGTERM raises `Interrupted` at once (see the module docstring)."""
    return _mode("prompt")


def deferred() -> contextlib.AbstractContextManager[None]:
    """A section (inside `prompt()`) that a signal must not cut short: it is recorded for `check()`."""
    return _mode("deferred")


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
