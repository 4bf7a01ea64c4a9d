"""Results files (jaxinit.run.files): never written through a symlink out of the run, messages stay one line.

Issue 20 items 10 and 15: a symlinked figures/ was written through; a newline in --out made the one-line
message two.
"""
import os

import numpy as np
import pytest

from jaxinit.run import files, manifest, rundir
from jaxinit.errors import ConfigError


@pytest.fixture
def run_and_elsewhere(tmp_path):
    out, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "precious.json").write_text("precious")
    return out, elsewhere


def _untouched(elsewhere):
    return sorted(p.name for p in elsewhere.iterdir()) == ["precious.json"] and \
        (elsewhere / "precious.json").read_text() == "precious"


WRITERS = {
    "json": lambda p, root: files.write_json(p, {"a": 1}, root=root),
    "jsonl": lambda p, root: files.write_jsonl(p, [{"a": 1}], root=root),
    "text": lambda p, root: files.write_text(p, "x", root=root),
    "npz": lambda p, root: files.save_npz(p, {"root": np.arange(2)}, root=root),
}


@pytest.mark.parametrize("writer", WRITERS)
def test_a_symlinked_folder_out_of_the_run_is_refused(run_and_elsewhere, writer):
    out, elsewhere = run_and_elsewhere
    (out / "figures").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="is a symbolic link to .* outside the run directory") as err:
        WRITERS[writer](out / "figures" / "new.json", out)
    assert "\n" not in str(err.value) and _untouched(elsewhere)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_symlinked_results_file_out_of_the_run_is_refused(run_and_elsewhere, writer):
    out, elsewhere = run_and_elsewhere
    (out / "summary.json").symlink_to(elsewhere / "precious.json")
    with pytest.raises(ConfigError, match="outside the run directory"):
        WRITERS[writer](out / "summary.json", out)
    assert _untouched(elsewhere) and (out / "summary.json").is_symlink()


def test_links_inside_the_run_and_a_linked_run_directory_are_fine(tmp_path):
    real = tmp_path / "scratch" / "run"
    real.mkdir(parents=True)
    out = tmp_path / "run"
    out.symlink_to(real)                                   # --out on another disk
    (real / "figs").mkdir()
    (real / "figures").symlink_to(real / "figs")
    files.write_json(out / "figures" / "a.json", {}, root=out)
    assert (real / "figs" / "a.json").exists()
    files.write_json(tmp_path / "free.json", {})           # without root: no check, as before


def test_the_manifest_writers_refuse_the_same(run_and_elsewhere):
    out, elsewhere = run_and_elsewhere
    (out / "figures").symlink_to(elsewhere)
    m = manifest.Manifest(out)
    with pytest.raises(ConfigError, match="outside the run directory"):
        m.write_text(out / "figures" / "fig1.png", "png")
    assert _untouched(elsewhere)


def test_check_inside_names_the_link(run_and_elsewhere):
    out, elsewhere = run_and_elsewhere
    (out / "results").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match=r"run/results is a symbolic link to"):
        files.check_inside(out, out / "results" / "a" / "b.npz")
    assert files.check_inside(out, out / "a" / "b.npz") == out / "a" / "b.npz"


@pytest.mark.parametrize("char", ["\n", "\r", "\x1b", "\t", "\x00", "\u2028", "\x85"])
def test_control_characters_in_a_path_are_escaped(char):
    text = files.safe_path(f"/tmp/a{char}b")
    assert text.isprintable() and text.startswith("/tmp/a\\") and text.endswith("b")


def test_a_newline_in_out_keeps_the_lock_message_one_line(tmp_path):
    out = tmp_path / "a\nb"
    with rundir.RunLock(out):
        with pytest.raises(ConfigError) as err:
            rundir.RunLock(out).__enter__()
    assert "\n" not in str(err.value) and "a\\x0ab" in str(err.value)


def test_sha256_file_reads_in_blocks(tmp_path):
    import hashlib
    blob = os.urandom(3 << 20)
    (tmp_path / "b").write_bytes(blob)
    assert files.sha256_file(tmp_path / "b") == hashlib.sha256(blob).hexdigest()
