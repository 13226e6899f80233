"""`llamay serve --draft NAME=DRAFT`: requests to NAME speculate with DRAFT and get the tokens
they get without it; the draft's memory counts against the budget."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from llamay.models.synthetic import requantize

from helpers.serving import start_server, stop_server

LLAMA2 = Path(__file__).parent.parent / "data" / "synth" / "llama2-spm-Q8_0.gguf"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    models = tmp_path_factory.mktemp("models")
    shutil.copy(LLAMA2, models / "target.gguf")
    shutil.copy(LLAMA2, models / "plain.gguf")  # the same weights, loaded apart, no draft
    requantize(LLAMA2, models / "draft.gguf", "Q4_0")
    running = start_server(
        tmp_path_factory.mktemp("home"),
        "--models-dir",
        str(models),
        "--alias",
        f"target={models / 'target.gguf'}",
        "--alias",
        f"plain={models / 'plain.gguf'}",
        "--draft",
        f"target={models / 'draft.gguf'}",
    )
    running.models = models
    yield running
    stop_server(running)


def complete(server, model: str) -> dict:
    body = {
        "model": model,
        "prompt": "The licenses for most software",
        "max_tokens": 40,
        "temperature": 0.8,
        "seed": 5,
    }
    answer = httpx.post(server.url("/v1/completions"), json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_drafted_model_answers_as_without_its_draft(server):
    drafted, plain = complete(server, "target"), complete(server, "plain")
    assert drafted["choices"][0]["text"] == plain["choices"][0]["text"] != ""
    assert drafted["usage"] == plain["usage"]


def test_the_draft_counts_against_the_memory_budget(server):
    complete(server, "target")
    complete(server, "plain")
    stats = httpx.get(server.url("/llamay/v1/stats"), timeout=30).json()
    kv = sum(m["pages_total"] * m["bytes_per_page"] for m in stats["models"].values())
    draft_file = (server.models / "draft.gguf").stat().st_size
    # the two files and their KV caches, and the draft's weights (and KV cache) on top
    assert stats["memory"]["held_bytes"] > 2 * LLAMA2.stat().st_size + kv + draft_file
