"""What this machine is and which of llamay's code runs on it, for `llamay show --system`,
`llamay verify`, `llamay bench` and the server's `/api/version`: a bug report or a benchmark
then says which kernels ran on which CPU."""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
from typing import Any

from llamay._core import _cpu
from llamay._version import __version__
from llamay.backends.cpu import kernel_set
from llamay.errors import LlamayError


@functools.cache
def cpu_name() -> str:
    """The CPU's model name as the OS gives it ('AMD EPYC 9454P 48-Core Processor', 'Apple
    M2'), or the machine's architecture where it gives none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            brand = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            if brand:
                return brand
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def system_info() -> dict[str, Any]:
    """llamay's version, the platform, the CPU (name, CPUs this process may use, the features
    a kernel set uses), the kernel sets this build carries and those the CPU runs, and the one
    a model loads with now (`kernels`: $LLAMAY_KERNELS, else the best; `kernels_forced`: whether
    the variable chose it). A kernel set the variable names but the CPU cannot run is reported
    in `kernels_error` instead."""
    info: dict[str, Any] = {
        "llamay": __version__,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpus": _cpu.cpu_count(),
        "features": _cpu.features(),
        "kernel_sets": _cpu.kernel_sets(),
        "runs": _cpu.usable_kernel_sets(),
        "best": _cpu.best_kernel_set(),
    }
    try:
        info["kernels"] = kernel_set(None)
    except LlamayError as exc:  # a bad LLAMAY_KERNELS: reported, as the one thing that is off
        info["kernels"] = None
        info["kernels_error"] = str(exc)
    info["kernels_forced"] = bool(os.environ.get("LLAMAY_KERNELS"))
    return info


def kernels_line(info: dict[str, Any] | None = None) -> str:
    """One line for a report's head: 'kernels avx512 (best of reference, avx2, avx512) on AMD
    EPYC 9454P, 2 CPUs'."""
    info = system_info() if info is None else info
    if info["kernels"] is None:
        chosen = f"none ({info['kernels_error']})"
    elif info["kernels_forced"]:
        chosen = f"{info['kernels']} (LLAMAY_KERNELS; runs {', '.join(info['runs'])})"
    else:
        chosen = f"{info['kernels']} (best of {', '.join(info['runs'])})"
    cpu = re.sub(r"\s+", " ", info["cpu"])
    return f"kernels {chosen} on {cpu}, {info['cpus']} CPUs"
