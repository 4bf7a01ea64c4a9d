"""jaxinit.data: embedded sets, splits, normalisation, config errors and the on-device pipeline."""
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit import data
from jaxinit.config import DataConfig
from jaxinit.errors import ConfigError
from jaxinit.data import synthetic
from jaxinit.data.pipeline import to_sphere
from errors import expect_error

RNG = np.random.default_rng(1234)


# --------------------------------------------------------------------------- embedded sets
def test_digits_shapes_dtypes_and_classes():
    ds = data.load_dataset(DataConfig(name="digits"))
    n_test = int(0.2 * 1797)
    assert ds.x_test.shape == (n_test, 8, 8, 1)
    assert ds.x_val.shape[0] == int(0.1 * (1797 - n_test))
    assert ds.x_train.shape[0] + ds.x_val.shape[0] + n_test == 1797
    assert ds.input_shape == (8, 8, 1) and ds.n_classes == 10 and ds.name == "digits"
    assert ds.x_train.dtype == jnp.float32 and ds.y_train.dtype == jnp.int32
    assert set(np.unique(ds.y_train).tolist()) == set(range(10))


def test_mnist1d_shapes():
    ds = data.load_dataset(DataConfig(name="mnist1d", n_samples=200, val_fraction=0.25))
    assert ds.x_train.shape == (120, 40, 1) and ds.x_val.shape == (40, 40, 1)
    assert ds.x_test.shape == (40, 40, 1)  # mnist1d's own 80/20 split
    assert ds.input_shape == (40, 1) and ds.n_classes == 10
    assert ds.y_test.dtype == jnp.int32 and int(ds.y_train.max()) <= 9 and int(ds.y_train.min()) >= 0


def test_mnist1d_leaves_global_rngs_alone():
    synthetic.mnist1d_arrays.cache_clear()  # otherwise a cached result would skip the generator
    np.random.seed(7)
    random.seed(7)
    np_before, py_before = np.random.get_state(), random.getstate()
    data.load_dataset(DataConfig(name="mnist1d", n_samples=100))
    np_after = np.random.get_state()
    assert np_after[0] == np_before[0] and np.array_equal(np_after[1], np_before[1])
    assert np_after[2:] == np_before[2:]
    assert random.getstate() == py_before


def test_gaussian_follows_documented_teacher_rule():
    cfg = DataConfig(name="gaussian", n_samples=300, dim=5, n_classes=3, normalize="none")
    ds = data.load_dataset(cfg)
    rng = np.random.default_rng(synthetic.SYNTH_SEED)
    teacher = rng.standard_normal((3, 5))
    assert ds.x_train.shape[1:] == (5,) and ds.input_shape == (5,) and ds.n_classes == 3
    for x, y in ((ds.x_train, ds.y_train), (ds.x_val, ds.y_val), (ds.x_test, ds.y_test)):
        np.testing.assert_array_equal(np.argmax(np.asarray(x) @ teacher.T, axis=1), np.asarray(y))
    assert len(np.unique(ds.y_train)) == 3
    assert ds.x_test.shape[0] == int(data.SYNTH_TEST_FRACTION * 300)


# --------------------------------------------------------------------------- splits
def rows(x):
    return {r.tobytes() for r in np.asarray(x)}


def test_split_is_deterministic_and_moves_with_seed():
    cfg = DataConfig(name="gaussian", n_samples=200, dim=4, normalize="none")
    a, b = data.load_dataset(cfg), data.load_dataset(cfg)
    c = data.load_dataset(DataConfig(name="gaussian", n_samples=200, dim=4, normalize="none", split_seed=1))
    np.testing.assert_array_equal(a.x_val, b.x_val)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    assert rows(a.x_val) != rows(c.x_val)
    np.testing.assert_array_equal(a.x_test, c.x_test)  # the test split never depends on split_seed


def test_splits_do_not_overlap():
    ds = data.load_dataset(DataConfig(name="gaussian", n_samples=400, dim=6, normalize="none"))
    train, val, test = rows(ds.x_train), rows(ds.x_val), rows(ds.x_test)
    assert len(train) == ds.x_train.shape[0] and len(val) == ds.x_val.shape[0]
    assert not (train & val) and not (train & test) and not (val & test)
    assert len(train | val | test) == 400


def test_explicit_sizes_and_nesting():
    small = data.load_dataset(DataConfig(name="digits", n_train=100, n_val=50, n_test=30, normalize="none"))
    large = data.load_dataset(DataConfig(name="digits", n_train=200, n_val=50, normalize="none"))
    assert small.x_train.shape[0] == 100 and small.x_val.shape[0] == 50 and small.x_test.shape[0] == 30
    np.testing.assert_array_equal(small.x_val, large.x_val)
    np.testing.assert_array_equal(small.x_train, large.x_train[:100])  # more data = a superset


def test_binarize_is_label_mod_two():
    full = data.load_dataset(DataConfig(name="digits"))
    from jaxinit.config import IGBDataConfig
    binary = data.load_dataset(IGBDataConfig(name="digits"))
    assert binary.n_classes == 2
    np.testing.assert_array_equal(binary.y_train, full.y_train % 2)
    np.testing.assert_array_equal(binary.y_test, full.y_test % 2)
    assert set(np.unique(binary.y_val).tolist()) == {0, 1}


# --------------------------------------------------------------------------- normalisation
def test_sphere_puts_every_input_on_the_sphere():
    for name in ("digits", "mnist1d"):
        ds = data.load_dataset(DataConfig(name=name, n_samples=200, normalize="sphere"))
        for x in (ds.x_train, ds.x_val, ds.x_test):
            d = np.prod(x.shape[1:])
            np.testing.assert_allclose(jnp.sum(x ** 2, axis=tuple(range(1, x.ndim))) / d, 1.0, rtol=1e-5)


def test_none_keeps_pixels_in_unit_interval():
    ds = data.load_dataset(DataConfig(name="digits", normalize="none"))
    assert float(ds.x_train.min()) == 0.0 and float(ds.x_train.max()) == 1.0


# --------------------------------------------------------------------------- errors
def test_unknown_name_and_missing_dir(tmp_path):
    expect_error(DataConfig(name="imagenet"), "imagenet", "data.name must be one of")
    expect_error(DataConfig(name="mnist", dir=str(tmp_path / "nope")), "nope", "no such directory")
    expect_error(DataConfig(name="digits", normalize="zca"), "zca")


def test_impossible_sizes():
    expect_error(DataConfig(name="digits", n_train=5000), "n_train=5000", "too large")
    expect_error(DataConfig(name="digits", n_test=400), "n_test=400", "359")
    expect_error(DataConfig(name="digits", n_val=1438), "n_val=1438")
    expect_error(DataConfig(name="digits", val_fraction=1.0), "val_fraction")
    expect_error(DataConfig(name="gaussian", n_samples=3), "n_samples")


# --------------------------------------------------------------------------- device pipeline
def test_epoch_permutation():
    key = jax.random.key(0)
    p0, p1 = data.epoch_permutation(key, 0, 50), data.epoch_permutation(key, 1, 50)
    assert p0.dtype == jnp.int32
    np.testing.assert_array_equal(np.sort(p0), np.arange(50))
    np.testing.assert_array_equal(np.sort(p1), np.arange(50))
    assert not np.array_equal(p0, p1)
    traced = jax.jit(data.epoch_permutation, static_argnums=2)(key, jnp.int32(1), 50)
    np.testing.assert_array_equal(traced, p1)


def test_steps_per_epoch_drops_partial_batch():
    assert data.steps_per_epoch(10, 3) == 3 and data.steps_per_epoch(12, 3) == 4
    with pytest.raises(ConfigError, match="batch size"):
        data.steps_per_epoch(10, 11)


def test_get_batch_under_jit():
    x = jnp.arange(20.0).reshape(10, 2)
    y = jnp.arange(10, dtype=jnp.int32)
    perm = data.epoch_permutation(jax.random.key(3), 0, 10)
    batch = jax.jit(data.get_batch, static_argnums=4)
    for step in range(data.steps_per_epoch(10, 3)):
        xb, yb = batch(x, y, perm, jnp.int32(step), 3)
        idx = np.asarray(perm)[step * 3:(step + 1) * 3]
        np.testing.assert_array_equal(xb, np.asarray(x)[idx])
        np.testing.assert_array_equal(yb, idx)


def manual_augment(key, xb):
    """Numpy crop/flip from the same per-example draws as `augment`."""
    out = []
    for k, x in zip(jax.random.split(key, len(xb)), np.asarray(xb)):
        k_crop, k_flip = jax.random.split(k)
        dy, dx = np.asarray(jax.random.randint(k_crop, (2,), 0, 2 * data.PAD + 1))
        padded = np.pad(x, ((data.PAD, data.PAD), (data.PAD, data.PAD), (0, 0)))
        crop = padded[dy:dy + x.shape[0], dx:dx + x.shape[1]]
        out.append(crop[:, ::-1] if bool(jax.random.bernoulli(k_flip)) else crop)
    return np.stack(out)


def candidates(x):
    """All 2 * 9 * 9 crop/flip transforms of one HWC image, keyed by (flip, dy, dx)."""
    padded = np.pad(x, ((data.PAD, data.PAD), (data.PAD, data.PAD), (0, 0)))
    h, w = x.shape[:2]
    return {(flip, dy, dx): (c[:, ::-1] if flip else c)
            for flip in (False, True) for dy in range(9) for dx in range(9)
            for c in [padded[dy:dy + h, dx:dx + w]]}


def test_augment_crops_and_flips():
    xb = jnp.asarray(RNG.uniform(0.1, 1.0, (16, 8, 8, 3)), jnp.float32)
    key = jax.random.key(42)
    out = jax.jit(data.augment)(key, xb)
    assert out.shape == xb.shape and out.dtype == xb.dtype
    np.testing.assert_array_equal(out, data.augment(key, xb))
    np.testing.assert_array_equal(out, manual_augment(key, xb))
    assert not np.array_equal(out, data.augment(jax.random.key(43), xb))
    found = []
    for x, o in zip(np.asarray(xb), np.asarray(out)):
        match = [t for t, c in candidates(x).items() if np.array_equal(c, o)]
        assert len(match) == 1
        found.append(match[0])
    assert any(flip for flip, _, _ in found) and not all(flip for flip, _, _ in found)
    assert any((dy, dx) != (data.PAD, data.PAD) for _, dy, dx in found)


def test_augment_is_identity_off_images():
    key = jax.random.key(0)
    for shape in ((4, 40, 1), (4, 6)):
        x = jnp.ones(shape)
        np.testing.assert_array_equal(data.augment(key, x), x)


def test_dataset_is_a_pytree_with_static_metadata():
    ds = data.load_dataset(DataConfig(name="gaussian", n_samples=50, dim=3))
    assert len(jax.tree_util.tree_leaves(ds)) == 6
    total = jax.jit(lambda d: d.x_train.shape[0] + d.n_classes)(ds)
    assert int(total) == ds.x_train.shape[0] + 10


def test_sphere_normalisation_accepts_an_empty_split():
    out = to_sphere(np.zeros((0, 8, 8, 1), np.float32))
    assert out.shape == (0, 8, 8, 1)
