"""bench/engine_runs.py: what `bench/ab.py depth` and `concurrency` measure in each build's
process (here with the installed llamay, in this process)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from engine_runs import aggregate_rate, measure_concurrency, measure_depth


def lockstep(n: int, steps: int, step_s: float, late: int = 0) -> list[np.ndarray]:
    """Arrival times of n sequences batched into steps of step_s seconds: each step's tokens
    reach their threads a millisecond apart, and the last sequence joins `late` steps later."""
    return [(np.arange(steps) + (late if i == n - 1 else 0)) * step_s + 0.001 * i for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 8])
@pytest.mark.parametrize("late", [0, 1])
def test_a_batch_of_n_sequences_makes_n_tokens_a_step(n, late):
    assert aggregate_rate(lockstep(n, 32, 0.1, late)) == pytest.approx(n / 0.1, rel=1e-9)


def test_sequences_at_different_speeds_add_up():
    fast, slow = np.arange(40) * 0.05, np.arange(20) * 0.1
    assert aggregate_rate([fast, slow]) == pytest.approx(20 + 10, rel=1e-9)


def test_sequences_that_never_decode_together_are_refused():
    with pytest.raises(SystemExit, match="too few tokens while every sequence decodes"):
        aggregate_rate([np.arange(4) * 0.1, 10 + np.arange(4) * 0.1])


@pytest.mark.slow
@pytest.mark.parametrize("interleave", [1, 3])
def test_both_decodes_are_timed_and_their_share_reported(gemma_path, interleave):
    report = measure_depth(
        str(gemma_path), depth=80, threads=1, n_gen=5, repeat=2, interleave=interleave
    )
    assert report["threads"] == 1
    assert report["empty_tps"] > 0 and report["depth_tps"] > 0 and report["share"] > 0


@pytest.mark.slow
def test_each_count_of_sequences_is_timed(gemma_path):
    report = measure_concurrency(
        str(gemma_path), threads=1, counts=[1, 2], max_tokens=6, kv_memory="64MiB"
    )
    assert report["threads"] == 1
    assert list(report["aggregate_tps"]) == ["1", "2"]
    assert all(tps > 0 for tps in report["aggregate_tps"].values())
