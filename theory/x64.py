"""float64 scoped to the theory, and the broadcasting / padding shared by its public functions.

Public functions of `theory` are decorated with `scoped`: they run inside `jax.enable_x64(True)` (never
switched on globally: training code keeps float32), convert their arguments to float64 jax arrays and
return float64 jax arrays. They work eagerly, under `jax.jit` (arguments such as `act` or `depth` static)
and under `jax.grad`.

Two caveats of a scoped float64 (both from JAX's dtype rules, not specific to this package):
- Arithmetic on the returned arrays *outside* an x64 scope runs in float32 (`x * 2` is float32): convert
  with `np.asarray(x)` first, or keep the arithmetic inside `with jax.enable_x64(True)`.
- Under `jax.jit` traced without x64, Python floats arrive as float32 tracers (0.1 -> 0.100000001) and are
  only then widened; trace inside `with jax.enable_x64(True)` to keep every input digit.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def scoped(fn):
    """Run `fn` with float64 enabled for the duration of the call (and of its tracing)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(True):
            return fn(*args, **kwargs)
    return wrapper


def f64(x):
    """`x` (number, list, numpy or jax array, tracer) as a float64 jax array; call inside `scoped`."""
    return jnp.asarray(x, dtype=jnp.float64)


def bucket(n: int) -> int:
    """Padded batch size: powers of two from 8, so calls of nearby sizes share one compiled program."""
    return max(8, 1 << (n - 1).bit_length())


def flat_padded(args) -> tuple[tuple, int, list]:
    """Broadcast float64 copies of `args`; return the shape, the size and flat copies padded to `bucket`
    (by repeating the last element, so padding never creates a new kind of point)."""
    arrays = jnp.broadcast_arrays(*[f64(a) for a in args])
    shape, size = arrays[0].shape, arrays[0].size
    if size == 0:
        raise ValueError("empty input")
    pad = bucket(size) - size
    return shape, size, [jnp.concatenate([a.reshape(-1), jnp.repeat(a.reshape(-1)[-1:], pad)]) for a in arrays]


def unpad(tree, size: int, shape: tuple):
    """Inverse of `flat_padded` on every leaf (a trailing axis per leaf, e.g. layers, is kept)."""
    return jax.tree.map(lambda o: o[:size].reshape(shape + o.shape[1:]), tree)


def padded_map(batched, *args):
    """``batched(*flat)`` on the broadcast, flattened and padded ``args`` (`flat_padded`), every output leaf back
    in the broadcast shape (`unpad`): how each public function runs its vmapped kernel, so that calls of nearby
    sizes share one compiled program."""
    shape, size, flat = flat_padded(args)
    return unpad(batched(*flat), size, shape)
