"""bench/attention_ab.sh builds two revisions' AVX2 attention kernels into one program and times
them in turn; both give the same bits when they are the same kernel."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from llamay._core import kernels as E

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "attention_ab.sh"


@pytest.mark.skipif("avx2" not in E.kernel_sets(), reason="this machine has no AVX2 kernel set")
def test_the_working_tree_against_itself_gives_the_same_bits():
    done = subprocess.run(
        [str(SCRIPT), ".", ".", "100", "3"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "depth 100, 3 steps each: B/A median" in done.stdout
    assert "output bits the same" in done.stdout


def test_too_few_arguments_are_refused():
    done = subprocess.run([str(SCRIPT), "."], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "usage:" in done.stderr
