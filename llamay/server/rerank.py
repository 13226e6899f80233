"""`POST /v1/rerank` (and llama-server's aliases `/rerank`, `/v1/reranking`): a cross-encoder's
relevance score of each document for a query, in the shape llama-server, Jina and Cohere
clients share.

    {"model", "query", "documents": [str | {"text": str}], "top_n"?, "return_documents"?}
    -> {"model", "object": "list", "results": [{"index", "relevance_score", "document"?}],
        "usage": {"prompt_tokens", "total_tokens"}}

The results are sorted by score, best first (ties by index), and cut to top_n. The score is the
model's classification head's output as llama.cpp gives it (unbounded, not a probability).
A model that is not a reranker (no pooling_type rank) gets a 400 naming it.
"""

from __future__ import annotations

from typing import Any

import falcon

from llamay.server import openapi
from llamay.server.errors import ApiError
from llamay.server.state import Route, ServerState

PATHS = ("/v1/rerank", "/rerank", "/v1/reranking")
MAX_DOCUMENTS = 1024

_REQUEST = {
    "type": "object",
    "required": ["model", "query", "documents"],
    "properties": {
        "model": {"type": "string"},
        "query": {"type": "string"},
        "documents": {
            "type": "array",
            "items": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"text": {"type": "string"}}},
                ]
            },
        },
        "top_n": {"type": "integer", "minimum": 1},
        "return_documents": {"type": "boolean"},
    },
}
_RESPONSE = {
    "type": "object",
    "properties": {
        "model": {"type": "string"},
        "object": {"type": "string"},
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "relevance_score": {"type": "number"},
                    "document": {"type": "object"},
                },
            },
        },
        "usage": {"type": "object"},
    },
}


def add_routes(app: falcon.App, state: ServerState) -> None:
    route = _Rerank(state)
    for path in PATHS:
        app.add_route(path, route)
        openapi.describe(
            "POST",
            path,
            "Rerank documents for a query with a cross-encoder",
            tag="openai",
            request=_REQUEST,
            response=_RESPONSE,
            errors=openapi.MODEL_ROUTE_ERRORS,
        )


class _Rerank(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self.body(req)
        name = body.get("model")
        if not isinstance(name, str) or not name:
            raise ApiError(400, "model is required: the name of a reranker model", "model")
        query = body.get("query")
        if not isinstance(query, str) or not query:
            raise ApiError(400, "query must be a non-empty string", "query")
        documents = _documents(body.get("documents"))
        top_n = _top_n(body.get("top_n"), len(documents))
        return_documents = body.get("return_documents", False)
        if not isinstance(return_documents, bool):
            raise ApiError(400, "return_documents must be true or false", "return_documents")
        model = self.state.models.get(name)
        if not model.is_reranker:
            raise ApiError(
                400,
                f"model {name!r} is not a reranker (it has no classification head, pooling "
                f"type {model.pooling}): /v1/rerank needs a cross-encoder such as "
                "bge-reranker",
                "model",
            )
        head = model.tokenize(query)
        pairs = [head + model.tokenize(doc, add_bos=False) for doc in documents]
        too_long = [i for i, ids in enumerate(pairs) if len(ids) > model.n_ctx]
        if too_long:
            raise ApiError(
                400,
                f"document {too_long[0]} with the query is {len(pairs[too_long[0]])} tokens; "
                f"{name!r} takes at most {model.n_ctx}",
                "documents",
            )
        scores = model.rerank_ids(pairs)
        n_tokens = sum(len(ids) for ids in pairs)
        self.state.count_tokens(model, n_tokens, 0)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:top_n]
        results = []
        for i in order:
            result: dict[str, Any] = {"index": i, "relevance_score": scores[i]}
            if return_documents:
                result["document"] = {"text": documents[i]}
            results.append(result)
        resp.media = {
            "model": name,
            "object": "list",
            "results": results,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }


def _documents(value: Any) -> list[str]:
    """Strings, or objects with a "text" (Cohere's and Jina's clients send either)."""
    if not isinstance(value, list) or not value:
        raise ApiError(400, "documents must be a non-empty list of strings", "documents")
    if len(value) > MAX_DOCUMENTS:
        raise ApiError(400, f"at most {MAX_DOCUMENTS} documents per request", "documents")
    out = []
    for item in value:
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str) or not text:
            raise ApiError(
                400, 'each document must be a non-empty string or {"text": string}', "documents"
            )
        out.append(text)
    return out


def _top_n(value: Any, n: int) -> int:
    if value is None:
        return n
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ApiError(400, "top_n must be a positive integer", "top_n")
    return min(value, n)
