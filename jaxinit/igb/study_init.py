"""`probe_init(cfg) -> Result`: every (input set, network) case at init against the theory, in memory.

For every (sigma_w2, sigma_b2) of the grid (vmapped, one draw shared by the grid) and ``probe.n_draws``
draws: per-layer c, gamma and gamma_corr against `theory.meanfield.propagate`; f_max of a binary head
(the first two logits) and of all ten logits against `theory.igb` (at infinitely many inputs, and
the same model on the n inputs probed); per-layer quantiles of |delta_l|^2 split by the favoured class
(binary head, labels = parity); then the finite-width sweep (`jaxinit.igb.width`). Inputs are rescaled
to |x|^2/d = 1 (Gaussian, or real data subsets drawn over all their classes: mnist's ten digits).
Nothing is written: ``on_case(name, arrays)`` (e.g. `jaxinit.shared.sink.saver`) receives each finished
case, ``cached`` holds cases to reuse (``--resume``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

import jax
import numpy as np

from jaxinit.jsonsafe import to_json
from jaxinit.result import Result
from jaxinit.errors import ConfigError
from jaxinit.igb import predict, probe, width
from jaxinit.igb import results as results_schema
from jaxinit.igb.config_init import INPUTS, IGBInitConfig, ModelsConfig
from jaxinit.models.cnn import CNN
from jaxinit.models.deep import DeepMLP
from jaxinit.models.vit import ViT
from jaxinit.shared import nets, sink

WIDTH_CASE = "width"   # name of the finite-width sweep among the results


@dataclass(frozen=True)
class Case:
    """One network of the study: its name (``mlp_tanh``, ``vit``, ...), model kind and `Net`."""
    name: str
    model: str
    net: nets.Net
    depth: int
    residual: bool = False

    @property
    def is_mlp(self) -> bool:
        return self.model in ("mlp", "resmlp")


def hash_name(name: str) -> int:
    """A stable small integer for fold_in (Python's hash is salted per process)."""
    return sum(ord(ch) * 31 ** i for i, ch in enumerate(name)) % (2 ** 31)


def grid_points(cfg: IGBInitConfig) -> tuple[np.ndarray, np.ndarray]:
    """Flattened cartesian grid: sigma_w2 varies fastest."""
    sb, sw = np.meshgrid(np.asarray(cfg.grid.sigma_b2, float), np.asarray(cfg.grid.sigma_w2, float), indexing="ij")
    return sw.ravel(), sb.ravel()


def load_inputs(name: str, cfg: IGBInitConfig, key) -> tuple[np.ndarray, np.ndarray]:
    """(x on the sphere, class labels): n_inputs Gaussian images shaped like digits (random labels 0 / 1),
    or a random subset of a set's training split with its own labels (mnist: the ten digits).

    The subset is uniform over the training split (not stratified: it keeps the data's class frequencies),
    so the all-logit f_max is measured on inputs of all the set's classes; the probe's binary labels are
    their parity (`binary_labels`), as ``data.binarize`` would give.
    """
    n = cfg.probe.n_inputs
    if name == "gaussian":
        k_x, k_y = jax.random.split(key)
        return width.gaussian_inputs(k_x, n), np.asarray(jax.random.bernoulli(k_y, 0.5, (n,)), np.int32)
    from jaxinit.data import load_dataset
    try:
        ds = load_dataset(replace(cfg.data, name=name, normalize="sphere", binarize=False))
    except (OSError, RuntimeError, ValueError) as e:
        raise ConfigError(f"{name}: not available ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if ds.x_train.shape[0] < n:
        raise ConfigError(f"{name}: only {ds.x_train.shape[0]} training inputs, --probe.n_inputs={n}")
    idx = np.asarray(jax.random.choice(key, ds.x_train.shape[0], (n,), replace=False))
    x = np.asarray(ds.x_train)[idx]
    x = x.reshape(n, *ds.input_shape) if len(ds.input_shape) == 3 else x.reshape(n, -1, 1, 1)
    return x, np.asarray(ds.y_train)[idx]


def binary_labels(classes) -> np.ndarray:
    """The probe's two classes: label parity (the IGB studies' ``data.binarize``)."""
    return (np.asarray(classes) % 2).astype(np.int32)


def build_cases(net: ModelsConfig, image_shape: tuple[int, ...]) -> list[Case]:
    """One `Case` per model (n_out = 10, so the first two logits are the binary head)."""
    cases = []
    for model in net.names:
        if model == "mlp":
            cases += [Case(f"mlp_{a}", model, nets.make_net(DeepMLP(10, net.mlp_width, net.mlp_depth, a), image_shape),
                           net.mlp_depth) for a in net.mlp_acts]
        elif model == "resmlp":
            module = DeepMLP(10, net.mlp_width, net.mlp_depth, net.res_act, residual=True)
            cases.append(Case(f"resmlp_{net.res_act}", model, nets.make_net(module, image_shape), net.mlp_depth, True))
        elif model.startswith("vit"):
            if image_shape[0] % net.vit_patch or image_shape[1] % net.vit_patch:
                continue
            module = ViT(10, net.vit_width, net.vit_depth, net.vit_heads, net.vit_patch, 2, net.vit_act, model == "vit")
            cases.append(Case(model, model, nets.make_net(module, image_shape), net.vit_depth + 1))
        else:
            module = CNN(10, net.cnn_width, net.cnn_depth, f"{net.cnn_act}+{model.split('_')[1]}pool")
            cases.append(Case(model, model, nets.make_net(module, image_shape), net.cnn_depth))
    return cases


def probe_case(case: Case, x, classes, cfg: IGBInitConfig, keys, c0_pairs, progress=None) -> dict[str, np.ndarray]:
    """Measurements of one case over the grid and draws (``classes``: the inputs' own labels), theory beside them."""
    k_draws, k_theory = keys
    sw, sb = grid_points(cfg)
    res = probe.probe_draws(case.net, jax.random.fold_in(k_draws, hash_name(case.name)), cfg.probe.n_draws, sw, sb,
                            x, binary_labels(classes), with_grads=case.model in cfg.probe.grads,
                            gp_readouts=cfg.probe.gp_readouts, progress=progress)
    res["n_inputs"] = np.array(len(x))
    res["input_class_counts"] = np.bincount(np.asarray(classes), minlength=2)
    res.update(predict.readout_predictions(res))
    res.update(predict.readout_finite_n(res, jax.random.fold_in(k_theory, hash_name(case.name)), len(x),
                                        cfg.probe.theory_samples))
    if case.net.theory_act is not None:
        res.update(predict.layer_predictions(case, sw, sb, c0_pairs, len(x), cfg.probe.c0_quantiles,
                                             cfg.probe.theory_samples, k_theory))
    res.update(sigma_w2=sw, sigma_b2=sb, c0_mean=np.mean(c0_pairs), c0_std=np.std(c0_pairs))
    return res


def _inputs(cfg: IGBInitConfig, k_inputs, skipped: dict):
    for name in cfg.probe.inputs:
        try:
            yield name, load_inputs(name, cfg, jax.random.fold_in(k_inputs, INPUTS.index(name)))
        except ConfigError as e:   # real sets that are not on this machine are skipped, and said so
            skipped[name] = str(e).splitlines()[0]


def probe_init(cfg: IGBInitConfig, on_case: Callable[[str, dict], None] | None = None,
               cached: dict[str, dict] | None = None, progress: bool | None = None) -> Result:
    """Every case of ``cfg`` (see the module docstring); writes nothing itself."""
    cached = cached or {}
    results_schema.check_init(cached)   # a saved case of another shape is refused before any work
    k_inputs, k_draws, k_theory, k_width = jax.random.split(jax.random.key(cfg.probe.seed), 4)
    cases, skipped, seconds = {}, {}, {}
    n_cases = len(cfg.model.names) + (len(cfg.model.mlp_acts) - 1 if "mlp" in cfg.model.names else 0)
    total = len(cfg.probe.inputs) * n_cases * cfg.probe.n_draws + len(cfg.width.widths) * cfg.width.n_draws
    bar = sink.progress_bar(total, "igb_init draws", progress)
    for input_name, (x, classes) in _inputs(cfg, k_inputs, skipped):
        c0_pairs = predict.input_overlaps(x)
        for case in build_cases(cfg.model, tuple(x.shape[1:])):
            name, t0 = f"{input_name}__{case.name}", time.perf_counter()
            if name not in cached:
                cases[name] = probe_case(case, x, classes, cfg, (k_draws, k_theory), c0_pairs, bar)
                seconds[name] = round(time.perf_counter() - t0, 2)
                if on_case is not None:
                    on_case(name, cases[name])
            cases[name] = cached.get(name, cases.get(name))
    if cfg.width.widths:
        cases[WIDTH_CASE] = cached.get(WIDTH_CASE) or width.width_sweep(cfg.width, k_width, bar)
        if on_case is not None and WIDTH_CASE not in cached:
            on_case(WIDTH_CASE, cases[WIDTH_CASE])
    bar.close()
    # arrays: per "<input>__<case>" (and "width"); timing: seconds per case computed here
    return Result(summarize_all(cases, skipped), None, {"seconds_per_case": seconds}, arrays=cases)


def summarize_all(cases: dict[str, dict], skipped: dict) -> dict:
    """summary.json: rows per case (`predict.summarize`), the width sweep, the input sets skipped."""
    rows = {name.replace("__", "/"): predict.summarize(r) for name, r in cases.items() if name != WIDTH_CASE}
    out = {"cases": rows, "inputs": input_summaries(cases), "skipped": skipped}
    if WIDTH_CASE in cases:
        out["width"] = width.summarize_width(cases[WIDTH_CASE])
    return to_json(out)


def input_summaries(cases: dict[str, dict]) -> dict[str, dict]:
    """Per input set (from its first case): n inputs, inputs per class label, mean and sd of the overlaps c0."""
    out = {}
    for name, r in cases.items():
        input_name = name.split("__")[0]
        if name == WIDTH_CASE or input_name in out:
            continue
        out[input_name] = {"n_inputs": int(r["n_inputs"]), "c0_mean": float(r["c0_mean"]), "c0_std": float(r["c0_std"])}
        if "input_class_counts" in r:   # absent from cases saved before it was recorded
            out[input_name]["class_counts"] = np.asarray(r["input_class_counts"]).tolist()
    return out
