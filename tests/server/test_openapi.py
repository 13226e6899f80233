"""GET /openapi.json: a valid OpenAPI 3 document of every route the app serves."""

from __future__ import annotations

import httpx
import pytest
import schemathesis

from llamay.server import create_app, openapi

# CONTRACT.md's routes, the Ollama routes of the issue, and llama-server's.
CONTRACT = [
    ("POST", "/llamay/v1/contexts"),
    ("GET", "/llamay/v1/contexts"),
    ("POST", "/llamay/v1/contexts/{context_id}/generate"),
    ("POST", "/llamay/v1/contexts/{context_id}/fork"),
    ("GET", "/llamay/v1/contexts/{context_id}/snapshot"),
    ("DELETE", "/llamay/v1/contexts/{context_id}"),
    ("GET", "/llamay/v1/stats"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/completions"),
    ("POST", "/v1/embeddings"),
    ("GET", "/v1/models"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/count_tokens"),
    ("GET", "/"),
    ("HEAD", "/"),
    ("GET", "/api/version"),
    ("POST", "/api/generate"),
    ("POST", "/api/chat"),
    ("GET", "/api/tags"),
    ("POST", "/api/show"),
    ("GET", "/api/ps"),
    ("POST", "/api/embed"),
    ("POST", "/api/embeddings"),
    ("POST", "/api/pull"),
    ("POST", "/api/create"),
    ("POST", "/api/copy"),
    ("DELETE", "/api/delete"),
    ("HEAD", "/api/blobs/{digest}"),
    ("POST", "/api/blobs/{digest}"),
    ("POST", "/completion"),
    ("POST", "/infill"),
    ("POST", "/tokenize"),
    ("POST", "/detokenize"),
    ("POST", "/apply-template"),
    ("GET", "/props"),
    ("GET", "/slots"),
    ("POST", "/slots/{id_slot}"),
]


@pytest.fixture(scope="module")
def app():
    return create_app()


def operations(document: dict) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}


def test_the_document_is_valid_openapi_3(app):
    document = openapi.document(app)
    assert document["openapi"].startswith("3.")
    schemathesis.openapi.from_dict(document).validate()


def test_every_served_route_is_in_the_document_and_described(app):
    served = openapi.served_routes(app)
    document = openapi.document(app)
    assert operations(document) == set(served)
    assert set(CONTRACT) <= set(served)
    undescribed = [
        (method, path)
        for path, ops in document["paths"].items()
        for method, op in ops.items()
        if op["tags"] == ["other"]
    ]
    assert undescribed == []
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


def test_routes_take_their_path_parameters(app):
    document = openapi.document(app)
    generate = document["paths"]["/llamay/v1/contexts/{context_id}/generate"]["post"]
    assert generate["parameters"] == [
        {
            "name": "context_id",
            "in": "path",
            "required": True,
            "schema": {"type": "string", "pattern": "^ctx-[0-9a-f]{16}$"},
        }
    ]
    assert "text/event-stream" in generate["responses"]["200"]["content"]
    create = document["paths"]["/llamay/v1/contexts"]["post"]
    assert set(create["requestBody"]["content"]) == {
        "application/json",
        "application/octet-stream",
    }
    assert "201" in create["responses"] and "409" in create["responses"]


def test_a_description_without_a_route_is_left_out():

    class Hello:
        def on_get(self, req, resp):
            resp.media = {}

    app = openapi.RoutedApp()
    app.add_route("/hello/{name:int}", Hello())
    openapi.add_routes(app, None)
    document = openapi.document(app)
    assert set(document["paths"]) == {"/hello/{name}", "/openapi.json"}
    hello = document["paths"]["/hello/{name}"]
    assert list(hello) == ["get"]  # not the 405 responders falcon adds
    assert hello["get"]["tags"] == ["other"]
    assert hello["get"]["parameters"][0]["schema"] == {"type": "string"}


def test_the_server_serves_the_document(server):
    answer = httpx.get(server.url("/openapi.json"), headers=server.headers())
    assert answer.status_code == 200
    assert set(CONTRACT) <= operations(answer.json())
