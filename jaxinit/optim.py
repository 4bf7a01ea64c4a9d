r"""Optimizers and learning-rate schedules for the initialization-memory study.

Notation: ``g`` gradient, ``w`` parameter, ``eta_t = schedule(t)`` (t = 0, 1, ... counts steps),
``lambda`` = ``l2`` (coupled L2), ``wd`` = ``weight_decay`` (decoupled). Every kind first forms
``g~ = g + lambda w`` (coupled L2: it *is* a gradient, so it goes through momentum and Adam's
preconditioner) and finishes with ``- eta_t wd w`` (decoupled: bypasses the preconditioner).

    sgd       w <- w - eta_t (g~ + wd w)
    momentum  m <- mu m + g~;               w <- w - eta_t (m + wd w)            (heavy ball, PyTorch form)
    nesterov  m <- mu m + g~;               w <- w - eta_t (g~ + mu m + wd w)
    adam      m <- b1 m + (1-b1) g~;  v <- b2 v + (1-b2) g~^2;
              w <- w - eta_t (m_hat / (sqrt(v_hat) + eps) + wd w),  m_hat = m/(1-b1^(t+1)), v_hat likewise
    adamw     adam with lambda = 0, wd > 0        (Loshchilov & Hutter 2019, "Decoupled Weight Decay
              Regularization", in optax's form where the decay is multiplied by eta_t)
    muon      kernels except the classifier ("head"), G viewed as a (fan_in, fan_out) matrix
              (conv kernels (*window, C_in, C_out) -> (prod(window) C_in, C_out)):
                M <- beta M + (1-beta) G~;  U = beta M + (1-beta) G~  (Nesterov; U = M without);
                O = NS5(U) ~ U_svd V_svd^T  (quintic Newton-Schulz, coefficients of Jordan et al.);
                w <- w - eta_t (sqrt(max(1, fan_out/fan_in)) O + wd w)
              everything else (biases, BatchNorm gains/biases, the head and, by default, the first
              layer: the kernels that read the input, as in Jordan's reference) runs the auxiliary
              Adam with learning rate ``r eta_t`` and decoupled decay ``- r eta_t wd w`` (`MuonAux`,
              ``opt.muon_aux``), while T_L2 counts the Muon lr (the kernels' decay).
              No bias correction in the Nesterov mix (as the reference; optax.contrib.muon corrects it,
              which differs in the first steps: docs/forgetting.md, "Optimizers").
              (K. Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks";
              optax.contrib.muon.) The routing is by leaf name and the reshape by the leaf's own
              shape, so a muon transform must be built and applied per member (inside vmap), never on
              a member-stacked tree, where NS5 would orthogonalise all members as one matrix.

Muon's auxiliary Adam (``opt.muon_aux``). The reference is K. Jordan's ``MuonWithAuxAdam``
(github.com/KellerJordan/Muon, muon.py and its README's usage block, read at commit 857d1ad): a Muon
group ``lr=0.02, weight_decay=0.01`` and an Adam group ``lr=3e-4, betas=(0.9, 0.95), weight_decay=0.01``
with the class default ``eps=1e-10``; each group decays as ``p <- p (1 - lr wd)`` before its update (the
decay scaled by its own group's lr, as ``_finish`` does here), the Adam update bias-corrected with eps
outside the square root (optax.scale_by_adam's form).

    choice     aux lr / muon lr        aux b1, b2, eps             wd (both groups, unless opt sets it)
    current    0.05 (1e-3 at 0.02)     opt.b1, opt.b2, opt.eps     SETTINGS' 0 (no decay)
               (defaults 0.9, 0.999, 1e-8)
    reference  0.015 (3e-4 / 0.02)     0.9, 0.95, 1e-10            0.01

``current`` (the default; the Muon results of docs/forgetting.md use it) matches the reference only in
its structure (which leaves take Adam, momentum 0.95, Nesterov, NS5, the shape factor, decay scaled per
group); ``reference`` matches its hyperparameters as well. Both keep the muon setting's own lr (0.02, the
reference's) and take an explicit ``opt.weight_decay`` / ``opt.setting_weight_decay=muon=...`` over the 0.01.

L2 and weight decay act on every parameter (PyTorch's ``weight_decay`` convention): kernels, biases,
BatchNorm gains and shifts, and the classifier ("head").
Effective step: the heavy-ball kinds (momentum, nesterov) move by ``eta m`` with ``m`` summing past
gradients geometrically, so a steady gradient ``g`` moves ``w`` by ``eta g / (1 - mu)`` per step; their
clocks use ``eta / (1 - mu)`` (`HEAVY_BALL_KINDS`). Adam's and Muon's momenta are EMAs (the ``1 - beta``
is inside), their step is ``eta`` times a unit-scale direction. The clocks of docs/theory.md §6 are computed from the returned schedule:
``T_SGD = sum_t eta_t^2 / b``, ``T_L2 = lambda sum_t eta_t``, ``T_adapt = sum_t eta_t``.

Schedules (k = step, T = steps_per_epoch * epochs, W = warmup_epochs * steps_per_epoch, rounded):
``constant`` eta; ``step`` eta x 0.1 for k >= T/2 and x 0.01 for k >= 3T/4; ``cosine``
eta (1 + cos(pi k / T)) / 2 (0 at k = T); ``warmup_cosine`` eta (k+1)/W for k < W, then cosine from eta
to 0 over the remaining T - W steps.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxinit.config import ConfigError, OptConfig
from jaxinit.init import is_head, is_kernel

KINDS = ("sgd", "momentum", "nesterov", "adam", "adamw", "muon")
REGULARISED = ("sgd_l2", "adamw", "muon")      # the settings whose L2 / weight decay opt.weight_decay sets
HEAVY_BALL_KINDS = ("momentum", "nesterov")  # effective step eta / (1 - mu): the clocks use it
MUON_FIRST_LAYER = ("adam", "muon")          # where Muon sends the kernels that read the input
SCHEDULES = ("constant", "step", "cosine", "warmup_cosine")
DECOUPLED_KINDS = ("adamw", "muon")     # where opt.weight_decay means decoupled wd, not coupled L2
MUON_ADAM_LR_RATIO = 0.05               # muon's Adam branch lr / muon lr: 1e-3 at the default 0.02
NS_COEFFS = (3.4445, -4.7750, 2.0315)   # quintic Newton-Schulz coefficients (Jordan et al. 2024)
NS_STEPS = 5


class MuonAux(NamedTuple):
    """Muon's auxiliary Adam (module docstring); None = the setting's own value (from opt)."""
    lr_ratio: float                     # aux lr / muon lr
    b1: float | None
    b2: float | None
    eps: float | None
    weight_decay: float | None          # the muon setting's default decoupled decay, both groups


MUON_AUX: dict[str, MuonAux] = {
    "current": MuonAux(MUON_ADAM_LR_RATIO, None, None, None, None),
    "reference": MuonAux(0.015, 0.9, 0.95, 1e-10, 0.01),      # 3e-4 / 0.02; Jordan's MuonWithAuxAdam
}


@dataclass(frozen=True)
class OptSetting:
    """One optimizer setting as recorded in results (``label``) and built by `make_optimizer`."""
    label: str
    kind: str
    lr: float
    l2: float = 0.0                 # coupled L2, added to the gradient
    weight_decay: float = 0.0       # decoupled, - lr * wd * w
    momentum: float = 0.0           # heavy-ball / Nesterov mu; muon's beta
    nesterov: bool = False          # muon's look-ahead; for the heavy-ball family the kind decides
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    schedule: str = "constant"
    warmup_epochs: float = 0.0
    muon_first_layer: str = "adam"  # muon: the input layer's kernels go to the adam branch (or "muon")
    muon_aux: str = "current"       # muon: its auxiliary Adam's hyperparameters, a key of MUON_AUX


class Hyper(NamedTuple):
    """The hyperparameters of a setting that are traced per member (float32 scalars or arrays): a sweep
    over them runs one compiled program. `structure` is the rest, the compile key."""
    lr: Any
    l2: Any
    weight_decay: Any


def hyper_of(s: OptSetting) -> Hyper:
    return Hyper(s.lr, s.l2, s.weight_decay)


def structure(s: OptSetting) -> OptSetting:
    """``s`` without its traced values (`Hyper`) and label: settings that differ only there share one
    compiled step. Whether L2 / weight decay is present at all stays (it adds a transform)."""
    return dataclasses.replace(s, label="", lr=1.0, l2=float(s.l2 > 0), weight_decay=float(s.weight_decay > 0))


# CPU-scale starting points (docs/forgetting.md); muon momentum 0.95 is Jordan et al.'s and is not taken
# from opt.momentum (that one is the heavy-ball mu).
SETTINGS: dict[str, OptSetting] = {s.label: s for s in (
    OptSetting("sgd", "sgd", lr=0.05),
    OptSetting("momentum", "momentum", lr=0.01, momentum=0.9),
    OptSetting("nesterov", "nesterov", lr=0.01, momentum=0.9, nesterov=True),
    OptSetting("adam", "adam", lr=1e-3),
    OptSetting("adamw", "adamw", lr=1e-3, weight_decay=5e-2),
    OptSetting("muon", "muon", lr=0.02, momentum=0.95, nesterov=True),
    OptSetting("sgd_l2", "sgd", lr=0.1, l2=2e-2),
)}


# --------------------------------------------------------------------------- settings
def resolve_setting(label: str, opt: OptConfig) -> OptSetting:
    """The registry setting ``label`` with `OptConfig` applied.

    lr comes from (first match wins) ``opt.lr`` (all settings), ``opt.setting_lr`` entries
    ``"label=value"``, then `SETTINGS`. The decay exists only for the regularised settings
    (`REGULARISED`: the coupled ``l2`` of sgd_l2, the decoupled ``weight_decay`` of adamw and muon) and
    comes from ``opt.weight_decay``, ``opt.setting_weight_decay``, then `SETTINGS`; sgd, momentum,
    nesterov and adam are unregularised by definition (a decay entry for them is an error). schedule, warmup_epochs, b1, b2, eps always come from ``opt``,
    and momentum too for the heavy-ball kinds (muon keeps its own beta). ``opt.muon_aux="reference"``
    makes muon's own decay 0.01 (`MUON_AUX`; explicit opt entries still win).
    """
    check_muon_aux(opt.muon_aux)
    if label not in SETTINGS:
        raise ConfigError(f"unknown optimizer setting {label!r}; known: {', '.join(SETTINGS)}")
    base = SETTINGS[label]
    decay_field = "weight_decay" if base.kind in DECOUPLED_KINDS else "l2"
    lr = _first(opt.lr, _entries(opt.setting_lr, "--opt.setting_lr").get(label), base.lr)
    if opt.weight_decay is not None and not _finite_nonneg(opt.weight_decay):
        raise ConfigError(f"--opt.weight_decay: L2 / weight decay must be finite and >= 0, got {opt.weight_decay}")
    decays = _entries(opt.setting_weight_decay, "--opt.setting_weight_decay")
    unregularised = [k for k in decays if k not in REGULARISED]
    if unregularised:
        raise ConfigError(f"--opt.setting_weight_decay: {unregularised[0]} has no L2 / weight decay by definition; "
                          f"use one of {', '.join(REGULARISED)}")
    own = getattr(base, decay_field)
    if base.kind == "muon" and MUON_AUX[opt.muon_aux].weight_decay is not None:
        own = MUON_AUX[opt.muon_aux].weight_decay
    decay = _first(opt.weight_decay, decays.get(label), own) if label in REGULARISED else own
    fields = dict(lr=lr, schedule=opt.schedule, warmup_epochs=opt.warmup_epochs, b1=opt.b1, b2=opt.b2, eps=opt.eps,
                  muon_first_layer=opt.muon_first_layer, muon_aux=opt.muon_aux)
    fields[decay_field] = decay
    if base.kind in ("momentum", "nesterov"):
        fields["momentum"] = opt.momentum
    setting = dataclasses.replace(base, **fields)
    check_setting(setting)
    return setting


def check_setting(s: OptSetting) -> None:
    """Raise `ConfigError` (one line) for values that make no sense."""
    bad = None
    if s.kind not in KINDS:
        bad = f"kind must be one of {'|'.join(KINDS)}, got {s.kind!r}"
    elif not (math.isfinite(s.lr) and s.lr > 0):
        bad = f"lr must be finite and > 0, got {s.lr}"
    elif not (_finite_nonneg(s.l2) and _finite_nonneg(s.weight_decay)):
        bad = f"L2 / weight decay must be finite and >= 0, got l2={s.l2}, weight_decay={s.weight_decay}"
    elif not all(0 <= v < 1 for v in (s.momentum, s.b1, s.b2)):
        bad = f"momentum, b1, b2 must lie in [0, 1), got {s.momentum}, {s.b1}, {s.b2}"
    elif not (math.isfinite(s.eps) and s.eps > 0):
        bad = f"eps must be finite and > 0, got {s.eps}"
    elif s.schedule not in SCHEDULES:
        bad = f"schedule must be one of {'|'.join(SCHEDULES)}, got {s.schedule!r}"
    elif not _finite_nonneg(s.warmup_epochs):
        bad = f"warmup_epochs must be finite and >= 0, got {s.warmup_epochs}"
    elif s.warmup_epochs > 0 and s.schedule != "warmup_cosine":
        bad = f"warmup_epochs={s.warmup_epochs} needs schedule=warmup_cosine, got {s.schedule!r}"
    elif s.kind in ("momentum", "nesterov") and s.nesterov != (s.kind == "nesterov"):
        bad = f"kind {s.kind!r} contradicts nesterov={s.nesterov}"
    elif s.muon_first_layer not in MUON_FIRST_LAYER:
        bad = f"muon_first_layer must be one of {'|'.join(MUON_FIRST_LAYER)}, got {s.muon_first_layer!r}"
    elif s.muon_aux not in MUON_AUX:
        bad = f"muon_aux must be one of {'|'.join(MUON_AUX)}, got {s.muon_aux!r}"
    elif not all(math.isfinite(v) and abs(v) <= 3.4e38 for v in (s.lr, s.l2, s.weight_decay)):
        bad = f"lr, L2 and weight decay must be finite in float32, got {s.lr}, {s.l2}, {s.weight_decay}"
    if bad:
        raise ConfigError(f"optimizer setting {s.label!r}: {bad}")


def check_muon_aux(name: str) -> str:
    if name not in MUON_AUX:
        raise ConfigError(f"--opt.muon_aux must be one of {'|'.join(MUON_AUX)}, got {name!r}")
    return name


def _entries(items: tuple[str, ...], flag: str) -> dict[str, float]:
    """Parse ``("label=value", ...)``: known labels, each once, finite values >= 0."""
    out = {}
    for item in items:
        label, sep, text = item.partition("=")
        label = label.strip()
        if not sep or label not in SETTINGS or label in out:
            why = "expected label=value" if not sep else ("unknown label" if label not in SETTINGS else "repeated label")
            raise ConfigError(f"{flag}: {why} in {item!r} (labels: {', '.join(SETTINGS)})")
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"{flag}: cannot parse {text.strip()!r} as a number in {item!r}") from None
        if not _finite_nonneg(value):
            raise ConfigError(f"{flag}: value must be finite and >= 0 in {item!r}")
        out[label] = value
    return out


def _first(*values):
    return next(v for v in values if v is not None)


def _finite_nonneg(v: float) -> bool:
    return math.isfinite(v) and v >= 0


# --------------------------------------------------------------------------- schedules
def make_schedule(name: str, lr: float, steps_per_epoch: int, epochs: int,
                  warmup_epochs: float = 0.0) -> optax.Schedule:
    """Per-step learning rate ``count -> eta``; see the module docstring for the formulas."""
    total = steps_per_epoch * epochs
    t_end = max(total, 1)
    if name == "constant":
        return lambda count: jnp.full((), lr, jnp.float32)
    if name == "step":
        return lambda count: lr * jnp.where(count >= total / 2, 0.1, 1.0) * jnp.where(count >= 3 * total / 4, 0.1, 1.0)
    if name == "cosine":
        return lambda count: _cosine(lr, count, t_end)
    if name == "warmup_cosine":
        warm = min(int(round(warmup_epochs * steps_per_epoch)), total)
        if warm == 0:
            return lambda count: _cosine(lr, count, t_end)
        return lambda count: jnp.where(count < warm, lr * (count + 1) / warm,
                                       _cosine(lr, count - warm, max(total - warm, 1)))
    raise ConfigError(f"schedule must be one of {'|'.join(SCHEDULES)}, got {name!r}")


def _cosine(lr: float, count, length: int):
    progress = jnp.clip(count / length, 0.0, 1.0)
    return lr * 0.5 * (1.0 + jnp.cos(jnp.pi * progress))


# --------------------------------------------------------------------------- muon
def newton_schulz(g: jax.Array, steps: int = NS_STEPS, eps: float = 1e-7) -> jax.Array:
    """Approximate ``U V^T`` of ``g = U S V^T`` (singular values land in roughly [0.7, 1.2]).

    Quintic iteration ``X <- a X + (b A + c A^2) X``, ``A = X X^T``, from ``X = g / |g|_F``; it runs on
    the wide orientation so ``A`` is the smaller Gram matrix. Unrolled: composes well with vmap.
    """
    x = g / (jnp.linalg.norm(g) + eps)
    wide = x.shape[0] <= x.shape[1]
    x = x if wide else x.T
    a, b, c = NS_COEFFS
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x if wide else x.T


def orthogonalize_kernel(u: jax.Array) -> jax.Array:
    """NS5 of a kernel viewed as (fan_in, fan_out), times Muon's ``sqrt(max(1, fan_out / fan_in))``."""
    mat = u.reshape(-1, u.shape[-1])
    fan_in, fan_out = mat.shape
    return (newton_schulz(mat) * math.sqrt(max(1.0, fan_out / fan_in))).reshape(u.shape)


class MuonState(NamedTuple):
    mu: optax.Updates     # momentum buffer M, one per routed kernel


def scale_by_muon(beta: float = 0.95, nesterov: bool = True) -> optax.GradientTransformation:
    """Muon's direction for kernels (no learning rate): EMA momentum, optional look-ahead, NS5.

    Args:
      beta: momentum EMA coefficient.
      nesterov: use ``beta M + (1 - beta) G`` (look-ahead) instead of ``M``.
    Returns:
      A `GradientTransformation` whose updates are orthogonalised kernels (unit-ish singular values).
    """
    def init_fn(params):
        return MuonState(mu=jax.tree.map(jnp.zeros_like, params))

    def update_fn(updates, state, params=None):
        del params
        ema = lambda m, g: beta * m + (1 - beta) * g
        mu = jax.tree.map(ema, state.mu, updates)
        direction = jax.tree.map(ema, mu, updates) if nesterov else mu
        return jax.tree.map(orthogonalize_kernel, direction), MuonState(mu=mu)

    return optax.GradientTransformation(init_fn, update_fn)


def reads_input(leaf: Any, input_shape: tuple | None) -> bool:
    """A kernel that reads the network's input directly: its in-dimension is the input's channels
    (a conv kernel, window > 1 axes) or the flattened input size (a dense kernel)."""
    if input_shape is None:
        return False
    shape = jnp.shape(leaf)
    n_in = input_shape[-1] if len(shape) > 2 else math.prod(input_shape)
    return len(shape) >= 2 and shape[-2] == n_in


def muon_labels(params: Any, input_shape: tuple | None = None, first_layer: str = "muon") -> Any:
    """'muon' for kernels with ndim >= 2 outside the classifier sub-tree ``head`` (and, with
    ``first_layer="adam"``, outside the input layer, see `reads_input`); 'adam' otherwise."""
    def label(path, leaf):
        in_head = is_head(path)
        first = first_layer == "adam" and reads_input(leaf, input_shape)
        return "muon" if is_kernel(path) and not in_head and not first and jnp.ndim(leaf) >= 2 else "adam"
    return jax.tree_util.tree_map_with_path(label, params)


# --------------------------------------------------------------------------- builder
def make_optimizer(setting: OptSetting, steps_per_epoch: int, epochs: int, input_shape: tuple | None = None,
                   hyper: Hyper | None = None) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """``(transform, schedule)``; call ``transform.update(grads, state, params)`` (params are needed for
    L2 and weight decay), one member at a time (vmap it).

    ``hyper`` (`Hyper`, may be traced) replaces the setting's lr, l2 and weight decay values, the way
    ``optax.inject_hyperparams`` would, without a state of its own: the transform is built inside the
    member's jitted function, so its checkpointed state is that of the plain transform. The setting
    (`structure`) decides only which transforms exist (a coupled L2 term where ``setting.l2 > 0``)."""
    check_setting(setting)
    if steps_per_epoch < 1 or epochs < 0:
        raise ConfigError(f"make_optimizer needs steps_per_epoch >= 1 and epochs >= 0, got {steps_per_epoch}, {epochs}")
    hyper = hyper_of(setting) if hyper is None else hyper
    schedule = make_schedule(setting.schedule, hyper.lr, steps_per_epoch, epochs, setting.warmup_epochs)
    coupled = [optax.add_decayed_weights(hyper.l2)] if setting.l2 > 0 else []
    if setting.kind == "muon":
        aux = MUON_AUX[setting.muon_aux]
        adam_schedule = lambda count: aux.lr_ratio * schedule(count)
        aux_adam = optax.scale_by_adam(b1=_first(aux.b1, setting.b1), b2=_first(aux.b2, setting.b2),
                                       eps=_first(aux.eps, setting.eps))
        core = [optax.partition({"muon": _finish(scale_by_muon(setting.momentum, setting.nesterov), setting, schedule,
                                                 hyper.weight_decay),
                                 "adam": _finish(aux_adam, setting, adam_schedule, hyper.weight_decay)},
                                functools.partial(muon_labels, input_shape=input_shape,
                                                  first_layer=setting.muon_first_layer))]
    else:
        core = [_finish(_direction(setting.kind, setting), setting, schedule, hyper.weight_decay)]
    return optax.chain(*coupled, *core), schedule


def _direction(kind: str, s: OptSetting) -> optax.GradientTransformation:
    if kind == "sgd":
        return optax.identity()
    if kind in ("momentum", "nesterov"):
        return optax.trace(decay=s.momentum, nesterov=kind == "nesterov")
    return optax.scale_by_adam(b1=s.b1, b2=s.b2, eps=s.eps)      # adam, adamw


def _finish(direction, s: OptSetting, schedule: Callable, weight_decay) -> optax.GradientTransformation:
    """direction -> (+ wd w, decoupled) -> x (-eta_t)."""
    decoupled = [optax.add_decayed_weights(weight_decay)] if s.weight_decay > 0 else []
    return optax.chain(direction, *decoupled, optax.scale_by_learning_rate(schedule))


__all__ = ["OptSetting", "Hyper", "hyper_of", "structure", "SETTINGS", "KINDS", "SCHEDULES", "resolve_setting", "check_setting",
           "make_schedule", "make_optimizer", "scale_by_muon", "newton_schulz", "orthogonalize_kernel",
           "muon_labels", "reads_input", "MUON_ADAM_LR_RATIO", "MUON_AUX", "MuonAux", "check_muon_aux",
           "HEAVY_BALL_KINDS"]
