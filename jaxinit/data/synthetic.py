"""Embedded sets, generated or shipped with a package, so no download is ever needed.

- `digits`: scikit-learn's 8x8 digits (1797 images, values 0..16, scaled by 1/16), shape (8, 8, 1).
- `mnist1d`: `mnist1d.data.make_dataset` with `num_samples = n_samples`, 40-sample signals (40, 1);
  its own 80/20 train/test split is kept.
- `gaussian`: x ~ N(0, I_dim), label = argmax of a fixed random linear teacher `W x`, W ~ N(0, 1) of
  shape (n_classes, dim).
digits and gaussian hold out SYNTH_TEST_FRACTION as the test split with a fixed seed, so neither the
data nor their test split ever moves with `split_seed`. Values arrive as float, already scaled.
"""
from __future__ import annotations

import functools
import random

import numpy as np

from jaxinit.data.checks import Raw

SYNTH_TEST_FRACTION = 0.2
SYNTH_SEED = 0             # fixed: the synthetic data and their test split never move with split_seed


def carve_test(x: np.ndarray, y: np.ndarray, n_classes: int) -> Raw:
    """A fixed-seed SYNTH_TEST_FRACTION test split of a set that has none."""
    perm = np.random.default_rng(SYNTH_SEED).permutation(len(y))
    n_test = int(SYNTH_TEST_FRACTION * len(y))
    return Raw(x[perm[n_test:]], y[perm[n_test:]], x[perm[:n_test]], y[perm[:n_test]], n_classes)


def digits() -> Raw:
    from sklearn.datasets import load_digits
    bunch = load_digits()
    return carve_test(bunch.images[..., None] / 16.0, bunch.target.astype(np.int64), 10)


def gaussian(n_samples: int, dim: int, n_classes: int) -> Raw:
    rng = np.random.default_rng(SYNTH_SEED)
    teacher = rng.standard_normal((n_classes, dim))
    x = rng.standard_normal((n_samples, dim))
    return carve_test(x, np.argmax(x @ teacher.T, axis=1), n_classes)


def mnist1d(n_samples: int) -> Raw:
    x, y, x_test, y_test = mnist1d_arrays(n_samples)
    return Raw(x[..., None], y, x_test[..., None], y_test, 10)


@functools.lru_cache(maxsize=4)
def mnist1d_arrays(n_samples: int):
    """(x, y, x_test, y_test) from mnist1d's generator, read-only because they are cached."""
    from mnist1d.data import get_dataset_args, make_dataset
    args = get_dataset_args()
    args.num_samples = n_samples
    # make_dataset reseeds the global numpy and python RNGs; give callers theirs back.
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        data = make_dataset(args)
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    out = (data["x"], data["y"], data["x_test"], data["y_test"])
    for a in out:
        a.setflags(write=False)
    return out
