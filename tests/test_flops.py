"""jaxinit.tools.flops: FLOPs from the traced program's shapes, the same on every backend; equal to XLA's CPU
cost analysis where XLA keeps the convolutions (a CPU); ResNet-9's member step at b = 128 is 253.8 GFLOP."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.config import ModelConfig, OptConfig
from jaxinit.models import make_model
from jaxinit.optim import resolve_setting
from jaxinit.tools import flops
from jaxinit.tools.projection import MEMBER_STEP_FLOP


def test_valid_taps_count_only_real_input_elements():
    assert flops.valid_taps(32, 32, 3, 1, 1, 1, 1) == 3 * 32 - 2          # SAME 3 x 3: the border loses one tap
    assert flops.valid_taps(4, 4, 1, 1, 0, 1, 1) == 4
    assert flops.valid_taps(8, 4, 3, 2, 1, 1, 1) == 11                    # stride 2: 3 taps x 4 outputs - 1 pad
    assert flops.valid_taps(4, 7, 3, 1, 2, 2, 1) == 10                    # dilated input: holes do not count


def test_a_dense_layer_and_a_convolution_by_hand():
    w = jax.ShapeDtypeStruct((16, 8), jnp.float32)
    x = jax.ShapeDtypeStruct((4, 16), jnp.float32)
    assert flops.function_flops(lambda x, w: x @ w, x, w)["flops"] == 2 * 4 * 16 * 8
    img = jax.ShapeDtypeStruct((2, 8, 8, 3), jnp.float32)
    k = jax.ShapeDtypeStruct((3, 3, 3, 5), jnp.float32)
    conv = lambda a, b: jax.lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    assert flops.function_flops(conv, img, k)["flops"] == 2 * 2 * 3 * 5 * (3 * 8 - 2) ** 2
    r = flops.function_flops(lambda a: jnp.exp(a).sum(), img)
    assert r["flops"] == 2 * 8 * 8 * 3 - 1 and r["transcendentals"] == 2 * 8 * 8 * 3


@pytest.mark.parametrize("setting, rel", [("sgd", 0.01), ("muon", 0.01)])
def test_resnet9_member_step_at_b128_is_the_stated_count(setting, rel):
    model = make_model(ModelConfig(name="resnet9"), (32, 32, 3), 10)
    r = flops.member_step_flops(model, resolve_setting(setting, OptConfig()), (32, 32, 3), 128, augment=True)
    assert r["flops"] == pytest.approx(MEMBER_STEP_FLOP[setting], rel=rel)
    assert r["by_primitive"]["conv_general_dilated"] / r["flops"] > 0.75     # the convolutions are the work
    assert r["loops_unknown"] == 0


def _xla_flops(lowered) -> float:
    analysis = lowered.cost_analysis()
    return (analysis[0] if isinstance(analysis, (list, tuple)) else analysis)["flops"]


@pytest.mark.parametrize("lhs, rhs, kw", [
    ((2, 9, 9, 6), (3, 3, 6, 4), dict(window_strides=(2, 2), padding=((1, 1), (1, 1)))),
    ((2, 9, 9, 6), (3, 3, 3, 4), dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    ((4, 9, 9, 6), (3, 3, 6, 4), dict(window_strides=(1, 1), padding=((2, 1), (0, 2)), batch_group_count=2)),
    ((2, 5, 5, 6), (3, 3, 6, 4), dict(window_strides=(1, 1), padding=((2, 2), (2, 2)), lhs_dilation=(2, 2),
                                      rhs_dilation=(1, 2))),
])
def test_convolutions_count_what_xla_counts(lhs, rhs, kw):
    if jax.default_backend() != "cpu":
        pytest.skip("compared with XLA's count on a CPU, where the convolutions stay convolutions")
    f = lambda a, b: jax.lax.conv_general_dilated(a, b, dimension_numbers=("NHWC", "HWIO", "NHWC"), **kw)
    args = (jax.ShapeDtypeStruct(lhs, jnp.float32), jax.ShapeDtypeStruct(rhs, jnp.float32))
    assert flops.function_flops(f, *args)["flops"] == _xla_flops(jax.jit(f).lower(*args))


def test_the_count_is_xla_cpus_cost_analysis_of_the_same_program():
    if jax.default_backend() != "cpu":
        pytest.skip("compared with XLA's count on a CPU, where the convolutions stay convolutions")
    model = make_model(ModelConfig(name="resnet9", width_mult=0.0625), (16, 16, 3), 10)
    setting = resolve_setting("adam", OptConfig())
    from jaxinit.train import members as M
    from jaxinit.train.compiled import Compiler
    from jaxinit.train.step import StepData
    fns = Compiler().fns("r9", model, (16, 16, 3), setting, 2, 1, 8, False, False)
    args = M.member_args([M.Member(0, "adam", 1.0, 0)], setting, False)
    x = jnp.zeros((16, 16, 16, 3))
    state = jax.eval_shape(fns.init, args, x[:8])
    call = (state, args, jnp.arange(16), StepData(x, jnp.zeros((16,), jnp.int32), jnp.int32(0)))
    ours = flops.function_flops(fns.step, *call)["flops"]
    assert ours == pytest.approx(_xla_flops(fns.step.lower(*call)), rel=0.01)    # measured: 0.3 % apart
    assert ours == pytest.approx(flops.member_step_flops(model, setting, (16, 16, 3), 8, n_train=16)["flops"])


def test_the_batched_step_counts_members_times_one():
    from jaxinit.train import members as M
    from jaxinit.train.compiled import Compiler
    from jaxinit.train.step import StepData
    model = make_model(ModelConfig(name="resnet9", width_mult=0.0625), (16, 16, 3), 10)
    setting = resolve_setting("sgd", OptConfig())
    fns = Compiler().fns("r9", model, (16, 16, 3), setting, 2, 1, 8, False, True)
    args = M.member_args([M.Member(i, "sgd", 1.0 + i, 0) for i in range(3)], setting, True)
    x = jax.ShapeDtypeStruct((16, 16, 16, 3), np.float32)
    state = jax.eval_shape(fns.init, args, jax.ShapeDtypeStruct((8, 16, 16, 3), np.float32))
    data = StepData(x, jax.ShapeDtypeStruct((16,), np.int32), jax.ShapeDtypeStruct((), np.int32))
    batched = flops.function_flops(fns.step, state, args, jax.ShapeDtypeStruct((3, 16), np.int32), data)["flops"]
    one = flops.member_step_flops(model, setting, (16, 16, 3), 8, n_train=16)["flops"]
    assert batched == pytest.approx(3 * one, rel=5e-3)
