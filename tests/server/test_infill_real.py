"""The real Qwen2.5-Coder-1.5B behind `llamay serve` completes a function body through /infill,
as an editor plugin asks it: the prefix up to the body, the suffix after it (a test of the
function), FIM tokens recognised by their text (the file has no fim_* keys). The code it fills
in is run, with the suffix's test, in a subprocess."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from helpers.serving import start_server, stop_server

PREFIX = (
    "def fibonacci(n):\n"
    '    """Return the n-th Fibonacci number: fibonacci(0) == 0, fibonacci(1) == 1."""\n'
    "    "
)
SUFFIX = "\n\n\ndef test_fibonacci():\n    assert fibonacci(10) == 55\n\n\ntest_fibonacci()\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory, qwen_coder_15b):
    running = start_server(
        tmp_path_factory.mktemp("home"),
        "--models-dir",
        str(qwen_coder_15b.parent),
        "--ctx-size",
        "4096",
    )
    yield running
    stop_server(running)


def test_infill_completes_a_function_body(server, qwen_coder_15b):
    answer = httpx.post(
        server.url("/infill"),
        json={
            "model": str(qwen_coder_15b),
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
