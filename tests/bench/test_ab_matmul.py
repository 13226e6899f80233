"""`bench/ab.py matmul` loads two builds' matmul modules in one process and times them in turn;
a build against itself gives the same bits."""

from __future__ import annotations

import json
from functools import partial

import pytest

from helpers.bench_scripts import BUILT, run_script

run = partial(run_script, "ab.py", "matmul")


@pytest.mark.bench
def test_the_working_tree_against_itself(gemma_path):
    done = run(
        str(BUILT), str(BUILT), "--model", str(gemma_path), "--tokens", "1,3", "--rounds", "2",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["mode"], report["rows"], report["same_bits"]) == ("matmul", None, True)
    assert [m["name"] for m in report["measures"]] == ["step of 1 token(s)", "step of 3 token(s)"]
    for m in report["measures"]:
        assert len(m["a"]) == len(m["b"]) == 2 and all(ms > 0 for ms in m["a"] + m["b"])
        assert m["speedup"] == pytest.approx(m["a_median"] / m["b_median"])


@pytest.mark.bench
def test_rows_time_a_slice_of_each_kind_of_weight(gemma_path):
    done = run(
        str(BUILT), str(BUILT), "--model", str(gemma_path), "--tokens", "2", "--rounds", "1",
        "--rows", "16",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ", the first 16 rows of each kind (in cache), kernels " in done.stdout
    assert "  step of 2 token(s): A " in done.stdout
    assert done.stdout.endswith("  output bits the same\n")


def test_a_checkout_without_a_build_is_refused(tmp_path, gemma_path):
    done = run(str(tmp_path), str(BUILT), "--model", str(gemma_path))
    assert done.returncode == 1
    assert done.stderr.startswith(f"{tmp_path}: no built llamay/_core/matmul module (build it")


def test_bad_counts_or_a_missing_model_are_refused_in_one_line(tmp_path):
    done = run(str(BUILT), str(BUILT), "--tokens", "8,x")
    assert done.returncode == 2
    assert "--tokens takes comma-separated positive counts, not '8,x'" in done.stderr
    done = run(str(BUILT), str(BUILT), "--rows", "0")
    assert done.returncode == 2
    assert "--rows must be at least 1" in done.stderr
    done = run(str(BUILT), str(BUILT), "--model", str(tmp_path / "missing.gguf"))
    assert done.returncode == 2
    assert "missing.gguf" in done.stderr and "Traceback" not in done.stderr
