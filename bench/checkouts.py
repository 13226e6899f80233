"""Running a bench/ script with another checkout's llamay: what the A/B scripts share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def require_built(checkout: Path) -> None:
    """Exits with a one-line reason unless checkout holds a llamay built in place."""
    if not any((checkout / "llamay" / "_core").glob("engine.*.so")):
        sys.exit(f"{checkout}: no built llamay/_core/engine module (build it in place)")


def run_json(checkout: Path, script: str, *args: str) -> object:
    """The JSON that bench/SCRIPT ARGS --json prints last, run with checkout's llamay first on
    PYTHONPATH, in a process of its own."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    command = [sys.executable, str(BENCH / script), "--json", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{checkout}: {script} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])
