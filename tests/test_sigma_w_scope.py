"""model.sigma_w_scope: sigma_w on all kernels, the hidden ones only or the head only, on paired draws."""
import json
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import forgetting
from jaxinit.config import ModelConfig
from jaxinit.errors import ConfigError
from jaxinit.init import SIGMA_W_SCOPES, base_draw, is_head, is_kernel, scale_params
from jaxinit.models import from_flax, make_model
from jaxinit.models.core import template_variables

MODELS = {
    "mlp": (ModelConfig(name="mlp", width=16, depth=2, batchnorm=True), (8,)),
    "resnet8": (ModelConfig(name="resnet8", width_mult=0.25), (8, 8, 1)),
    "vit": (ModelConfig(name="vit", width=8, depth=2), (8, 8, 1)),
    "cnn": (ModelConfig(name="cnn", width=4, depth=2), (8, 8, 1)),
}


def _flat(params):
    return {jax.tree_util.keystr(p): (p, np.asarray(x)) for p, x in jax.tree_util.tree_flatten_with_path(params)[0]}


def _init(cfg, shape, scope, sigma_w, key=3):
    model = make_model(ModelConfig(**{**cfg.__dict__, "sigma_w_scope": scope}), shape, 10)
    return _flat(model.init(jax.random.key(key), sigma_w)[0])


@pytest.mark.parametrize("name", MODELS)
def test_scopes_share_the_draws_and_scale_only_their_part(name):
    cfg, shape = MODELS[name]
    sigma_w = 2.5
    # today's init, spelled out: kernels of the base draw x sigma_w, every other leaf the base draw's
    module_template = template_variables(make_model(cfg, shape, 10).module, shape)["params"]
    base = _flat(base_draw(jax.random.key(3), module_template, cfg.base_init))
    expected_all = {k: (p, x * np.float32(sigma_w) if is_kernel(p) else x) for k, (p, x) in base.items()}
    inits = {scope: _init(cfg, shape, scope, sigma_w) for scope in SIGMA_W_SCOPES}
    unit = _init(cfg, shape, "all", 1.0)
    kernels = [k for k, (p, _) in base.items() if is_kernel(p)]
    heads = [k for k in kernels if is_head(base[k][0])]
    assert heads and len(heads) < len(kernels)
    for k, (path, x) in base.items():
        np.testing.assert_array_equal(inits["all"][k][1], expected_all[k][1])       # "all" is today's, bit for bit
        np.testing.assert_array_equal(unit[k][1], x)                                  # sigma_w = 1 is the draw
        if k not in kernels:                                                          # BN gains, biases: untouched
            for scope in SIGMA_W_SCOPES:
                np.testing.assert_array_equal(inits[scope][k][1], x)
            continue
        scaled, drawn = (inits["all"][k][1], unit[k][1])
        np.testing.assert_array_equal(inits["hidden"][k][1], drawn if k in heads else scaled)
        np.testing.assert_array_equal(inits["head"][k][1], scaled if k in heads else drawn)
        assert not np.array_equal(scaled, drawn)                                      # each assertion can fail


def test_scope_is_traced_vmapped_and_never_recompiles():
    cfg, shape = MODELS["mlp"]
    model = make_model(ModelConfig(**{**cfg.__dict__, "sigma_w_scope": "hidden"}), shape, 10)
    traces = []

    def init(key, s):
        traces.append(1)
        return model.init(key, s)[0]

    batched = jax.jit(jax.vmap(init))
    keys = jax.random.split(jax.random.key(0), 3)
    first = batched(keys, jnp.asarray([0.5, 1.0, 2.0]))
    second = batched(keys, jnp.asarray([0.1, 1.5, 3.0]))
    assert len(traces) == 1
    for i, s in enumerate((0.5, 1.0, 2.0)):
        loop = model.init(keys[i], s)[0]
        jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[i], b), first, loop)
    np.testing.assert_array_equal(first["head"]["kernel"], second["head"]["kernel"])      # head at sigma_w = 1
    np.testing.assert_allclose(second["dense_0"]["kernel"][2], 1.5 * first["dense_0"]["kernel"][2], rtol=1e-6)


class Named(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        return nn.Dense(3, name="head")(nn.relu(nn.Dense(8)(x)))


class Unnamed(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        return nn.Dense(3)(nn.relu(nn.Dense(8)(x)))


def test_user_module_head_is_the_submodule_named_head():
    model = from_flax(Named(), (5,), sigma_w_scope="head")
    p1, _ = from_flax(Named(), (5,)).init(jax.random.key(1), 1.0)
    p4, _ = model.init(jax.random.key(1), 4.0)
    np.testing.assert_array_equal(p4["head"]["kernel"], 4.0 * np.asarray(p1["head"]["kernel"]))
    np.testing.assert_array_equal(p4["Dense_0"]["kernel"], p1["Dense_0"]["kernel"])
    assert from_flax(Unnamed(), (5,), sigma_w_scope="all").init(jax.random.key(1), 2.0)
    for scope in ("hidden", "head"):
        with pytest.raises(ConfigError, match="named 'head'") as err:
            from_flax(Unnamed(), (5,), sigma_w_scope=scope)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="no kernel outside"):
        scale_params({"head": {"kernel": jnp.ones((2, 2))}}, 2.0, scope="hidden")


def test_unknown_scope_is_one_line_config_error():
    with pytest.raises(ConfigError, match="sigma_w_scope must be one of all|hidden|head"):
        make_model(ModelConfig(name="mlp", width=8, depth=1, sigma_w_scope="body"), (4,), 2)


def test_unknown_scope_through_the_cli_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "o"
    assert forgetting.run(["--preset", "smoke", "--model.sigma_w_scope=body", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--model.sigma_w_scope" in err[0] and "'body'" in err[0], err
    assert not (out / "config.json").exists()


def test_summary_kernel_norms_are_those_of_the_scoped_init(tmp_path):
    """kernel_norm_init of a "hidden" run: the hidden kernels x sigma_w, the head at its sigma_w = 1 norm."""
    out = tmp_path / "run"
    args = ["--preset", "smoke", "--model.sigma_w_scope=hidden", "--sweep.optimizers=sgd", "--train.epochs=1",
            "--out", str(out)]
    assert forgetting.run(args) == 0
    row0 = {(r["sigma_w"], r["seed"]): r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if r["epoch"] == 0}
    layers = {s: row0[(s, 0)]["param_norm_layers"] for s in (0.5, 2.0)}
    assert layers[0.5]["head/kernel"] == pytest.approx(layers[2.0]["head/kernel"], rel=1e-6)
    hidden = [k for k in layers[0.5] if k.endswith("kernel") and not k.startswith("head")]
    assert hidden
    for k in hidden:
        assert layers[2.0][k] == pytest.approx(4 * layers[0.5][k], rel=1e-5)
    summary = json.loads((out / "summary.json").read_text())
    for m in summary["members"]:
        norms = layers[m["sigma_w"]]
        expected = math.sqrt(sum(v * v for k, v in norms.items() if k.endswith("kernel")))
        assert m["kernel_norm_init"] == pytest.approx(expected, rel=1e-6)
    assert json.loads((out / "config.json").read_text())["model"]["sigma_w_scope"] == "hidden"
