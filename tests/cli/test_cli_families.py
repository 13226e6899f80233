"""`llamay run` and the Python API on a file of every family of tests/data/families: the same
greedy text from both, and a chat turn through the family's template (gpt-oss: the built-in
Harmony)."""

from __future__ import annotations

import pytest

import llamay

from helpers import families
from helpers.clitools import run_llamay

FILES = [
    "granite-Q4_K_M",
    "granitemoe-Q4_K_M",
    "olmo2-Q4_K_M",
    "smollm3-Q4_K_M",
    "cohere2-Q4_K_M",
    "qwen2moe-Q4_K_M",
    "qwen3moe-Q4_K_M",
    "mixtral-Q4_K_M",
    "gpt-oss-MXFP4_MOE",
]
PROMPT = "The license"


@pytest.mark.parametrize("name", FILES)
def test_run_and_the_python_api_agree(tmp_path, name):
    path = families.model_file(name, tmp_path)
    with llamay.load(path, threads=2) as model:
        expected = "".join(
            p.text for p in model.generate(PROMPT, max_tokens=8, temperature=0).pieces()
        )
    assert expected  # random weights, but some text
    result = run_llamay(
        "run", str(path), PROMPT, "--raw", "-n", "8", "--temp", "0", "--threads", "2"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    chat = run_llamay("run", str(path), "Hello", "-n", "4", "--temp", "0", "--threads", "2")
    assert chat.returncode == 0, chat.stderr
