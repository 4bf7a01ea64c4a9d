"""What every reader demands of pixels, labels and shapes; errors as one line naming the file.

Rules (a value that does not fit is an error, never a cast):
- pixels: uint8, or any integer or float array whose values are all finite integers in [0, 255]
  (an int16 image of 0..255 or a float image of 0.0, 1.0, ..., 255.0 is the same picture). NaN, inf,
  non-integral or out-of-range values are refused, and so are bool, complex, string and object arrays:
  int16 300 would otherwise wrap to 44 and float 0.5 truncate to 0.
- labels: a 1-D array or list of integer values in [0, n_classes), under the same dtype rules
  (a float label 2.9 is an error, not class 2).
- a split has as many labels as images, and every image has the shape its set publishes.

`ConfigError` is what the entrypoints turn into one line on stderr and exit status 2, so every
message here is a single line that starts with the file it is about.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxinit.errors import ConfigError

PIXEL_MAX = 255


class Raw(NamedTuple):
    """A set as read from its source, before splitting; images NHWC (or N, L, C / N, D)."""
    x_pool: np.ndarray     # training pool (validation is carved from it)
    y_pool: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int


def reason(err: BaseException) -> str:
    """`module.Type: first line of the message`: errors reach the user as one line."""
    kind, module = type(err).__name__, type(err).__module__.lstrip("_")
    if module != "builtins":  # `zlib.error` says what failed; a bare `error` does not
        kind = f"{module}.{kind}"
    lines = str(err).strip().splitlines()
    return f"{kind}: {lines[0]}" if lines else kind


def _numeric(values, what: str, where) -> np.ndarray:
    """`values` as an integer or float array; anything else (ragged, strings, objects) is refused."""
    try:
        array = np.asarray(values)
    except (ValueError, TypeError, OverflowError) as err:  # ragged lists, unconvertible objects
        raise ConfigError(f"{where}: {what} are not a numeric array ({reason(err)})") from None
    if array.dtype.kind not in "uif":  # bool, complex, bytes, str, object, structured
        raise ConfigError(f"{where}: {what} have dtype {array.dtype}; expected integers")
    return array


def _first(mask: np.ndarray, array: np.ndarray):
    """The first value of `array` where `mask` holds, for an example in the message."""
    return array.reshape(-1)[int(np.argmax(mask.reshape(-1)))].item()


def _not_integers_in(array: np.ndarray, lo: int, hi: int) -> str | None:
    """Why `array` is not all integer values in [lo, hi], or None when it is."""
    if array.size == 0:
        return None
    if array.dtype.kind == "f":
        finite = np.isfinite(array)
        if not finite.all():
            return f"NaN or infinite values (e.g. {_first(~finite, array)})"
        fractional = array != np.round(array)
        if fractional.any():
            return f"non-integer values (e.g. {_first(fractional, array)})"
    low, high = array.min().item(), array.max().item()
    if low < lo or high > hi:
        return f"values in [{low}, {high}], outside [{lo}, {hi}]"
    return None


def as_pixels(values, where) -> np.ndarray:
    """`values` as uint8, exactly: integer values in [0, 255] of any numeric dtype, else ConfigError."""
    array = _numeric(values, "pixels", where)
    problem = _not_integers_in(array, 0, PIXEL_MAX)
    if problem:
        hint = ""
        if array.dtype.kind == "f" and array.size and 0 <= array.min() and array.max() <= 1:
            hint = " (floats in [0, 1] look already scaled; the file must hold 0..255)"
        raise ConfigError(f"{where}: pixels have {problem}; expected integers in [0, {PIXEL_MAX}]{hint}")
    return array.astype(np.uint8)


def as_labels(values, n_classes: int, where) -> np.ndarray:
    """`values` as a 1-D int64 array of classes in [0, n_classes), else ConfigError."""
    array = _numeric(values, "labels", where)
    if array.ndim != 1:
        raise ConfigError(f"{where}: labels have shape {array.shape}, expected (N,)")
    problem = _not_integers_in(array, 0, n_classes - 1)
    if problem:
        raise ConfigError(f"{where}: labels have {problem}; expected integers in [0, {n_classes})")
    return array.astype(np.int64)


def check_image_shape(x: np.ndarray, image_shape: tuple, where) -> np.ndarray:
    """`x` itself when it is (N, *image_shape); a model would otherwise fail far from the file."""
    if x.ndim != len(image_shape) + 1 or tuple(x.shape[1:]) != tuple(image_shape):
        expected = ", ".join(["N", *map(str, image_shape)])
        raise ConfigError(f"{where}: images have shape {x.shape}, expected ({expected})")
    return x


def check_same_length(x: np.ndarray, y: np.ndarray, where) -> None:
    if len(x) != len(y):
        raise ConfigError(f"{where}: {len(x)} images but {len(y)} labels")
