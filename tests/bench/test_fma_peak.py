"""bench/probes/fma_peak.c compiles with the flags the kernels are built with and prints the FMA rate,
then, on a machine with AVX-512 VNNI, one rate per integer instruction of the K-quant kernels
(a shortened run: -DSTEPS)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from llamay._core import kernels as E

from helpers.bench_scripts import BENCH

INSTRUCTIONS = ["vpdpbusd", "vpdpwssd", "vpmulld", "vpaddd"]
PROBE = BENCH / "probes" / "fma_peak.c"


@pytest.mark.bench
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.skipif("avx2" not in E.kernel_sets(), reason="this machine has no AVX2 kernel set")
def test_the_rates_it_prints(tmp_path):
    program = tmp_path / "fma_peak"
    subprocess.run(
        ["cc", "-O2", "-march=native", "-DSTEPS=200000", str(PROBE), "-o", program],
        check=True,
        timeout=120,
    )
    done = subprocess.run([program], capture_output=True, text=True, timeout=120)
    fma = re.search(r"^([0-9.]+) G FMA/s of 8 lanes, ([0-9.]+) G multiply-adds/s", done.stdout)
    assert fma is not None and float(fma[1]) > 0, done.stdout
    rates = dict(re.findall(r"^(\w+) +([0-9.]+) G/s$", done.stdout, re.MULTILINE))
    if "avx512" in E.kernel_sets():  # the import-time check vouches for VNNI in that set
        assert list(rates) == INSTRUCTIONS, done.stdout
        assert all(float(rate) > 0 for rate in rates.values()), done.stdout
    else:
        assert rates == {}, done.stdout
