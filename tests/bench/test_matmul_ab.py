"""bench/matmul_ab.py loads two builds' matmul modules in one process and times them in turn;
a build against itself gives the same bits."""

from __future__ import annotations

import json
from functools import partial

from helpers.bench_scripts import BUILT, run_script

run = partial(run_script, "matmul_ab.py")


def test_the_working_tree_against_itself(gemma_path):
    done = run(
        str(BUILT), str(BUILT), "--model", str(gemma_path), "--tokens", "1,3", "--rounds", "1",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [s["tokens"] for s in report["steps"]] == [1, 3]
    assert all(s["ms_a"] > 0 and s["ms_b"] > 0 and s["speedup"] > 0 for s in report["steps"])
    assert report["same_bits"] is True


def test_rows_time_a_slice_of_each_kind_of_weight(gemma_path):
    done = run(
        str(BUILT), str(BUILT), "--model", str(gemma_path), "--tokens", "2", "--rounds", "1",
        "--rows", "16", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rows"] == 16
    assert [s["tokens"] for s in report["steps"]] == [2]
    assert report["same_bits"] is True
    done = run(str(BUILT), str(BUILT), "--model", str(gemma_path), "--rows", "0")
    assert done.returncode == 2
    assert "--rows" in done.stderr and "Traceback" not in done.stderr


def test_a_checkout_without_a_build_is_refused(tmp_path, gemma_path):
    done = run(str(tmp_path), str(BUILT), "--model", str(gemma_path))
    assert done.returncode != 0
    assert "no built llamay/_core/matmul module" in done.stderr


def test_a_bad_token_count_or_model_is_refused_in_one_line(tmp_path):
    done = run(str(BUILT), str(BUILT), "--tokens", "8,x")
    assert done.returncode == 2
    assert "--tokens takes comma-separated counts, not '8,x'" in done.stderr
    done = run(str(BUILT), str(BUILT), "--model", str(tmp_path / "missing.gguf"))
    assert done.returncode == 2
    assert "missing.gguf" in done.stderr and "Traceback" not in done.stderr
