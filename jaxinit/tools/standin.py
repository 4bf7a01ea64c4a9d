"""Random stand-ins for CIFAR-10 and MNIST in their real on-disk formats, for timing runs where the sets
cannot be fetched.

An accelerator machine without network cannot download CIFAR-10 or MNIST, yet the first epochs of the
accelerator presets (the forgetting study's `paper`: CIFAR-10; the IGB study's `paper`: MNIST) are what
tell how long the real runs will take. A stand-in has the set's exact shapes, sizes, dtype and file
layout -- CIFAR-10's `cifar-10-batches-py/` of pickled batches, MNIST's four IDX files in `mnist/` (read
by `jaxinit.data.idx`) -- so the data path, the compiled steps and every timing are those of the real
run; its pixels and labels are uniform noise, so its accuracies mean nothing. Pass the folder as
`--data.dir=DIR`.

    python -m jaxinit.tools.standin cifar10 DIR          # 50,000 + 10,000 images, ~180 MB
    python -m jaxinit.tools.standin cifar10 DIR --n 8    # 8 images per batch file (tests)
    python -m jaxinit.tools.standin mnist DIR            # DIR/mnist/: 60,000 + 10,000 images, ~55 MB
    python -m jaxinit.tools.standin mnist DIR --n 8      # 8 training and 8 test images
"""
from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
CIFAR10_PER_BATCH = 10_000
MNIST_FOLDER = "mnist"              # `jaxinit.data.readers` looks in DIR/mnist/ first
MNIST_SIZES = {"train": 60_000, "t10k": 10_000}
MNIST_SIDE = 28


def write_cifar10_standin(root: str | Path, n_per_batch: int = CIFAR10_PER_BATCH, seed: int = 0) -> Path:
    """Write `root/cifar-10-batches-py/` (five training batches + the test batch) of uniform noise.

    Each batch is a pickled dict `{b"data": uint8 (n, 3072) channel-major rows, b"labels": [int]}`, as
    in the official python archive. Files are written to a temporary name and renamed, so an
    interrupted call never leaves a half-written batch that the reader would take for a real one.
    """
    if n_per_batch < 1:
        raise ValueError(f"n_per_batch must be >= 1, got {n_per_batch}")
    folder = Path(root) / CIFAR10_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name in CIFAR10_BATCHES:
        batch = {b"data": rng.integers(0, 256, (n_per_batch, 3 * 32 * 32), dtype=np.uint8),
                 b"labels": rng.integers(0, 10, n_per_batch).tolist()}
        tmp = folder / f".{name}.tmp"
        tmp.write_bytes(pickle.dumps(batch, protocol=4))
        tmp.replace(folder / name)
    return folder


def write_mnist_standin(root: str | Path, n_train: int = MNIST_SIZES["train"], n_test: int = MNIST_SIZES["t10k"],
                        seed: int = 0) -> Path:
    """Write `root/mnist/` with MNIST's four uncompressed IDX files, uniform noise.

    IDX (yann.lecun.com/exdb/mnist): magic `0x00 0x00 0x08 NDIM` (uint8 data), NDIM big-endian uint32
    sizes, then the values row-major: `*-images-idx3-ubyte` (n, 28, 28), `*-labels-idx1-ubyte` (n,) in
    0..9. Each file is written to a temporary name and renamed, as `write_cifar10_standin` does.
    """
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train and n_test must be >= 1, got {n_train}, {n_test}")
    folder = Path(root) / MNIST_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        _write_idx(folder / f"{prefix}-images-idx3-ubyte",
                   rng.integers(0, 256, (n, MNIST_SIDE, MNIST_SIDE), dtype=np.uint8))
        _write_idx(folder / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n, dtype=np.uint8))
    return folder


def _write_idx(path: Path, values: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, values.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in values.shape)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(header + np.ascontiguousarray(values, np.uint8).tobytes())
    tmp.replace(path)


WRITERS = {"cifar10": lambda root, n: write_cifar10_standin(root, n or CIFAR10_PER_BATCH),
           "mnist": lambda root, n: write_mnist_standin(root, *((n, n) if n else ()))}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):   # argparse prints usage + message; we want one line
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _images_per_batch(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"needs a whole number >= 1, got {text!r}")
    return int(text)


def _directory(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a directory, got an empty string")
    return Path(text).expanduser()


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m jaxinit.tools.standin", description=__doc__, allow_abbrev=False,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=list(WRITERS), metavar="DATASET", help="the set to imitate: cifar10 | mnist")
    p.add_argument("dir", type=_directory, metavar="DIR",
                   help="DIR/cifar-10-batches-py/ or DIR/mnist/ is written (~ is expanded)")
    p.add_argument("--n", type=_images_per_batch, default=0, metavar="IMAGES_PER_BATCH",
                   help=f"images per file: per batch file for cifar10 (default {CIFAR10_PER_BATCH:,}, CIFAR-10's), "
                        f"in each of the training and test files for mnist (default 60,000 and 10,000)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Write the stand-in and print its folder; bad input is one line on stderr and exit status 2."""
    try:
        args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    except _UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        print(WRITERS[args.dataset](args.dir, args.n))
    except OSError as e:
        print(f"error: {args.dir}: cannot write there ({e.strerror or e})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
