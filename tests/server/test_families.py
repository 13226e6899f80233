"""`llamay serve` on files of the families of tests/data/families: an OpenAI chat completion from a
mixture-of-experts model and from gpt-oss, greedy, as the Python API generates it."""

from __future__ import annotations

import httpx
import pytest

import llamay

from helpers import families


@pytest.mark.parametrize("name", ["qwen3moe-Q4_K_M", "gpt-oss-MXFP4_MOE"])
def test_serve_answers_from_a_new_family(tmp_path, launch, name):
    models = tmp_path / "models"
    models.mkdir()
    path = families.model_file(name, models)
    messages = [{"role": "user", "content": "Hello"}]
    with llamay.load(path, threads=2) as model:
        prompt = model.chat_template.render(messages)
        expected = "".join(
            p.text for p in model.generate(prompt, max_tokens=6, temperature=0).pieces()
        )
    server = launch(tmp_path / "home", "--models-dir", str(models))
    answer = httpx.post(
        server.url("/v1/chat/completions"),
        json={"model": str(path), "messages": messages, "max_tokens": 6, "temperature": 0},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == expected
