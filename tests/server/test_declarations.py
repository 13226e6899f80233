"""Every family's request bodies, declared once: the OpenAPI document gives each route's
declaration, and a value past a bound the document states is refused naming that field."""

from __future__ import annotations

import pytest

from llamay.server import (
    anthropic,
    create_app,
    llama_server_fields,
    native_fields,
    ollama_fields,
    openai_fields,
    openapi,
    rerank,
    responses_items,
)
from llamay.server.errors import ApiError
from llamay.server.fields import Shape

HELLO = [{"role": "user", "content": "Hi"}]
# route -> its declaration, and the least body it takes
ROUTES: dict[str, tuple[Shape, dict]] = {
    "/v1/chat/completions": (openai_fields.CHAT, {"model": "m", "messages": HELLO}),
    "/v1/completions": (openai_fields.COMPLETION, {"model": "m", "prompt": "Hi"}),
    "/v1/embeddings": (openai_fields.EMBEDDINGS, {"model": "m", "input": "Hi"}),
    "/v1/messages": (anthropic.MESSAGES, {"model": "m", "messages": HELLO, "max_tokens": 4}),
    "/v1/messages/count_tokens": (anthropic.COUNT_TOKENS, {"model": "m", "messages": HELLO}),
    "/v1/responses": (responses_items.REQUEST, {"model": "m", "input": "Hi"}),
    "/v1/responses/input_tokens": (responses_items.INPUT_TOKENS, {"model": "m"}),
    "/v1/rerank": (rerank.REQUEST, {"model": "m", "query": "q", "documents": ["d"]}),
    "/api/generate": (ollama_fields.GENERATE, {"model": "m"}),
    "/api/chat": (ollama_fields.CHAT, {"model": "m"}),
    "/api/embed": (ollama_fields.EMBED, {"model": "m"}),
    "/api/embeddings": (ollama_fields.EMBEDDINGS, {"model": "m"}),
    "/llamay/v1/contexts": (native_fields.CREATE, {"model": "m", "prompt": "Hi"}),
    "/llamay/v1/contexts/{context_id}/generate": (native_fields.GENERATE, {}),
    "/completion": (llama_server_fields.COMPLETION, {"prompt": "Hi"}),
    "/infill": (llama_server_fields.INFILL, {}),
    "/tokenize": (llama_server_fields.TOKENIZE, {"content": "Hi"}),
    "/detokenize": (llama_server_fields.DETOKENIZE, {}),
    "/apply-template": (llama_server_fields.APPLY_TEMPLATE, {"messages": HELLO}),
    "/slots/{id_slot}": (llama_server_fields.SLOT_ACTION, {}),
}


@pytest.fixture(scope="module")
def document():
    return openapi.document(create_app())


@pytest.mark.parametrize("path", ROUTES)
def test_the_document_gives_each_routes_declaration(document, path):
    shape, least = ROUTES[path]
    body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == shape.schema()
    shape.read(least)  # the least body is one the declaration takes


def bounds(shape: Shape):
    """(field, a value just past it) for each numeric bound the schema of `shape` states."""
    for name, schema in shape.schema()["properties"].items():
        step = 1 if "integer" in schema.get("type", ()) else 0.5
        for key, past in (
            ("minimum", -step),
            ("exclusiveMinimum", 0),
            ("maximum", step),
            ("exclusiveMaximum", 0),
        ):
            if key in schema:
                yield name, schema[key] + past


@pytest.mark.parametrize(
    ("path", "field", "value"),
    [(path, field, value) for path, (shape, _) in ROUTES.items() for field, value in bounds(shape)]
    + [("options", field, value) for field, value in bounds(ollama_fields.OPTIONS)],
)
def test_a_value_past_a_stated_bound_is_refused_naming_its_field(path, field, value):
    shape, least = ROUTES.get(path, (ollama_fields.OPTIONS, {}))
    with pytest.raises(ApiError) as refused:
        shape.read({**least, field: value})
    assert refused.value.status == 400 and refused.value.param == field
    assert refused.value.message.startswith(field)
