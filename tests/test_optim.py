"""Optimizers: shared invariants over every setting, coupled L2 vs decoupled wd, Muon, schedules, settings."""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.config import OptConfig
from jaxinit.errors import ConfigError
from jaxinit.optim import (MUON_ADAM_LR_RATIO, SETTINGS, OptSetting, check_setting, make_optimizer,
                           make_schedule, muon_labels, resolve_setting)

SPE, EPOCHS = 10, 4


def _normal(shape, rng):
    # numpy, not jax.random: every new shape would compile another threefry kernel
    return jnp.asarray(rng.standard_normal(shape), jnp.float32)


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return {"conv": {"kernel": _normal((3, 3, 8, 16), rng)},
            "dense": {"kernel": _normal((4, 16), rng), "bias": _normal((16,), rng)},
            "bn": {"scale": 1.0 + 0.1 * _normal((16,), rng), "bias": jnp.full((16,), 0.5)},
            "head": {"kernel": _normal((16, 10), rng), "bias": jnp.zeros((10,)) + 0.25}}


def _grads(seed=1):
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda p: _normal(p.shape, rng), _params())


def _one_step(setting, params, grads):
    tx, _ = make_optimizer(setting, SPE, EPOCHS)
    updates, _ = tx.update(grads, tx.init(params), params)
    return updates


def _setting(label, **opt):
    return resolve_setting(label, OptConfig(**opt))


# --------------------------------------------------------------------------- every setting
@pytest.mark.parametrize("label", SETTINGS)
def test_every_setting_one_step_finite_changes_params_and_jit_matches(label):
    setting, params, grads = _setting(label), _params(), _grads()
    eager = _one_step(setting, params, grads)
    jitted = jax.jit(lambda p, g: _one_step(setting, p, g))(params, grads)
    for leaf in jax.tree.leaves(eager):
        assert bool(jnp.all(jnp.isfinite(leaf))) and float(jnp.max(jnp.abs(leaf))) > 0
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-7), eager, jitted)


@pytest.mark.parametrize("label", SETTINGS)
def test_every_setting_descends_on_a_quadratic(label):
    setting, params = _setting(label), _params()
    target = jax.tree.map(jnp.zeros_like, params)
    loss = lambda p: sum(jnp.sum(jnp.square(a - b)) for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(target)))
    tx, _ = make_optimizer(setting, SPE, EPOCHS)

    @jax.jit
    def five_steps(p):
        state = tx.init(p)
        for _ in range(5):
            updates, state = tx.update(jax.grad(loss)(p), state, p)
            p = jax.tree.map(jnp.add, p, updates)
        return p

    assert float(loss(five_steps(params))) < float(loss(params))


# --------------------------------------------------------------------------- coupled L2 vs decoupled wd
def _zero_grad_update(setting):
    params = _params()
    return params, _one_step(setting, params, jax.tree.map(jnp.zeros_like, params))


def test_sgd_l2_zero_grad_moves_w_by_minus_lr_l2_w():
    s = _setting("sgd_l2")
    params, updates = _zero_grad_update(s)
    jax.tree.map(lambda u, w: np.testing.assert_allclose(u, -s.lr * s.l2 * w, rtol=1e-5, atol=1e-8), updates, params)
    _, plain = _zero_grad_update(_setting("sgd"))
    assert all(float(jnp.max(jnp.abs(u))) == 0 for u in jax.tree.leaves(plain))


def test_adam_coupled_l2_goes_through_the_preconditioner():
    s = dataclasses.replace(_setting("adam"), l2=1e-2)    # adam has no L2 as a setting; the transform does
    params, updates = _zero_grad_update(s)
    # first Adam step on g = l2 w: m_hat / sqrt(v_hat) = sign(w), whatever the size of w
    # (eps = 1e-8 shows at ~1e-3 relative only for the smallest |w|)
    jax.tree.map(lambda u, w: np.testing.assert_allclose(u, -s.lr * jnp.sign(w), rtol=2e-3), updates, params)


def test_adamw_decoupled_decay_moves_w_by_minus_lr_wd_w():
    s = _setting("adamw")
    assert s.weight_decay == 5e-2 and s.l2 == 0
    params, updates = _zero_grad_update(s)
    jax.tree.map(lambda u, w: np.testing.assert_allclose(u, -s.lr * s.weight_decay * w, rtol=1e-5, atol=1e-9),
                 updates, params)


def test_momentum_accumulates_the_coupled_l2_gradient():
    s = dataclasses.replace(_setting("momentum"), l2=0.1)
    w0 = {"w": jnp.array([2.0, -1.0])}
    tx, _ = make_optimizer(s, SPE, EPOCHS)
    state = tx.init(w0)
    u0, state = tx.update({"w": jnp.zeros(2)}, state, w0)
    w1 = jax.tree.map(jnp.add, w0, u0)
    u1, _ = tx.update({"w": jnp.zeros(2)}, state, w1)
    expected = -s.lr * (s.l2 * w1["w"] + s.momentum * s.l2 * w0["w"])     # m1 = mu m0 + l2 w1
    np.testing.assert_allclose(u1["w"], expected, rtol=1e-6)


# --------------------------------------------------------------------------- muon
def test_muon_routes_kernels_but_not_head_bias_or_bn():
    labels = muon_labels(_params())
    assert labels["conv"]["kernel"] == "muon" and labels["dense"]["kernel"] == "muon"
    assert labels["head"]["kernel"] == "adam" and labels["dense"]["bias"] == "adam"
    assert labels["bn"]["scale"] == "adam" and labels["bn"]["bias"] == "adam"


def _ill_conditioned(shape, condition=100.0, seed=0):
    """A kernel-shaped gradient whose (fan_in, fan_out) matrix has singular values 1/condition .. 1."""
    rng = np.random.default_rng(seed)
    rows, cols = math.prod(shape[:-1]), shape[-1]
    u, _ = np.linalg.qr(rng.normal(size=(rows, cols)))
    v, _ = np.linalg.qr(rng.normal(size=(cols, cols)))
    return jnp.asarray((u * np.logspace(-math.log10(condition), 0, cols)) @ v.T, jnp.float32).reshape(shape)


def test_muon_conv_update_is_orthogonalised():
    s = _setting("muon")
    grads = _grads()
    grads["conv"]["kernel"] = _ill_conditioned((3, 3, 8, 16))
    updates = _one_step(s, _params(), grads)
    conv = np.asarray(updates["conv"]["kernel"]).reshape(72, 16) / -s.lr
    sv = np.linalg.svd(conv, compute_uv=False)
    assert 0.6 < sv.min() and sv.max() < 1.25, sv                # condition number 100 -> < 2
    dense = np.asarray(updates["dense"]["kernel"]) / -s.lr        # (4, 16): x sqrt(fan_out / fan_in) = 2
    sv_dense = np.linalg.svd(dense, compute_uv=False)
    assert 2 * 0.6 < sv_dense.min() and sv_dense.max() < 2 * 1.25, sv_dense


def test_muon_bias_bn_and_head_take_the_adam_branch():
    s = _setting("muon")
    grads = _grads()
    updates = _one_step(s, _params(), grads)
    adam_lr = MUON_ADAM_LR_RATIO * s.lr
    for path in (("dense", "bias"), ("bn", "scale"), ("head", "kernel")):
        u, g = updates[path[0]][path[1]], grads[path[0]][path[1]]
        np.testing.assert_allclose(u, -adam_lr * jnp.sign(g), rtol=1e-4)   # first Adam step


def test_muon_vmapped_over_members_equals_loop_and_stacked_tree_does_not():
    s = _setting("muon", weight_decay=1e-2)
    members = [_params(i) for i in range(3)]
    grads = [_grads(10 + i) for i in range(3)]
    stack = lambda trees: jax.tree.map(lambda *xs: jnp.stack(xs), *trees)

    def two_steps(params, g):
        tx, _ = make_optimizer(s, SPE, EPOCHS)     # built and applied per member
        state = tx.init(params)
        u, state = tx.update(g, state, params)
        u, state = tx.update(g, state, jax.tree.map(jnp.add, params, u))
        return u

    vmapped = jax.jit(jax.vmap(two_steps))(stack(members), stack(grads))
    single = jax.jit(two_steps)
    looped = stack([single(p, g) for p, g in zip(members, grads)])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7), vmapped, looped)
    wrong = single(stack(members), stack(grads))    # one NS over all members' rows
    assert not np.allclose(wrong["conv"]["kernel"], looped["conv"]["kernel"], rtol=1e-3)


# --------------------------------------------------------------------------- schedules
def test_step_schedule_drops_at_50_and_75_percent():
    f = make_schedule("step", 0.1, steps_per_epoch=10, epochs=10)   # T = 100
    values = [float(f(k)) for k in (0, 49, 50, 74, 75, 99)]
    np.testing.assert_allclose(values, [0.1, 0.1, 0.01, 0.01, 0.001, 0.001], rtol=1e-6)


def test_cosine_and_warmup_cosine_known_values():
    cos = make_schedule("cosine", 0.2, 10, 10)
    np.testing.assert_allclose([float(cos(k)) for k in (0, 50, 100)], [0.2, 0.1, 0.0], atol=1e-7)
    warm = make_schedule("warmup_cosine", 0.2, 10, 10, warmup_epochs=1)   # W = 10 steps
    np.testing.assert_allclose([float(warm(k)) for k in (0, 4, 9, 10, 55, 100)],
                               [0.02, 0.1, 0.2, 0.2, 0.1, 0.0], atol=1e-7)
    const = make_schedule("constant", 0.3, 10, 10)
    assert float(const(0)) == float(const(1000)) == pytest.approx(0.3)


def test_optimizer_follows_its_schedule():
    s = _setting("sgd", schedule="step")
    tx, schedule = make_optimizer(s, steps_per_epoch=2, epochs=2)    # T = 4
    w = {"w": jnp.ones(1)}
    state = tx.init(w)
    steps = []
    for _ in range(4):
        u, state = tx.update({"w": jnp.ones(1)}, state, w)
        steps.append(float(u["w"][0]))
    np.testing.assert_allclose(steps, [-s.lr, -s.lr, -0.1 * s.lr, -0.01 * s.lr], rtol=1e-6)
    np.testing.assert_allclose([float(schedule(k)) for k in range(4)], [-x for x in steps], rtol=1e-6)


# --------------------------------------------------------------------------- settings
def test_registry_defaults():
    assert set(SETTINGS) >= {"sgd", "momentum", "nesterov", "adam", "adamw", "muon", "sgd_l2"}
    assert _setting("sgd").lr == 0.05 and _setting("sgd").l2 == 0
    assert (_setting("sgd_l2").lr, _setting("sgd_l2").l2) == (0.1, 2e-2)
    assert _setting("muon").momentum == 0.95 and _setting("nesterov").nesterov
    for s in SETTINGS.values():
        assert isinstance(s, OptSetting)
        check_setting(s)


def test_resolve_precedence_global_over_entries_over_registry():
    opt = OptConfig(setting_lr=("sgd=0.2", "adam=3e-4"), setting_weight_decay=("sgd_l2=0.05", "adamw=0.1"))
    assert _setting("sgd", setting_lr=opt.setting_lr).lr == 0.2
    assert resolve_setting("adam", opt).lr == 3e-4 and resolve_setting("momentum", opt).lr == 0.01
    assert resolve_setting("sgd_l2", opt).l2 == 0.05 and resolve_setting("adamw", opt).weight_decay == 0.1
    both = dataclasses.replace(opt, lr=0.3, weight_decay=1e-3)
    assert resolve_setting("sgd", both).lr == 0.3 and resolve_setting("adam", both).lr == 0.3
    assert resolve_setting("sgd_l2", both).l2 == 1e-3 and resolve_setting("adamw", both).weight_decay == 1e-3


def test_weight_decay_reaches_only_the_regularised_settings():
    for label in ("sgd", "momentum", "nesterov", "adam"):     # unregularised by definition (docs/design.md)
        s = _setting(label, weight_decay=1e-3)
        assert (s.l2, s.weight_decay) == (0.0, 0.0), label
    assert (_setting("sgd_l2", weight_decay=1e-3).l2, _setting("sgd_l2", weight_decay=1e-3).weight_decay) == (1e-3, 0.0)
    for label in ("adamw", "muon"):
        s = _setting(label, weight_decay=1e-3)
        assert (s.l2, s.weight_decay) == (0.0, 1e-3), label
    with pytest.raises(ConfigError, match="sgd has no L2"):
        _setting("sgd", setting_weight_decay=("sgd=1e-3",))


def test_muon_sends_the_input_layer_to_adam_unless_asked():
    params = {"dense_0": {"kernel": jnp.zeros((40, 16))}, "dense_1": {"kernel": jnp.zeros((16, 16))},
              "conv": {"kernel": jnp.zeros((3, 3, 1, 8))}, "head": {"kernel": jnp.zeros((16, 10))}}
    ref = muon_labels(params, input_shape=(40,), first_layer="adam")
    assert ref["dense_0"]["kernel"] == "adam" and ref["dense_1"]["kernel"] == "muon"
    assert muon_labels(params, input_shape=(40,), first_layer="muon")["dense_0"]["kernel"] == "muon"
    img = muon_labels(params, input_shape=(8, 8, 1), first_layer="adam")
    assert img["conv"]["kernel"] == "adam" and img["dense_0"]["kernel"] == "muon"
    assert _setting("muon").muon_first_layer == "adam"
    with pytest.raises(ConfigError, match="muon_first_layer"):
        _setting("muon", muon_first_layer="nowhere")


def test_optconfig_fields_flow_into_settings():
    s = _setting("momentum", momentum=0.5, schedule="warmup_cosine", warmup_epochs=2.0)
    assert (s.momentum, s.schedule, s.warmup_epochs) == (0.5, "warmup_cosine", 2.0)
    assert _setting("muon", momentum=0.5).momentum == 0.95       # muon keeps its own beta
    assert _setting("adam", b1=0.8, b2=0.99, eps=1e-6).b2 == 0.99


@pytest.mark.parametrize("kwargs, match", [
    ({"setting_lr": ("sgd0.1",)}, "label=value"),
    ({"setting_lr": ("sgdd=0.1",)}, "unknown label"),
    ({"setting_lr": ("sgd=abc",)}, "cannot parse"),
    ({"setting_lr": ("sgd=nan",)}, "finite"),
    ({"setting_weight_decay": ("sgd=-1",)}, "finite"),
    ({"setting_lr": ("sgd=0.1", "sgd=0.2")}, "repeated"),
    ({"setting_lr": ("momentum=0",)}, "lr must be"),
    ({"lr": float("nan")}, "lr must be"),
    ({"lr": -1.0}, "lr must be"),
    ({"weight_decay": -1e-3}, "weight decay"),
    ({"lr": 1e39}, "float32"),
    ({"momentum": 1.0}, "momentum"),
    ({"schedule": "linear"}, "schedule"),
    ({"warmup_epochs": 1.0}, "warmup_cosine"),
    ({"eps": 0.0}, "eps"),
])
def test_resolve_errors_are_one_line_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match) as err:
        _setting("momentum", **kwargs)
    assert "\n" not in str(err.value)


def test_unknown_label_and_bad_steps():
    with pytest.raises(ConfigError, match="unknown optimizer setting"):
        _setting("lion")
    with pytest.raises(ConfigError, match="steps_per_epoch"):
        make_optimizer(_setting("sgd"), 0, 10)
    assert math.isfinite(float(make_schedule("cosine", 0.1, 1, 0)(0)))    # epochs = 0: no division by 0
