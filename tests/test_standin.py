"""jaxinit.standin: a CIFAR-10 stand-in the real reader loads with the real shapes."""
import numpy as np
import pytest

from jaxinit import data, standin
from jaxinit.config import DataConfig


def test_standin_loads_as_cifar10_with_its_shapes(tmp_path):
    folder = standin.write_cifar10_standin(tmp_path, n_per_batch=6, seed=3)
    assert sorted(p.name for p in folder.iterdir()) == sorted(standin.CIFAR10_BATCHES)   # no temporary left
    ds = data.load_dataset(DataConfig(name="cifar10", dir=str(tmp_path), n_val=6))
    assert ds.input_shape == (32, 32, 3) and ds.n_classes == 10
    assert ds.x_train.shape == (24, 32, 32, 3) and ds.x_val.shape[0] == 6 and ds.x_test.shape[0] == 6
    assert np.all((np.asarray(ds.y_train) >= 0) & (np.asarray(ds.y_train) < 10))


def test_standin_is_seeded(tmp_path):
    import pickle

    def first_batch(root, seed):
        standin.write_cifar10_standin(root, 4, seed)
        return pickle.loads((root / standin.CIFAR10_FOLDER / "data_batch_1").read_bytes())[b"data"]
    assert np.array_equal(first_batch(tmp_path / "a", 1), first_batch(tmp_path / "b", 1))
    assert not np.array_equal(first_batch(tmp_path / "a", 1), first_batch(tmp_path / "c", 2))


@pytest.mark.parametrize("argv", [[], ["cifar100", "x"], ["cifar10"], ["cifar10", "x", "--n", "0"],
                                  ["cifar10", "x", "--n"]])
def test_bad_command_line_is_one_line_and_exit_2(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert standin.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    assert not (tmp_path / "x").exists()


def test_command_line_writes_the_folder(tmp_path, capsys):
    assert standin.main(["cifar10", str(tmp_path / "d"), "--n", "2"]) == 0
    assert (tmp_path / "d" / standin.CIFAR10_FOLDER / "test_batch").is_file()
