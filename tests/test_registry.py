"""The experiment registry (`jaxinit.run.registry`): the one list of ``python -m experiments.*`` entry points, whose
names run.json records and `load_run` reads (each experiment's smoke run read back: tests/test_load_run.py)."""
import ast
import importlib
from pathlib import Path

import pytest

from jaxinit.config import to_dict
from jaxinit.run import registry

ROOT = Path(__file__).resolve().parents[1]


def entry_points() -> set[str]:
    """The modules of experiments/ that run as ``python -m experiments.<name>`` (an ``if __name__ == "__main__"``)."""
    found = set()
    for path in (ROOT / "experiments").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                found.add(path.stem)
    return found


def test_the_registry_is_every_entry_point_once():
    assert len(registry.NAMES) == len(set(registry.NAMES))
    assert set(registry.NAMES) == entry_points()
    assert {"forgetting", "clocks", "igb_init", "igb_train", "igb_rescale", "memory_phases", "phase_diagram",
            "benchmark", "accel_check"} <= entry_points()


@pytest.mark.parametrize("name", registry.NAMES)
def test_each_entry_is_its_modules_experiment(name):
    module = importlib.import_module(f"experiments.{name}")
    exp = getattr(module, "EXPERIMENT", None)
    if registry.entry(name).run_dir:
        assert exp is not None and exp.name == name and exp.prog == f"experiments.{name}"
        assert exp.default_out("smoke") == f"runs/{name}_smoke"
    else:
        assert exp is None            # accel_check: its own flags, accel.json only


@pytest.mark.parametrize("name", [e.name for e in registry.EXPERIMENTS if e.run_dir])
def test_a_run_made_before_run_json_named_it_is_told_by_its_config(name):
    exp = importlib.import_module(f"experiments.{name}").EXPERIMENT
    for preset in exp.presets:
        config = to_dict(exp.presets[preset])
        assert registry.experiment_of(config, {}) == name, preset
        assert registry.experiment_of(config, {"experiment": "igb_rescale"}) == "igb_rescale"   # recorded wins


def test_unknown_names_and_configs():
    with pytest.raises(KeyError, match="not in jaxinit.run.registry.EXPERIMENTS"):
        registry.entry("forgeting")
    assert registry.experiment_of({"data": {}, "model": {}}, {}) is None
    assert registry.experiment_of([1], [1]) is None               # damaged files: nothing to go by
