"""`load_dataset`: a config in, device-resident splits out, every user error a one-line ConfigError."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp

from jaxinit.config import DataConfig, check_values
from jaxinit.errors import ConfigError
from jaxinit.data import synthetic
from jaxinit.data.checks import Raw
from jaxinit.data.pipeline import NORMALIZE, normalize, pool_images, split_indices, to_float
from jaxinit.data.readers import load_real

SYNTHETIC = ("digits", "mnist1d", "gaussian")
REAL = ("mnist", "fashion_mnist", "cifar10", "cifar100")
NAMES = SYNTHETIC + REAL


@dataclass(frozen=True)
class Dataset:
    """Device-resident splits; a pytree whose leaves are the six arrays."""
    x_train: jax.Array
    y_train: jax.Array
    x_val: jax.Array
    y_val: jax.Array
    x_test: jax.Array
    y_test: jax.Array
    n_classes: int
    input_shape: tuple
    name: str


jax.tree_util.register_dataclass(
    Dataset, data_fields=["x_train", "y_train", "x_val", "y_val", "x_test", "y_test"],
    meta_fields=["n_classes", "input_shape", "name"])


def load_dataset(cfg: DataConfig) -> Dataset:
    """Load, split, binarise and normalise `cfg.name`, then put the splits on the device once."""
    _validate(cfg)
    raw = _load_raw(cfg)
    _check_pool(cfg, tuple(raw.x_pool.shape[1:]))
    train, val, test = split_indices(len(raw.y_pool), len(raw.y_test), cfg)
    xs = [pool_images(to_float(a), cfg.pool) for a in (raw.x_pool[train], raw.x_pool[val], raw.x_test[test])]
    ys = [raw.y_pool[train], raw.y_pool[val], raw.y_test[test]]
    n_classes = raw.n_classes
    if cfg.binarize:
        ys, n_classes = [y % 2 for y in ys], 2
    xs = normalize(xs, cfg.normalize)
    x_tr, x_va, x_te = (jnp.asarray(x, jnp.float32) for x in xs)
    y_tr, y_va, y_te = (jnp.asarray(y, jnp.int32) for y in ys)
    return Dataset(x_tr, y_tr, x_va, y_va, x_te, y_te, int(n_classes),
                   tuple(int(s) for s in x_tr.shape[1:]), cfg.name)


def data_dir(cfg: DataConfig) -> str:
    """`--data.dir` with `~` expanded ('' stays '': no folder given)."""
    return os.path.expanduser(cfg.dir) if cfg.dir else ""


def _validate(cfg: DataConfig) -> None:
    from jaxinit import budget
    check_values(cfg, "data.")   # notebooks reach here without the parser: inf, negative seeds, ...
    if cfg.name not in NAMES:
        raise ConfigError(f"--data.name={cfg.name!r}: unknown dataset; choose one of {', '.join(NAMES)}")
    if cfg.dir and not Path(data_dir(cfg)).is_dir():
        expanded = f" ({data_dir(cfg)})" if data_dir(cfg) != cfg.dir else ""
        raise ConfigError(f"--data.dir={cfg.dir}{expanded}: no such directory")
    if cfg.normalize not in NORMALIZE:
        raise ConfigError(f"--data.normalize={cfg.normalize!r}: choose one of {', '.join(NORMALIZE)}")
    if cfg.pool < 1:
        raise ConfigError(f"--data.pool must be >= 1, got {cfg.pool}")
    if min(cfg.n_train, cfg.n_val, cfg.n_test) < 0:
        raise ConfigError("--data.n_train, n_val and n_test must be >= 0 (0 = default)")
    if not 0.0 <= cfg.val_fraction < 1.0:
        raise ConfigError(f"--data.val_fraction must lie in [0, 1), got {cfg.val_fraction}")
    if cfg.name in ("mnist1d", "gaussian") and cfg.n_samples < 10:
        raise ConfigError(f"--data.n_samples must be >= 10 for {cfg.name}, got {cfg.n_samples}")
    if cfg.name == "gaussian" and (cfg.dim <= 0 or cfg.n_classes < 2):
        raise ConfigError(f"gaussian needs --data.dim >= 1 and --data.n_classes >= 2, got {cfg.dim}, {cfg.n_classes}")
    budget.check_data(cfg)


def _check_pool(cfg: DataConfig, shape: tuple) -> None:
    """`--data.pool` needs images (H, W, C) whose height and width it divides."""
    if cfg.pool == 1:
        return
    if len(shape) != 3:
        raise ConfigError(f"--data.pool={cfg.pool} pools images; {cfg.name} inputs have shape {shape}")
    if shape[0] % cfg.pool or shape[1] % cfg.pool:
        raise ConfigError(f"--data.pool={cfg.pool} must divide {cfg.name}'s image height and width {shape[:2]}")


def _load_raw(cfg: DataConfig) -> Raw:
    if cfg.name == "digits":
        return synthetic.digits()
    if cfg.name == "mnist1d":
        return synthetic.mnist1d(cfg.n_samples)
    if cfg.name == "gaussian":
        return synthetic.gaussian(cfg.n_samples, cfg.dim, cfg.n_classes)
    return load_real(cfg.name, data_dir(cfg))
