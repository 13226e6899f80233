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
from llamay.server.fields import Custom, Field, Flag, Invalid, Shape, Text, integer
from llamay.server.state import Route, ServerState

PATHS = ("/v1/rerank", "/rerank", "/v1/reranking")
MAX_DOCUMENTS = 1024

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
            request=REQUEST.schema(),
            response=_RESPONSE,
            errors=openapi.MODEL_ROUTE_ERRORS,
        )


class _Rerank(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = REQUEST.read(self.body(req))
        name, query, documents = values["model"], values["query"], values["documents"]
        top_n = min(values["top_n"] or len(documents), len(documents))
        return_documents = values["return_documents"]
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
        raise Invalid("{name} must be a non-empty list of strings")
    if len(value) > MAX_DOCUMENTS:
        raise Invalid(f"at most {MAX_DOCUMENTS} documents per request")
    out = []
    for item in value:
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str) or not text:
            raise Invalid('each document must be a non-empty string or {"text": string}')
        out.append(text)
    return out


_NO_MODEL = "model is required: the name of a reranker model"
REQUEST = Shape(
    Field("model", Text(nonempty=True), required=_NO_MODEL, invalid=_NO_MODEL),
    Field("query", Text(nonempty=True), required="query must be a non-empty string"),
    Field(
        "documents",
        Custom(
            _documents,
            {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_DOCUMENTS,
                "items": {
                    "oneOf": [
                        {"type": "string"},
                        {"type": "object", "properties": {"text": {"type": "string"}}},
                    ]
                },
            },
        ),
        required="documents must be a non-empty list of strings",
    ),
    Field("top_n", integer(1), "the best this many (default: all)"),
    Field("return_documents", Flag(), "each result with its document", default=False),
)
