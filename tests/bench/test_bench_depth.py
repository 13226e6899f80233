"""bench/bench_depth.py times decode on an empty and on a deep context of one model, in turn."""

from __future__ import annotations

import json
from functools import partial

from helpers.bench_scripts import run_script

run = partial(run_script, "bench_depth.py")


def test_both_decodes_are_timed_and_their_share_reported(gemma_path):
    done = run(
        "--model", str(gemma_path), "--depth", "80", "--n-gen", "5", "--rounds", "2",
        "--threads", "1", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["depth"], report["rounds"], report["threads"]) == (80, 2, 1)
    assert report["interleave"] == 1
    assert report["empty_tps"] > 0 and report["depth_tps"] > 0 and report["share"] > 0


def test_the_deep_context_can_be_filled_in_turn_with_others(gemma_path):
    done = run(
        "--model", str(gemma_path), "--depth", "80", "--n-gen", "4", "--rounds", "1",
        "--threads", "1", "--interleave", "3", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["depth"], report["interleave"]) == (80, 3)
    assert report["depth_tps"] > 0


def test_a_shallow_depth_is_refused():
    done = run("--depth", "8")
    assert done.returncode == 2
    assert "--depth must be at least 16" in done.stderr


def test_more_interleaved_contexts_than_the_pages_hold_are_refused():
    done = run("--interleave", "4")
    assert done.returncode == 2
    assert "--interleave must be 1, 2 or 3" in done.stderr
