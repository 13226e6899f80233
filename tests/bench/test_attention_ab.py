"""bench/attention_ab.sh builds two revisions' attention kernels (AVX2, or the set SET names) into
one program and times them in turn; both give the same bits when they are the same kernel."""

from __future__ import annotations

import os
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
    assert "output bits the same; kernels avx2" in done.stdout


def test_too_few_arguments_or_an_unknown_set_are_refused():
    done = subprocess.run([str(SCRIPT), "."], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "usage:" in done.stderr
    done = subprocess.run(
        [str(SCRIPT), ".", "."],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SET": "neon"},
    )
    assert done.returncode == 2
    assert "SET must be avx2 or avx512, not 'neon'" in done.stderr


@pytest.mark.skipif("avx512" not in E.kernel_sets(), reason="this machine has no AVX-512 set")
def test_set_picks_the_avx512_kernels():
    done = subprocess.run(
        [str(SCRIPT), ".", ".", "100", "3", "hot"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "SET": "avx512"},
    )
    assert done.returncode == 0, done.stderr
    assert "depth 100 (hot), 3 steps each: B/A median" in done.stdout
    assert "output bits the same; kernels avx512" in done.stdout


@pytest.mark.skipif("avx2" not in E.kernel_sets(), reason="this machine has no AVX2 kernel set")
def test_a_layer_s_weights_between_layers_shuffled_pages_and_one_run_of_pages():
    # stream: 50 MB read before each layer's attention; shuffled: the page table shuffled; runs:
    # each (layer, KV head)'s pages one run of bytes. Both builds see the same positions.
    done = subprocess.run(
        [str(SCRIPT), ".", ".", "100", "3", "stream", "shuffled", "runs"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "depth 100 (stream) (shuffled) (runs), 3 steps each: B/A median" in done.stdout
    assert "output bits the same" in done.stdout


def test_an_unknown_option_is_refused():
    done = subprocess.run(
        [str(SCRIPT), ".", ".", "100", "3", "cold"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 2
    assert "unknown option cold: hot, stream, shuffled or runs" in done.stderr
