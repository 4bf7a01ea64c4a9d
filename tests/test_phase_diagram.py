"""`python -m experiments.phase_diagram`: the smoke preset end to end, its files, bad input -> exit 2."""
import json

import numpy as np
import pytest

from experiments import phase_diagram as pd
from jaxinit import cli


def _run(argv):
    return cli.run_experiment("experiments.phase_diagram", pd.__doc__, pd.PhaseDiagramConfig, pd.PRESETS, "default",
                              pd.main, "unused", pd.validate, argv=argv)


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
    n = pd.SMOKE.grid.n
    for act in pd.PANELS:
        key = act.replace("+", "_")
        assert data[f"{key}__phase"].shape == (n, n)
        assert set(np.unique(data[f"{key}__phase"])) <= {0, 1, 2, 3, 4}
        assert data[f"{key}__eoc_forward"].shape == (n,)
    np.testing.assert_allclose(data["relu_maxpool__eoc_gradient"], 4 / 3, rtol=1e-12)
    assert np.isfinite(data["tanh__neutrality"][1:]).all()
    assert data["layers__c"].shape == (len(pd.SMOKE.plot.layers_sigma_w2), pd.SMOKE.plot.layers_depth)
    timing = json.loads((smoke_run / "timing.json").read_text())
    assert timing["baseline_points"] == pd.SMOKE.timing.baseline_points
    assert timing["jax_first_s"] > 0 and timing["speedup_first_call"] > 0
    assert timing["baseline_max_abs_diff_chi1"] < 1e-6      # the loop computes the same quantities


def test_baseline_point_agrees_with_the_vmapped_diagram():
    from theory import phase
    res = phase.phase_diagram("tanh", np.array([1.2, 3.0]), np.array([0.1]), 10)
    for i, sw in enumerate((1.2, 3.0)):
        base = pd.baseline_point(sw, 0.1, 10)
        assert base["chi1"] == pytest.approx(res["chi1"][i, 0], rel=1e-8)
        assert base["c_star"] == pytest.approx(res["c_star"][i, 0], abs=1e-5)
        assert base["c_depth"] == pytest.approx(res["c_depth"][i, 0], abs=1e-5)


@pytest.mark.parametrize("argv", [["--grid.n=1"], ["--plot.acts=relu,softsign"], ["--grid.nn=3"],
                                  ["--plot.criterion=sideways"], ["--timing.repeats=0"]])
def test_bad_input_exits_2(argv, tmp_path, capsys):
    assert _run(["--preset", "smoke", "--out", str(tmp_path), *argv]) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_help_exits_0(capsys):
    assert _run(["--help"]) == 0
    assert "phase_diagram" in capsys.readouterr().out
