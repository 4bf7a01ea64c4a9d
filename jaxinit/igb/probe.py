"""Bias meets trainability: finite networks at init and in training, measured for the IGB theory.

Library side of `experiments/igb_init.py` and `experiments/igb_train.py` (THEORY.md sections 1-5).
Models are the mean-field-convention ones in `jaxinit.models.{deep,cnn,vit}`: each module has
`draw(key, spec)`, `scale_draw(z, sigma_w2, sigma_b2)`, `apply(params, x, spec, shift)` ->
(logits, per-layer pre-activations) and `readout_features(h_last, spec)`.

At init (`probe_network`): per layer the Gram moments Q, P (so c = P/Q, gamma_corr = P/(Q-P)) and the
naive gamma; at the output f_max for a 2-class head (the first two logits) and for all logits; the
readout's exact conditional c given the last features, and optionally the norm-free mean logit
correlation (`readout_rho`) and the Gaussian-process f_max over fresh readouts of the network's own
features (`fmax_gp`), which drop the single-gamma model's equicorrelated kernel; per-layer quantiles of the squared
backpropagated signal |delta_l|^2 / nodes for the binary head, over all samples, over those labelled
with the favoured class and over the others. `probe_grid` vmaps it over a (sigma_w2, sigma_b2) grid
sharing one draw (paired), so the grid values are traced and never recompile.

In training (`train_members`): member-parallel Adam on deep MLPs, one jitted vmapped step over
members that differ in (sigma_w2, sigma_b2, seed); a member that goes non-finite is frozen.
"""
from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxinit import metrics
from jaxinit.models import cnn, deep, vit

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
GROUPS = ("all", "favoured", "others")


def model_module(spec):
    """The module implementing `spec` (deep MLP / residual MLP, CNN, ViT)."""
    return {deep.DeepSpec: deep, cnn.CNNSpec: cnn, vit.ViTSpec: vit}[type(spec)]


# --------------------------------------------------------------------------- data on the sphere
def to_sphere(x_BD: jax.Array) -> jax.Array:
    """Rescale each input to |x|^2 / d = 1 (the theory's q0_aa = 1), keeping its direction."""
    flat = x_BD.reshape(x_BD.shape[0], -1)
    rms = jnp.sqrt(jnp.mean(jnp.square(flat), axis=1, keepdims=True))
    return (flat / jnp.where(rms > 0, rms, 1.0)).reshape(x_BD.shape)


def input_overlaps(x_BD: jax.Array) -> np.ndarray:
    """c0_ab = x_a . x_b / d for all pairs a < b of sphere-normalised inputs (q0_ab of real data)."""
    flat = np.asarray(x_BD, np.float64).reshape(x_BD.shape[0], -1)
    gram = flat @ flat.T / flat.shape[1]
    return gram[np.triu_indices(len(flat), k=1)]


# --------------------------------------------------------------------------- one network at init
def layer_moments(hs) -> dict[str, jax.Array]:
    """Per layer Q, P, c and naive gamma from pre-activations (L, B, nodes) or a list of (B, nodes_l)."""
    layers = list(hs) if isinstance(hs, (list, tuple)) else [hs[i] for i in range(hs.shape[0])]
    stats = [metrics.igb_stats(h.T) for h in layers]
    return {k: jnp.stack([s[k] for s in stats]) for k in ("q", "p", "c", "gamma", "gamma_corr")}


def readout_c(features_BF: jax.Array, sigma_w2, sigma_b2) -> jax.Array:
    """Exact c of the logits over the readout's own weights, given the features it reads.

    E_W[z_a z_b] = sigma_w2 f_a.f_b / F + sigma_b2, so c_out = (sigma_w2 P_f + sigma_b2) / (sigma_w2 Q_f + sigma_b2).
    """
    q, p = metrics.gram_moments(features_BF.T)
    return (sigma_w2 * p + sigma_b2) / (sigma_w2 * q + sigma_b2)


def readout_kernel(features_BF: jax.Array, sigma_w2, sigma_b2) -> jax.Array:
    """K_ab = E_W[z_a z_b] = sigma_w2 f_a.f_b / F + sigma_b2: the logits' kernel over inputs, shape (B, B)."""
    return sigma_w2 * (features_BF @ features_BF.T) / features_BF.shape[1] + sigma_b2


def readout_rho(features_BF: jax.Array, sigma_w2, sigma_b2) -> jax.Array:
    """Mean over pairs a != b of the logit correlation rho_ab = K_ab / sqrt(K_aa K_bb) (`readout_kernel`).

    The argmax over classes ignores each input's scale, so f_max depends on correlations, not on the
    kernel's entries: c = P/Q (`readout_c`, a ratio of means) equals this mean only when every input
    has the same norm. Where norms vary across inputs (`readout_norm_cv` in `probe_network`; large for
    the ViT's features, see README) c underestimates the correlation that sets f_max.
    """
    kernel = readout_kernel(features_BF, sigma_w2, sigma_b2)
    inv_sd = jax.lax.rsqrt(jnp.diag(kernel))
    rho = kernel * inv_sd[:, None] * inv_sd[None, :]
    n = kernel.shape[0]
    return (jnp.sum(rho) - jnp.trace(rho)) / (n * (n - 1))


def fmax_gp(key: jax.Array, features_BF: jax.Array, sigma_w2, sigma_b2, n_classes: int,
            n_readouts: int) -> tuple[jax.Array, jax.Array]:
    """(binary, all-class) E f_max over `n_readouts` fresh readouts of one network's features.

    Given the features, the logits of each class are exactly N(0, K) over inputs (K = `readout_kernel`),
    independent across classes: this is the Gaussian-process prediction with the network's own
    (empirical) kernel, by sampling. The single-gamma IGB formula is the special case of an
    equicorrelated K at infinitely many inputs; the gap between the two measures what a heterogeneous
    kernel (input-dependent norms, pair-dependent correlations) and finitely many inputs add. Binary
    f_max uses the first two logits, as `probe_network` does.
    """
    n_features = features_BF.shape[1]
    k_w, k_b = jax.random.split(key)
    w_RFC = jax.random.normal(k_w, (n_readouts, n_features, n_classes)) * jnp.sqrt(sigma_w2 / n_features)
    b_RC = jax.random.normal(k_b, (n_readouts, n_classes)) * jnp.sqrt(sigma_b2)
    logits_RBC = jnp.einsum("bf,rfc->rbc", features_BF, w_RFC) + b_RC[:, None, :]
    binary = jax.vmap(lambda lg: metrics.f_max(lg[:, :2]))(logits_RBC)
    every = jax.vmap(metrics.f_max)(logits_RBC)
    return binary.mean(), every.mean()


def backprop_signals(params, x, labels_B, spec) -> jax.Array:
    """|delta_l|^2 / nodes per layer and sample for the binary head's cross-entropy, shape (L+1, B).

    delta_l = d loss_a / d h_l(a), taken as the gradient w.r.t. a zero shift added to h_l (each
    sample's loss depends on its own h only); the last row is the output layer, p - e_y.
    """
    mod = model_module(spec)
    _, hs = mod.apply(params, x, spec)
    shift = jax.tree.map(jnp.zeros_like, hs)

    def total_loss(shift):
        logits, _ = mod.apply(params, x, spec, shift)
        return optax.softmax_cross_entropy_with_integer_labels(logits[:, :2], labels_B).sum(), logits

    grads, logits = jax.grad(total_loss, has_aux=True)(shift)
    grads = list(grads) if isinstance(grads, (list, tuple)) else [grads[i] for i in range(grads.shape[0])]
    per_layer = [jnp.mean(jnp.square(g), axis=-1) for g in grads]
    out = jax.nn.softmax(logits[:, :2]) - jax.nn.one_hot(labels_B, 2)
    return jnp.stack(per_layer + [jnp.mean(jnp.square(out), axis=-1)])


def probe_network(z, sigma_w2, sigma_b2, x, labels_B, spec, with_grads: bool = True, gp_key=None,
                  gp_readouts: int = 0) -> dict[str, jax.Array]:
    """Everything measured on one network draw `z` scaled to (sigma_w2, sigma_b2); labels are binary.

    With `gp_readouts` > 0 also the GP prediction of f_max from this network's own features
    (`fmax_gp`, readouts drawn from `gp_key`) and the norm-free readout correlation (`readout_rho`).
    """
    mod = model_module(spec)
    params = mod.scale_draw(z, sigma_w2, sigma_b2)
    logits, hs = mod.apply(params, x, spec)
    h_last = hs[-1]
    out = layer_moments(hs)
    features = mod.readout_features(h_last, spec)
    out["c_readout"] = readout_c(features, sigma_w2, sigma_b2)
    out["fmax_2"] = metrics.f_max(logits[:, :2])
    out["fmax_all"] = metrics.f_max(logits)
    if gp_readouts:
        out["rho_readout"] = readout_rho(features, sigma_w2, sigma_b2)
        sq_norms = jnp.mean(jnp.square(features), axis=1)          # |f_a|^2 / F per input
        out["readout_norm_cv"] = jnp.std(sq_norms) / jnp.mean(sq_norms)
        out["fmax_2_gp"], out["fmax_all_gp"] = fmax_gp(gp_key, features, sigma_w2, sigma_b2, logits.shape[-1],
                                                        gp_readouts)
    favoured = jnp.argmax(metrics.class_fractions(logits[:, :2]))
    out["favoured"] = favoured
    out["favoured_share"] = jnp.mean(labels_B == favoured)
    if not with_grads:
        return out
    signals = backprop_signals(params, x, labels_B, spec)
    split = jax.vmap(lambda v: metrics.class_split_quantiles(v, labels_B, favoured, QUANTILES))(signals)
    out["grad_quantiles"] = jnp.stack([split[g] for g in GROUPS], axis=1)   # (L+1, 3, 5)
    return out


GP_STREAM = 0x6770   # fold_in tag of the GP readouts' key: the network draw keeps its own key


@partial(jax.jit, static_argnames=("spec", "with_grads", "gp_readouts"))
def probe_grid(key, sigma_w2_G, sigma_b2_G, x, labels_B, spec, with_grads: bool = True,
               gp_readouts: int = 0) -> dict[str, jax.Array]:
    """`probe_network` for one draw at every grid point (leading axis G); grid values are traced.

    The GP readouts are the same standard-normal draws at every grid point (scaled by it), as the
    network's own weights are.
    """
    z = model_module(spec).draw(key, spec)
    probe = partial(probe_network, spec=spec, with_grads=with_grads, gp_key=jax.random.fold_in(key, GP_STREAM),
                    gp_readouts=gp_readouts)
    return jax.vmap(probe, in_axes=(None, 0, 0, None, None))(z, sigma_w2_G, sigma_b2_G, x, labels_B)


def probe_draws(key, n_draws: int, sigma_w2_G, sigma_b2_G, x, labels_B, spec,
                with_grads: bool = True, gp_readouts: int = 0) -> dict[str, np.ndarray]:
    """Stack `probe_grid` over independent draws (fold_in(key, draw)): leading axes (n_draws, G)."""
    rows = [jax.device_get(probe_grid(jax.random.fold_in(key, i), sigma_w2_G, sigma_b2_G, x, labels_B, spec,
                                      with_grads, gp_readouts))
            for i in range(n_draws)]
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


# --------------------------------------------------------------------------- residual mean field
def residual_propagate(q_map, c_map, sigma_w2, sigma_b2, act: str, depth: int, q0=1.0, c0=0.0):
    """(q, c) per layer for `deep` with residual=True, from the plain maps of `theory.meanfield`.

    The branch W psi(h) + b is independent of h given the previous layer and has zero mean, so
    q(l+1) = q(l) + alpha^2 q_map(q(l)) and q_ab(l+1) = q_ab(l) + alpha^2 c_map(c(l), q(l)) q_map(q(l)),
    alpha^2 = 1 / depth; layer 1 is the linear embedding and the readout (layer depth + 1) is plain.
    """
    alpha2 = 1.0 / depth
    q = sigma_w2 * q0 + sigma_b2
    qab = sigma_w2 * q0 * c0 + sigma_b2
    qs, cs = [q], [qab / q]
    for _ in range(depth - 1):
        q_branch = q_map(q, sigma_w2, sigma_b2, act)
        qab = qab + alpha2 * c_map(qab / q, q, sigma_w2, sigma_b2, act) * q_branch
        q = q + alpha2 * q_branch
        qs.append(q)
        cs.append(qab / q)
    qs.append(q_map(q, sigma_w2, sigma_b2, act))
    cs.append(c_map(qab / q, q, sigma_w2, sigma_b2, act))
    return np.asarray(qs, float), np.asarray(cs, float)


# --------------------------------------------------------------------------- member-parallel training
class Members(NamedTuple):
    """One row per member; (sigma_w2, sigma_b2) are data, the seed picks the base draw."""
    sigma_w2: jax.Array
    sigma_b2: jax.Array
    seed: jax.Array


def init_members(key: jax.Array, members: Members, spec: deep.DeepSpec, opt: optax.GradientTransformation):
    """Params and optimizer state with a leading member axis; equal seeds share the base draw."""
    def one(sigma_w2, sigma_b2, seed):
        params, _ = deep.init(jax.random.fold_in(key, seed), sigma_w2, sigma_b2, spec)
        return params, opt.init(params)
    return jax.vmap(one)(members.sigma_w2, members.sigma_b2, members.seed)


def _loss(params, x, y, spec):
    logits, _ = deep.apply(params, x, spec)
    return metrics.cross_entropy(logits, y)


@partial(jax.jit, static_argnames=("spec", "opt"), donate_argnums=(0, 1))
def train_step(params, opt_state, alive, x, y, spec, opt):
    """One Adam step for every member on the same batch; a member whose update is non-finite freezes."""
    def one(p, s, ok):
        loss, g = jax.value_and_grad(_loss)(p, x, y, spec)
        updates, s_new = opt.update(g, s, p)
        p_new = optax.apply_updates(p, updates)
        finite = ok & jnp.isfinite(loss) & jnp.isfinite(optax.global_norm(p_new))
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)
        return keep(p_new, p), keep(s_new, s), finite
    return jax.vmap(one)(params, opt_state, alive)


@partial(jax.jit, static_argnames="spec")
def evaluate(params, x, y, spec):
    """(accuracy, f_max, loss) per member on (x, y)."""
    def one(p):
        logits, _ = deep.apply(p, x, spec)
        return metrics.accuracy(logits, y), metrics.f_max(logits), metrics.cross_entropy(logits, y)
    return jax.vmap(one)(params)


def eval_steps(n_steps: int, every: int, dense_until: int) -> list[int]:
    """Steps at which to evaluate: every step up to `dense_until` (bias is absorbed early), then every `every`."""
    return sorted(set(range(min(dense_until, n_steps) + 1)) | set(range(0, n_steps + 1, every)) | {n_steps})


def train_members(key: jax.Array, members: Members, spec: deep.DeepSpec, opt, data: dict, n_steps: int,
                  batch_size: int, steps_to_eval: list[int]) -> dict[str, np.ndarray]:
    """Train every member on the same batches; returns arrays (evals, members) of the measurements.

    `data` holds x_train, y_train, x_test, y_test (optionally x_train_eval, y_train_eval: the subset on which
    train accuracy is measured); batch indices come from fold_in(data_key, step).
    """
    init_key, data_key = jax.random.split(key)
    params, opt_state = init_members(init_key, members, spec, opt)
    alive = jnp.ones(members.seed.shape, bool)
    n_train = data["x_train"].shape[0]
    hist = {k: [] for k in ("step", "train_acc", "train_fmax", "train_loss", "test_acc", "test_fmax", "test_loss", "alive")}
    eval_set = set(steps_to_eval)
    for step in range(n_steps + 1):
        if step in eval_set:
            tr = evaluate(params, data.get("x_train_eval", data["x_train"]), data.get("y_train_eval", data["y_train"]), spec)
            te = evaluate(params, data["x_test"], data["y_test"], spec)
            for name, value in zip(("train_acc", "train_fmax", "train_loss", "test_acc", "test_fmax", "test_loss", "alive"),
                                   (*tr, *te, alive)):
                hist[name].append(value)
            hist["step"].append(step)
        if step == n_steps:
            break
        idx = jax.random.choice(jax.random.fold_in(data_key, step), n_train, (batch_size,), replace=False)
        params, opt_state, alive = train_step(params, opt_state, alive, data["x_train"][idx], data["y_train"][idx], spec, opt)
    return {k: np.asarray(jax.device_get(v)) for k, v in hist.items()}


def steps_to_target(steps_E: np.ndarray, acc_EM: np.ndarray, target: float) -> np.ndarray:
    """First evaluated step with accuracy >= target, per member; NaN if never reached."""
    hit = acc_EM >= target
    first = np.where(hit.any(axis=0), np.argmax(hit, axis=0), -1)
    return np.where(first >= 0, np.asarray(steps_E, float)[np.maximum(first, 0)], np.nan)


def summarize_quantiles(q: np.ndarray) -> dict[str, Any]:
    """Medians over draws of the (L+1, group, quantile) gradient quantiles, as nested lists for JSON."""
    return {g: np.nanmedian(q[..., i, :], axis=0).tolist() for i, g in enumerate(GROUPS)}
