"""bench/bench_concurrency.py: aggregate decode speed of sequences generating at once."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from helpers.bench_scripts import run_script

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_concurrency import aggregate_rate

run = partial(run_script, "bench_concurrency.py")


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


def test_a_run_reports_each_count(gemma_path):
    done = run(
        "--model", str(gemma_path), "--threads", "1", "--concurrency", "1,2",
        "--max-tokens", "6", "--repeat", "1", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [row["sequences"] for row in rows] == [1, 2]
    assert all(row["aggregate_tps"] > 0 and row["max_tokens"] == 6 for row in rows)
