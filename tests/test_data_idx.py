"""jaxinit.data.idx: MNIST-style IDX files read exactly, and every malformed file refused in one line."""
import gzip
import tracemalloc

import numpy as np
import pytest

from jaxinit import data
from jaxinit.config import DataConfig
from jaxinit.data import idx
from errors import expect_error, one_line_error

RNG = np.random.default_rng(1234)
CODES = {np.dtype(v).newbyteorder("="): code for code, v in idx.IDX_DTYPES.items()}


# --------------------------------------------------------------------------- fixture helpers
def write_idx(path, array, gz=False):
    """Write `array` (uint8) in the IDX format; `.gz` compressed when gz."""
    header = bytes([0, 0, 0x08, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    blob = header + np.asarray(array, np.uint8).tobytes()
    path.write_bytes(gzip.compress(blob) if gz else blob)


def idx_bytes(array):
    """`array` in the IDX format under the type code of its own dtype (no cast)."""
    array = np.asarray(array)
    header = bytes([0, 0, CODES[array.dtype], array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def make_mnist_dir(folder, n_train=12, n_test=6, gz=True):
    """Tiny MNIST-layout IDX set; returns the arrays written."""
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"train-images": RNG.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
              "train-labels": RNG.integers(0, 10, n_train, dtype=np.uint8),
              "t10k-images": RNG.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
              "t10k-labels": RNG.integers(0, 10, n_test, dtype=np.uint8)}
    for stem, array in arrays.items():
        kind = "idx3" if stem.endswith("images") else "idx1"
        write_idx(folder / (f"{stem}-{kind}-ubyte" + (".gz" if gz else "")), array, gz)
    return arrays


def hostile_set(tmp_path, stem, array):
    """A valid uncompressed set whose file `stem` is replaced by `array` in its own dtype."""
    make_mnist_dir(tmp_path, gz=False)
    path = tmp_path / f"{stem}-{'idx3' if stem.endswith('images') else 'idx1'}-ubyte"
    path.write_bytes(idx_bytes(array))
    return path


def load(tmp_path):
    return data.load_dataset(DataConfig(name="mnist", dir=str(tmp_path), normalize="none", val_fraction=0.0))


# --------------------------------------------------------------------------- valid sets
@pytest.mark.parametrize("gz", [True, False])
def test_idx_reader_roundtrip(tmp_path, gz):
    arrays = make_mnist_dir(tmp_path, gz=gz)
    cfg = DataConfig(name="mnist", dir=str(tmp_path), normalize="none", val_fraction=0.25)
    ds = data.load_dataset(cfg)
    train, val, _ = data.split_indices(12, 6, cfg)
    assert ds.input_shape == (28, 28, 1) and ds.x_train.shape == (9, 28, 28, 1)
    np.testing.assert_allclose(ds.x_train[..., 0], arrays["train-images"][train] / 255.0, atol=1e-7)
    np.testing.assert_array_equal(ds.y_val, arrays["train-labels"][val])
    np.testing.assert_allclose(ds.x_test[..., 0], arrays["t10k-images"] / 255.0, atol=1e-7)


def test_fashion_mnist_in_torchvision_layout(tmp_path):
    arrays = make_mnist_dir(tmp_path / "FashionMNIST" / "raw", n_train=8, n_test=4)
    ds = data.load_dataset(DataConfig(name="fashion_mnist", dir=str(tmp_path), val_fraction=0.0))
    assert ds.x_train.shape == (8, 28, 28, 1) and ds.x_test.shape == (4, 28, 28, 1)
    np.testing.assert_array_equal(ds.y_test, arrays["t10k-labels"])


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.float32, np.float64])
def test_integral_pixels_of_any_dtype_are_read_exactly(tmp_path, dtype):
    pixels = RNG.integers(0, 256, (12, 28, 28))
    pixels[0, 0, :2] = (0, 255)  # both ends of the range are allowed
    hostile_set(tmp_path, "train-images", pixels.astype(dtype))
    ds = load(tmp_path)
    np.testing.assert_allclose(np.sort(np.asarray(ds.x_train).ravel()), np.sort(pixels.ravel()) / 255.0, atol=1e-7)


def test_read_idx_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "labels").write_bytes(idx_bytes(np.arange(5, dtype=np.uint8)))
    np.testing.assert_array_equal(idx.read_idx("~/labels"), np.arange(5))


# --------------------------------------------------------------------------- values
def test_float_images_with_nan_are_refused(tmp_path):
    pixels = RNG.integers(0, 256, (12, 28, 28)).astype(np.float32)
    pixels[3, 4, 5] = np.nan
    path = hostile_set(tmp_path, "train-images", pixels)
    message = one_line_error(load, tmp_path, match=r"pixels have NaN or infinite values")
    assert str(path) in message


def test_int32_pixels_above_255_are_refused(tmp_path):
    pixels = RNG.integers(0, 256, (12, 28, 28)).astype(np.int32)
    pixels[0, 0, 0] = 300  # a cast to uint8 would make it 44
    path = hostile_set(tmp_path, "train-images", pixels)
    message = one_line_error(load, tmp_path, match=r"outside \[0, 255\]")
    assert str(path) in message and "300" in message


def test_fractional_labels_are_refused(tmp_path):
    hostile_set(tmp_path, "train-labels", np.full(12, 2.5, np.float32))
    one_line_error(load, tmp_path, match=r"train-labels-idx1-ubyte: labels have non-integer values \(e\.g\. 2\.5\)")


@pytest.mark.parametrize("label", [10, -1])
def test_labels_outside_the_classes_are_refused(tmp_path, label):
    labels = RNG.integers(0, 10, 6).astype(np.int16)
    labels[2] = label
    hostile_set(tmp_path, "t10k-labels", labels)
    one_line_error(load, tmp_path, match=r"t10k-labels-idx1-ubyte: labels have values .* outside \[0, 9\]")


# --------------------------------------------------------------------------- shapes and headers
def test_images_of_another_shape_are_refused(tmp_path):
    hostile_set(tmp_path, "t10k-images", RNG.integers(0, 256, (6, 32, 32), dtype=np.uint8))
    one_line_error(load, tmp_path,
                   match=r"t10k-images-idx3-ubyte: images have shape \(6, 32, 32\), expected \(N, 28, 28\)")


def test_labels_that_are_not_a_vector_are_refused(tmp_path):
    hostile_set(tmp_path, "train-labels", RNG.integers(0, 10, (12, 1), dtype=np.uint8))
    one_line_error(load, tmp_path, match=r"train-labels-idx1-ubyte: labels have shape \(12, 1\), expected \(N,\)")


def test_image_and_label_counts_must_agree(tmp_path):
    hostile_set(tmp_path, "train-labels", RNG.integers(0, 10, 11, dtype=np.uint8))
    one_line_error(load, tmp_path, match=r"12 images but 11 labels")


@pytest.mark.parametrize("blob,match", [
    (b"\x01\x02\x08\x01" + bytes(8), r"not an IDX file \(bad magic number 01020801\)"),
    (b"\0\0", r"not an IDX file"),
    (b"\0\0\x0a\x01" + (4).to_bytes(4, "big") + bytes(4), r"unknown IDX type code 0x0a"),
    (b"\0\0\x08\x00", r"declares 0 dimensions"),
    (b"\0\0\x08\x03" + (4).to_bytes(4, "big"), r"truncated IDX header"),
    (b"\0\0\x08\x01" + (4).to_bytes(4, "big") + bytes(5), r"longer than its header declares"),
    (b"\0\0\x0c\x01" + (4).to_bytes(4, "big") + bytes(15), r"truncated IDX file \(15 data bytes, expected 16"),
])
def test_malformed_headers_are_one_line(tmp_path, blob, match):
    (tmp_path / "f").write_bytes(blob)
    one_line_error(idx.read_idx, tmp_path / "f", match=match)


def test_header_of_2_31_x_2_31_x_4_is_refused_without_allocating(tmp_path):
    # 2^64 bytes: a numpy product of these sizes wraps to 0 and matched an empty payload.
    dims = (2**31, 2**31, 4)
    (tmp_path / "f").write_bytes(b"\0\0\x08\x03" + b"".join(d.to_bytes(4, "big") for d in dims))
    tracemalloc.start()
    try:
        one_line_error(idx.read_idx, tmp_path / "f", match=r"declares shape \(2147483648, 2147483648, 4\)")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_memory_follows_what_a_gzip_holds_not_what_it_declares(tmp_path):
    # 200 MB declared (under the bound), 1 kB held: reading must not reserve the declared size.
    blob = b"\0\0\x08\x03" + b"".join(d.to_bytes(4, "big") for d in (200, 1000, 1000)) + bytes(1000)
    (tmp_path / "f.gz").write_bytes(gzip.compress(blob))
    tracemalloc.start()
    try:
        one_line_error(idx.read_idx, tmp_path / "f.gz",
                       match=r"truncated IDX file \(1000 data bytes, expected 200000000")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


def test_corrupt_deflate_data_is_one_line(tmp_path):
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    blob = bytearray(gzip.compress(idx_bytes(RNG.integers(0, 10, 1000, dtype=np.uint8))))
    blob[12] ^= 0xFF  # inside the deflate stream, past the 10-byte gzip header
    path.write_bytes(bytes(blob))
    one_line_error(idx.read_idx, path, match=r"train-labels-idx1-ubyte\.gz: cannot read \(zlib\.error: ")


def test_not_gzip_at_all_is_one_line(tmp_path):
    (tmp_path / "x.gz").write_bytes(b"plain text, not gzip")
    one_line_error(idx.read_idx, tmp_path / "x.gz", match=r"x\.gz: cannot read \(gzip\.BadGzipFile: ")


@pytest.mark.parametrize("gz", [True, False])
def test_truncated_idx_file(tmp_path, gz):
    make_mnist_dir(tmp_path, gz=gz)
    path = tmp_path / ("train-images-idx3-ubyte" + (".gz" if gz else ""))
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2])
    expect_error(DataConfig(name="mnist", dir=str(tmp_path)), "train-images-idx3-ubyte")


def test_incomplete_idx_set(tmp_path):
    make_mnist_dir(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    expect_error(DataConfig(name="mnist", dir=str(tmp_path)), "t10k-labels", "missing")
