"""jaxinit.data.readers: which source is read, tfds under the same checks, `~` in --data.dir."""
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit import data
from jaxinit.tools import standin
from jaxinit.config import DataConfig
from jaxinit.data import readers
from errors import expect_error, one_line_error


def examples(images, labels):
    """A random-access source as tfds.data_source gives one: a sequence of feature dicts."""
    return [{"image": x, "label": y} for x, y in zip(images, labels)]


def test_no_data_says_what_to_put_where(tmp_path):
    expect_error(DataConfig(name="cifar10", dir=str(tmp_path)), str(tmp_path),
                 "cifar-10-python.tar.gz", "cifar-10-batches-py/", "tfds")
    expect_error(DataConfig(name="mnist", dir=str(tmp_path)), "train-images-idx3-ubyte")


def test_data_dir_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    standin.write_cifar10_standin(tmp_path / "sets", n_per_batch=2)
    ds = data.load_dataset(DataConfig(name="cifar10", dir="~/sets", val_fraction=0.0))
    assert ds.x_train.shape == (10, 32, 32, 3) and ds.x_test.shape == (2, 32, 32, 3)
    expect_error(DataConfig(name="cifar10", dir="~/nope"), "~/nope", str(tmp_path / "nope"), "no such directory")


def test_tfds_data_source_with_mock_data(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    # mock_data ignores data_dir, so a marker stands in for a prepared tfds folder.
    (tmp_path / "mnist" / "3.0.1").mkdir(parents=True)
    (tmp_path / "mnist" / "3.0.1" / "dataset_info.json").write_text("{}")
    with tfds.testing.mock_data(num_examples=10, policy=tfds.testing.MockPolicy.USE_CODE):
        ds = data.load_dataset(DataConfig(name="mnist", dir=str(tmp_path), val_fraction=0.2, normalize="none"))
    assert ds.x_train.shape == (8, 28, 28, 1) and ds.x_val.shape == (2, 28, 28, 1)
    assert ds.x_test.shape == (10, 28, 28, 1) and ds.y_test.dtype == jnp.int32
    assert 0.0 <= float(ds.x_train.min()) and float(ds.x_train.max()) <= 1.0
    assert float(ds.x_train.max()) > 0.0  # mock images are random, not blank


def test_tfds_examples_pass_through_uncast():
    images = np.arange(3 * 28 * 28).reshape(3, 28, 28, 1) % 256
    x, y = readers.checked_split("mnist", *readers.source_arrays(examples(images, [np.int64(4), 0, 9])), "src")
    np.testing.assert_array_equal(x, images)
    np.testing.assert_array_equal(y, [4, 0, 9])
    assert x.dtype == np.uint8 and y.dtype == np.int64


def test_tfds_fractional_labels_are_refused():
    # `int(label)` used to turn 2.9 into class 2.
    source = examples(np.zeros((2, 28, 28, 1), np.uint8), [1.0, 2.9])
    one_line_error(readers.checked_split, "mnist", *readers.source_arrays(source), "src (mnist train)",
                   match=r"src \(mnist train\): labels have non-integer values \(e\.g\. 2\.9\)")


def test_tfds_float_images_are_refused():
    source = examples(np.full((2, 32, 32, 3), 0.5, np.float32), [1, 2])
    one_line_error(readers.checked_split, "cifar10", *readers.source_arrays(source), "src",
                   match=r"src: pixels have non-integer values")


def test_tfds_images_of_another_shape_are_refused():
    source = examples(np.zeros((2, 32, 32, 3), np.uint8), [1, 2])
    one_line_error(readers.checked_split, "mnist", *readers.source_arrays(source), "src",
                   match=r"src: images have shape \(2, 32, 32, 3\), expected \(N, 28, 28, 1\)")


def test_a_prepared_tfds_folder_without_the_tfds_extra_is_one_line(tmp_path, monkeypatch):
    """tensorflow-datasets is the ``tfds`` extra: a folder that needs it, on a machine without it, says so."""
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)      # import now raises
    (tmp_path / "cifar10" / "3.0.2").mkdir(parents=True)
    (tmp_path / "cifar10" / "3.0.2" / "dataset_info.json").write_text("{}")
    expect_error(DataConfig(name="cifar10", dir=str(tmp_path)), "needs tensorflow-datasets", "jaxinit[tfds]")
