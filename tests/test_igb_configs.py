"""The IGB study's configs: frozen dataclasses of simple types, a docstring under every field (tyro shows it
in --help), presets named smoke / cpu (/ paper) that validate."""
import ast
import dataclasses
import inspect
import typing

import pytest

from jaxinit.igb import config_init, config_phase, config_train

MODULES = (config_init, config_phase, config_train)
SIMPLE = (int, float, str, bool)


def _dataclasses(module):
    return [obj for _, obj in inspect.getmembers(module, inspect.isclass)
            if dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_field_has_a_docstring(module):
    tree = ast.parse(inspect.getsource(module))
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        body = cls.body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign):
                nxt = body[i + 1] if i + 1 < len(body) else None
                assert isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and \
                    isinstance(nxt.value.value, str) and nxt.value.value.strip(), f"{cls.name}.{node.target.id}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_fields_are_frozen_and_simple(module):
    for cls in _dataclasses(module):
        assert cls.__dataclass_params__.frozen, cls.__name__
        for name, hint in typing.get_type_hints(cls).items():
            args = [a for a in typing.get_args(hint) if a is not Ellipsis and a is not type(None)]
            ok = hint in SIMPLE or dataclasses.is_dataclass(hint) or (args and all(a in SIMPLE for a in args))
            assert ok, f"{cls.__name__}.{name}: {hint}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_presets_are_named_and_valid(module):
    assert {"smoke", "cpu"} <= set(module.PRESETS)
    for cfg in module.PRESETS.values():
        module.validate(cfg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        module.PRESETS["cpu"].grid = None
