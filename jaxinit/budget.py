"""Sizes checked before a run allocates anything: a config that cannot fit is one line, not an OOM kill.

Every estimate is a lower bound (only arrays a run surely holds at once, counted at their smallest), and
it is compared with the machine's physical memory (`machine_memory`), so a refusal is always right and
no config that fits is refused; a config that passes may still not fit. Only validation calls these.
"""
from __future__ import annotations

import math
import os

from jaxinit.errors import ConfigError

INT32_MAX = 2**31 - 1              # step counters, member and example counts are int32

GB = 1e9
# mnist1d's generator makes ~3,000 samples/s on one core of the 2-core CPU (measured: 20,000 in 7.5 s),
# so 10**6 samples are ~6 min; more would grind for hours before the first step.
MNIST1D_MAX_SAMPLES = 10**6
SYNTH_TRAIN_FRACTION = 0.8          # mnist1d's own split; digits / gaussian carve 20 % as test
INPUT_SHAPES = {"digits": (8, 8, 1), "mnist1d": (40, 1), "mnist": (28, 28, 1), "fashion_mnist": (28, 28, 1),
                "cifar10": (32, 32, 3), "cifar100": (32, 32, 3)}
TRAIN_POOLS = {"digits": 1797 - int(0.2 * 1797), "mnist": 60_000, "fashion_mnist": 60_000, "cifar10": 50_000,
               "cifar100": 50_000}
# Per member: parameters, gradients and at least one optimizer buffer, float32.
MEMBER_COPIES = 3
PHASE_ARRAYS = 7                    # float64 outputs per panel that theory.phase.phase_diagram returns


def machine_memory() -> int | None:
    """Physical memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(what: str, need: float, advice: str) -> None:
    """`ConfigError` if ``need`` bytes exceed the machine's memory."""
    have = machine_memory()
    if have and need > have:
        raise ConfigError(f"{what} needs at least {need / GB:.3g} GB, more than this machine's {have / GB:.3g} GB "
                          f"of memory; {advice}")


# --------------------------------------------------------------------------- data
def input_shape(data) -> tuple[int, ...]:
    """One example's shape for `DataConfig` ``data`` (gaussian: its dim)."""
    return (data.dim,) if data.name == "gaussian" else INPUT_SHAPES.get(data.name, (1,))


def n_classes(data) -> int:
    if data.binarize:
        return 2
    return {"gaussian": data.n_classes, "cifar100": 100}.get(data.name, 10)


def train_pool(data) -> int:
    """At most this many training examples (the split carves validation from it)."""
    if data.n_train > 0:
        return data.n_train
    if data.name in ("mnist1d", "gaussian"):
        return max(1, int(SYNTH_TRAIN_FRACTION * data.n_samples))
    return TRAIN_POOLS.get(data.name, 1)


def check_data(data) -> None:
    """Synthetic sets: a generation that would grind for hours, or arrays larger than memory."""
    if data.name == "mnist1d" and data.n_samples > MNIST1D_MAX_SAMPLES:
        raise ConfigError(f"--data.n_samples={data.n_samples}: mnist1d generates ~3,000 samples/s, so more than "
                          f"{MNIST1D_MAX_SAMPLES:,} would take hours; use fewer")
    if data.name in ("mnist1d", "gaussian"):
        # generated in float64, then a float32 copy: 12 bytes per input value
        need = data.n_samples * math.prod(input_shape(data)) * 12
        check_fits(f"--data.name={data.name} --data.n_samples={data.n_samples}", need, "use fewer samples")


# --------------------------------------------------------------------------- members
def _channels(c: int, width_mult: float) -> int:
    return max(1, int(round(c * width_mult)))     # jaxinit.models.layers.scaled_channels, without flax


def param_lower_bound(model, shape: tuple[int, ...], classes: int) -> int:
    """Kernel entries a `ModelConfig` surely has (exact for the MLP, the largest layers of the others)."""
    w = max(model.width, 1)
    if model.name == "mlp":
        return math.prod(shape) * w + max(model.depth - 1, 0) * w * w + w * classes
    if model.name == "resnet9":
        c = _channels(512, model.width_mult)
        return 9 * c * c + c * classes
    if model.name.startswith("resnet"):
        c = _channels(64, model.width_mult)
        return 9 * c * c + c * classes
    return max(model.depth, 1) * w * w + w * classes     # vit / cnn: one w x w matrix per block


def check_members(members: int, model, data) -> None:
    """Every member's parameters, gradients and optimizer state at once (chunks keep all members' states)."""
    params = param_lower_bound(model, input_shape(data), n_classes(data))
    need = members * params * 4 * MEMBER_COPIES
    check_fits(f"{members:,} members of {params:,} parameters", need,
               "use fewer --sweep.seeds / --sweep.sigma_w / --sweep.optimizers or a smaller model")


def check_steps(epochs: int, batch_size: int, data) -> None:
    """The step counter is an int32 (`np.int32(step)`, fold_in): epochs x steps per epoch must fit."""
    per_epoch = -(-train_pool(data) // max(batch_size, 1))
    if epochs * per_epoch > INT32_MAX:
        raise ConfigError(f"--train.epochs={epochs}: {epochs} x {per_epoch} steps per epoch exceeds 2**31 - 1, "
                          f"the int32 step counter; use fewer epochs")


# --------------------------------------------------------------------------- the IGB and joined studies
def mlp_params(n_in: int, width: int, depth: int, classes: int) -> int:
    """Kernel entries of a deep MLP (`jaxinit.models.deep.DeepMLP`: ``depth`` hidden layers of ``width``)."""
    return n_in * width + max(depth - 1, 0) * width * width + width * classes


def members_at_once(strategy: str, chunk: int, members: int) -> int:
    """Members one compiled call holds (`jaxinit.train.members`): all (vmap), a chunk, or one (sequential)."""
    return {"sequential": 1, "chunked": min(max(chunk, 1), members)}.get(strategy, members)


def check_batch(batch_size: int, n_train: int, key: str = "train.batch_size") -> None:
    """Batches are drawn without replacement from the training split (`jaxinit.train.step.shared_order`): at most
    its size."""
    if batch_size > n_train:
        raise ConfigError(f"--{key}={batch_size} exceeds the {n_train:,} training examples (batches are drawn without "
                          f"replacement); use at most {n_train:,}")


def check_gram(splits: dict[str, int], at_once: int) -> None:
    """The joined study's evaluation measures c and gamma from the Gram matrix of a whole split (float64 inside,
    `theory.igb.estimate`), one per member of a compiled call: ``at_once`` x n^2 x 8 bytes for the largest split
    (``splits``: its flag or name -> inputs)."""
    key, n = max(splits.items(), key=lambda kv: kv[1])
    check_fits(f"evaluating {at_once:,} member(s) at once on {n:,} inputs ({key})", at_once * n * n * 8.0,
               f"use fewer inputs ({key}) or --train.strategy=chunked with a small --train.chunk")


def check_cases(cases: dict, *, n_in: int, n_classes: int, rates, select_seeds: int) -> None:
    """The members of each stage (selection: every point x rate x selection seed where a case has several rates;
    reported: every point's seeds) hold their parameters, gradients and optimizer state at once. ``cases``: the
    studies' `jaxinit.shared.phases.Case` by name; ``rates(optimizer)``: the rates its selection tries."""
    def need(members_of) -> float:
        return sum(members_of(c) * mlp_params(n_in, c.width, c.depth, n_classes) for c in cases.values()) * 4.0 \
            * MEMBER_COPIES
    reported = need(lambda c: int(sum(c.points["seeds"])))
    selection = need(lambda c: len(c.points["role"]) * len(rates(c.optimizer)) * select_seeds
                     if len(rates(c.optimizer)) > 1 else 0)
    check_fits("training every case's reported members", reported, "use fewer --phases.seeds, points or cases")
    check_fits("training every case's selection members", selection, "use fewer --opt.select_seeds, rates or points")


# --------------------------------------------------------------------------- theory grids
def check_phase_grid(key: str, n: int, panels: int) -> None:
    """A phase diagram of ``n`` x ``n`` points: `PHASE_ARRAYS` float64 arrays per panel, all kept."""
    need = n * n * 8 * (PHASE_ARRAYS * max(panels, 1) + 2)   # + the two meshgrid axes
    check_fits(f"--{key}={n} ({n}^2 points x {panels} panel(s))", need, f"use a smaller --{key}")
