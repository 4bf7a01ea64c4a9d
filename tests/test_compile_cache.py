"""jaxinit.compile_cache: where the persistent compilation cache goes, that it is used and can be turned off;
run.json lists the compiled programs (`train.timing.Compiles`)."""
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from jaxinit import compile_cache

ROOT = Path(__file__).resolve().parents[1]


def test_the_folder_follows_the_variable_then_jax_then_the_user_cache(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert compile_cache.chosen_dir(env) == tmp_path / "xdg" / "jaxinit" / "xla"
    assert compile_cache.chosen_dir(env, jax_dir="/somewhere") == Path("/somewhere")
    assert compile_cache.chosen_dir({**env, compile_cache.ENV: str(tmp_path / "c")}, "/somewhere") == tmp_path / "c"
    for off in ("off", "0", "False", " none "):
        assert compile_cache.chosen_dir({compile_cache.ENV: off}, "/somewhere") is None
    assert compile_cache.default_dir({}) == Path.home() / ".cache" / "jaxinit" / "xla"


PROGRAM = """
import sys
from jaxinit import compile_cache
folder = compile_cache.enable()
import jax, jax.numpy as jnp
from jaxinit.train.timing import Compiles
record = Compiles()
jax.jit(lambda x: jnp.sin(x) @ jnp.cos(x).T + 1.0)(jnp.ones((64, 64))).block_until_ready()
print(folder, record.cache_hits > 0, [p["cache_hit"] for p in record.programs if "lambda" in p["program"]])
"""


def _run(env_extra: dict) -> str:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", **env_extra)
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_second_process_loads_the_program_from_the_cache(tmp_path):
    folder = tmp_path / "cache"
    first = _run({compile_cache.ENV: str(folder)})
    assert first == f"{folder} False [False]" and any(folder.iterdir())
    assert _run({compile_cache.ENV: str(folder)}) == f"{folder} True [True]"


def test_off_writes_no_cache_even_where_jax_has_a_folder(tmp_path):
    folder = tmp_path / "jaxdir"
    assert _run({compile_cache.ENV: "off", "JAX_COMPILATION_CACHE_DIR": str(folder)}) == "None False [False]"
    assert not folder.exists() or not any(folder.iterdir())


def test_default_is_the_user_cache_folder(tmp_path):
    out = _run({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    folder = tmp_path / "xdg" / "jaxinit" / "xla"
    assert out.startswith(str(folder)) and any(folder.iterdir())


def test_run_json_lists_the_compiled_programs(tmp_path):
    import jax
    from jaxinit import forgetting
    from jaxinit.config import DataConfig, ModelConfig, TrainConfig
    smoke = forgetting.preset("smoke")
    cfg = replace(smoke, data=DataConfig(name="gaussian", n_samples=600, dim=16, n_train=256, n_val=128),
                  model=ModelConfig(name="mlp", width=16, depth=1), train=TrainConfig(batch_size=64, epochs=1))
    # An earlier test in this worker may have traced the same programs; a program found in jax's in-memory cache is
    # not compiled again and so, rightly, not listed.
    jax.clear_caches()
    forgetting.fit(cfg, tmp_path / "r", progress=False)
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    # A program loaded from a warm persistent cache takes milliseconds and is counted among the small ones by name.
    names = [p["program"] for p in info["compiles"]] + info["compiles_small"]["names"]
    assert "jit(batched_train_step)" in names and "jit(init_member)" in names, names
    for step in (p for p in info["compiles"] if p["program"] == "jit(batched_train_step)"):
        assert step["compile_s"] > 0 and step["lower_s"] > 0 and isinstance(step["cache_hit"], bool)
    assert info["compile_s_total"] >= sum(p["compile_s"] for p in info["compiles"])
    assert info["compile_cache"] == os.environ.get("JAX_COMPILATION_CACHE_DIR")


def test_the_command_line_turns_the_cache_on_by_default(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", compile_cache.ENV)}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    argv = ["--preset", "smoke", "--data.name=gaussian", "--train.epochs=1", "--train.checkpoint_every=0",
            "--out", str(tmp_path / "o")]
    code = f"from experiments import forgetting; import sys; sys.exit(forgetting.run({argv!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = tmp_path / "xdg" / "jaxinit" / "xla"
    info = json.loads((tmp_path / "o" / "run.json").read_text())
    assert info["compile_cache"] == str(folder) and any(folder.iterdir())
