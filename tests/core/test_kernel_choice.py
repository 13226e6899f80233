"""One build carries every kernel set of its architecture and picks, at load, the best one the
CPU runs; `kernels=` and LLAMAY_KERNELS force one, and asking for one the CPU lacks is a
one-line error naming what it lacks."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest

import llamay
from llamay._core import _cpu
from llamay.errors import LlamayError, UnsupportedCPU

from helpers.clitools import LLAMAY
from helpers.tiny import write_tiny


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny(tmp_path_factory.mktemp("tiny") / "tiny.gguf", "llama", weight_type="Q8_0")


ARCH_SETS = {
    "x86_64": ["reference", "avx2", "avx512"],
    "amd64": ["reference", "avx2", "avx512"],
    "aarch64": ["reference", "neon"],
    "arm64": ["reference", "neon"],
}
NEEDS = {
    "avx2": {"avx", "avx2", "fma", "f16c"},
    "avx512": {
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512dq",
        "avx512vl",
        "avx512vnni",
    },
    "neon": {"asimd"},
}


def test_a_build_carries_every_set_of_its_architecture():
    assert _cpu.kernel_sets() == ARCH_SETS[platform.machine().lower()]


def test_the_sets_that_run_are_those_whose_features_the_cpu_has():
    features = set(_cpu.features())
    for name in _cpu.kernel_sets():
        lacking = sorted(NEEDS.get(name, set()) - features)
        assert _cpu.missing(name) == [f for f in _cpu.missing(name) if f in lacking]
        assert set(_cpu.missing(name)) == set(lacking)
        assert (name in _cpu.usable_kernel_sets()) == (not lacking)
    assert _cpu.usable_kernel_sets()[0] == "reference"
    assert _cpu.best_kernel_set() == _cpu.usable_kernel_sets()[-1]


def test_features_are_read_from_the_cpu_itself():
    """Where Linux lists the CPU's flags, every feature llamay found is among them."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo here")
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):
            flags |= set(line.split(":", 1)[1].split())
    spelled = {"avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16", "avxvnni": "avx_vnni"}
    for feature in _cpu.features():
        assert spelled.get(feature, feature) in flags, feature


def test_a_set_of_another_architecture_is_refused_by_name(tmp_path):
    other = "neon" if "avx2" in ARCH_SETS[platform.machine().lower()] else "avx2"
    with pytest.raises(UnsupportedCPU, match=f"no kernel set '{other}'"):
        _cpu.check(other)


def test_unknown_set_names_are_refused():
    with pytest.raises(ValueError, match="unknown kernel set 'avx9'"):
        _cpu.check("avx9")


def test_each_usable_set_can_be_forced(tiny, monkeypatch):
    path = tiny
    for name in _cpu.usable_kernel_sets():
        assert llamay.load(path, kernels=name).kernels == name
        monkeypatch.setenv("LLAMAY_KERNELS", name)
        assert llamay.load(path).kernels == name
    monkeypatch.delenv("LLAMAY_KERNELS")
    assert llamay.load(path).kernels == _cpu.best_kernel_set()
    monkeypatch.setenv("LLAMAY_KERNELS", "best")
    assert llamay.load(path).kernels == _cpu.best_kernel_set()


def test_an_unknown_name_in_the_environment_is_a_one_line_error(tiny, monkeypatch):
    monkeypatch.setenv("LLAMAY_KERNELS", "avx9")
    with pytest.raises(LlamayError, match="LLAMAY_KERNELS: unknown kernel set 'avx9'"):
        llamay.load(tiny)
    env = {**os.environ, "LLAMAY_KERNELS": "avx9"}
    done = subprocess.run([str(LLAMAY), "verify"], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: LLAMAY_KERNELS: unknown kernel set 'avx9'; known: best, reference, avx2, "
        "avx512, neon"
    ]


@pytest.mark.skipif(
    not _cpu.missing("avx512") or platform.machine() != "x86_64",
    reason="this CPU runs every kernel set of its build",
)
def test_a_set_this_cpu_lacks_names_the_missing_features(tiny):
    with pytest.raises(UnsupportedCPU) as info:
        llamay.load(tiny, kernels="avx512")
    message = str(info.value)
    assert "\n" not in message
    for feature in _cpu.missing("avx512"):
        assert feature in message


def test_cpu_count_is_the_affinity_mask():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if expected is not None:
        assert _cpu.cpu_count() == expected
    assert _cpu.cpu_count() >= 1
