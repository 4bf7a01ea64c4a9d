"""Random stand-ins for CIFAR in its real on-disk format, for timing runs where the set cannot be fetched.

An accelerator machine without network cannot download CIFAR-10, yet the first epochs of the `paper`
preset are what tell how long the real run will take. The stand-in has CIFAR's exact shapes, sizes,
dtype and file layout (`cifar-10-batches-py/` of pickled batches), so the data path, the compiled
steps and every timing are those of the real run; its pixels and labels are uniform noise, so its
accuracies mean nothing.

    python -m jaxinit.standin cifar10 DIR            # 50,000 + 10,000 images, ~180 MB
    python -m jaxinit.standin cifar10 DIR --n 8      # 8 images per batch file (tests)
"""
from __future__ import annotations

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


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m jaxinit.standin cifar10 DIR [--n IMAGES_PER_BATCH]"
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    n = CIFAR10_PER_BATCH
    if "--n" in args:
        i = args.index("--n")
        value = args[i + 1] if i + 1 < len(args) else ""
        if not value.isdigit() or int(value) < 1:
            print(f"error: --n needs a whole number >= 1, got {value!r}", file=sys.stderr)
            return 2
        n = int(value)
        del args[i:i + 2]
    if len(args) != 2 or args[0] != "cifar10":
        print(f"error: {usage}", file=sys.stderr)
        return 2
    try:
        print(write_cifar10_standin(args[1], n))
    except OSError as e:
        print(f"error: {args[1]}: cannot write there ({e.strerror or e})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
