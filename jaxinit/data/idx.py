"""MNIST and Fashion-MNIST from their original IDX files, read strictly.

Format (yann.lecun.com/exdb/mnist): a magic number of four bytes `0x00 0x00 TYPE NDIM`, then NDIM
big-endian uint32 sizes, then prod(sizes) values of TYPE, big-endian and row-major, and nothing after.
TYPE is 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32 or 0x0E float64. A file may be
gzipped (`.gz`). A set is four files, `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
`t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte` (or the `train-images.idx3-ubyte` spelling).

Rules: the magic number, TYPE and NDIM > 0 are checked; the data size is computed from the header in
Python integers (a numpy product of 2^31 x 2^31 x 4 wraps to 0) and refused above MAX_IDX_BYTES
before anything is read; the data are read in chunks, so memory follows what the file really holds,
and must be exactly as long as declared. Images are N x 28 x 28 and labels N, with the pixel and
label rules of checks.py: a float image with NaN or an int32 pixel of 300 is an error, never a cast.
"""
from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np

from jaxinit.errors import ConfigError
from jaxinit.data.checks import Raw, as_labels, as_pixels, check_image_shape, check_same_length, reason

IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
IDX_FILES = {"train": ("train-images", "train-labels"), "test": ("t10k-images", "t10k-labels")}
IMAGE_SHAPE = (28, 28)
N_CLASSES = 10
# MNIST's training images are 47 MB as uint8 (188 MB as int32 or float32); a header declaring more
# is corrupt or hostile, and a tiny gzip can declare and inflate to far more.
MAX_IDX_BYTES = 256 * 2**20
CHUNK_BYTES = 2**20


def find_idx(folder: Path, stem: str) -> Path | None:
    """The file for `stem` in `folder`: hyphenated or dotted spelling, plain or gzipped."""
    kind = "idx3" if stem.endswith("images") else "idx1"
    for base in (f"{stem}-{kind}-ubyte", f"{stem}.{kind}-ubyte"):
        for path in (folder / base, folder / f"{base}.gz"):
            if path.is_file():
                return path
    return None


def read_idx_set(folder: Path) -> Raw | None:
    """The four IDX files in `folder` as a Raw set; None when none of them is there."""
    paths = {stem: find_idx(folder, stem) for pair in IDX_FILES.values() for stem in pair}
    if not any(paths.values()):
        return None
    missing = [stem for stem, p in paths.items() if p is None]
    if missing:
        raise ConfigError(f"{folder}: IDX files incomplete, missing {', '.join(missing)}")
    (x, y), (x_test, y_test) = (_read_split(paths[images], paths[labels])
                                for images, labels in IDX_FILES.values())
    return Raw(x, y, x_test, y_test, N_CLASSES)


def _read_split(images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    x = check_image_shape(as_pixels(read_idx(images_path), images_path), IMAGE_SHAPE, images_path)
    y = as_labels(read_idx(labels_path), N_CLASSES, labels_path)
    check_same_length(x, y, f"{images_path} / {labels_path.name}")
    return x[..., None], y


def read_idx(path) -> np.ndarray:
    """One IDX file (optionally gzipped) as a native-endian array; anything malformed is a ConfigError."""
    path = Path(path).expanduser()
    try:
        with (gzip.open if path.name.endswith(".gz") else open)(path, "rb") as f:
            dtype, dims = _read_header(f, path)
            n_bytes = _data_bytes(dtype, dims, path)
            payload = _read_at_most(f, n_bytes)
            trailing = f.read(1)
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        raise ConfigError(f"{path}: cannot read ({reason(err)})") from None
    if len(payload) != n_bytes:
        raise ConfigError(f"{path}: truncated IDX file ({len(payload)} data bytes, "
                          f"expected {n_bytes} for shape {dims})")
    if trailing:
        raise ConfigError(f"{path}: IDX file is longer than its header declares (shape {dims})")
    return np.frombuffer(payload, dtype).reshape(dims).astype(dtype.newbyteorder("="))


def _read_header(f, path: Path) -> tuple[np.dtype, tuple[int, ...]]:
    magic = f.read(4)
    if len(magic) < 4 or magic[:2] != b"\0\0":
        raise ConfigError(f"{path}: not an IDX file (bad magic number {magic.hex() or 'none'})")
    if magic[2] not in IDX_DTYPES:
        raise ConfigError(f"{path}: unknown IDX type code 0x{magic[2]:02x} "
                          f"(known: {', '.join(f'0x{c:02x}' for c in IDX_DTYPES)})")
    ndim = magic[3]
    if ndim == 0:
        raise ConfigError(f"{path}: IDX header declares 0 dimensions")
    sizes = f.read(4 * ndim)
    if len(sizes) < 4 * ndim:
        raise ConfigError(f"{path}: truncated IDX header")
    dims = tuple(int.from_bytes(sizes[4 * i:4 * i + 4], "big") for i in range(ndim))
    return np.dtype(IDX_DTYPES[magic[2]]), dims


def _data_bytes(dtype: np.dtype, dims: tuple[int, ...], path: Path) -> int:
    n_bytes = math.prod(dims) * dtype.itemsize  # Python ints: never wraps
    if n_bytes > MAX_IDX_BYTES:
        raise ConfigError(f"{path}: IDX header declares shape {dims} of {dtype.name} ({n_bytes} bytes), "
                          f"more than the {MAX_IDX_BYTES} bytes an MNIST-style file may hold")
    return n_bytes


def _read_at_most(f, n_bytes: int) -> bytearray:
    # Chunked: one read(n) would allocate n bytes up front, however little the file holds.
    out = bytearray()
    while len(out) < n_bytes:
        chunk = f.read(min(CHUNK_BYTES, n_bytes - len(out)))
        if not chunk:
            break
        out += chunk
    return out
