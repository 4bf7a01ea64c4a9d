"""Random stand-ins for CIFAR in its real on-disk format, for timing runs where the set cannot be fetched.

An accelerator machine without network cannot download CIFAR-10, yet the first epochs of the `paper`
preset are what tell how long the real run will take. The stand-in has CIFAR's exact shapes, sizes,
dtype and file layout (`cifar-10-batches-py/` of pickled batches), so the data path, the compiled
steps and every timing are those of the real run; its pixels and labels are uniform noise, so its
accuracies mean nothing.

    python -m jaxinit.tools.standin cifar10 DIR          # 50,000 + 10,000 images, ~180 MB
    python -m jaxinit.tools.standin cifar10 DIR --n 8    # 8 images per batch file (tests)
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
    p.add_argument("dataset", choices=["cifar10"], metavar="DATASET", help="the set to imitate: cifar10")
    p.add_argument("dir", type=_directory, metavar="DIR", help="DIR/cifar-10-batches-py/ is written (~ is expanded)")
    p.add_argument("--n", type=_images_per_batch, default=CIFAR10_PER_BATCH, metavar="IMAGES_PER_BATCH",
                   help=f"images per batch file (default {CIFAR10_PER_BATCH:,}, CIFAR-10's)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Write the stand-in and print its folder; bad input is one line on stderr and exit status 2."""
    try:
        args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    except _UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        print(write_cifar10_standin(args.dir, args.n))
    except OSError as e:
        print(f"error: {args.dir}: cannot write there ({e.strerror or e})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
