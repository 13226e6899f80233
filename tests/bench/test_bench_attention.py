"""bench/bench_attention.py runs on a shape's KV layout and reports every kernel set asked for."""

from __future__ import annotations

import json
from functools import partial

from llamay._core import kernels as E

from helpers.bench_scripts import run_script

run = partial(run_script, "bench_attention.py")


def test_every_kernel_set_is_timed_at_the_depth_asked():
    sets = E.kernel_sets()
    done = run(
        "--depth",
        "70",
        "--repeat",
        "1",
        "--kv-type",
        "q8_0",
        "--page-tokens",
        "16",
        "--json",
        "--kernels",
        ",".join(sets),
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [row["kernels"] for row in rows] == sets
    for row in rows:
        assert (row["shape"], row["depth"], row["kv_type"], row["page_tokens"]) == (
            "llama-1b",
            70,
            "q8_0",
            16,
        )
        assert row["ms_per_step"] > 0 and row["kv_gb_per_s"] > 0


def test_hot_runs_are_marked():
    done = run("--depth", "40", "--repeat", "1", "--kernels", "reference", "--hot", "--json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["hot"] is True and row["ms_per_step"] > 0


def test_a_depth_of_zero_is_refused():
    done = run("--depth", "0")
    assert done.returncode == 2
    assert "--depth and --repeat must be at least 1" in done.stderr


def test_an_unknown_kernel_set_is_refused_naming_the_known_ones():
    done = run("--depth", "64", "--kernels", "reference,avx9")
    assert done.returncode == 2
    assert f"unknown kernel sets ['avx9']; known: {', '.join(E.kernel_sets())}" in done.stderr
