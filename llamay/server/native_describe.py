"""The OpenAPI description of llamay's own routes (native.py); the request bodies are their
declarations' schemas (native_fields.py)."""

from __future__ import annotations

from llamay.server import openapi
from llamay.server.native_fields import CREATE, GENERATE, MESSAGE

PREFIX = "/llamay/v1"
SNAPSHOT_TYPE = "application/octet-stream"  # a snapshot file, up or down

_ERRORS = {
    400: "bad request",
    404: "unknown model or context",
    409: "the context is busy (here, or held by another replica), or was made by other "
    "weights than this replica's",
    429: "too many open contexts (Retry-After)",
    503: "busy: the KV cache or the memory budget is full (Retry-After)",
}
_CONTEXT = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "model": {"type": "string"},
        "n_tokens": {"type": "integer"},
        # GET of one context: its length in --state-dir (null without one)
        "persisted_n_tokens": {"type": ["integer", "null"]},
    },
    "required": ["id", "model", "n_tokens"],
}
_CONTEXT_ID = {"type": "string", "pattern": "^ctx-[0-9a-f]{16}$"}
_COUNT = {"type": "integer", "minimum": 0}


def describe_routes() -> None:
    one_context = {
        "type": "object",
        "properties": {
            **_CONTEXT["properties"],
            "n_ctx": {"type": "integer", "description": "the most tokens the context holds"},
            "pages": {
                "type": "object",
                "description": "its KV pages: shared with another context, and its own",
                "properties": {"total": _COUNT, "shared": _COUNT, "own": _COUNT},
            },
            "messages": {
                "type": ["array", "null"],
                "items": MESSAGE,
                "description": "the conversation of a context made from messages; its last "
                "turn, the assistant's, is open",
            },
            "text": {
                "type": ["string", "null"],
                "description": "the text of a context that keeps no conversation",
            },
        },
        "required": _CONTEXT["required"],
    }
    generate_response = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "tokens": {"type": "array", "items": {"type": "integer"}},
            "finish_reason": {"type": "string", "enum": ["stop", "length", "cancelled"]},
            "n_tokens": {"type": "integer"},
        },
    }
    context_errors = {404: "no such context", 409: "the context is busy"}
    openapi.describe(
        "POST",
        f"{PREFIX}/contexts",
        "Create a context from a prompt or messages, or restore one from a snapshot file",
        tag="llamay",
        request=CREATE.schema(),
        other_requests={SNAPSHOT_TYPE: {"type": "string", "format": "binary"}},
        query={"model": {"type": "string"}, "verify": {"type": "boolean"}},
        response=_CONTEXT,
        status=201,
        errors={**_ERRORS, 409: "the snapshot is of other weights", 413: "body too large"},
    )
    openapi.describe(
        "GET",
        f"{PREFIX}/contexts",
        "List contexts",
        tag="llamay",
        response={
            "type": "object",
            "properties": {"contexts": {"type": "array", "items": _CONTEXT}},
        },
    )
    openapi.describe(
        "GET",
        f"{PREFIX}/contexts/{{context_id}}",
        "One context: its length, pages and conversation",
        tag="llamay",
        path_params={"context_id": _CONTEXT_ID},
        response=one_context,
        errors={404: "no such context"},
    )
    openapi.describe(
        "DELETE",
        f"{PREFIX}/contexts/{{context_id}}",
        "Delete a context, freeing its pages",
        tag="llamay",
        path_params={"context_id": _CONTEXT_ID},
        status=204,
        errors=context_errors,
    )
    openapi.describe(
        "POST",
        f"{PREFIX}/contexts/{{context_id}}/generate",
        "Generate in a context (it keeps what was generated)",
        tag="llamay",
        path_params={"context_id": _CONTEXT_ID},
        request=GENERATE.schema(),
        response=generate_response,
        stream_type="text/event-stream",
        errors={**_ERRORS, 404: "no such context"},
    )
    openapi.describe(
        "POST",
        f"{PREFIX}/contexts/{{context_id}}/fork",
        "Fork a context (copy-on-write)",
        tag="llamay",
        path_params={"context_id": _CONTEXT_ID},
        response=_CONTEXT,
        status=201,
        errors=context_errors,
    )
    openapi.describe(
        "POST",
        f"{PREFIX}/contexts/{{context_id}}/cancel",
        "Cancel the generation running in a context (its request ends as cancelled)",
        tag="llamay",
        path_params={"context_id": _CONTEXT_ID},
        response={
            "type": "object",
            "properties": {"id": {"type": "string"}, "cancelled": {"type": "boolean"}},
        },
        errors={404: "no such context"},
    )
    openapi.describe(
        "GET",
        f"{PREFIX}/contexts/{{context_id}}/snapshot",
        "Download a context's snapshot file",
        tag="llamay",
        path_params={"context_id": _CONTEXT_ID},
        response={"type": "string", "format": "binary"},
        response_type=SNAPSHOT_TYPE,
        errors=context_errors,
    )
    openapi.describe(
        "GET",
        f"{PREFIX}/stats",
        "KV page accounting of each loaded model",
        tag="llamay",
        response={"type": "object", "properties": {"models": {"type": "object"}}},
    )
