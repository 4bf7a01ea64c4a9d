"""The ``python -m experiments.<name>`` mains. Run so, jax is imported here first, so that a ``JAX_*`` environment
value jax refuses at import is one line and exit status 2 (`jaxinit.run.environment.import_jax`), not a traceback.
Not for the device check (`experiments.accel_check`), whose parent process never imports jax (each variant runs
in a process of its own), nor when a program imports these modules (it gets jax's own error)."""
import sys

from jaxinit.run.environment import import_jax

_ARGS = getattr(sys, "orig_argv", [])
if sys.argv[:1] == ["-m"] and "experiments.accel_check" not in _ARGS:
    import_jax()
