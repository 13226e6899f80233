"""`POST /v1/rerank` (and /rerank, /v1/reranking): a cross-encoder's scores, sorted, cut to
top_n, the same as Model.rerank; a model that is no reranker gets a 400 naming it."""

from __future__ import annotations

import httpx
import pytest

import llamay

from helpers import embeddings

QUERY = "what may I do with free software"
DOCUMENTS = [
    "you may copy and distribute verbatim copies of this license document",
    "the licenses for most software are designed to take away your freedom",
    "a program",
    "to protect your rights, we need to prevent others from denying you these rights",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory, launch):
    models = tmp_path_factory.mktemp("rerankers")
    paths = {
        name: str(embeddings.model_file(name, models))
        for name in ("bert-rerank-Q8_0", "bert-mean-Q8_0")
    }
    server = launch(tmp_path_factory.mktemp("rerank-home"), "--models-dir", str(models))
    return server, paths


def rerank(server, path="/v1/rerank", **body) -> httpx.Response:
    return httpx.post(server.url(path), json=body, timeout=120)


def test_rerank_sorts_by_the_models_scores(served):
    server, paths = served
    model_path = paths["bert-rerank-Q8_0"]
    with llamay.load(model_path, threads=2) as model:
        scores = model.rerank(QUERY, DOCUMENTS)
    answer = rerank(server, model=model_path, query=QUERY, documents=DOCUMENTS)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    order = sorted(range(len(DOCUMENTS)), key=lambda i: -scores[i])
    assert [r["index"] for r in body["results"]] == order
    assert [r["relevance_score"] for r in body["results"]] == [scores[i] for i in order]
    assert all("document" not in r for r in body["results"])
    assert body["model"] == model_path
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0


@pytest.mark.parametrize("route", ["/rerank", "/v1/reranking"])
def test_aliases_top_n_and_documents(served, route):
    server, paths = served
    documents = [{"text": d} for d in DOCUMENTS]  # Cohere's and Jina's object form
    full = rerank(server, model=paths["bert-rerank-Q8_0"], query=QUERY, documents=DOCUMENTS)
    answer = rerank(
        server,
        route,
        model=paths["bert-rerank-Q8_0"],
        query=QUERY,
        documents=documents,
        top_n=2,
        return_documents=True,
    )
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["index"] for r in results] == [r["index"] for r in full.json()["results"][:2]]
    assert [r["document"]["text"] for r in results] == [DOCUMENTS[r["index"]] for r in results]


def test_not_a_reranker_is_named(served):
    server, paths = served
    answer = rerank(server, model=paths["bert-mean-Q8_0"], query=QUERY, documents=DOCUMENTS)
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert "not a reranker" in message and paths["bert-mean-Q8_0"] in message


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"query": QUERY, "documents": DOCUMENTS}, "model"),
        ({"query": "", "documents": DOCUMENTS}, "query"),
        ({"query": QUERY, "documents": []}, "documents"),
        ({"query": QUERY, "documents": [1]}, "documents"),
        ({"query": QUERY, "documents": DOCUMENTS, "top_n": 0}, "top_n"),
        ({"query": QUERY, "documents": DOCUMENTS, "return_documents": "yes"}, "return_documents"),
    ],
)
def test_bad_requests_say_which_field(served, body, param):
    server, paths = served
    if param != "model":
        body = {"model": paths["bert-rerank-Q8_0"], **body}
    answer = rerank(server, **body)
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == param
