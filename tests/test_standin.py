"""jaxinit.tools.standin: a CIFAR-10 stand-in the real reader loads with the real shapes; its command line."""
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxinit import data
from jaxinit.config import DataConfig
from jaxinit.tools import standin

ROOT = Path(__file__).resolve().parents[1]


def test_standin_loads_as_cifar10_with_its_shapes(tmp_path):
    folder = standin.write_cifar10_standin(tmp_path, n_per_batch=6, seed=3)
    assert sorted(p.name for p in folder.iterdir()) == sorted(standin.CIFAR10_BATCHES)   # no temporary left
    ds = data.load_dataset(DataConfig(name="cifar10", dir=str(tmp_path), n_val=6))
    assert ds.input_shape == (32, 32, 3) and ds.n_classes == 10
    assert ds.x_train.shape == (24, 32, 32, 3) and ds.x_val.shape[0] == 6 and ds.x_test.shape[0] == 6
    assert np.all((np.asarray(ds.y_train) >= 0) & (np.asarray(ds.y_train) < 10))


def test_standin_is_seeded(tmp_path):
    def first_batch(root, seed):
        standin.write_cifar10_standin(root, 4, seed)
        return pickle.loads((root / standin.CIFAR10_FOLDER / "data_batch_1").read_bytes())[b"data"]
    assert np.array_equal(first_batch(tmp_path / "a", 1), first_batch(tmp_path / "b", 1))
    assert not np.array_equal(first_batch(tmp_path / "a", 1), first_batch(tmp_path / "c", 2))


@pytest.mark.parametrize("argv, fragment", [
    ([], "required"),
    (["cifar100", "x"], "cifar100"),
    (["cifar10"], "required"),
    (["cifar10", "x", "--n", "0"], "--n"),
    (["cifar10", "x", "--n", "two"], "--n"),
    (["cifar10", "x", "--n"], "--n"),
    (["cifar10", "x", "--bogus"], "--bogus"),
    (["cifar10", ""], "DIR"),
])
def test_bad_command_line_is_one_line_and_exit_2(argv, fragment, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert standin.main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err
    assert captured.out == ""
    assert list(tmp_path.iterdir()) == []


def test_unwritable_directory_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert standin.main(["cifar10", str(tmp_path / "file"), "--n", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "cannot write there" in err[0], err


def test_help_exits_0_and_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as done:
        standin.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "python -m jaxinit.tools.standin" in out and "--n IMAGES_PER_BATCH" in out


def test_command_line_expands_home_and_prints_the_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert standin.main(["cifar10", "~/d", "--n", "2"]) == 0
    folder = tmp_path / "d" / standin.CIFAR10_FOLDER
    assert capsys.readouterr().out.strip() == str(folder)
    batch = pickle.loads((folder / "test_batch").read_bytes())
    assert batch[b"data"].shape == (2, 3072) and len(batch[b"labels"]) == 2


def test_module_runs_as_a_command(tmp_path):
    """`python -m jaxinit.tools.standin` (the Makefile's accel-check): exit 0, and 2 on bad input."""
    def run(*argv):
        return subprocess.run([sys.executable, "-m", "jaxinit.tools.standin", *argv], cwd=ROOT,
                              capture_output=True, text=True)
    ok = run("cifar10", str(tmp_path / "d"), "--n", "1")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "d" / standin.CIFAR10_FOLDER / "data_batch_5").is_file()
    bad = run("cifar10", str(tmp_path / "e"), "--n", "0")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "e").exists()
