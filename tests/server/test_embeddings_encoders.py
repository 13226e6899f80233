"""`llamay serve` on encoder models (BERT, nomic-bert): /v1/embeddings through the official
openai SDK (with `dimensions`), /api/embed through the official ollama SDK, each the same
vectors as the Python API gives."""

from __future__ import annotations

import httpx
import numpy as np
import ollama
import openai
import pytest

import llamay

from helpers import embeddings

TEXTS = ["the licenses for most software", "freedom to share and change", "a program"]


@pytest.fixture(scope="module")
def served(tmp_path_factory, launch):
    models = tmp_path_factory.mktemp("encoders")
    paths = {
        name: embeddings.model_file(name, models)
        for name in ("bert-mean-Q8_0", "nomic-bert-F16", "bert-rerank-Q8_0")
    }
    server = launch(tmp_path_factory.mktemp("encoders-home"), "--models-dir", str(models))
    return server, {name: str(path) for name, path in paths.items()}


def expected(path: str, dimensions: int | None = None) -> np.ndarray:
    with llamay.load(path, threads=2) as model:
        return np.array(model.embed_many(TEXTS, dimensions=dimensions))


@pytest.mark.parametrize("name", ["bert-mean-Q8_0", "nomic-bert-F16"])
def test_openai_sdk_embeddings_with_dimensions(served, name):
    server, paths = served
    client = openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)
    full = client.embeddings.create(model=paths[name], input=TEXTS)
    vectors = np.array([d.embedding for d in full.data], dtype=np.float32)
    assert vectors.shape == (3, 256)
    assert np.array_equal(vectors, expected(paths[name]))
    short = client.embeddings.create(model=paths[name], input=TEXTS, dimensions=64)
    vectors = np.array([d.embedding for d in short.data], dtype=np.float32)
    assert vectors.shape == (3, 64)
    assert np.array_equal(vectors, expected(paths[name], 64))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert full.usage.prompt_tokens > 0
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        client.embeddings.create(model=paths[name], input=TEXTS, dimensions=257)


def test_ollama_sdk_embed_with_dimensions(served):
    server, paths = served
    client = ollama.Client(host=server.base_url)
    path = paths["bert-mean-Q8_0"]
    answer = client.embed(model=path, input=TEXTS)
    assert np.array_equal(np.array(answer.embeddings, dtype=np.float32), expected(path))
    short = client.embed(model=path, input=TEXTS[0], dimensions=16)
    assert np.array_equal(np.array(short.embeddings[0], dtype=np.float32), expected(path, 16)[0])
    raw = client.embeddings(model=path, prompt=TEXTS[0])  # the older route: not normalized
    with llamay.load(path, threads=2) as model:
        assert np.array_equal(
            np.array(raw.embedding, dtype=np.float32), model.embed(TEXTS[0], normalize=False)
        )


def test_a_reranker_is_refused_embeddings(served):
    server, paths = served
    answer = httpx.post(
        server.url("/v1/embeddings"),
        json={"model": paths["bert-rerank-Q8_0"], "input": "x"},
        timeout=120,
    )
    assert answer.status_code == 400
    assert "reranker" in answer.json()["error"]["message"]
