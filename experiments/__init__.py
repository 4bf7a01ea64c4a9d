"""The ``python -m experiments.<name>`` mains. jax is imported here first, so that a ``JAX_*`` environment value
jax refuses at import is one line and exit status 2 (`jaxinit.run.environment.import_jax`), not a traceback."""
from jaxinit.run.environment import import_jax

import_jax()
