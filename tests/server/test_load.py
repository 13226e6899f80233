"""A short run of the load test (bench/load_test.py; the full one is 16 clients for 60 s):
concurrent OpenAI and Anthropic clients, no errors, every KV page back afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LOAD_TEST = Path(__file__).parents[2] / "bench" / "load_test.py"


def test_eight_clients_for_ten_seconds(launch, tmp_path_factory, gemma_path):
    # A server of its own: the pages it holds before and after must not depend on what other
    # tests sharing the session's server left cached or still have in flight.
    server = launch(tmp_path_factory.mktemp("load-home"))
    run = subprocess.run(
        [
            sys.executable,
            str(LOAD_TEST),
            "--url",
            server.base_url,
            "--clients",
            "8",
            "--seconds",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout)
    assert summary["errors"] == 0
    assert summary["requests"] >= 8
    assert summary["pages_held_after"] == summary["pages_held_before"]
