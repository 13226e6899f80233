"""bench/depth_ab.py runs bench_depth.py from two builds in turn and compares what a deep
context adds to a token in each."""

from __future__ import annotations

import json
from functools import partial

from helpers.bench_scripts import BUILT, run_script

run = partial(run_script, "depth_ab.py", timeout=900)


def test_a_build_against_itself_reports_both_sides(gemma_path):
    done = run(
        str(BUILT), str(BUILT), "--model", str(gemma_path), "--depth", "64", "--rounds", "1",
        "--runs", "1", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["depth"], report["threads"]) == (64, 1)
    for side in ("a", "b"):
        (only,) = report[side]
        assert only["depth"] == 64 and only["rounds"] == 1
        assert only["empty_tps"] > 0 and only["depth_tps"] > 0
        assert only["added_ms"] == 1000 / only["depth_tps"] - 1000 / only["empty_tps"]


def test_a_checkout_without_a_build_is_refused(tmp_path):
    done = run(str(tmp_path), str(BUILT))
    assert done.returncode != 0
    assert "no built llamay/_core/engine module" in done.stderr
    assert "Traceback" not in done.stderr
    done = run(str(BUILT), str(BUILT), "--runs", "0")
    assert done.returncode == 2
    assert "--runs must be at least 1" in done.stderr
