"""Depth x sigma_w interaction in interpolation (jaxinit.forgetting.interpolation) and data.pool."""
import json
import math

import numpy as np
import pytest

from jaxinit.config import DataConfig
from jaxinit.data import load_dataset
from jaxinit.data.pipeline import pool_images
from jaxinit.errors import ConfigError
from jaxinit.forgetting import interpolation as itp


# --------------------------------------------------------------------------- the statistic
def test_final_train_error_takes_each_members_last_epoch_and_counts_nan_as_unfit():
    rows = [{"member": 0, "epoch": 0, "train_acc": 0.1}, {"member": 0, "epoch": 8, "train_acc": 0.97},
            {"member": 0, "epoch": 4, "train_acc": 0.5}, {"member": 1, "epoch": 8, "train_acc": float("nan")},
            {"member": 2, "epoch": 8, "loss_only": 1.0}]
    err = itp.final_train_error(rows)
    assert err[0] == pytest.approx(3.0) and err[1] == 100.0 and 2 not in err


def test_gaps_pair_the_large_scale_with_the_reference_of_the_same_seed():
    members = [{"optimizer": "sgd", "sigma_w": s, "seed": seed, "member": i}
               for i, (s, seed) in enumerate([(1.0, 0), (2.5, 0), (1.0, 1), (2.5, 1), (2.5, 2)])]
    err = {0: 1.0, 1: 11.0, 2: 2.0, 3: 4.0, 4: 50.0}
    assert itp.gaps(members, err, "sgd", 2.5) == {0: 10.0, 1: 2.0}   # seed 2 has no reference member


def test_welch_interval_matches_scipy():
    from scipy import stats
    a, b = [1.0, 2.0, 4.0, 3.5, 0.5], [6.0, 9.0, 7.5, 12.0, 8.0, 10.0]
    lo, hi = itp.welch_interval(a, b)
    ref = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert lo == pytest.approx(ref.low) and hi == pytest.approx(ref.high)


def test_permutation_p_is_exact_on_a_small_case():
    # 0, 1 vs 10, 11: of the C(4, 2) = 6 splits only the observed one and its mirror reach |diff| = 10
    assert itp.permutation_p([0.0, 1.0], [10.0, 11.0]) == pytest.approx(2 / 6)


def test_a_planted_depth_interaction_is_found():
    rng = np.random.default_rng(0)
    shallow = dict(enumerate(rng.normal(0.0, 1.0, 5)))
    deep = dict(enumerate(20.0 + rng.normal(0.0, 1.0, 5)))
    d = itp.interaction(shallow, deep)
    assert d["delta"] == pytest.approx(20.0, abs=2.0)
    assert d["ci95"][0] > 0 and d["p"] <= 2 / 252 + 1e-12


def test_no_interaction_holds_its_level():
    rng = np.random.default_rng(1)
    ps = [itp.interaction(dict(enumerate(rng.normal(0, 3, 5))), dict(enumerate(rng.normal(0, 3, 5))))["p"]
          for _ in range(300)]
    rate = np.mean(np.array(ps) <= 0.05)
    assert 0.01 <= rate <= 0.09


# --------------------------------------------------------------------------- the table and CLI on run files
def _write_run(path, deep_gap: float):
    members, rows, i = [], [], 0
    for seed in range(5):
        for sigma in (0.1, 1.0, 2.5):
            acc = 1.0 - (deep_gap + seed * 0.1) / 100 if sigma == 2.5 else 0.999
            members.append({"optimizer": "sgd", "sigma_w": sigma, "seed": seed, "member": i,
                            "tau_interp": 12 if acc >= 0.995 else None})
            rows += [{"member": i, "epoch": 0, "train_acc": 0.1}, {"member": i, "epoch": 20, "train_acc": acc}]
            i += 1
    path.mkdir()
    (path / "summary.json").write_text(json.dumps({"members": members, "spread": {}}))
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_table_reports_the_planted_depth_effect(tmp_path, capsys):
    _write_run(tmp_path / "d8", 0.0)
    _write_run(tmp_path / "d56", 15.0)
    assert itp.main([str(tmp_path / "d8"), str(tmp_path / "d56")]) == 0
    out = capsys.readouterr().out
    assert "| sgd | d8 | 5/5, 12 | 5/5, 12 | 5/5, 12 |" in out
    assert "| sgd | d56 | 5/5, 12 | 5/5, 12 | 0/5, - |" in out
    row = next(line for line in out.splitlines() if line.startswith("| sgd | 2.5 | d56"))
    assert "| 15.0 [" in row and row.rstrip().endswith("| 0.008 |")


def test_figure_is_written(tmp_path):
    _write_run(tmp_path / "d8", 0.0)
    _write_run(tmp_path / "d56", 15.0)
    out = tmp_path / "interp.png"
    assert itp.main([str(tmp_path / "d8"), str(tmp_path / "d56"), "--figure", str(out)]) == 0
    assert out.stat().st_size > 1000


def test_cli_bad_input_is_one_line_and_status_2(tmp_path, capsys):
    assert itp.main([str(tmp_path / "missing"), str(tmp_path / "missing2")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert itp.main([str(tmp_path)]) == 2
    assert itp.main([str(tmp_path), str(tmp_path), "--figure"]) == 2


# --------------------------------------------------------------------------- data.pool
def test_pool_images_averages_blocks():
    x = np.arange(2 * 4 * 4 * 1, dtype=np.float32).reshape(2, 4, 4, 1)
    out = pool_images(x, 2)
    assert out.shape == (2, 2, 2, 1)
    assert out[0, 0, 0, 0] == pytest.approx((0 + 1 + 4 + 5) / 4)
    assert out[1, 1, 1, 0] == pytest.approx((26 + 27 + 30 + 31) / 4)
    assert pool_images(x, 1) is x


def test_pool_on_non_images_or_a_non_divisor_is_a_config_error():
    with pytest.raises(ConfigError, match="pools images"):
        load_dataset(DataConfig(name="mnist1d", n_samples=200, pool=2))
    with pytest.raises(ConfigError, match="must divide"):
        load_dataset(DataConfig(name="digits", pool=3))    # 8 x 8 images
    with pytest.raises(ConfigError, match=">= 1"):
        load_dataset(DataConfig(name="digits", pool=0))


def test_pooled_digits_have_the_pooled_shape_and_are_normalised_after_pooling():
    ds = load_dataset(DataConfig(name="digits", pool=2, n_val=100))
    assert ds.input_shape == (4, 4, 1) and ds.x_train.shape[1:] == (4, 4, 1)
    assert math.isclose(float(np.asarray(ds.x_train).mean()), 0.0, abs_tol=1e-4)
