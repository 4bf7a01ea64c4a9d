"""jaxinit.data.cifar: CIFAR batches and archives read exactly; hostile files refused in one line."""
import hashlib
import io
import pathlib
import pickle
import tarfile

import numpy as np
import pytest

from jaxinit import data
from jaxinit.config import DataConfig
from jaxinit.data import cifar
from errors import expect_error, one_line_error

RNG = np.random.default_rng(1234)
MiB = 2**20


# --------------------------------------------------------------------------- fixture helpers
def cifar_batches(n_classes, sizes, label_key):
    """{member: (pickle bytes, NCHW-flat data, labels)} in the CIFAR python format."""
    out = {}
    for member, n in sizes.items():
        flat = RNG.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = RNG.integers(0, n_classes, n).tolist()
        out[member] = (pickle.dumps({label_key: labels, b"data": flat}, protocol=2), flat, labels)
    return out


def add_member(tar, name, blob):
    info = tarfile.TarInfo(name)
    info.size = len(blob)
    tar.addfile(info, io.BytesIO(blob))


def write_cifar(root, name, as_tar):
    layout = cifar.CIFAR[name]
    folder, archive, train, test, key, n_classes = layout[:6]
    batches = cifar_batches(n_classes, {m: 3 for m in train + test}, key)
    if as_tar:
        with tarfile.open(root / archive, "w:gz") as tar:
            for member, (blob, _, _) in batches.items():
                add_member(tar, f"{folder}/{member}", blob)
    else:
        (root / folder).mkdir()
        for member, (blob, _, _) in batches.items():
            (root / folder / member).write_bytes(blob)
    flat = lambda members: np.concatenate([batches[m][1] for m in members])
    labels = lambda members: np.concatenate([batches[m][2] for m in members])
    return flat(train), labels(train), flat(test), labels(test)


def trust(monkeypatch, archive):
    """Register `archive`'s own MD5 as the published one, so tests reach what lies past the check."""
    monkeypatch.setitem(cifar.ARCHIVE_MD5, archive.name, hashlib.md5(archive.read_bytes()).hexdigest())


def load(root, name="cifar10"):
    return data.load_dataset(DataConfig(name=name, dir=str(root), normalize="none", val_fraction=0.0))


def hostile_batch(root, data_value, labels, member="data_batch_2"):
    """A valid CIFAR-10 folder whose `member` holds these data and labels instead."""
    write_cifar(root, "cifar10", as_tar=False)
    path = root / "cifar-10-batches-py" / member
    path.write_bytes(pickle.dumps({b"data": data_value, b"labels": labels}, protocol=2))
    return path


class Zeros(io.RawIOBase):
    """`n` zero bytes, streamed: a big archive member without a big buffer in the test."""
    def __init__(self, n):
        self.left = n

    def readinto(self, buffer):
        k = min(len(buffer), self.left)
        buffer[:k] = bytes(k)
        self.left -= k
        return k

    def readable(self):
        return True


def spy_extractions(monkeypatch):
    """Names of the tar members whose data the reader opens."""
    opened, real = [], tarfile.TarFile.extractfile

    def extractfile(self, member):
        opened.append(member.name if isinstance(member, tarfile.TarInfo) else member)
        return real(self, member)
    monkeypatch.setattr(tarfile.TarFile, "extractfile", extractfile)
    return opened


# --------------------------------------------------------------------------- valid sets
@pytest.mark.parametrize("name,as_tar", [("cifar10", False), ("cifar10", True), ("cifar100", True)])
def test_cifar_reader_roundtrip(tmp_path, monkeypatch, name, as_tar):
    flat, labels, flat_test, labels_test = write_cifar(tmp_path, name, as_tar)
    if as_tar:
        trust(monkeypatch, tmp_path / cifar.CIFAR[name].archive)
    cfg = DataConfig(name=name, dir=str(tmp_path), normalize="none", val_fraction=0.0)
    ds = data.load_dataset(cfg)
    train, _, _ = data.split_indices(len(labels), len(labels_test), cfg)
    assert ds.n_classes == (100 if name == "cifar100" else 10) and ds.input_shape == (32, 32, 3)
    # NHWC pixel (n, h, w, c) is the flat row entry c*1024 + h*32 + w.
    expected = flat.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)[train] / 255.0
    np.testing.assert_allclose(ds.x_train, expected, atol=1e-7)
    assert float(ds.x_train[0, 1, 2, 0]) == pytest.approx(flat[train[0], 0 * 1024 + 1 * 32 + 2] / 255.0)
    np.testing.assert_array_equal(ds.y_train, np.asarray(labels)[train])
    np.testing.assert_array_equal(ds.y_test, labels_test)


def test_standard_uses_train_statistics_per_channel(tmp_path):
    write_cifar(tmp_path, "cifar10", as_tar=False)
    ds = data.load_dataset(DataConfig(name="cifar10", dir=str(tmp_path), val_fraction=0.2))
    raw = data.load_dataset(DataConfig(name="cifar10", dir=str(tmp_path), val_fraction=0.2, normalize="none"))
    x = np.asarray(ds.x_train, np.float64)
    np.testing.assert_allclose(x.mean(axis=(0, 1, 2)), 0.0, atol=1e-5)
    np.testing.assert_allclose(x.std(axis=(0, 1, 2)), 1.0, atol=1e-5)
    r = np.asarray(raw.x_train, np.float64)
    mean, std = r.mean(axis=(0, 1, 2)), r.std(axis=(0, 1, 2))
    np.testing.assert_allclose(ds.x_test, (np.asarray(raw.x_test) - mean) / std, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int16, np.float64])
def test_integral_pixels_and_nhwc_batches_are_read_exactly(tmp_path, dtype):
    nhwc = RNG.integers(0, 256, (3, 32, 32, 3))
    hostile_batch(tmp_path, nhwc.astype(dtype), [0, 1.0, 9])
    read = cifar.read_batch((tmp_path / "cifar-10-batches-py" / "data_batch_2").read_bytes(), b"labels", 10, "b")
    np.testing.assert_array_equal(read[0], nhwc)
    np.testing.assert_array_equal(read[1], [0, 1, 9])
    assert read[0].dtype == np.uint8 and load(tmp_path).x_train.shape == (15, 32, 32, 3)


# --------------------------------------------------------------------------- pixel and label values
def test_float_pixels_in_the_unit_interval_are_refused(tmp_path):
    path = hostile_batch(tmp_path, RNG.uniform(0, 1, (3, 3072)), [1, 2, 3])
    message = one_line_error(load, tmp_path, match=r"pixels have non-integer values .* look already scaled")
    assert message.startswith(str(path))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_infinite_pixels_are_refused(tmp_path, bad):
    pixels = RNG.integers(0, 2, (3, 3072)).astype(np.float32)  # {0, 1}: what a cast used to make of them
    pixels[1, 7] = bad
    hostile_batch(tmp_path, pixels, [1, 2, 3])
    one_line_error(load, tmp_path, match=r"data_batch_2: pixels have NaN or infinite values")


def test_int16_pixels_above_255_are_refused(tmp_path):
    hostile_batch(tmp_path, RNG.integers(200, 456, (3, 3072)).astype(np.int16), [1, 2, 3])
    one_line_error(load, tmp_path, match=r"pixels have values in \[200, 455\], outside \[0, 255\]")


def test_fractional_labels_are_refused(tmp_path):
    hostile_batch(tmp_path, RNG.integers(0, 256, (3, 3072), dtype=np.uint8), [1, 2.9, 3])
    one_line_error(load, tmp_path, match=r"labels have non-integer values \(e\.g\. 2\.9\)")


@pytest.mark.parametrize("label", [10, -1])
def test_labels_outside_the_classes_are_refused(tmp_path, label):
    hostile_batch(tmp_path, RNG.integers(0, 256, (3, 3072), dtype=np.uint8), [1, label, 3])
    one_line_error(load, tmp_path, match=r"labels have values .* outside \[0, 9\]")


def test_string_labels_are_refused(tmp_path):
    hostile_batch(tmp_path, RNG.integers(0, 256, (3, 3072), dtype=np.uint8), ["cat", "dog", "cat"])
    one_line_error(load, tmp_path, match=r"labels have dtype <U3; expected integers")


def test_object_arrays_are_refused(tmp_path):
    pixels = np.empty((3, 3072), dtype=object)
    pixels[:] = 7
    hostile_batch(tmp_path, pixels, [1, 2, 3])
    one_line_error(load, tmp_path, match=r"pixels have dtype object; expected integers")


def test_ragged_labels_are_refused(tmp_path):
    hostile_batch(tmp_path, RNG.integers(0, 256, (3, 3072), dtype=np.uint8), [1, [2, 3], 4])
    one_line_error(load, tmp_path, match=r"labels are not a numeric array")


# --------------------------------------------------------------------------- batch shapes
@pytest.mark.parametrize("shape", [(3, 3, 32, 32), (3, 1000), (3072,), (3, 32, 32, 1)])
def test_data_of_another_shape_is_refused(tmp_path, shape):
    hostile_batch(tmp_path, RNG.integers(0, 256, shape, dtype=np.uint8), [1, 2, 3])
    one_line_error(load, tmp_path, match=r"data_batch_2: (CIFAR data has|images have) shape")


def test_image_and_label_counts_must_agree(tmp_path):
    hostile_batch(tmp_path, RNG.integers(0, 256, (3, 3072), dtype=np.uint8), [1, 2])
    one_line_error(load, tmp_path, match=r"data_batch_2: 3 images but 2 labels")


def test_a_pickle_that_is_not_a_batch_is_refused(tmp_path):
    write_cifar(tmp_path, "cifar10", as_tar=False)
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps([1, 2, 3]))
    one_line_error(load, tmp_path, match=r"test_batch: not a CIFAR batch")


def test_corrupt_cifar(tmp_path):
    write_cifar(tmp_path, "cifar10", as_tar=False)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(b"\x80\x02garbage")
    expect_error(DataConfig(name="cifar10", dir=str(tmp_path)), "data_batch_3", "corrupt")
    other = tmp_path / "tar"
    other.mkdir()
    (other / "cifar-100-python.tar.gz").write_bytes(b"not a tar at all")
    expect_error(DataConfig(name="cifar100", dir=str(other)), "cifar-100-python.tar.gz", "corrupt")


def test_pickle_with_foreign_objects_is_refused(tmp_path):
    write_cifar(tmp_path, "cifar10", as_tar=False)
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps({b"data": print}))
    expect_error(DataConfig(name="cifar10", dir=str(tmp_path)), "test_batch", "builtins.print")


# --------------------------------------------------------------------------- archive checksum
def test_original_archive_with_another_md5_is_one_line(tmp_path):
    write_cifar(tmp_path, "cifar10", as_tar=True)  # a valid tar.gz, but not the published file
    message = one_line_error(load, tmp_path, match=r"cifar-10-python\.tar\.gz: MD5 [0-9a-f]{32} differs "
                                                   r"from the published c58f30108f718f92721af3b95e74349a")
    assert hashlib.md5((tmp_path / "cifar-10-python.tar.gz").read_bytes()).hexdigest() in message


def test_published_md5s_are_the_cifar_page_values():
    assert cifar.ARCHIVE_MD5 == {"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a",
                                 "cifar-100-python.tar.gz": "eb9058c3a382ffc7106e4002c42a8d85"}


def test_verify_archive_streams_in_chunks_and_accepts_a_match(tmp_path, monkeypatch):
    path = tmp_path / "tiny.tar.gz"
    path.write_bytes(bytes(range(256)) * 3 + b"tail")
    monkeypatch.setattr(cifar, "CHUNK_BYTES", 7)  # many chunks, the last one partial
    good = hashlib.md5(path.read_bytes()).hexdigest()
    cifar.verify_archive(path, good)
    cifar.verify_archive(path, good.upper())
    one_line_error(cifar.verify_archive, path, "0" * 32,
                   match=r"tiny\.tar\.gz: MD5 .* differs from the published 0{32}")
    one_line_error(cifar.verify_archive, tmp_path / "absent.tar.gz", good, match=r"absent\.tar\.gz: cannot read")


# --------------------------------------------------------------------------- archive structure and size
def test_corrupt_deflate_in_the_archive_is_one_line(tmp_path, monkeypatch):
    write_cifar(tmp_path, "cifar10", as_tar=True)
    archive = tmp_path / "cifar-10-python.tar.gz"
    blob = bytearray(archive.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    archive.write_bytes(bytes(blob))
    trust(monkeypatch, archive)
    why = r"(zlib\.error: |gzip\.BadGzipFile: |tarfile\.\w+Error: |invalid tar header at byte \d+)"
    one_line_error(load, tmp_path, match=rf"cifar-10-python\.tar\.gz: corrupt archive \({why}")


def test_oversized_member_is_refused_from_its_header_unread(tmp_path, monkeypatch):
    layout = cifar.CIFAR["cifar10"]
    archive = tmp_path / layout.archive
    too_big = cifar.BYTES_PER_IMAGE * 10_000 + 1  # one byte over the bound of a 10,000-image batch
    assert too_big < 48 * MiB  # a real batch is 31 MB; the bound stays well under 64 MB
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo(f"{layout.folder}/data_batch_1")
        info.size = too_big
        tar.addfile(info, Zeros(too_big))
    trust(monkeypatch, archive)
    opened = spy_extractions(monkeypatch)
    one_line_error(load, tmp_path, match=rf"data_batch_1: {too_big} bytes, more than the {too_big - 1}")
    assert opened == []


def test_oversized_batch_file_is_refused_before_reading(tmp_path, monkeypatch):
    write_cifar(tmp_path, "cifar100", as_tar=False)
    with open(tmp_path / "cifar-100-python" / "test", "r+b") as f:
        f.truncate(cifar.BYTES_PER_IMAGE * 10_000 + 1)  # sparse: no disk
    read, real = [], pathlib.Path.read_bytes
    monkeypatch.setattr(pathlib.Path, "read_bytes", lambda self: read.append(self.name) or real(self))
    one_line_error(load, tmp_path, "cifar100", match=r"cifar-100-python/test: \d+ bytes, more than the")
    assert "test" not in read


def test_junk_members_are_skipped_unread(tmp_path, monkeypatch):
    layout = cifar.CIFAR["cifar10"]
    batches = cifar_batches(10, {m: 2 for m in layout.train + layout.test}, b"labels")
    archive = tmp_path / layout.archive
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo(f"{layout.folder}/junk")
        info.size = 48 * MiB
        tar.addfile(info, Zeros(info.size))  # the 1.5 GB member, smaller
        for member, (blob, _, _) in batches.items():
            add_member(tar, f"{layout.folder}/{member}", blob)
    trust(monkeypatch, archive)
    opened = spy_extractions(monkeypatch)
    assert load(tmp_path).x_train.shape == (10, 32, 32, 3)
    assert sorted(opened) == sorted(f"{layout.folder}/{m}" for m in layout.train + layout.test)


def test_member_that_is_not_a_regular_file_is_refused(tmp_path, monkeypatch):
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    trust(monkeypatch, archive)
    one_line_error(load, tmp_path, match=r"data_batch_1: not a regular file in the archive")


def test_archive_without_a_batch_is_one_line(tmp_path, monkeypatch):
    archive = tmp_path / "cifar-100-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add_member(tar, "cifar-100-python/train", b"x")
    trust(monkeypatch, archive)
    one_line_error(load, tmp_path, "cifar100", match=r"cifar-100-python\.tar\.gz: has no member cifar-100-python/test")
