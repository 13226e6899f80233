"""`bench/ab.py attention` compiles two builds' attention kernels (AVX2, or the set --kernels
names) into one probe and times them step by step in turn; both give the same bits when they
are the same kernel."""

from __future__ import annotations

import json
import subprocess
from functools import partial
from pathlib import Path

import pytest

from llamay._core import kernels as E

from helpers.bench_scripts import run_script

ROOT = Path(__file__).resolve().parents[2]
run = partial(run_script, "ab.py", "attention")
needs_avx2 = pytest.mark.skipif(
    "avx2" not in E.kernel_sets(), reason="this machine has no AVX2 kernel set"
)


def _in_git() -> bool:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.bench
@needs_avx2
def test_the_working_tree_against_itself_gives_the_same_bits():
    done = run(str(ROOT), str(ROOT), "--depth", "100", "--rounds", "3", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["kernels"], report["depth"], report["same_bits"]) == ("avx2", 100, True)
    [step] = report["measures"]
    assert step["name"] == "attention step" and step["unit"] == "ms"
    assert len(step["a"]) == len(step["b"]) == 3 == len(step["round_speedups"])
    assert all(ms > 0 for ms in step["a"] + step["b"])
    assert step["speedup"] == pytest.approx(step["a_median"] / step["b_median"])


@pytest.mark.bench
@needs_avx2
@pytest.mark.skipif(not _in_git(), reason="not a git checkout")
def test_a_git_revision_is_built_from_its_own_sources():
    done = run("HEAD", "HEAD", "--depth", "64", "--rounds", "2")
    assert done.returncode == 0, done.stderr
    assert "attention: attention at depth 64, kernels avx2, 2 round(s) of A then B" in done.stdout
    assert "  attention step: A " in done.stdout and "; B/A speed " in done.stdout
    assert "  output bits the same" in done.stdout


@pytest.mark.bench
@pytest.mark.skipif("avx512" not in E.kernel_sets(), reason="this machine has no AVX-512 set")
def test_kernels_picks_the_avx512_set():
    done = run(
        str(ROOT), str(ROOT), "--kernels", "avx512", "--depth", "100", "--rounds", "3", "--hot",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["about"] == "attention at depth 100, kernels avx512, --hot"
    assert report["same_bits"] is True


@pytest.mark.bench
@needs_avx2
def test_a_layer_s_weights_between_layers_shuffled_pages_and_one_group_of_pages():
    # stream: 50 MB read before each layer's attention; shuffled: the page table shuffled; one
    # group: each (layer, KV head)'s pages one run of bytes. Both builds see the same positions.
    done = run(
        str(ROOT), str(ROOT), "--depth", "100", "--rounds", "3", "--stream", "--shuffled",
        "--one-group", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (
        report["about"] == "attention at depth 100, kernels avx2, --stream, --shuffled, --one-group"
    )
    assert report["same_bits"] is True


def test_an_unknown_set_or_too_few_builds_are_refused_in_one_line():
    done = run(str(ROOT), str(ROOT), "--kernels", "neon")
    assert done.returncode == 2
    assert "argument --kernels: invalid choice: 'neon'" in done.stderr
    done = run(str(ROOT))
    assert done.returncode == 2
    assert "the following arguments are required: b" in done.stderr
    done = run(str(ROOT), str(ROOT), "--rounds", "0")
    assert done.returncode == 2
    assert "--rounds must be at least 1" in done.stderr


def test_a_build_that_is_neither_sources_nor_a_revision_is_refused(tmp_path):
    done = run(str(tmp_path), str(ROOT), "--depth", "16", "--rounds", "1")
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        == f"{tmp_path}: no llamay/_core/csrc/kernels.c (a checkout of llamay's sources)"
    )
    done = run("no-such-revision", str(ROOT), "--depth", "16", "--rounds", "1")
    assert done.returncode == 1
    assert done.stderr.startswith("no-such-revision: neither a directory nor a git revision of ")
    assert "Traceback" not in done.stderr
