"""`python -m experiments.benchmark`: the quick set end to end, the JSON-line schema, ratios, bad input.

Speed is the benchmark's output, never a test's condition: nothing here bounds a wall time.
"""
import ast
import inspect
import json
from dataclasses import fields, replace

import jax
import pytest

from experiments import benchmark
from jaxinit.train.members import default_strategy
from jaxinit.tools import bench, bench_config, machine
from jaxinit.tools.bench import Variant

# Smallest settings: MLP + ResNet-9 (lax conv), K = 1 and 2 (chunks of 2: chunked == vmap, not re-run). Every
# compile of a conv step costs seconds here, so chunks of mixed sizes and the im2col lines' ratios are
# checked without compiling, further down.
SMALLEST = ["--quick", "--bench.models=mlp,resnet9", "--bench.conv_impls=lax", "--bench.members=1,2",
            "--bench.repeats=2", "--bench.image_size=4",
            "--phase.n_grid=8", "--phase.depth=5", "--phase.baseline_points=2", "--phase.repeats=1"]
DESIGN_FIELDS = {"platform", "model", "members", "strategy", "compile_s", "step_s", "members_per_s",
                 "ratio_default_vs_sequential"}
EXTRA_FIELDS = {"conv_impl", "batch_size", "width_mult", "flops_per_step", "achieved_flops", "peak_flops",
                "device_kind"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick run for the tests below (`make test` keeps a file on one worker: --dist loadfile)."""
    out = tmp_path_factory.mktemp("bench")
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = benchmark.run(SMALLEST + ["--out", str(out)])
    return status, out, buf.getvalue()


def _train_lines(out):
    lines = [json.loads(s) for s in (out / "benchmark.jsonl").read_text().splitlines()]
    return lines, [r for r in lines if r["kind"] == "train_step"]


def test_quick_runs_end_to_end(quick_run):
    status, out, stdout = quick_run
    assert status == 0
    for name in ("config.json", "benchmark.jsonl", "table.md", "run.json"):
        assert (out / name).stat().st_size > 0
    lines, _ = _train_lines(out)
    printed = [json.loads(s) for s in stdout.splitlines() if s.startswith("{")]
    assert printed == lines                      # every JSON line is also printed
    assert f"wrote {out}" in stdout


def test_every_line_has_the_design_fields_with_sane_values(quick_run):
    _, out, _ = quick_run
    _, rows = _train_lines(out)
    assert rows
    for r in rows:
        assert DESIGN_FIELDS | EXTRA_FIELDS <= set(r), set(DESIGN_FIELDS | EXTRA_FIELDS) - set(r)
        assert r["platform"] == jax.default_backend()
        assert r["compile_s"] > 0 and r["step_s_min"] <= r["step_s"]        # the compile clock listened
        assert r["members_per_s"] == pytest.approx(r["members"] / r["step_s"], rel=1e-9)
        assert r["ratio_default_vs_sequential"] is not None and r["ratio_default_vs_sequential"] > 0
        assert r["throughput_vs_one"] is not None and r["throughput_vs_one"] > 0
        assert r["flops_per_step"] is None or r["flops_per_step"] > 0
        if r["flops_per_step"]:
            assert r["achieved_flops"] == pytest.approx(r["flops_per_step"] / r["step_s"], rel=1e-9)
        assert (r["conv_impl"] is None) == (r["model"] == "mlp")


def test_every_model_and_member_count_is_measured_with_each_distinct_strategy(quick_run):
    _, out, _ = quick_run
    _, rows = _train_lines(out)
    got = {(r["model"], r["conv_impl"], r["members"], r["strategy"]) for r in rows}
    want = set()
    for model, impls in (("mlp", [None]), ("resnet9", ["lax"])):
        for impl in impls:
            want.add((model, impl, 1, "sequential"))   # K = 1: every strategy is the single-member step
            want |= {(model, impl, 2, s) for s in ("sequential", "vmap")}
    assert got == want
    assert {r["chunk"] for r in rows if r["members"] == 2} == {1, 2}


def test_ratios_are_the_default_and_each_strategy_over_sequential(quick_run):
    _, out, _ = quick_run
    _, rows = _train_lines(out)
    for model, conv in (("mlp", False), ("resnet9", True)):
        ref_impl = None if model == "mlp" else "lax"
        for k in (1, 2):
            group = [r for r in rows if r["model"] == model and r["members"] == k]
            by = {(r["conv_impl"], r["strategy"]): r for r in group}
            seq = by[(ref_impl, "sequential")]["step_s"]
            # the quick preset's chunk (2) covers K = 2, so a chunked default runs the vmap code there
            chunk = benchmark.QUICK.bench.chunk
            strategy = bench.canonical(Variant(ref_impl, default_strategy(conv, jax.default_backend())),
                                       k, chunk).strategy
            want = by[(ref_impl, strategy)]["step_s"] / seq
            assert all(r["ratio_default_vs_sequential"] == pytest.approx(want, rel=1e-9) for r in group)
            for r in group:
                assert r["ratio_vs_sequential"] == pytest.approx(r["step_s"] / seq, rel=1e-9)
            if k == 1:
                assert all(r["throughput_vs_one"] == pytest.approx(1.0) for r in group)


def test_vmapped_flops_are_k_times_one_member(quick_run):
    _, out, _ = quick_run
    _, rows = _train_lines(out)
    one = {(r["model"], r["conv_impl"]): r["flops_per_step"] for r in rows if r["members"] == 1}
    for r in rows:
        if r["members"] == 2 and r["flops_per_step"] and one[(r["model"], r["conv_impl"])]:
            assert r["flops_per_step"] == pytest.approx(2 * one[(r["model"], r["conv_impl"])], rel=0.25), r


def test_phase_diagram_is_timed_against_the_per_point_baseline(quick_run):
    _, out, _ = quick_run
    lines, _ = _train_lines(out)
    (p,) = [r for r in lines if r["kind"] == "phase_diagram"]
    assert p["platform"] == jax.default_backend() and p["points"] == 64 and p["depth"] == 5
    assert p["jax_first_s"] > 0 and p["baseline_per_point_s"] > 0
    assert p["baseline_extrapolated_s"] == pytest.approx(64 * p["baseline_per_point_s"], rel=1e-9)
    assert p["baseline_max_abs_diff_chi1"] < 1e-3            # the two computations agree where both ran


def test_table_has_one_row_per_line(quick_run):
    _, out, _ = quick_run
    _, rows = _train_lines(out)
    table = (out / "table.md").read_text()
    body = [s for s in table.splitlines() if s.startswith("| ") and not s.startswith("| model")]
    assert len(body) == len(rows)
    assert "phase diagram (tanh, 8 x 8, depth 5)" in table
    run = json.loads((out / "run.json").read_text())
    assert run["platform"] == jax.default_backend() and run["n_devices"] == jax.device_count()
    assert run["total_s"] >= max(r["compile_s"] for r in rows)   # the whole run holds each of its parts


def _one_error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


@pytest.mark.parametrize("args, fragment", [
    (["--bogus"], "unknown argument"),
    (["--preset", "nope"], "unknown preset"),
    (["--quick", "--preset", "accel"], "--quick"),
    (["--bench.members=0,4"], "bench.members"),
    (["--bench.strategies=vmap"], "sequential"),
    (["--bench.models=mlp,nope"], "bench.models"),
    (["--bench.conv_impls=im2col"], "lax"),
    (["--bench.repeats=0"], "bench.repeats"),
    (["--bench.width_mult=0"], "width_mult"),
    (["--bench.nope=1"], "bench.nope"),
    (["--preset", "default"], "unknown preset"),          # renamed `cpu`, like every experiment's default
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, fragment):
    assert benchmark.run(args + ["--out", str(tmp_path / "x")]) == 2
    assert fragment in _one_error_line(capsys)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="checks the refusal on a CPU-only jax")
def test_accel_preset_refuses_a_cpu_with_one_line_and_writes_nothing(tmp_path, capsys):
    assert benchmark.PRESETS["accel"].bench.require_accelerator
    assert benchmark.run(["--preset", "accel", "--out", str(tmp_path / "a")]) == 2
    assert "needs a GPU/TPU" in _one_error_line(capsys)
    assert not (tmp_path / "a").exists()


def test_resume_is_refused_with_one_line(tmp_path, capsys):
    out = tmp_path / "r"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({}))
    assert benchmark.run(["--resume", "--out", str(out)]) == 2
    assert "--resume" in _one_error_line(capsys)


def test_canonical_variants_and_distinct_strategies():
    b = benchmark.QUICK.bench
    assert bench.canonical(Variant("lax", "vmap"), 1, 2) == Variant("lax", "sequential")
    assert bench.canonical(Variant("lax", "chunked"), 2, 2) == Variant("lax", "vmap")
    assert bench.canonical(Variant("lax", "chunked"), 4, 2) == Variant("lax", "chunked")
    assert bench.group_variants(b, "mlp", 1) == [Variant(None, "sequential")]
    assert bench.group_variants(b, "mlp", 2) == [Variant(None, "sequential"), Variant(None, "vmap")]
    assert len(bench.group_variants(b, "resnet9", 4)) == 6


ZEN4 = "vendor_id\t: AuthenticAMD\ncpu MHz\t\t: 2596.130\nflags\t\t: fpu sse2 fma avx2 avx512f avx512_bf16\n"


def test_cpu_nominal_peak_from_clock_and_vector_flags():
    peak, note = machine.cpu_nominal_peak_flops(ZEN4, 2)
    assert peak == pytest.approx(2 * 2596.13e6 * 32) and "2 CPUs" in note
    intel = ZEN4.replace("AuthenticAMD", "GenuineIntel")
    assert machine.cpu_nominal_peak_flops(intel, 2)[0] == pytest.approx(2 * 2596.13e6 * 64)
    sse = "vendor_id: AuthenticAMD\ncpu MHz: 1000\nflags: fpu sse2\n"
    assert machine.cpu_nominal_peak_flops(sse, 4)[0] == pytest.approx(4 * 1e9 * 8)
    assert machine.cpu_nominal_peak_flops("", 2)[0] is None
    # Only the first processor's block counts (every block repeats the fields).
    assert machine.cpu_nominal_peak_flops(ZEN4 + "\ncpu MHz\t: 9999\n", 2)[0] == pytest.approx(2 * 2596.13e6 * 32)


def test_nominal_peaks_match_device_kinds_by_prefix():
    assert machine.nominal_peak_flops("NVIDIA H200") == pytest.approx(494.7e12)
    assert machine.nominal_peak_flops("NVIDIA H100 80GB HBM3") == pytest.approx(494.7e12)
    assert machine.nominal_peak_flops("NVIDIA H100 PCIe") == pytest.approx(378.0e12)     # not the SXM figure
    assert machine.nominal_peak_flops("NVIDIA A100-SXM4-80GB") == pytest.approx(156.0e12)  # jax's full device_kind
    for unknown in ("cpu", "NVIDIA GeForce RTX 4090", "TPU v5 lite", "NVIDIA H1"):
        assert machine.nominal_peak_flops(unknown) is None, unknown


def test_presets_validate():
    for name, cfg in benchmark.PRESETS.items():   # accel's device check has its own test below
        benchmark.validate(replace(cfg, bench=replace(cfg.bench, require_accelerator=False)))
    assert benchmark.PRESETS["accel"].bench.models[0] == "resnet9" and 16 in benchmark.PRESETS["accel"].bench.members


def test_group_rows_refer_every_conv_impl_to_sequential_lax():
    cfg = benchmark.QUICK
    info = {"platform": "cpu", "device_kind": "cpu", "peak_flops": 1e12}
    m = lambda step_s, flops=None: {"step_s": step_s, "step_s_min": step_s, "repeats": 1, "compile_s": 1.0,
                                    "chunk": 1, "flops_per_step": flops}
    one = bench.group_rows(cfg, info, "resnet9", 1, {Variant("lax", "sequential"): m(1.0)}, {})
    assert one[0]["throughput_vs_one"] == 1.0 and one[0]["ratio_default_vs_sequential"] == 1.0
    ones = {"lax": 1.0, "im2col": 0.5}                                        # one member's step, same group
    measured = {Variant("lax", "sequential"): m(4.0, 8e9), Variant("lax", "vmap"): m(8.0),
                Variant("im2col", "sequential"): m(3.0), Variant("im2col", "vmap"): m(2.0)}
    rows = {(r["conv_impl"], r["strategy"]): r for r in bench.group_rows(cfg, info, "resnet9", 4, measured, ones)}
    assert {r["ratio_default_vs_sequential"] for r in rows.values()} == {1.0}    # cpu conv default: sequential
    assert rows[("im2col", "vmap")]["ratio_vs_sequential"] == 0.5               # against sequential *lax*
    assert rows[("im2col", "vmap")]["throughput_vs_one"] == 1.0                 # 2 members/s vs 2 for one member
    assert rows[("lax", "vmap")]["throughput_vs_one"] == 0.5
    assert rows[("lax", "vmap")]["members_per_s"] == 0.5
    assert rows[("lax", "sequential")]["achieved_flops"] == 2e9
    assert rows[("lax", "sequential")]["flops_utilization"] == 2e-3
    gpu = bench.group_rows(cfg, {**info, "platform": "gpu"}, "resnet9", 4, measured, ones)
    assert {r["ratio_default_vs_sequential"] for r in gpu} == {2.0}             # gpu default: vmap


def test_chunked_sweep_splits_members_like_training():
    b = benchmark.QUICK.bench                                   # chunk = 2
    ds = bench.synthetic_dataset((4,), 64)   # >= the batch size (build_sweep checks it)
    sweep = bench.make_sweep(b, "mlp", Variant(None, "chunked"), 3, ds)
    assert bench.chunk_shapes(sweep) == [2, 1]              # a vmapped pair, then a vmapped single member
    assert [m.sigma_w for m in sweep.members] == [0.5, 1.25, 2.0]
    assert bench.chunk_shapes(bench.make_sweep(b, "mlp", Variant(None, "sequential"), 3, ds)) == [0, 0, 0]
    assert bench.chunk_shapes(bench.make_sweep(b, "mlp", Variant(None, "vmap"), 3, ds)) == [3]


def test_is_conv_follows_the_model_kernels():
    b = benchmark.QUICK.bench
    assert not bench.is_conv(b, "mlp") and bench.is_conv(b, "resnet9") and bench.is_conv(b, "resnet20")


def test_benchmark_sweep_is_the_forgetting_config_of_the_case():
    b = benchmark.QUICK.bench
    cfg = bench.forgetting_config(b, "resnet9", Variant("im2col", "chunked"), 3)
    assert cfg.model.name == "resnet9" and cfg.model.conv_impl == "im2col" and cfg.model.width_mult == b.width_mult
    assert cfg.train.strategy == "chunked" and cfg.train.chunk == b.chunk and cfg.train.batch_size == b.conv_batch_size
    assert cfg.sweep.sigma_w == (0.5, 1.25, 2.0) and cfg.sweep.seeds == 1 and cfg.sweep.optimizers == (b.optimizer,)
    ds = bench.synthetic_dataset((4,), 64)   # >= the batch size (build_sweep checks it)
    sweep = bench.make_sweep(b, "mlp", Variant(None, "vmap"), 2, ds)
    assert sweep.steps_per_epoch == b.steps and sweep.strategy == "vmap"
    assert sweep.x_calib.shape == (64, 4)                     # build_sweep's calibration batch, capped by the set


def test_help_shows_the_platform_preset_and_every_field_docstring(capsys):
    assert benchmark.run(["--help"]) == 0
    out = capsys.readouterr().out
    assert f"{benchmark.platform_preset()} (default)" in out and "--quick" in out
    assert "members per vmap call of the chunked strategy" in out      # a field docstring, through tyro


@pytest.mark.parametrize("cls", [bench_config.BenchmarkConfig, bench_config.BenchSection, bench_config.PhaseSection])
def test_config_dataclasses_are_frozen_with_a_docstring_under_every_field(cls):
    assert cls.__dataclass_params__.frozen
    body = ast.parse(inspect.getsource(cls)).body[0].body
    documented = {node.target.id for node, nxt in zip(body, body[1:])
                  if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr)
                  and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)}
    assert documented == {f.name for f in fields(cls)}
