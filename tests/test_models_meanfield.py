"""Mean-field-convention flax models (deep MLP, residual MLP, CNN, ViT) against closed forms of docs/theory.md."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.config import ModelConfig
from jaxinit.data import normalize
from jaxinit.igb import predict
from jaxinit.models import cnn, deep, vit
from jaxinit.models.core import from_flax
from jaxinit.shared import igb_stats as stats, nets

forward = jax.jit(nets.forward, static_argnums=0)
backprop_signals = jax.jit(nets.backprop_signals, static_argnums=0)


def _sphere_inputs(key, n, shape):
    return jnp.asarray(normalize([np.asarray(jax.random.normal(key, (n, *shape)))], "sphere")[0])


def _relu_c_map(c):
    """Normalised ReLU c-map at sigma_b2 = 0 (docs/theory.md section 3)."""
    return (np.sqrt(1 - c ** 2) + (np.pi - np.arccos(c)) * c) / np.pi


def _net(module, shape, key, sigma_w2, sigma_b2):
    net = nets.make_net(module, shape)
    return net, nets.scale(nets.draw(net, key), sigma_w2, sigma_b2)


def test_weights_follow_the_convention_with_stacked_layers():
    model = from_flax(deep.DeepMLP(10, width=400, depth=3, activation="tanh"), (50,), "normal_fan_in", "normal")
    params, state = model.init(jax.random.key(0), np.sqrt(2.5), np.sqrt(0.3))
    assert state == {}
    assert params["stacked_layers"]["dense"]["kernel"].shape == (2, 400, 400)   # fan-in 400, not 2 x 400
    assert np.var(np.asarray(params["stacked_layers"]["dense"]["kernel"])) == pytest.approx(2.5 / 400, rel=0.03)
    assert np.var(np.asarray(params["embed"]["kernel"])) == pytest.approx(2.5 / 50, rel=0.05)
    assert np.var(np.asarray(params["stacked_layers"]["dense"]["bias"])) == pytest.approx(0.3, rel=0.15)


def test_grid_members_share_one_draw():
    net = nets.make_net(deep.DeepMLP(2, 16, 3, "relu"), (8,))
    z = nets.draw(net, jax.random.key(1))
    a, b = nets.scale(z, 1.0, 0.1), nets.scale(z, 4.0, 0.4)
    np.testing.assert_allclose(b["stacked_layers"]["dense"]["kernel"], 2 * a["stacked_layers"]["dense"]["kernel"], rtol=1e-6)
    np.testing.assert_allclose(b["head"]["bias"], 2 * a["head"]["bias"], rtol=1e-6)


def test_depth_does_not_grow_the_program():
    """The hidden layers are one nn.scan: the traced program of depth 100 is that of depth 10."""
    def n_eqns(depth):
        module = deep.DeepMLP(2, 32, depth, "tanh")
        params = nets.make_net(module, (8,)).template
        return len(jax.make_jaxpr(lambda p, x: module.apply({"params": p}, x))(params, jnp.ones((4, 8))).eqns)
    assert n_eqns(100) == n_eqns(10)


def test_relu_mlp_matches_closed_form_c_and_q():
    """Wide ReLU net, sigma_b2 = 0, near-orthogonal inputs: c2 = 1/pi, c5 = 0.681 and q_l = sw2 (chi_1 = 1)."""
    x = _sphere_inputs(jax.random.key(2), 64, (400,))
    net, params = _net(deep.DeepMLP(2, 2000, 5, "relu"), (400,), jax.random.key(3), 2.0, 0.0)
    m = stats.layer_moments(forward(net, params, x)[1])
    expected = [predict.input_overlaps(x).mean()]
    for _ in range(4):
        expected.append(_relu_c_map(expected[-1]))
    np.testing.assert_allclose(m["c"], expected, atol=0.03)
    assert expected[1] == pytest.approx(1 / np.pi, abs=0.01)
    np.testing.assert_allclose(m["q"], 2.0, rtol=0.1)


@pytest.mark.parametrize("act,sigma_w2", [("tanh", 1.5), ("tanh", 2.5), ("relu", 2.0)])
def test_per_layer_c_follows_propagate(act, sigma_w2):
    """Per-layer c of a wide MLP (width 1024, depth 12) against `theory.meanfield.propagate` from the inputs' c0."""
    from theory import meanfield as mf
    x = _sphere_inputs(jax.random.key(4), 48, (256,))
    net, params = _net(deep.DeepMLP(2, 1024, 12, act), (256,), jax.random.key(5), sigma_w2, 0.1)
    c = stats.layer_moments(forward(net, params, x)[1])["c"]
    c0s = predict.c0_representatives(predict.input_overlaps(x), 8)
    c_mf = np.asarray(mf.propagate(sigma_w2, 0.1, act, 12, q0=1.0, c0=c0s)[1]).mean(axis=0)
    np.testing.assert_allclose(c, c_mf, atol=0.03)


def test_maxpool_psi_uses_two_independent_nodes():
    """E[relu(max(z1, z2))^2] = 3/4 + 1/(2 pi) sets q2 / q1 at sigma_b2 = 0."""
    from jaxinit.models import activations
    assert activations.get("relu+maxpool")(jnp.array([[1.0, -2.0, -1.0, 3.0]])).tolist() == [[1.0, 3.0]]
    x = _sphere_inputs(jax.random.key(4), 32, (100,))
    net, params = _net(deep.DeepMLP(2, 2000, 2, "relu+maxpool"), (100,), jax.random.key(5), 1.5, 0.0)
    hs = forward(net, params, x)[1]
    assert hs.shape == (2, 32, 4000)
    q = stats.layer_moments(hs)["q"]
    assert float(q[1] / q[0]) == pytest.approx(1.5 * (0.75 + 1 / (2 * np.pi)), rel=0.05)


def test_residual_mlp_matches_its_recursion():
    """`predict.residual_propagate`, fed ReLU closed forms, predicts the wide residual net."""
    def q_map(q, sw, sb, act):
        return sw * q / 2 + sb

    def c_map(c, q, sw, sb, act):
        return (sw * q * _relu_c_map(np.clip(c, -1, 1)) / 2 + sb) / q_map(q, sw, sb, act)

    x = _sphere_inputs(jax.random.key(6), 48, (300,))
    module = deep.DeepMLP(2, 1500, 6, "relu", residual=True)
    net, params = _net(module, (300,), jax.random.key(7), 1.5, 0.05)
    m = stats.layer_moments(forward(net, params, x)[1])
    q_th, c_th = predict.residual_propagate(1.5, 0.05, "relu", 6, 1.0, float(predict.input_overlaps(x).mean()),
                                            q_map=q_map, c_map=c_map)
    np.testing.assert_allclose(m["q"], q_th[:6], rtol=0.06)
    np.testing.assert_allclose(m["c"], c_th[:6], atol=0.03)
    plain = deep.DeepMLP(2, 1500, 6, "relu").apply({"params": params}, x)
    assert not np.allclose(plain, module.apply({"params": params}, x))


def test_cnn_channel_pooling_is_the_two_node_psi():
    net, params = _net(cnn.CNN(10, width=4, depth=2, activation="relu+avgpool"), (6, 6, 3), jax.random.key(8), 2.0, 0.1)
    x = jax.random.normal(jax.random.key(9), (5, 6, 6, 3))
    logits, hs, _ = forward(net, params, x)
    assert logits.shape == (5, 10) and [h.shape for h in hs] == [(5, 6 * 6 * 8)] * 2
    h1 = hs[0].reshape(5, 6, 6, 8)
    from jaxinit.models import activations
    np.testing.assert_allclose(activations.get("relu+avgpool")(h1),
                               0.5 * (jax.nn.relu(h1[..., 0::2]) + jax.nn.relu(h1[..., 1::2])), rtol=1e-6)
    assert np.var(np.asarray(params["conv_1"]["kernel"])) == pytest.approx(2.0 / (9 * 4), rel=0.15)


def test_cnn_first_layer_length_and_space_pooling():
    """Circular padding: q1 = sw2 + sb2 on sphere inputs; 2 x 2 spatial pooling halves the map."""
    module = cnn.CNN(10, width=128, depth=3, activation="tanh", space_pool="max")
    net, params = _net(module, (8, 8, 1), jax.random.key(11), 1.5, 0.2)
    x = _sphere_inputs(jax.random.key(10), 16, (8, 8, 1))
    logits, hs, features = forward(net, params, x)
    assert [h.shape[1] for h in hs] == [64 * 128, 16 * 128, 4 * 128]
    assert float(stats.layer_moments(hs)["q"][0]) == pytest.approx(1.7, rel=0.1)   # 128 filters: sd ~4 %
    np.testing.assert_allclose(features @ params["head"]["kernel"] + params["head"]["bias"], logits, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("residual", [True, False])
def test_vit_shapes_readout_and_position_embedding(residual):
    module = vit.ViT(10, width=16, depth=2, heads=4, patch=2, activation="gelu", residual=residual)
    net, params = _net(module, (8, 8, 1), jax.random.key(12), 1.0, 0.1)
    x = jax.random.normal(jax.random.key(13), (3, 8, 8, 1))
    logits, hs, features = forward(net, params, x)
    assert logits.shape == (3, 10) and hs.shape == (3, 3, 16 * 16)
    np.testing.assert_allclose(features @ params["head"]["kernel"] + params["head"]["bias"], logits, rtol=1e-5, atol=1e-6)
    emb = vit.patchify(x, 2) @ params["embed"]["kernel"] + params["embed"]["bias"] + params["pos_embedding"]["bias"]
    np.testing.assert_allclose(hs[0], emb.reshape(3, -1), rtol=1e-5, atol=1e-6)
    # the position embedding is drawn like a bias: N(0, sigma_b2), scaled by sqrt(sigma_b2)
    z = nets.draw(net, jax.random.key(12))
    np.testing.assert_allclose(params["pos_embedding"]["bias"], np.sqrt(0.1) * z["pos_embedding"]["bias"], rtol=1e-6)


def test_perturbation_gradient_is_the_backpropagated_signal():
    """d loss / d perturbation of h_L equals d loss / d h_L computed from the readout alone."""
    net, params = _net(deep.DeepMLP(10, 20, 3, "tanh"), (12,), jax.random.key(14), 2.0, 0.1)
    x = _sphere_inputs(jax.random.key(15), 6, (12,))
    labels = jnp.array([0, 1, 1, 0, 1, 0])
    signals = backprop_signals(net, params, x, labels)
    hs = forward(net, params, x)[1]

    def readout_loss(h_last):
        logits = jnp.tanh(h_last) @ params["head"]["kernel"] + params["head"]["bias"]
        return jax.nn.logsumexp(logits[:, :2], axis=1).sum() - jnp.take_along_axis(logits[:, :2], labels[:, None], 1).sum()

    delta = jax.grad(readout_loss)(hs[-1])
    np.testing.assert_allclose(signals[-2], jnp.mean(delta ** 2, axis=1), rtol=1e-4)
    assert signals.shape == (4, 6)


def test_init_template_has_no_probe_collections():
    """Probes create nothing at init: from_flax's state stays {} (training never branches on it)."""
    for module, shape in ((deep.DeepMLP(2, 8, 3), (4,)), (vit.ViT(2, 8, 1, 2), (4, 4, 1)), (cnn.CNN(2, 4, 2), (4, 4, 1))):
        assert from_flax(module, shape, "normal_fan_in", "normal").init(jax.random.key(0), 1.0, 0.1)[1] == {}


@pytest.mark.parametrize("name", ["vit", "cnn"])
def test_registry_factories_build_flax_models(name):
    from jaxinit.models import make_model
    model = make_model(ModelConfig(name=name, width=8, depth=2, activation="relu"), (8, 8, 1), 10)
    params, state = model.init(jax.random.key(0), 1.0)
    logits, _ = model.apply(params, state, jnp.ones((3, 8, 8, 1)), train=True)
    assert logits.shape == (3, 10) and state == {}
    kernels = [k for k in jax.tree_util.tree_flatten_with_path(params)[0] if k[0][-1].key == "kernel"]
    assert len(kernels) == (1 + 6 + 1 if name == "vit" else 2 + 1)    # ViT: six kernels stacked over 2 blocks
    if name == "vit":
        assert params["stacked_blocks"]["query"]["kernel"].shape == (2, 8, 8)


def test_bad_model_settings_are_config_errors():
    from jaxinit.errors import ConfigError
    with pytest.raises(ConfigError, match="depth and width must be >= 1"):
        deep.DeepMLP(2, width=0, depth=3)
    with pytest.raises(ConfigError, match="multiple of heads"):
        vit.ViT(2, width=10, heads=4)
    with pytest.raises(ConfigError, match="not multiples of patch=3"):
        vit.patchify(jnp.ones((1, 8, 8, 1)), 3)
    with pytest.raises(ConfigError, match="space_pool"):
        cnn.CNN(2, space_pool="median")
