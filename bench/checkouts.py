"""Running a bench/ script with another checkout's llamay: what the A/B scripts share."""

from __future__ import annotations

import argparse
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


def ab_parser(doc: str, threads: int, runs: int) -> argparse.ArgumentParser:
    """The options every A/B script takes: the two checkouts, --model, --threads, --runs and
    --json; the script adds its own, then calls ab_args."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("a", type=Path, help="checkout A, built in place")
    parser.add_argument("b", type=Path, help="checkout B, built in place")
    parser.add_argument("--model", default="llama-1b:Q4_K_M")
    parser.add_argument("--threads", type=int, default=threads)
    parser.add_argument("--runs", type=int, default=runs, help="processes per build, in turn")
    parser.add_argument("--json", action="store_true")
    return parser


def ab_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The parsed options, with both checkouts built (as absolute paths) and at least one run."""
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    args.a, args.b = args.a.resolve(), args.b.resolve()
    for checkout in (args.a, args.b):
        require_built(checkout)
    return args
