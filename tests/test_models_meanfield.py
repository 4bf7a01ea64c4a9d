"""Mean-field-convention models (deep MLP, residual MLP, CNN, ViT) against closed forms of THEORY.md."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit import bias
from jaxinit.models import cnn, deep, vit

# jitted once per spec: eager dispatch of every op would dominate these small tests
deep_apply = jax.jit(deep.apply, static_argnames="spec")
cnn_apply = jax.jit(cnn.apply, static_argnames="spec")
vit_apply = jax.jit(vit.apply, static_argnames="spec")
backprop_signals = jax.jit(bias.backprop_signals, static_argnames="spec")



def _sphere_inputs(key, n, d):
    return bias.to_sphere(jax.random.normal(key, (n, d)))


def _relu_c_map(c):
    """Normalised ReLU c-map at sigma_b2 = 0 (THEORY.md section 3)."""
    return (np.sqrt(1 - c ** 2) + (np.pi - np.arccos(c)) * c) / np.pi


def test_weights_follow_the_convention():
    spec = deep.DeepSpec(d_in=50, width=400, depth=3, n_out=10, act="tanh")
    params, state = deep.init(jax.random.key(0), 2.5, 0.3, spec)
    assert state == {}
    assert np.var(np.asarray(params["W"][0])) == pytest.approx(2.5 / 400, rel=0.03)
    assert np.var(np.asarray(params["W_in"])) == pytest.approx(2.5 / 50, rel=0.05)
    assert np.var(np.asarray(params["b"])) == pytest.approx(0.3, rel=0.1)


def test_grid_members_share_one_draw():
    spec = deep.DeepSpec(8, 16, 3, 2, "relu")
    z = deep.draw(jax.random.key(1), spec)
    a, b = deep.scale(z, 1.0, 0.1), deep.scale(z, 4.0, 0.4)
    np.testing.assert_allclose(b["W"], 2 * a["W"], rtol=1e-6)
    np.testing.assert_allclose(b["b_out"], 2 * a["b_out"], rtol=1e-6)


def test_relu_mlp_matches_closed_form_c_and_q():
    """Wide ReLU net, sigma_b2 = 0, near-orthogonal inputs: c2 = 1/pi, c5 = 0.681 and q_l = (sw2/2)^(l-1) sw2."""
    spec = deep.DeepSpec(d_in=400, width=2000, depth=5, n_out=2, act="relu")
    x = _sphere_inputs(jax.random.key(2), 64, 400)
    params, _ = deep.init(jax.random.key(3), 2.0, 0.0, spec)
    _, hs = deep_apply(params, x, spec)
    m = bias.layer_moments(hs)
    c0 = bias.input_overlaps(x).mean()
    expected = [c0]
    for _ in range(4):
        expected.append(_relu_c_map(expected[-1]))
    np.testing.assert_allclose(m["c"], expected, atol=0.03)
    assert expected[1] == pytest.approx(1 / np.pi, abs=0.01)
    np.testing.assert_allclose(m["q"], 2.0, rtol=0.1)   # chi_1 = sw2 / 2 = 1: the length is preserved


def test_maxpool_psi_uses_two_independent_nodes():
    """E[relu(max(z1, z2))^2] = 3/4 + 1/(2 pi) sets q2 / q1 at sigma_b2 = 0."""
    assert deep.make_psi("relu+maxpool")(jnp.array([[1.0, -2.0, -1.0, 3.0]])).tolist() == [[1.0, 3.0]]
    assert deep.make_psi("tanh+avgpool")(jnp.array([[0.5, -0.5]])).tolist() == [[0.0]]
    spec = deep.DeepSpec(d_in=100, width=2000, depth=2, n_out=2, act="relu+maxpool")
    x = _sphere_inputs(jax.random.key(4), 32, 100)
    params, _ = deep.init(jax.random.key(5), 1.5, 0.0, spec)
    _, hs = deep_apply(params, x, spec)
    q = bias.layer_moments(hs)["q"]
    assert float(q[1] / q[0]) == pytest.approx(1.5 * (0.75 + 1 / (2 * np.pi)), rel=0.05)


def test_residual_mlp_matches_its_recursion():
    """The residual recursion in `bias.residual_propagate`, fed ReLU closed forms, predicts the wide net."""
    def q_map(q, sw, sb, act):
        return sw * q / 2 + sb

    def c_map(c, q, sw, sb, act):
        return (sw * q * _relu_c_map(np.clip(c, -1, 1)) / 2 + sb) / q_map(q, sw, sb, act)

    spec = deep.DeepSpec(d_in=300, width=1500, depth=6, n_out=2, act="relu", residual=True)
    x = _sphere_inputs(jax.random.key(6), 48, 300)
    params, _ = deep.init(jax.random.key(7), 1.5, 0.05, spec)
    _, hs = deep_apply(params, x, spec)
    m = bias.layer_moments(hs)
    q_th, c_th = bias.residual_propagate(q_map, c_map, 1.5, 0.05, "relu", 6, 1.0, float(bias.input_overlaps(x).mean()))
    np.testing.assert_allclose(m["q"], q_th[:6], rtol=0.06)
    np.testing.assert_allclose(m["c"], c_th[:6], atol=0.03)
    plain, _ = deep_apply(params, x, deep.DeepSpec(300, 1500, 6, 2, "relu", residual=False))
    assert not np.allclose(plain, deep_apply(params, x, spec)[0])


def test_cnn_channel_pooling_is_the_two_node_psi():
    spec = cnn.CNNSpec((6, 6, 3), width=4, depth=2, n_out=10, act="relu", pool="avg", pool_over="channels")
    params, _ = cnn.init(jax.random.key(8), 2.0, 0.1, spec)
    x = jax.random.normal(jax.random.key(9), (5, 6, 6, 3))
    logits, hs = cnn_apply(params, x, spec)
    assert logits.shape == (5, 10) and [h.shape for h in hs] == [(5, 6 * 6 * 8)] * 2
    h1 = hs[0].reshape(5, 6, 6, 8)
    y = cnn.psi_layer(h1, spec)
    np.testing.assert_allclose(y, 0.5 * (jax.nn.relu(h1[..., 0::2]) + jax.nn.relu(h1[..., 1::2])), rtol=1e-6)
    assert np.var(np.asarray(params["W1"])) == pytest.approx(2.0 / (9 * 4), rel=0.15)


def test_cnn_first_layer_length_and_space_pooling():
    """Circular padding: q1 = sw2 + sb2 on sphere inputs; 2 x 2 spatial pooling halves the map."""
    spec = cnn.CNNSpec((8, 8, 1), width=128, depth=3, n_out=10, act="tanh", pool="max", pool_over="space")
    x = bias.to_sphere(jax.random.normal(jax.random.key(10), (16, 8, 8, 1)))
    params, _ = cnn.init(jax.random.key(11), 1.5, 0.2, spec)
    logits, hs = cnn_apply(params, x, spec)
    assert [h.shape[1] for h in hs] == [64 * 128, 16 * 128, 4 * 128]
    assert cnn.layer_hw(spec) == [(8, 8), (4, 4), (2, 2)]
    assert float(bias.layer_moments(hs)["q"][0]) == pytest.approx(1.7, rel=0.1)   # 128 filters: sd ~4 %
    np.testing.assert_allclose(cnn.readout_features(hs[-1], spec) @ params["W_out"] + params["b_out"], logits, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("residual", [True, False])
def test_vit_shapes_and_readout(residual):
    spec = vit.ViTSpec((8, 8, 1), patch=2, width=16, depth=2, heads=4, n_out=10, act="gelu", residual=residual)
    params, _ = vit.init(jax.random.key(12), 1.0, 0.1, spec)
    x = jax.random.normal(jax.random.key(13), (3, 8, 8, 1))
    logits, hs = vit_apply(params, x, spec)
    assert logits.shape == (3, 10) and hs.shape == (3, 3, 16 * 16)
    np.testing.assert_allclose(vit.readout_features(hs[-1], spec) @ params["W_out"] + params["b_out"], logits,
                               rtol=1e-5, atol=1e-6)
    # the first recorded layer is the patch embedding, before any block
    emb = vit.patchify(x, 2) @ params["W_emb"] + params["b_emb"] + params["pos"]
    np.testing.assert_allclose(hs[0], emb.reshape(3, -1), rtol=1e-5, atol=1e-6)


def test_shift_gradient_is_the_backpropagated_signal():
    """d loss / d shift_L equals d loss / d h_L computed from the readout alone."""
    spec = deep.DeepSpec(d_in=12, width=20, depth=3, n_out=10, act="tanh")
    params, _ = deep.init(jax.random.key(14), 2.0, 0.1, spec)
    x = _sphere_inputs(jax.random.key(15), 6, 12)
    labels = jnp.array([0, 1, 1, 0, 1, 0])
    signals = backprop_signals(params, x, labels, spec)
    _, hs = deep_apply(params, x, spec)

    def readout_loss(h_last):
        logits = deep.readout_features(h_last, spec) @ params["W_out"] + params["b_out"]
        return jax.nn.logsumexp(logits[:, :2], axis=1).sum() - jnp.take_along_axis(logits[:, :2], labels[:, None], 1).sum()

    delta = jax.grad(readout_loss)(hs[-1])
    np.testing.assert_allclose(signals[-2], jnp.mean(delta ** 2, axis=1), rtol=1e-4)
    assert signals.shape == (4, 6)
