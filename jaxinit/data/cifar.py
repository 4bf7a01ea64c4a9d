"""CIFAR-10 and CIFAR-100 in the python format of www.cs.toronto.edu/~kriz/cifar.html, read strictly.

Format: the folder `cifar-10-batches-py/` (`data_batch_1` .. `data_batch_5`, `test_batch`, 10,000
images each) or `cifar-100-python/` (`train` 50,000, `test` 10,000), each batch a pickled dict whose
`b"data"` is uint8 (N, 3072) with channel-major rows (1024 red, 1024 green, 1024 blue values, each
plane row-major 32 x 32), and whose `b"labels"` (CIFAR-10) or `b"fine_labels"` (CIFAR-100) holds N
ints. The folder may instead be the original archive `cifar-10-python.tar.gz` /
`cifar-100-python.tar.gz`, read in place and never extracted.

Rules:
- an original archive is checked against the MD5 published on the CIFAR page (streamed in chunks)
  before it is opened: a mismatch is one line, as is any gzip, zlib or tar error after it;
- a batch, file or archive member, is refused from its size (stat, or the tar header) before it is
  read when it is larger than its image count x BYTES_PER_IMAGE: a real batch holds ~3,104 bytes
  per image, so memory stays bounded however the archive was built; other members are never read;
- pickles may build numpy arrays and builtins only, so unpickling runs no foreign code;
- `b"data"` is (N, 3072) as published, or (N, 32, 32, 3) already NHWC; pixels and labels obey the
  rules of checks.py (float pixels in [0, 1], int16 200..455, label 2.9: errors, never casts).
"""
from __future__ import annotations

import hashlib
import io
import lzma
import pickle
import tarfile
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxinit.errors import ConfigError
from jaxinit.data.checks import Raw, as_labels, as_pixels, check_image_shape, check_same_length, reason


class CifarLayout(NamedTuple):
    folder: str
    archive: str
    train: tuple[str, ...]
    test: tuple[str, ...]
    label_key: bytes
    n_classes: int
    images_per_member: dict[str, int]


_CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR = {
    "cifar10": CifarLayout("cifar-10-batches-py", "cifar-10-python.tar.gz", _CIFAR10_TRAIN, ("test_batch",),
                           b"labels", 10, {m: 10_000 for m in _CIFAR10_TRAIN + ("test_batch",)}),
    "cifar100": CifarLayout("cifar-100-python", "cifar-100-python.tar.gz", ("train",), ("test",),
                            b"fine_labels", 100, {"train": 50_000, "test": 10_000}),
}
# Published on https://www.cs.toronto.edu/~kriz/cifar.html next to each download.
ARCHIVE_MD5 = {"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a",
               "cifar-100-python.tar.gz": "eb9058c3a382ffc7106e4002c42a8d85"}
IMAGE_SHAPE = (32, 32, 3)
BYTES_PER_IMAGE = 4096      # 3072 pixels + label, file name and pickle framing, with a margin
CHUNK_BYTES = 2**20         # streamed reads: the MD5 and the end-of-archive check
_TAR_ERRORS = (OSError, EOFError, tarfile.TarError, zlib.error, lzma.LZMAError)


# --------------------------------------------------------------------------- archive checksum
def file_md5(path: Path) -> str:
    """Hex MD5 of a file, read in chunks so that a 170 MB archive never sits in memory."""
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def verify_archive(path, expected_md5: str) -> None:
    """ConfigError (one line) unless the file at `path` has MD5 `expected_md5`."""
    path = Path(path).expanduser()
    try:
        actual = file_md5(path)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({reason(err)})") from None
    if actual != expected_md5.lower():
        raise ConfigError(f"{path}: MD5 {actual} differs from the published {expected_md5}; the archive "
                          f"is corrupt or not the original (download it again)")


# --------------------------------------------------------------------------- reading a set
def read_cifar(name: str, root: Path) -> Raw | None:
    """The CIFAR set `name` from `root` (folder first, then archive); None when neither is there."""
    layout = CIFAR[name]
    if (root / layout.folder).is_dir():
        blobs = {m: _read_file(root / layout.folder / m, _max_bytes(layout, m))
                 for m in layout.train + layout.test}
        where = {m: root / layout.folder / m for m in blobs}
    elif (root / layout.archive).is_file():
        archive = root / layout.archive
        if archive.name in ARCHIVE_MD5:
            verify_archive(archive, ARCHIVE_MD5[archive.name])
        blobs = read_tar_members(archive, layout)
        where = {m: f"{archive}:{layout.folder}/{m}" for m in blobs}
    else:
        return None
    x, y = _batches(layout, blobs, where, layout.train)
    x_test, y_test = _batches(layout, blobs, where, layout.test)
    return Raw(x, y, x_test, y_test, layout.n_classes)


def _max_bytes(layout: CifarLayout, member: str) -> int:
    return layout.images_per_member[member] * BYTES_PER_IMAGE


def _refuse_if_large(size: int, limit: int, where) -> None:
    if size > limit:
        raise ConfigError(f"{where}: {size} bytes, more than the {limit} a CIFAR batch of this name "
                          f"can hold; refusing to read it")


def _read_file(path: Path, limit: int) -> bytes:
    try:
        _refuse_if_large(path.stat().st_size, limit, path)
        return path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({reason(err)})") from None


def read_tar_members(archive: Path, layout: CifarLayout) -> dict[str, bytes]:
    """The batches of `layout` from a tar archive in one pass; other members are skipped unread."""
    wanted = {f"{layout.folder}/{m}": m for m in layout.train + layout.test}
    blobs = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            for info in tar:
                member = wanted.get(info.name.removeprefix("./"))
                if member is None or member in blobs:
                    continue  # skipping seeks past the member's data without keeping it
                blobs[member] = _read_member(tar, info, _max_bytes(layout, member), f"{archive}:{info.name}")
                if len(blobs) == len(wanted):
                    break
            else:  # members are missing: say whether the archive is short or tarfile stopped early
                problem = _tail_problem(tar)
                if problem:
                    raise ConfigError(f"{archive}: corrupt archive ({problem})")
    except _TAR_ERRORS as err:
        raise ConfigError(f"{archive}: corrupt archive ({reason(err)})") from None
    missing = [name for name, m in wanted.items() if m not in blobs]
    if missing:
        raise ConfigError(f"{archive}: has no member {missing[0]}")
    return blobs


def _tail_problem(tar: tarfile.TarFile) -> str | None:
    """Why the archive does not end where tarfile stopped, or None when only zero blocks follow.

    tarfile ends its iteration silently at the first invalid header after the first member, so a
    corrupt archive would otherwise read as one that lacks members; reading on to the end (in
    chunks) also runs gzip's CRC check.
    """
    tar.fileobj.seek(tar.offset)
    while chunk := tar.fileobj.read(CHUNK_BYTES):
        if chunk.count(0) != len(chunk):
            return f"invalid tar header at byte {tar.offset}"
    return None


def _read_member(tar: tarfile.TarFile, info: tarfile.TarInfo, limit: int, where: str) -> bytes:
    if not info.isfile():
        raise ConfigError(f"{where}: not a regular file in the archive")
    _refuse_if_large(info.size, limit, where)  # from the header, before a byte of it is read
    return tar.extractfile(info).read()


def _batches(layout: CifarLayout, blobs: dict, where: dict, members: tuple) -> tuple[np.ndarray, np.ndarray]:
    pairs = [read_batch(blobs[m], layout.label_key, layout.n_classes, where[m]) for m in members]
    return np.concatenate([x for x, _ in pairs]), np.concatenate([y for _, y in pairs])


def read_batch(blob: bytes, label_key: bytes, n_classes: int, where) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch as (uint8 NHWC images, int64 labels), checked."""
    batch = _unpickle(blob, where)
    if not isinstance(batch, dict) or b"data" not in batch or label_key not in batch:
        raise ConfigError(f"{where}: not a CIFAR batch (no {b'data'!r} / {label_key!r} entries)")
    x = _to_nhwc(as_pixels(batch[b"data"], where), where)
    y = as_labels(batch[label_key], n_classes, where)
    check_same_length(x, y, where)
    return x, y


def _to_nhwc(x: np.ndarray, where) -> np.ndarray:
    if x.ndim == 2 and x.shape[1] == 3 * 32 * 32:
        return x.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # channel-major rows -> NHWC
    if x.ndim == 4:
        return check_image_shape(x, IMAGE_SHAPE, where)
    raise ConfigError(f"{where}: CIFAR data has shape {x.shape}, expected (N, 3072) or (N, 32, 32, 3)")


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles only numpy arrays and builtins: a CIFAR batch needs nothing else."""
    _ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
                ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar")}

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        if module.startswith("numpy.core.") and hasattr(np, "_core"):
            module = module.replace("numpy.core.", "numpy._core.")  # numpy 2 moved it
        return super().find_class(module, name)


def _unpickle(blob: bytes, where):
    try:
        return _ArrayUnpickler(io.BytesIO(blob), encoding="bytes").load()
    except Exception as err:  # any failure inside a pickle stream means a corrupt file
        raise ConfigError(f"{where}: corrupt CIFAR batch ({reason(err)})") from None
