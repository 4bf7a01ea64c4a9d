"""opt.muon_aux: Muon's auxiliary Adam as before ("current") or as Jordan's MuonWithAuxAdam ("reference")."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments import forgetting
from jaxinit.config import OptConfig
from jaxinit.errors import ConfigError
from jaxinit.optim import MUON_ADAM_LR_RATIO, OptSetting, check_setting, make_optimizer, muon_labels, resolve_setting

from test_optim import _normal, _params   # the same small tree as the optimizer tests

SPE, EPOCHS, STEPS = 10, 4, 4


def _grads(seed):
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda p: _normal(p.shape, rng), _params())


def _path_map(fn, tree):
    return jax.tree_util.tree_map_with_path(fn, tree)


def _run(setting, steps=STEPS):
    """Params after `steps` steps of the setting's optimizer on fixed random gradients (one member)."""
    tx, _ = make_optimizer(setting, SPE, EPOCHS)
    params = _params()
    state = tx.init(params)
    for k in range(steps):
        updates, state = tx.update(_grads(100 + k), state, params)
        params = optax.apply_updates(params, updates)
    return params


def _group(tree, group):
    """The leaves of `tree` that muon routes to `group` ('adam' or 'muon'), as {path: array}."""
    labels = jax.tree.leaves(muon_labels(_params()))
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(p): np.asarray(x) for (p, x), lab in zip(flat, labels) if lab == group}


def _aux(tree):
    return _group(tree, "adam")


def _muon(tree):
    return _group(tree, "muon")


def _reference_aux_adam(lr, betas, eps, wd, steps=STEPS):
    """K. Jordan's MuonWithAuxAdam, Adam group (github.com/KellerJordan/Muon muon.py), transcribed to
    numpy in float64: lerp moments, bias-correct, p *= 1 - lr wd, p -= lr m_hat / (sqrt(v_hat) + eps)."""
    out = {}
    for name, p in _aux(_params()).items():
        p = p.astype(np.float64)
        m, v = np.zeros_like(p), np.zeros_like(p)
        for k in range(steps):
            g = _aux(_grads(100 + k))[name].astype(np.float64)
            m += (1 - betas[0]) * (g - m)
            v += (1 - betas[1]) * (g * g - v)
            t = k + 1
            update = (m / (1 - betas[0] ** t)) / (np.sqrt(v / (1 - betas[1] ** t)) + eps)
            p = p * (1 - lr * wd) - lr * update
        out[name] = p
    return out


def test_reference_resolves_to_the_reference_values():
    ref, cur = resolve_setting("muon", OptConfig(muon_aux="reference")), resolve_setting("muon", OptConfig())
    assert ref.muon_aux == "reference" and ref.weight_decay == 0.01 and ref.lr == 0.02
    assert cur.muon_aux == "current" and cur.weight_decay == 0.0 and cur.lr == 0.02
    # an explicit decay still wins over the reference's 0.01; settings other than muon are unchanged
    assert resolve_setting("muon", OptConfig(muon_aux="reference", setting_weight_decay=("muon=0",))).weight_decay == 0
    assert resolve_setting("muon", OptConfig(muon_aux="reference", weight_decay=0.1)).weight_decay == 0.1
    assert resolve_setting("adamw", OptConfig(muon_aux="reference")).weight_decay == 0.05


def test_reference_aux_group_matches_jordans_adam_and_optax_adamw():
    s = resolve_setting("muon", OptConfig(muon_aux="reference"))
    lr = 0.015 * s.lr                                              # 3e-4 at the muon lr 0.02
    got = _aux(_run(s))
    expected = _reference_aux_adam(lr, (0.9, 0.95), 1e-10, 0.01)
    assert set(got) == set(expected) and "['head']['kernel']" in got and "['bn']['scale']" in got
    for name in got:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, atol=1e-7, err_msg=name)
    # the same through optax.adamw on the aux leaves alone
    tx = optax.adamw(lr, b1=0.9, b2=0.95, eps=1e-10, weight_decay=0.01)
    params = _aux(_params())
    state = tx.init(params)
    for k in range(STEPS):
        updates, state = tx.update(_aux(_grads(100 + k)), state, params)
        params = optax.apply_updates(params, updates)
    for name in got:
        np.testing.assert_allclose(got[name], params[name], rtol=1e-6, atol=1e-8, err_msg=name)
    # and not the current choice's Adam (lr 1e-3, b2 0.999, eps 1e-8, no decay)
    current = _aux(_run(resolve_setting("muon", OptConfig())))
    assert not np.allclose(got["['head']['kernel']"], current["['head']['kernel']"])


def test_reference_decays_both_groups_by_their_own_lr():
    ref = resolve_setting("muon", OptConfig(muon_aux="reference"))
    no_decay = resolve_setting("muon", OptConfig(muon_aux="reference", setting_weight_decay=("muon=0",)))
    w = _params()

    def first_update(setting):
        tx, _ = make_optimizer(setting, SPE, EPOCHS)
        return tx.update(_grads(100), tx.init(w), w)[0]

    u_ref, u_none = first_update(ref), first_update(no_decay)
    for pick, lr in ((_muon, ref.lr), (_aux, 0.015 * ref.lr)):
        got = {k: pick(u_ref)[k] - pick(u_none)[k] for k in pick(w)}
        assert got
        for name, diff in got.items():     # one step: the same direction, minus lr wd w
            np.testing.assert_allclose(diff, -lr * 0.01 * pick(w)[name], rtol=1e-4, atol=1e-10, err_msg=name)


def test_current_is_unchanged():
    """Aux leaves: Adam at 0.05 x the muon lr with opt's b1, b2, eps and no decay; opt.b2 still counts."""
    for opt, b2 in ((OptConfig(), 0.999), (OptConfig(b2=0.99), 0.99)):
        s = resolve_setting("muon", opt)
        got = _aux(_run(s))
        expected = _reference_aux_adam(MUON_ADAM_LR_RATIO * s.lr, (0.9, b2), 1e-8, 0.0)
        for name in got:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, atol=1e-7, err_msg=name)
    # with "reference" opt.b2 does not reach the aux Adam
    a, b = (_aux(_run(resolve_setting("muon", OptConfig(muon_aux="reference", b2=b2)))) for b2 in (0.999, 0.9))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_reference_vmapped_over_members_equals_loop():
    s = resolve_setting("muon", OptConfig(muon_aux="reference"))
    tx, _ = make_optimizer(s, SPE, EPOCHS)
    members, grads = [_params(i) for i in range(3)], [_grads(10 + i) for i in range(3)]
    stack = lambda trees: jax.tree.map(lambda *xs: jnp.stack(xs), *trees)
    step = lambda p, g: tx.update(g, tx.init(p), p)[0]
    batched = jax.jit(jax.vmap(step))(stack(members), stack(grads))
    for i in range(3):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a[i], b, rtol=2e-5, atol=1e-7),
                     batched, step(members[i], grads[i]))


def test_unknown_choice_is_one_line_config_error(tmp_path, capsys):
    with pytest.raises(ConfigError, match="muon_aux must be one of current|reference") as err:
        resolve_setting("sgd", OptConfig(muon_aux="jordan"))
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="muon_aux"):
        check_setting(OptSetting("muon", "muon", lr=0.02, muon_aux="jordan"))
    out = tmp_path / "o"
    assert forgetting.run(["--preset", "smoke", "--opt.muon_aux=jordan", "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--opt.muon_aux" in lines[0] and "'jordan'" in lines[0], lines
    assert not (out / "config.json").exists()
