"""Splits and values on the host (once), then shuffle, batch and augment on the device as jax ops.

Splits. Validation is carved from the training pool by a permutation seeded with `split_seed`
(`n_val`, else `val_fraction` of the pool); `n_train` (0 = the rest) is taken next in the same
permutation, so a larger `n_train` is a superset. The test split is the official one (`n_test` > 0:
a fixed-seed subset that never depends on `split_seed`).

Values. uint8 pixels -> float32 in [0, 1] (other sources arrive as floats already scaled), then
images average-pooled over `pool` x `pool` blocks when asked, before normalising: `standard`
subtracts the training split's per-channel (last axis) mean and divides by its std; `sphere` rescales
each input so that |x|^2 / d = 1 (no centering), as the IGB theory assumes; `none` leaves them.

Device. An epoch's order is `permutation(fold_in(data_key, epoch))`, so any step's batch is a pure
function of (key, epoch, step) and a resumed run sees the same batches; the last partial batch is
dropped. Augmentation: per-example random crop after a PAD-pixel zero pad, and a horizontal flip.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxinit.config import DataConfig
from jaxinit.errors import ConfigError

NORMALIZE = ("standard", "sphere", "none")
TEST_SUBSET_SEED = 1       # fixed: an `n_test` subset is the same for every split_seed
PAD = 4                    # augment: zero padding of the random crop


# --------------------------------------------------------------------------- splits and values
def split_indices(n_pool: int, n_test_avail: int, cfg: DataConfig):
    """(train, val, test) index arrays: val then train from one `split_seed` permutation of the pool."""
    n_val = cfg.n_val or int(cfg.val_fraction * n_pool)
    if n_val >= n_pool:
        raise ConfigError(f"{cfg.name}: n_val={n_val} leaves no training data (training pool has {n_pool})")
    n_train = cfg.n_train or n_pool - n_val
    if n_train > n_pool - n_val:
        raise ConfigError(f"{cfg.name}: --data.n_train={n_train} is too large: {n_pool - n_val} "
                          f"training examples are left after {n_val} for validation")
    if cfg.n_test > n_test_avail:
        raise ConfigError(f"{cfg.name}: --data.n_test={cfg.n_test} is too large: the test split has {n_test_avail}")
    perm = np.random.default_rng(cfg.split_seed).permutation(n_pool)
    test = np.arange(n_test_avail)
    if cfg.n_test:
        test = np.sort(np.random.default_rng(TEST_SUBSET_SEED).permutation(n_test_avail)[:cfg.n_test])
    return perm[n_val:n_val + n_train], perm[:n_val], test


def to_float(x: np.ndarray) -> np.ndarray:
    # uint8 pixels become [0, 1]; other sources arrive as floats already scaled.
    return x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)


def pool_images(x: np.ndarray, k: int) -> np.ndarray:
    """Average-pool NHWC images over non-overlapping k x k blocks: out[n, i, j, c] = mean of
    x[n, k i : k (i + 1), k j : k (j + 1), c]. k = 1 returns `x`. Done on the host before normalising,
    so `standard` statistics are those of the pooled images."""
    if k == 1:
        return x
    n, h, w, c = x.shape
    return x.reshape(n, h // k, k, w // k, k, c).mean(axis=(2, 4), dtype=np.float64).astype(np.float32)


def normalize(xs: list, mode: str) -> list:
    """Normalise [train, val, test] by `mode`; `standard` statistics come from `xs[0]` only."""
    if mode == "standard":
        axes = tuple(range(xs[0].ndim - 1))
        mean = xs[0].mean(axes, dtype=np.float64)
        std = xs[0].std(axes, dtype=np.float64)
        std = np.where(std > 0, std, 1.0)  # a constant channel stays finite
        return [((x - mean) / std).astype(np.float32) for x in xs]
    if mode == "sphere":
        return [to_sphere(x) for x in xs]
    return xs


def to_sphere(x: np.ndarray) -> np.ndarray:
    flat = x.reshape(len(x), int(np.prod(x.shape[1:]))).astype(np.float64)  # -1 fails on an empty split
    rms = np.sqrt((flat ** 2).mean(axis=1))
    rms = np.where(rms > 0, rms, 1.0)  # an all-zero input has no direction to keep
    return (flat / rms[:, None]).reshape(x.shape).astype(np.float32)


# --------------------------------------------------------------------------- on-device pipeline
def epoch_permutation(data_key: jax.Array, epoch, n: int) -> jax.Array:
    """The shuffle of epoch `epoch` (traceable): a permutation of range(n) keyed by fold_in(key, epoch)."""
    return jax.random.permutation(jax.random.fold_in(data_key, epoch), n).astype(jnp.int32)


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Full batches per epoch; the last partial batch is dropped (a new shuffle covers it next epoch)."""
    if batch_size <= 0 or batch_size > n:
        raise ConfigError(f"batch size {batch_size} must lie in [1, {n}] (the training set size)")
    return n // batch_size


def get_batch(x: jax.Array, y: jax.Array, perm: jax.Array, step, batch_size: int):
    """Batch `step` (may be traced) of the epoch ordered by `perm`; `batch_size` is static."""
    idx = lax.dynamic_slice(perm, (step * batch_size,), (batch_size,))
    return jnp.take(x, idx, axis=0), jnp.take(y, idx, axis=0)


def _augment_one(key: jax.Array, x: jax.Array) -> jax.Array:
    k_crop, k_flip = jax.random.split(key)
    h, w, c = x.shape
    padded = jnp.pad(x, ((PAD, PAD), (PAD, PAD), (0, 0)))
    dy, dx = jax.random.randint(k_crop, (2,), 0, 2 * PAD + 1)
    crop = lax.dynamic_slice(padded, (dy, dx, 0), (h, w, c))
    return jnp.where(jax.random.bernoulli(k_flip), crop[:, ::-1], crop)


def augment(key: jax.Array, xb: jax.Array) -> jax.Array:
    """Per-example random crop (4-pixel zero pad) + horizontal flip for NHWC; identity for other ranks."""
    if xb.ndim != 4:  # signals (N, L, C) and vectors have no image geometry to exploit
        return xb
    return jax.vmap(_augment_one)(jax.random.split(key, xb.shape[0]), xb)
