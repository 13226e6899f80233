"""Runs a bench/ script as a user would: this Python, in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import llamay

BENCH = Path(__file__).resolve().parents[2] / "bench"
# where the built package lies: the source tree (built in place) or site-packages (installed)
BUILT = Path(llamay.__file__).resolve().parents[1]


def run_script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """bench/NAME ARGS..., its output captured as text."""
    return subprocess.run(
        [sys.executable, str(BENCH / name), *args], capture_output=True, text=True, timeout=timeout
    )
