"""The centred twin of a trained point: the same network draw with no initial guessing bias on the data.

A point's twin draws W and b exactly as the point (`jaxinit.shared.nets.scaled_draw`, same seed: paired) and then
shifts the readout bias, b_out <- b_out - mean_x f(x), the mean logit of the initial network over reference
training inputs, so that every class's mean logit over them is 0 (docs/theory.md section 5: the prejudice is the
node centres' spread sigma_mu2 at the output; the shift removes the readout's centre, not the spread of the
hidden layers). Every weight is the point's, so every layer-to-layer Jacobian, and with them the backward factor
|delta_1|^2 / |delta_L|^2, is unchanged; only the output error p - e_y differs. Its trained nets are the null of the prejudice measure (`jaxinit.igb.prejudice`).
"""
from __future__ import annotations

import functools

import jax.numpy as jnp

from jaxinit.models import Model
from jaxinit.shared import nets

TWIN = " centred"      # a twin's role: "<role> centred"
REFERENCE_INPUTS = 256


def centred_draw(net: nets.Net, key, sigma_w2, sigma_b2, centre, x_ref):
    """`nets.scaled_draw` with the readout bias shifted by ``centre`` x the mean logit over ``x_ref`` (``centre``
    in {0, 1}, traced: one program for points and twins)."""
    params = dict(nets.scaled_draw(net, key, sigma_w2, sigma_b2))
    logits = net.module.apply({"params": params}, x_ref)
    head = dict(params["head"])
    head["bias"] = head["bias"] - centre * jnp.mean(logits, axis=0)
    params["head"] = head
    return params


def model_of(x_ref):
    """``model_of(net)`` for `jaxinit.shared.case_train.study`: the net as an engine model whose ``init(key, scale)``
    takes scale = (sigma_w2, sigma_b2, centre) (`centred_draw` on ``x_ref``)."""
    x_ref = jnp.asarray(x_ref)

    def make(net: nets.Net) -> Model:
        def init(key, scale):
            return centred_draw(net, key, *scale, x_ref), {}
        return Model(init, net.model.apply, net.module)
    return functools.lru_cache(maxsize=None)(make)


def twin_rows(rows) -> list:
    """(role, sigma_w2, sigma_b2, seeds) rows followed by each row's twin (role + `TWIN`)."""
    return list(rows) + [(f"{role}{TWIN}", sw, sb, seeds) for role, sw, sb, seeds in rows]


def is_twin(role: str) -> bool:
    return str(role).endswith(TWIN)


def base_role(role: str) -> str:
    return str(role)[:-len(TWIN)] if is_twin(role) else str(role)
