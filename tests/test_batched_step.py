"""The batched step (`step.batched_train_step`): the gradient of the summed member losses, taken outside the vmap.

Its lowered program has batch-grouped weight-gradient convolutions where the vmap of the single-member step
has feature-grouped ones; per member it computes what the single-member step computes (losses, gradients,
BatchNorm statistics, the update); bf16 runs the convolutions and dots in bfloat16 with float32 state.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxinit import precision as precision_lib
from jaxinit.config import ModelConfig, OptConfig
from jaxinit.models import make_model
from jaxinit.optim import resolve_setting
from jaxinit.tools import hlo
from jaxinit.train import members as M
from jaxinit.train import step as S
from jaxinit.train.compiled import Compiler

SHAPE, N, B, K = (32, 32, 3), 32, 8, 3          # 32 x 32: every ResNet-9 feature map is larger than 3 x 3
# Float32: reduction order only. Measured (ResNet-9 x 0.0625, 3 members, one step, random inputs and labels),
# the largest difference of any leaf relative to that leaf's largest entry: losses 1.5e-7, gradients 1.8e-6,
# BatchNorm statistics 1.1e-7; whole-gradient relative difference 8e-7.
F32_RTOL = 2e-5
# bf16: the batched and the single-member programs accumulate in another order and round each convolution's
# output to bfloat16, so single roundings differ and propagate; at this width, on random labels, the
# gradient is small against its per-example terms and bf16's own error is large: the single-member bf16
# gradient differs from the float32 one by ~18 % (whole-gradient relative norm). Measured here: batched vs
# single bf16 17-24 % on gradients, losses 2.6e-3, BatchNorm statistics 8.8e-4 (largest leaf). Stated
# tolerance: gradients within twice bf16's own error, losses 1e-2, statistics 3e-3.
BF16_LOSS, BF16_STATS, BF16_GRAD_VS_OWN_ERROR = 1e-2, 3e-3, 2.0


def _model(width=0.0625):
    return make_model(ModelConfig(name="resnet9", width_mult=width), SHAPE, 10)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((N, *SHAPE)), jnp.float32)
    return S.StepData(x, jnp.asarray(rng.integers(0, 10, N), jnp.int32), jnp.int32(1))


def _lowered(form: str, precision: str = "float32", members: int = K) -> str:
    setting = resolve_setting("sgd", OptConfig())
    fns = Compiler().fns("r9", _model(), SHAPE, setting, N // B, 1, B, True, True, precision, batched_form=form)
    args = M.member_args([M.Member(i, "sgd", 0.5 + i, 0) for i in range(members)], setting, True)
    data = _data()
    state = jax.eval_shape(fns.init, args, data.x[:B])
    return fns.step.lower(state, args, jax.ShapeDtypeStruct((members, N), jnp.int32), data).as_text()


# --------------------------------------------------------------------------- the program
def test_weight_gradients_are_batch_grouped_not_feature_grouped():
    report = hlo.conv_report(_lowered("sum_grad"))
    grads = [c for c in hlo.convolutions(_lowered("sum_grad")) if c.weight_gradient]
    assert report["weight_gradient"] == 8 == len(grads)          # ResNet-9's eight convolutions
    assert report["weight_gradient_feature_grouped"] == 0
    assert all(c.batch_group_count == K for c in grads)
    old = hlo.conv_report(_lowered("vmap_grad"))                  # the vmap of the single-member step
    assert old["weight_gradient_feature_grouped"] == 8 and old["weight_gradient_batch_grouped"] == 0


def test_bf16_runs_every_convolution_and_dot_in_bfloat16():
    for form in ("sum_grad",):
        report = hlo.conv_report(_lowered(form, "bf16"))
        assert report["conv_dtypes"] == {"bf16": report["convolutions"]} and report["convolutions"] == 23
        assert report["dot_dtypes"] == {"bf16": 3}                # the head: forward, two gradients
    assert hlo.conv_report(_lowered("sum_grad", "float32"))["conv_dtypes"] == {"f32": 23}


def test_library_calls_are_read_from_compiled_text():
    text = ('%a = f32[2] custom-call(x), custom_call_target="__cudnn$convForward"\n'
            '%b = f32[2] custom-call(x), custom_call_target="__cudnn$convBackwardFilter"\n'
            '%c = f32[2] custom-call(x), custom_call_target="__cudnn$convForward"')
    assert hlo.library_calls(text) == {"__cudnn$convBackwardFilter": 1, "__cudnn$convForward": 2}
    assert hlo.library_calls("%d = f32[2] convolution(a, b)") == {}


# --------------------------------------------------------------------------- per-member equality
def _grab():
    """An 'optimizer' whose state after a step is the gradient it was given (updates 0)."""
    init = lambda params: jax.tree.map(jnp.zeros_like, params)
    update = lambda grads, state, params=None: (jax.tree.map(jnp.zeros_like, grads), grads)
    return optax.GradientTransformation(init, update)


def _members(precision: str):
    model = _model()
    setting = resolve_setting("sgd", OptConfig())
    args = M.member_args([M.Member(i, "sgd", s, i % 2) for i, s in enumerate((0.5, 1.0, 2.0))], setting, True)
    make_tx = lambda hyper: _grab()
    init, single, batched = precision_lib.bind(precision, model, S.init_member, S.train_step, S.batched_train_step)
    data = _data()
    state_S = jax.jit(jax.vmap(functools.partial(init, make_tx), in_axes=(0, None)))(args, data.x[:B])
    order_S = jnp.stack([jnp.roll(jnp.arange(N), 5 * m) for m in range(K)])
    one = jax.jit(functools.partial(single, make_tx, B, True))
    many = jax.jit(functools.partial(batched, make_tx, B, True))
    loop = [one(*jax.tree.map(lambda x: x[m], (state_S, args, order_S)), data) for m in range(K)]
    return loop, many(state_S, args, order_S, data)


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-30))


def _flat(tree) -> np.ndarray:
    return np.concatenate([np.asarray(x, np.float64).ravel() for x in jax.tree.leaves(tree)])


def _norm_rel(a, b) -> float:
    a, b = _flat(a), _flat(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def _worst(loop, state_S, loss_S) -> dict:
    """Largest relative difference (`_rel`, per leaf) between each member's single step and its slice of the
    batched step."""
    worst = {"loss": 0.0, "grad": 0.0, "stats": 0.0, "params": 0.0}
    for m, (state, loss) in enumerate(loop):
        mine = jax.tree.map(lambda x: x[m], state_S)
        worst["loss"] = max(worst["loss"], _rel(loss, loss_S[m]))
        for key, a, b in (("grad", state.opt_state, mine.opt_state), ("stats", state.model_state, mine.model_state),
                          ("params", state.params, mine.params)):
            for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
                worst[key] = max(worst[key], _rel(x, y))
        assert int(mine.step) == int(state.step) == 1 and not bool(mine.diverged)
    return worst


@pytest.fixture(scope="module")
def stepped():
    return {p: _members(p) for p in ("float32", "bf16")}


def test_batched_step_equals_the_single_member_step_per_member_in_float32(stepped):
    loop, (state_S, loss_S) = stepped["float32"]
    grads = jax.tree.leaves(loop[0][0].opt_state)
    assert grads and all(float(jnp.max(jnp.abs(g))) > 0 for g in grads)         # the gradients are there
    worst = _worst(loop, state_S, loss_S)
    assert all(v <= F32_RTOL for v in worst.values()), worst


def test_batched_bf16_step_is_within_bf16_rounding_of_the_single_member_step(stepped):
    loop, (state_S, loss_S) = stepped["bf16"]
    f32 = stepped["float32"][0]
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves((state_S.params, state_S.model_state,
                                                                 state_S.opt_state, loss_S)))
    worst = _worst(loop, state_S, loss_S)
    assert worst["loss"] <= BF16_LOSS and worst["stats"] <= BF16_STATS, worst
    for m, (state, _) in enumerate(loop):
        own_error = _norm_rel(f32[m][0].opt_state, state.opt_state)            # bf16 against float32
        batched = _norm_rel(state.opt_state, jax.tree.map(lambda x: x[m], state_S.opt_state))
        assert batched <= BF16_GRAD_VS_OWN_ERROR * own_error, (m, batched, own_error)


def test_a_diverging_member_leaves_the_others_of_a_batched_conv_step_alone():
    """A member whose forward pass overflows (sigma_w = 1e25) is flagged at step 0 and frozen; the others
    take the step they take without it (the same two members alone, batched)."""
    model = _model()
    setting = resolve_setting("sgd", OptConfig(lr=0.1))
    fns = Compiler().fns("r9", model, SHAPE, setting, N // B, 1, B, False, True, "float32")
    data = _data()
    run = lambda sigmas: fns.step(fns.init(M.member_args([M.Member(i, "sgd", s, 0) for i, s in enumerate(sigmas)],
                                                         setting, True), data.x[:B]),
                                  M.member_args([M.Member(i, "sgd", s, 0) for i, s in enumerate(sigmas)], setting,
                                                True), jnp.tile(jnp.arange(N), (len(sigmas), 1)), data)
    three, _ = run((0.5, 1e25, 2.0))
    two, _ = run((0.5, 2.0))
    assert [bool(d) for d in three.diverged] == [False, True, False] and int(three.diverged_step[1]) == 0
    for a, b in zip(jax.tree.leaves(three.params), jax.tree.leaves(two.params)):
        assert np.all(np.isfinite(a[np.array([0, 2])]))
        np.testing.assert_allclose(a[np.array([0, 2])], b, rtol=2e-5, atol=1e-7)
