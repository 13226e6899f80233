"""The compiled core: every hot loop, in Cython and C.

Importing this package first checks that the CPU has every instruction the kernels were
compiled with, so an unsuited CPU gets a clear error instead of SIGILL.
"""

from __future__ import annotations

from llamay.errors import UnsupportedCPU

try:
    from llamay._core import _cpu
except ImportError as exc:  # pragma: no cover - a broken install
    raise ImportError(
        "llamay's compiled core is missing; reinstall with `pip install .` from the source tree"
    ) from exc


def check_cpu(missing: list[str], build_flags: str) -> None:
    """Refuse to load kernels that use instructions this CPU lacks."""
    if missing:
        raise UnsupportedCPU(
            f"llamay was compiled for a CPU with {', '.join(missing)} (flags: {build_flags}), "
            "which this CPU lacks; reinstall from source on this machine, or with "
            "LLAMAY_PORTABLE=1 for a build that runs anywhere"
        )


check_cpu(_cpu.missing_features(), _cpu.build_flags())
