"""The OpenAPI 3 description of the server, built from the routes actually on the app.

Each API family describes its operations here as it adds them (`describe`); `document(app)`
walks the app's router, so a route that is served but not described still appears (with a
bare description), and a description whose route is not served does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import falcon

from llamay._version import __version__

if TYPE_CHECKING:
    from llamay.server.state import ServerState

JSON = "application/json"
_STRING = {"type": "string"}
_CONVERTER = re.compile(r"\{(\w+)(?::[^}]*)?\}")
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class Operation:
    summary: str
    tag: str
    request: dict[str, Any] | None = None
    request_type: str = JSON
    # Other media types the body may have: media type -> schema.
    other_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    response: dict[str, Any] | None = None
    response_type: str = JSON
    # Other media types the answer may have (content negotiation): media type -> schema.
    other_responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    status: int = 200
    # Other answers: status -> description (errors share each family's error shape).
    errors: dict[int, str] = field(default_factory=dict)
    query: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: dict[str, dict[str, Any]] = field(default_factory=dict)  # path parameter schemas
    stream_type: str | None = None  # the media type when the body asks to stream


_OPERATIONS: dict[tuple[str, str], Operation] = {}


# What a route that names a model in its body may answer besides success.
MODEL_ROUTE_ERRORS = {
    400: "bad request",
    401: "missing or wrong API key",
    404: "unknown model",
    413: "body too large",
    503: "busy: the KV cache or the memory budget is full (Retry-After)",
}
# What any route may answer (guard.py, errors.read_json).
_GUARD_ERRORS = {
    403: "a foreign Origin on a route that changes things, or (without an API key) a Host that is not this server's"
}
_JSON_ERRORS = {415: "the body is sent as another type than application/json"}


def describe(
    method: str,
    path: str,
    summary: str,
    *,
    tag: str,
    request: dict[str, Any] | None = None,
    request_type: str = JSON,
    other_requests: dict[str, dict[str, Any]] | None = None,
    response: dict[str, Any] | None = None,
    response_type: str = JSON,
    other_responses: dict[str, dict[str, Any]] | None = None,
    status: int = 200,
    errors: dict[int, str] | None = None,
    query: dict[str, dict[str, Any]] | None = None,
    path_params: dict[str, dict[str, Any]] | None = None,
    stream_type: str | None = None,
) -> None:
    """Record what `method path` takes and answers: JSON schemas of the request and response
    bodies (and of other media types the request may be sent as, or the answer may have, by
    the request's Accept header), the success status, the
    error statuses it may give, query and path parameters (name -> schema; a path parameter
    is any string unless given) and, for routes that stream on request, the streamed media
    type."""
    _OPERATIONS[(method.upper(), _CONVERTER.sub(r"{\1}", path))] = Operation(
        summary,
        tag,
        request,
        request_type,
        dict(other_requests or {}),
        response,
        response_type,
        dict(other_responses or {}),
        status,
        dict(errors or {}),
        dict(query or {}),
        dict(path_params or {}),
        stream_type,
    )


def add_routes(app: falcon.App, state: ServerState) -> None:
    """`GET /openapi.json`."""
    app.add_route("/openapi.json", _OpenAPIResource(app))
    describe(
        "GET", "/openapi.json", "This OpenAPI document", tag="meta", response={"type": "object"}
    )
    # app.py's own route.
    describe(
        "GET",
        "/health",
        "Whether the server is up",
        tag="meta",
        response={"type": "object", "properties": {"status": {"type": "string"}}},
    )


class _OpenAPIResource:
    def __init__(self, app: falcon.App) -> None:
        self.app = app

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = document(self.app)


class RoutedApp(falcon.App):
    """A Falcon app that remembers its routes (falcon keeps no public list of them), so that
    /openapi.json describes exactly what is served."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.routes: list[tuple[str, object]] = []

    def add_route(self, uri_template: str, resource: object, **kwargs: Any) -> None:
        super().add_route(uri_template, resource, **kwargs)
        self.routes.append((uri_template, resource))


def served_routes(app: RoutedApp) -> list[tuple[str, str]]:
    """(method, URI template) of every responder the app's resources define, in route order."""
    return [
        (method, _CONVERTER.sub(r"{\1}", template))
        for template, resource in app.routes
        for method in _METHODS
        if callable(getattr(resource, f"on_{method.lower()}", None))
    ]


def document(app: falcon.App) -> dict[str, Any]:
    """The OpenAPI 3.1 document (JSON Schema 2020-12 bodies) of every route `app` serves."""
    paths: dict[str, dict[str, Any]] = {}
    for method, template in served_routes(app):
        op = _OPERATIONS.get((method, template)) or Operation(f"{method} {template}", "other")
        paths.setdefault(template, {})[method.lower()] = _operation(method, template, op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "llamay",
            "version": __version__,
            "description": "OpenAI, Anthropic and Ollama compatible APIs, and llamay's own "
            "context API, over local GGUF models.",
        },
        "paths": paths,
    }


def _operation(method: str, template: str, op: Operation) -> dict[str, Any]:
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": op.path.get(name, _STRING)}
        for name in _CONVERTER.findall(template)
    ]
    parameters += [
        {"name": name, "in": "query", "required": False, "schema": schema}
        for name, schema in op.query.items()
    ]
    content: dict[str, Any] = {}
    if method != "HEAD":
        content[op.response_type] = {"schema": op.response or {}}
        content |= {kind: {"schema": schema} for kind, schema in op.other_responses.items()}
        if op.stream_type:
            content[op.stream_type] = {"schema": {"type": "string"}}
    success: dict[str, Any] = {"description": op.summary}
    if content and op.status != 204:
        success["content"] = content
    responses: dict[str, Any] = {str(op.status): success}
    errors = _GUARD_ERRORS | (_JSON_ERRORS if op.request_type == JSON and op.request else {})
    for status, description in sorted((errors | op.errors).items()):
        responses[str(status)] = {"description": description}
    operation: dict[str, Any] = {
        "summary": op.summary,
        "tags": [op.tag],
        "operationId": _operation_id(method, template),
        "responses": responses,
    }
    if parameters:
        operation["parameters"] = parameters
    if op.request is not None:
        content = {op.request_type: {"schema": op.request}}
        content |= {kind: {"schema": schema} for kind, schema in op.other_requests.items()}
        operation["requestBody"] = {"required": True, "content": content}
    return operation


def _operation_id(method: str, template: str) -> str:
    words = re.sub(r"[^0-9A-Za-z]+", "_", template).strip("_") or "root"
    return f"{method.lower()}_{words}"
