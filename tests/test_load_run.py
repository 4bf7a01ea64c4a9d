"""`jaxinit.load_run`: every experiment's smoke run read back for a notebook, checked against its files, named
by the experiment that wrote it (run.json; `jaxinit.run.registry`)."""
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxinit
from jaxinit.errors import ConfigError
from jaxinit.run import registry

ROOT = Path(__file__).resolve().parents[1]
# Each experiment's smallest preset, as a user runs it (phase_diagram without its speed comparison; the benchmark's
# quick preset with nothing timed: its run directory is what is read here).
SMOKE = {"forgetting": ["--preset", "smoke"], "clocks": ["--preset", "smoke"], "igb_init": ["--preset", "smoke"],
         "igb_train": ["--preset", "smoke"], "igb_rescale": ["--preset", "smoke"], "memory_phases": ["--preset", "smoke"],
         "phase_diagram": ["--preset", "smoke", "--timing.enabled=false"],
         "benchmark": ["--preset", "quick", "--bench.enabled=false", "--phase.enabled=false"]}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """``smoke(name)``: the directory of that experiment's smoke run, run on first use (once per module)."""
    done = {}

    def run(name: str) -> Path:
        if name not in done:
            out = tmp_path_factory.mktemp(name) / "run"
            proc = subprocess.run([sys.executable, "-m", f"experiments.{name}", "--out", str(out), *SMOKE[name]],
                                  cwd=ROOT, capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, proc.stderr[-3000:]
            done[name] = out
        return done[name]
    return run


def _json(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.is_file() else []


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _same_arrays(a: dict, b: dict) -> bool:
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])            # NaN where NaN, dtype-blind
        assert a[k].dtype == b[k].dtype, k
    return True


def test_every_experiment_that_writes_a_run_directory_is_read_here():
    assert sorted(SMOKE) == sorted(e.name for e in registry.EXPERIMENTS if e.run_dir)


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_a_run_is_its_files(smoke, name):
    out = smoke(name)
    run = jaxinit.load_run(out)
    assert run.experiment == name and run.path == out and run.run_info["experiment"] == name
    assert run.config == _json(out / "config.json") and run.run_info == _json(out / "run.json")
    assert run.summary == _json(out / "summary.json")            # None for the phase diagrams: none written
    assert run.rows == _lines(out / "metrics.jsonl")
    npz = {p.stem: p for p in [*out.glob("*.npz"), *(out / "results").glob("*.npz")]}
    assert sorted(run.results) == sorted(npz) and all(_same_arrays(run.results[k], _npz(p)) for k, p in npz.items())
    expect = {"forgetting": (True, False, False), "clocks": (False, False, True), "igb_init": (False, True, False),
              "igb_train": (True, True, False), "igb_rescale": (True, True, False), "memory_phases": (True, True, False),
              "phase_diagram": (False, True, False), "benchmark": (False, False, False)}[name]
    assert (bool(run.rows), bool(run.results), bool(run.points)) == expect
    assert (run.summary is None) == (name in ("phase_diagram", "benchmark"))
    assert bool(run.arrays) == bool(run.rows)
    text = repr(run)              # a notebook shows one short line, not the data
    assert "\n" not in text and len(text) < 200 + len(str(out)) and name in text and str(out) in text
    assert registry.experiment_of(run.config, {}) == name        # a run made before run.json named it


def test_the_repr_says_what_a_run_holds(tmp_path):
    (tmp_path / "config.json").write_text('{"sweep": {}, "analysis": {}}')
    (tmp_path / "metrics.jsonl").write_text('{"member": 0, "epoch": 0}\n{"member": 1, "epoch": 0}\n')
    assert repr(jaxinit.load_run(tmp_path)) == f"<Run of forgetting in {tmp_path}: 2 rows, no summary>"
    (tmp_path / "config.json").write_text('{"x": {}}')
    assert repr(jaxinit.load_run(tmp_path)).startswith("<Run of an unknown experiment in ")


@pytest.mark.parametrize("name", ["forgetting", "igb_train"])
def test_the_arrays_are_the_rows_scalar_columns(smoke, name):
    out = smoke(name)
    run = jaxinit.load_run(out)
    nested = {k for r in run.rows for k, v in r.items() if isinstance(v, (dict, list))}
    assert set(run.arrays) == {k for r in run.rows for k in r} - nested
    for key, col in run.arrays.items():
        assert col.shape == (len(run.rows),)
        for v, r in zip(col.tolist(), run.rows):
            want = r.get(key)
            assert (math.isnan(v) if want is None else v == want and type(v) is type(want)), (key, v, want)
    assert run.arrays["member"].dtype == np.int64 and run.arrays["diverged"].dtype == bool
    assert run.arrays["optimizer"].dtype.kind == "U" and run.arrays["test_acc"].dtype == np.float64
    if name == "forgetting":
        assert {"param_norm_layers", "update_rms_sum"} <= nested and np.isnan(run.arrays["diverged_step"]).all()
        sgd = run.arrays["optimizer"] == "sgd"
        assert sgd.any() and not sgd.all()


def test_the_clock_sweeps_points_are_runs_of_their_own(smoke):
    out = smoke("clocks")
    run = jaxinit.load_run(out)
    assert sorted(run.points) == sorted(p.name for p in (out / "points").iterdir())
    assert [ln["point"] for ln in run.summary["lines"]] == [ln["point"] for ln in _lines(out / "clocks.jsonl")]
    for point, sub in run.points.items():
        assert sub.experiment == "forgetting" and sub.rows == _lines(out / "points" / point / "metrics.jsonl")
        assert sub.summary == _json(out / "points" / point / "summary.json") and sub.rows


def test_frame_is_a_dataframe_or_one_line_naming_pandas(smoke, monkeypatch):
    out = smoke("igb_train")
    run = jaxinit.load_run(out)
    try:
        import pandas  # noqa: F401
    except ImportError:
        pass
    else:
        df = run.df
        assert list(df.columns) == list(run.arrays) and len(df) == len(run.rows)
        assert np.array_equal(df["test_acc"].to_numpy(), run.arrays["test_acc"])
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        run.frame()


def test_a_resumed_runs_repeated_rows_count_once_the_later_winning(smoke, tmp_path):
    out = smoke("forgetting")
    rows = _lines(out / "metrics.jsonl")
    last = max(r["epoch"] for r in rows)
    again = [{**r, "val_acc": 0.5} for r in rows if r["epoch"] == last]        # the last epoch, written again
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(out / "config.json", copy / "config.json")
    text = "".join(json.dumps(r) + "\n" for r in rows + again)
    (copy / "metrics.jsonl").write_text(text + '{"member": 0, "epo')             # and killed mid-line
    run = jaxinit.load_run(copy)
    assert len(run.rows) == len(rows) and run.summary is None and run.run_info == {}
    assert [(r["member"], r["epoch"]) for r in run.rows] == [(r["member"], r["epoch"]) for r in rows]
    assert [r["val_acc"] for r in run.rows if r["epoch"] == last] == [0.5] * len(again)
    (copy / "metrics.jsonl").write_text('{"member": 0, "epoch": 0}\n{"mem\n{"member": 0, "epoch": 1}\n')
    with pytest.raises(ConfigError, match="line 2 is not JSON"):
        jaxinit.load_run(copy)


def test_what_is_not_a_run_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    for path, why in ((tmp_path, "has no config.json"), (tmp_path / "missing", "no such directory"),
                      (tmp_path / "notes.txt", "not a directory")):
        with pytest.raises(ConfigError, match=why) as err:
            jaxinit.load_run(path)
        assert "\n" not in str(err.value) and "is not a run directory" in str(err.value)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="config.json is not readable JSON"):
        jaxinit.load_run(tmp_path)


def test_unknown_configs_and_recorded_experiments():
    assert registry.experiment_of({"data": {}, "model": {}}, {}) is None
    assert registry.experiment_of({"sweep": {}, "analysis": {}}, {"experiment": "memory_phases"}) == "memory_phases"


def test_importing_jaxinit_and_loading_a_run_needs_no_jax(smoke):
    out = smoke("igb_train")
    code = (f"import sys, jaxinit; light = 'numpy' not in sys.modules; run = jaxinit.load_run({str(out)!r}); "
            f"print(light, len(run.rows), sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'scipy')))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split(" ", 2)[:2] == ["True", str(len(_lines(out / "metrics.jsonl")))]
    assert proc.stdout.strip().endswith("[]")
