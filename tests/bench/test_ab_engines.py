"""`bench/ab.py depth` and `bench/ab.py concurrency` run whole engines of two builds, a process
of each a round in turn (bench/engine_runs.py), and compare them figure by figure."""

from __future__ import annotations

import json
from functools import partial

import pytest

from helpers.bench_scripts import BUILT, run_script

run = partial(run_script, "ab.py", timeout=900)


@pytest.mark.bench
def test_depth_reports_both_builds_and_what_the_depth_adds(gemma_path):
    done = run(
        "depth", str(BUILT), str(BUILT), "--model", str(gemma_path), "--depth", "64",
        "--n-gen", "5", "--repeat", "1", "--rounds", "2", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["mode"], report["depth"]) == ("depth", 64)
    empty, deep, share, added = report["measures"]
    assert [m["name"] for m in (empty, deep, share, added)] == [
        "empty-context decode",
        "decode after 64 tokens",
        "share of the empty-context decode",
        "what the depth adds to a token",
    ]
    for side in ("a", "b"):
        assert len(empty[side]) == 2 and all(tps > 0 for tps in empty[side] + deep[side])
        assert added[side] == [
            1000 / d - 1000 / e for e, d in zip(empty[side], deep[side], strict=True)
        ]
    assert empty["speedup"] == pytest.approx(empty["b_median"] / empty["a_median"])


@pytest.mark.bench
def test_concurrency_reports_each_count_and_its_scaling(gemma_path):
    done = run(
        "concurrency", str(BUILT), str(BUILT), "--model", str(gemma_path), "--threads", "1",
        "--concurrency", "1,2", "--max-tokens", "6", "--rounds", "2", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    names = [m["name"] for m in report["measures"]]
    assert names == ["1 sequence(s), aggregate", "2 sequence(s), aggregate", "2 sequences over one"]
    one, two, scaling = report["measures"]
    for side in ("a", "b"):
        assert len(one[side]) == 2 and all(tps > 0 for tps in one[side] + two[side])
        assert scaling[side] == [t / o for o, t in zip(one[side], two[side], strict=True)]


@pytest.mark.parametrize("mode", ["depth", "concurrency"])
def test_a_checkout_without_a_build_is_refused(tmp_path, gemma_path, mode):
    done = run(mode, str(tmp_path), str(BUILT), "--model", str(gemma_path))
    assert done.returncode == 1
    assert done.stderr.startswith(f"{tmp_path}: no built llamay/_core/engine module (build it")
    assert "Traceback" not in done.stderr


def test_bad_options_are_refused_in_one_line():
    done = run("depth", str(BUILT), str(BUILT), "--rounds", "0")
    assert done.returncode == 2
    assert "--rounds must be at least 1" in done.stderr
    done = run("depth", str(BUILT), str(BUILT), "--depth", "8")
    assert done.returncode == 2
    assert "--depth must be at least 16" in done.stderr
    done = run("depth", str(BUILT), str(BUILT), "--interleave", "4")
    assert done.returncode == 2
    assert "--interleave must be 1, 2 or 3" in done.stderr
    done = run("concurrency", str(BUILT), str(BUILT), "--concurrency", "1,0")
    assert done.returncode == 2
    assert "--concurrency takes comma-separated positive counts, not '1,0'" in done.stderr
