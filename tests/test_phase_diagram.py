"""`python -m experiments.phase_diagram`: the smoke preset end to end, its files, bad input -> exit 2."""
import json

import numpy as np
import pytest

from experiments import phase_diagram as main_module
from jaxinit.run import cli
from jaxinit.igb import config_phase, phase_baseline, phase_diagram as pd


def _run(argv):
    return cli.run(main_module.EXPERIMENT, argv)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("phase")
    assert _run(["--preset", "smoke", "--out", str(out)]) == 0
    return out


def test_smoke_writes_arrays_figures_and_timing(smoke_run):
    for name in ("config.json", "phase_diagram.npz", "timing.json", "figures/phase_diagram.png",
                 "figures/c_gamma_layers.png"):
        assert (smoke_run / name).is_file(), name
    data = np.load(smoke_run / "phase_diagram.npz")
    n = config_phase.SMOKE.grid.n
    for act in config_phase.PANELS:
        assert data[pd.key(act, "phase")].shape == (n, n)
        assert set(np.unique(data[pd.key(act, "phase")])) <= {0, 1, 2, 3, 4, 5}
        assert data[pd.key(act, "eoc_forward")].shape == (n,)
    np.testing.assert_allclose(data["relu_maxpool__eoc_gradient"], 4 / 3, rtol=1e-12)
    np.testing.assert_allclose(data["relu__eoc_forward"], 2.0, rtol=1e-12)
    assert data["tanh__eoc_forward"][0] == pytest.approx(1.0, rel=1e-7)      # tanh EOC at sigma_b2 = 0
    assert np.isfinite(data["tanh__neutrality"][1:]).all()
    assert data["layers__c"].shape == (len(config_phase.SMOKE.plot.layers_sigma_w2), config_phase.SMOKE.plot.layers_depth)
    timing = json.loads((smoke_run / "timing.json").read_text())
    t = config_phase.SMOKE.timing
    assert timing["baseline_points"] == t.baseline_points and timing["points"] == t.n ** 2
    assert timing["jax_first_s"] == pytest.approx(float(np.median(timing["jax_first_s_all"])))
    assert timing["baseline_extrapolated_s"] == pytest.approx(timing["baseline_per_point_s"] * t.n ** 2)
    assert timing["speedup_first_call"] == pytest.approx(timing["baseline_extrapolated_s"] / timing["jax_first_s"])
    assert timing["baseline_max_abs_diff_chi1"] < 1e-6      # the loop computes the same quantities


def test_baseline_point_agrees_with_the_vmapped_diagram():
    from theory import phase
    res = phase.phase_diagram("tanh", np.array([1.2, 3.0]), np.array([0.1]), 10)
    for i, sw in enumerate((1.2, 3.0)):
        base = phase_baseline.baseline_point(sw, 0.1, 10)
        assert base["chi1"] == pytest.approx(float(res["chi1"][i, 0]), rel=1e-8)
        assert base["c_star"] == pytest.approx(float(res["c_star"][i, 0]), abs=1e-5)
        assert base["c_depth"] == pytest.approx(float(res["c_depth"][i, 0]), abs=1e-5)


def test_figures_are_built_in_memory():
    data = pd.compute_panels(config_phase.SMOKE, log=lambda _: None)
    figures = pd.panel_figures(data, config_phase.SMOKE)
    assert set(figures) == {"phase_diagram", "c_gamma_layers"}
    assert len([ax for ax in figures["phase_diagram"].axes if ax.get_visible()]) == len(config_phase.PANELS)


@pytest.mark.parametrize("argv,message", [
    (["--grid.n=1"], "error: --grid: n >= 2, depth >= 1 and a finite sigma_w2_max > 0 required"),
    (["--plot.acts=relu,softsign"], "error: Error parsing --plot.acts: expected one of linear|relu|erf|tanh|"),
    (["--plot.criterion=sideways"], "error: invalid choice 'sideways' for argument '--plot.criterion'. Expected one of "
                                    "('forward', 'gradient')."),
    (["--timing.repeats=0"], "error: --timing: n, depth, baseline_points and repeats must be >= 1"),
])
def test_bad_input_exits_2_with_one_line(argv, message, tmp_path, capsys):
    assert _run(["--preset", "smoke", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_unknown_key_is_one_line_naming_it(tmp_path, capsys):
    assert _run(["--preset", "smoke", "--out", str(tmp_path), "--grid.nn=3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Unrecognized options") and "--grid.nn=3" in err and err.count("\n") == 1


def test_help_exits_0(capsys):
    assert _run(["--help"]) == 0
    out = capsys.readouterr().out
    assert "phase_diagram" in out and "points per axis" in out      # field docstrings reach --help
