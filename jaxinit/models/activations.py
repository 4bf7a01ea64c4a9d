"""One activation table for every model, shared with `theory/` where the functions coincide.

``get(name)`` returns ``psi``: an elementwise ``phi`` (``"relu"``, ``"tanh"``, ...) or a multi-node
activation (``"relu+maxpool"``, ``"tanh+avgpool"``: the last axis is read as groups of ``k = 2``
consecutive pre-activations, pooled). Every name the mean-field theory knows is taken from
`theory.activations` (its ``psi`` field), so a finite network and its theory apply the very same
function; activations the theory does not cover (``elu``, ``sigmoid``) are added here.
"""
from __future__ import annotations

from typing import Callable

import jax

from jaxinit.errors import ConfigError
from theory import activations as theory_activations

EXTRA: dict[str, Callable] = {"elu": jax.nn.elu, "sigmoid": jax.nn.sigmoid}
NAMES: tuple[str, ...] = tuple(theory_activations.NAMES) + tuple(EXTRA)


def get(name: str) -> Callable:
    """``psi`` of ``name``; an unknown name is a `ConfigError` (one line) listing the known ones."""
    if name in EXTRA:
        return EXTRA[name]
    if name in theory_activations.NAMES:
        return theory_activations.get(name).psi
    raise ConfigError(f"unknown activation {name!r}; known: {', '.join(NAMES)}")


def nodes(name: str) -> int:
    """Pre-activations pooled into one unit: 1 for elementwise phi, 2 for the papers' pooled psi."""
    return theory_activations.get(name).nodes if name in theory_activations.NAMES else 1
