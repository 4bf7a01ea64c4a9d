"""The IGB study's configs: frozen dataclasses of simple types, a docstring under every field (tyro shows it
in --help), presets named smoke / cpu (/ paper) that validate, the shared vocabulary of sections."""
import ast
import dataclasses
import inspect
import json
import typing

import pytest

from jaxinit.config import to_dict
from jaxinit.run.config_parse import override, from_dict
from jaxinit.errors import ConfigError
from jaxinit import config as config_data
from jaxinit.igb import config_init, config_phase, config_train

MODULES = (config_init, config_phase, config_train)
SIMPLE = (int, float, str, bool)


def _simple(hint) -> bool:
    """int / float / str / bool, a Literal of strings, or a tuple of either."""
    if hint in SIMPLE:
        return True
    if typing.get_origin(hint) is typing.Literal:
        return all(isinstance(a, str) for a in typing.get_args(hint))
    args = [a for a in typing.get_args(hint) if a is not Ellipsis and a is not type(None)]
    return bool(args) and all(_simple(a) for a in args)


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
            assert _simple(hint) or dataclasses.is_dataclass(hint), f"{cls.__name__}.{name}: {hint}"


@pytest.mark.parametrize("module", MODULES[:3], ids=lambda m: m.__name__)
def test_presets_are_named_and_valid(module):
    assert {"smoke", "cpu"} <= set(module.PRESETS)
    for cfg in module.PRESETS.values():
        module.validate(cfg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        module.PRESETS["cpu"].grid = None


def test_the_renamed_sections_parse_and_the_old_ones_are_refused():
    cfg = override(config_train.SMOKE,
        "--model.acts=relu", "--model.width=8", "--model.depths=4,6", "--grid.depths=4", "--opt.sgd_lr=0.1,0.3",
        "--opt.momentum_lr=0.01", "--opt.adam_lr=1e-4", "--opt.select_horizon=0.75", "--opt.select_seeds=3",
        "--sweep.optimizers=momentum,sgd", "--train.steps=5", "--data.binarize=false")
    config_train.validate(cfg)
    assert (cfg.model.acts, cfg.model.width, cfg.model.depths) == (("relu",), 8, (4, 6))
    assert cfg.opt.lrs("sgd") == (0.1, 0.3) and cfg.opt.lrs("momentum") == (0.01,) and cfg.opt.lrs("adam") == (1e-4,)
    assert (cfg.opt.select_horizon, cfg.opt.select_seeds) == (0.75, 3) and cfg.sweep.optimizers == ("momentum", "sgd")
    assert cfg.train.steps == 5 and cfg.data.binarize is False
    init = override(config_init.SMOKE, "--model.names=mlp,cnn_avg", "--model.mlp_acts=relu+maxpool",
                                               "--model.mlp_width=8", "--probe.grads=cnn_avg", "--width.phases=EOC")
    config_init.validate(init)
    assert init.model.names == ("mlp", "cnn_avg") and init.model.mlp_acts == ("relu+maxpool",)
    for old in ("--net.width=8", "--lr.sgd=0.1", "--train.optimizers=sgd", "--train.optimizer=sgd"):
        with pytest.raises(ConfigError, match="Unrecognized options"):
            override(config_train.SMOKE, old)
    with pytest.raises(ConfigError, match="Unrecognized options"):
        override(config_init.SMOKE, "--net.models=mlp")


def test_a_config_json_of_the_old_shape_is_refused_in_one_line():
    saved = json.loads(json.dumps(to_dict(config_train.SMOKE)))
    saved["net"] = saved.pop("model")
    with pytest.raises(ConfigError) as err:
        from_dict(config_train.IGBTrainConfig, saved)
    assert str(err.value) == "config.json: unknown key 'net'"
    assert from_dict(config_train.IGBTrainConfig, to_dict(config_train.SMOKE)) == config_train.SMOKE


def test_every_igb_config_reads_binarised_data_and_the_phases_literal_is_the_solvers():
    from jaxinit.shared.phases import PHASES
    for module in (config_init, config_train):
        for cfg in module.PRESETS.values():
            assert isinstance(cfg.data, config_data.IGBDataConfig) and cfg.data.binarize
    assert set(typing.get_args(config_init.Phase)) <= set(PHASES)
    assert set(typing.get_args(config_train.Phase)) == set(PHASES)
