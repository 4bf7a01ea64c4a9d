"""A stop requested by the test: `interrupt.pending` answers SIGTERM from its (n_checks + 1)-th call on.

The run loop checks once per step, so `n_checks` steps are taken and the stop lands at the next boundary.
"""
import signal

from jaxinit import interrupt


def interrupt_after(monkeypatch, n_checks: int) -> dict:
    calls = {"n": 0}

    def pending():
        calls["n"] += 1
        return signal.SIGTERM if calls["n"] > n_checks else None
    monkeypatch.setattr(interrupt, "pending", pending)
    return calls
