"""The study's networks (flax modules of `jaxinit.models.{deep,vit,cnn}`) with what the probes read.

A `Net` holds a module and its parameter template. `draw` gives one network's unscaled parameters
(kernels N(0, 1/fan_in), biases and the ViT's position embedding N(0, 1): `jaxinit.init.base_draw`
with "normal_fan_in" / "normal"), `scale` turns them into docs/theory.md section 1 weights for traced
(sigma_w2, sigma_b2), so a grid of scales shares one draw and never recompiles. `forward` returns the
logits, every hidden pre-activation (sown by the modules) and the readout's input; `backprop_signals`
the squared backpropagated signal per layer, as the gradient w.r.t. the modules' perturbations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxinit import init as init_lib
from jaxinit.models import Model, cnn, deep, vit
from jaxinit.models.core import template_variables

_READERS = {deep.DeepMLP: deep, vit.ViT: vit, cnn.CNN: cnn}


@dataclass(frozen=True)   # a static argument of the jitted probes: equal module and input shape, one program
class Net:
    module: nn.Module
    input_shape: tuple
    preactivations: Callable
    features: Callable
    theory_act: str | None     # psi whose mean-field map the hidden layers follow (None: no layer theory)
    template: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def model(self) -> Model:
        """The network as the training engine's (init, apply) pair (`jaxinit.train.engine`): ``init(key,
        (sigma_w2, sigma_b2))`` is `scaled_draw` (members of one seed share their base draw: paired points),
        ``apply`` the module; no state (no BatchNorm)."""
        def init(key, scale):
            return scaled_draw(self, key, *scale), {}

        def apply(params, state, x, train: bool = False):
            return self.module.apply({"params": params}, x), state
        return Model(init, apply, self.module)


def make_net(module: nn.Module, input_shape: tuple) -> Net:
    """`Net` of a `DeepMLP`, `ViT` or `CNN` for inputs of ``input_shape`` (one example)."""
    reader = _READERS[type(module)]
    act = None
    if isinstance(module, deep.DeepMLP):
        act = module.activation
    elif isinstance(module, cnn.CNN) and module.space_pool == "none":
        act = module.activation
    params = template_variables(module, tuple(input_shape))["params"]
    return Net(module, tuple(input_shape), reader.preactivations, reader.features, act, params)


def case_nets(cases: dict, n_classes: int, input_shape: tuple) -> dict[str, Net]:
    """One `DeepMLP` network per (activation, depth) of the trained cases (`jaxinit.shared.phases.Case`: act, depth,
    width), keyed ``"<act>__d<depth>"``."""
    return {f"{c.act}__d{c.depth}": make_net(deep.DeepMLP(n_classes, c.width, c.depth, c.act), input_shape)
            for c in cases.values()}


def draw(net: Net, key: jax.Array) -> Any:
    """One network's unscaled parameters: W = N(0, 1/fan_in), b = N(0, 1)."""
    return init_lib.base_draw(key, net.template, "normal_fan_in", "normal")


def scale(z: Any, sigma_w2, sigma_b2) -> Any:
    """W ~ N(0, sigma_w2/fan_in), b ~ N(0, sigma_b2) from a `draw` (scales may be traced)."""
    return init_lib.scale_params(z, jnp.sqrt(sigma_w2), jnp.sqrt(sigma_b2))


def scaled_draw(net: Net, key: jax.Array, sigma_w2, sigma_b2) -> Any:
    """``scale(draw(net, key), sigma_w2, sigma_b2)``: one network at the variances (traced or not)."""
    z = init_lib.base_draw(key, net.template, "normal_fan_in", "normal")
    return init_lib.scale_params(z, jnp.sqrt(sigma_w2), jnp.sqrt(sigma_b2))


def forward(net: Net, params: Any, x: jax.Array):
    """(logits, hidden pre-activations (L, B, nodes) or a list of (B, nodes_l), readout features (B, F))."""
    logits, state = net.module.apply({"params": params}, x, mutable=["intermediates"])
    inter = state["intermediates"]
    return logits, net.preactivations(inter), net.features(inter)


def backprop_signals(net: Net, params: Any, x: jax.Array, labels_B: jax.Array, n_out: int = 2) -> jax.Array:
    """|delta_l|^2 / nodes per layer and sample for the cross-entropy of the first ``n_out`` logits,
    shape (L + 1, B); the last row is the output layer, p - e_y.

    delta_l = d loss_a / d h_l(a): the gradient w.r.t. the zero perturbation the modules add to each
    h_l (`jaxinit.models.deep.probe`); each sample's loss depends on its own h only.
    """
    _, zeros = net.module.apply({"params": params}, x, mutable=["perturbations"])

    def total_loss(perturbations):
        logits = net.module.apply({"params": params, **perturbations}, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits[:, :n_out], labels_B).sum(), logits

    grads, logits = jax.grad(total_loss, has_aux=True)(zeros)
    per_layer = [jnp.mean(jnp.square(g), axis=-1) for g in _layers(net.preactivations(grads["perturbations"]))]
    out = jax.nn.softmax(logits[:, :n_out]) - jax.nn.one_hot(labels_B, n_out)
    return jnp.stack(per_layer + [jnp.mean(jnp.square(out), axis=-1)])


def _layers(hs) -> list[jax.Array]:
    return list(hs) if isinstance(hs, (list, tuple)) else [hs[i] for i in range(hs.shape[0])]


__all__ = ["Net", "make_net", "case_nets", "draw", "scale", "scaled_draw", "forward", "backprop_signals"]
