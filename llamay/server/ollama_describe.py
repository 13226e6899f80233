"""The OpenAPI description of the Ollama routes (ollama.py, ollama_models.py); the bodies of
generate, chat and the embedding routes are their declarations' schemas (ollama_fields.py)."""

from __future__ import annotations

from typing import Any

from llamay.server import openapi
from llamay.server.ollama_fields import CHAT, EMBED, EMBEDDINGS, GENERATE

_STRING = {"type": "string"}
_BOOL = {"type": "boolean"}
_INT = {"type": "integer"}
_NUMBER = {"type": "number"}
_OBJECT = {"type": "object"}
_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_ARRAY_OF_OBJECTS = {"type": "array", "items": _OBJECT}
_DETAILS = {
    "type": "object",
    "properties": {
        "parent_model": _STRING,
        "format": _STRING,
        "family": _STRING,
        "families": {"type": "array", "items": _STRING},
        "parameter_size": _STRING,
        "quantization_level": _STRING,
    },
}
_MESSAGE = {
    "type": "object",
    "properties": {
        "role": _STRING,
        "content": _STRING,
        "tool_calls": {"type": "array", "items": _OBJECT},
        "tool_name": _STRING,
    },
    "required": ["role"],
}
_DONE = {
    "logprobs": _ARRAY_OF_OBJECTS,
    "done": _BOOL,
    "done_reason": _STRING,
    "total_duration": _INT,
    "load_duration": _INT,
    "prompt_eval_count": _INT,
    "prompt_eval_duration": _INT,
    "eval_count": _INT,
    "eval_duration": _INT,
}
_ERRORS = {400: "bad request", 404: "unknown model"}
_STATUS = {
    "type": "object",
    "properties": {"status": _STRING, "digest": _STRING, "total": _INT, "completed": _INT},
}


def _request(properties: dict[str, Any], required: tuple[str, ...] = ("model",)) -> dict:
    return {"type": "object", "properties": properties, "required": list(required)}


def describe_routes() -> None:
    ndjson = "application/x-ndjson"
    describe = openapi.describe
    for method in ("GET", "HEAD"):
        describe(
            method,
            "/",
            "Ollama is running; the chat page for a request that ranks text/html above "
            "text/plain (a browser)",
            tag="ollama",
            response_type="text/plain",
            other_responses={"text/html": {"type": "string"}},
        )
    describe(
        "GET",
        "/api/version",
        "The server's version",
        tag="ollama",
        response={
            "type": "object",
            "properties": {
                "version": _STRING,
                "kernels": {"type": ["string", "null"]},
                "cpu": _STRING,
                "cpu_features": {"type": "array", "items": _STRING},
            },
        },
    )
    describe(
        "POST",
        "/api/generate",
        "Generate a completion (NDJSON stream unless stream is false)",
        tag="ollama",
        request=GENERATE.schema(),
        response={
            "type": "object",
            "properties": {
                "model": _STRING,
                "created_at": _STRING,
                "response": _STRING,
                "context": {"type": "array", "items": _INT},
                **_DONE,
            },
        },
        stream_type=ndjson,
        errors=_ERRORS,
    )
    describe(
        "POST",
        "/api/chat",
        "Chat (NDJSON stream unless stream is false)",
        tag="ollama",
        request=CHAT.schema(),
        response={
            "type": "object",
            "properties": {"model": _STRING, "created_at": _STRING, "message": _MESSAGE, **_DONE},
        },
        stream_type=ndjson,
        errors=_ERRORS,
    )
    describe(
        "POST",
        "/api/embed",
        "Embeddings of one or more inputs (unit length)",
        tag="ollama",
        request=EMBED.schema(),
        response={
            "type": "object",
            "properties": {
                "model": _STRING,
                "embeddings": {"type": "array", "items": {"type": "array", "items": _NUMBER}},
            },
        },
        errors=_ERRORS,
    )
    describe(
        "POST",
        "/api/embeddings",
        "The embedding of one prompt (the older route; not normalized)",
        tag="ollama",
        request=EMBEDDINGS.schema(),
        response={"type": "object", "properties": {"embedding": {"type": "array"}}},
        errors=_ERRORS,
    )
    _describe_models(ndjson)


def _describe_models(ndjson: str) -> None:
    describe = openapi.describe
    model_entry = {
        "type": "object",
        "properties": {
            "name": _STRING,
            "model": _STRING,
            "modified_at": _STRING,
            "size": _INT,
            "digest": _STRING,
            "details": _DETAILS,
        },
    }
    describe(
        "GET",
        "/api/tags",
        "The models this server can run",
        tag="ollama",
        response={
            "type": "object",
            "properties": {"models": {"type": "array", "items": model_entry}},
        },
    )
    describe(
        "POST",
        "/api/show",
        "A model's details, template, parameters and metadata (model_info)",
        tag="ollama",
        request=_request({"model": _STRING, "verbose": _BOOL}),
        response={
            "type": "object",
            "properties": {
                "modelfile": _STRING,
                "parameters": _STRING,
                "template": _STRING,
                "details": _DETAILS,
                "model_info": _OBJECT,
                "capabilities": {"type": "array", "items": _STRING},
            },
        },
        errors=_ERRORS,
    )
    describe(
        "GET",
        "/api/ps",
        "The loaded models",
        tag="ollama",
        response={"type": "object", "properties": {"models": _ARRAY_OF_OBJECTS}},
    )
    describe(
        "POST",
        "/api/pull",
        "Pull a model into the store (NDJSON status stream unless stream is false)",
        tag="ollama",
        request=_request({"model": _STRING, "insecure": _BOOL, "stream": _BOOL}),
        response=_STATUS,
        stream_type=ndjson,
        errors={400: "bad name, or the pull failed"},
    )
    describe(
        "POST",
        "/api/create",
        "Create a model from another one or from an uploaded GGUF blob, quantized or not",
        tag="ollama",
        request=_request(
            {
                "model": _STRING,
                "from": _STRING,
                "files": {"type": "object", "additionalProperties": _STRING},
                "quantize": _STRING,
                "template": _STRING,
                "system": _STRING,
                "license": {"oneOf": [_STRING, {"type": "array", "items": _STRING}]},
                "parameters": _OBJECT,
                "stream": _BOOL,
            }
        ),
        response=_STATUS,
        stream_type=ndjson,
        errors=_ERRORS,
    )
    describe(
        "POST",
        "/api/copy",
        "Store a model under another name too",
        tag="ollama",
        request=_request({"source": _STRING, "destination": _STRING}, ("source", "destination")),
        errors=_ERRORS,
    )
    describe(
        "DELETE",
        "/api/delete",
        "Delete a model from the store",
        tag="ollama",
        request=_request({"model": _STRING}),
        errors=_ERRORS,
    )
    describe(
        "HEAD",
        "/api/blobs/{digest}",
        "Whether the store has a blob",
        tag="ollama",
        path_params={"digest": _DIGEST},
        errors={404: "no such blob", 400: "not a sha256 digest"},
    )
    describe(
        "POST",
        "/api/blobs/{digest}",
        "Upload a blob (its bytes must hash to the digest)",
        tag="ollama",
        path_params={"digest": _DIGEST},
        request={"type": "string", "format": "binary"},
        request_type="application/octet-stream",
        status=201,
        errors={400: "the bytes do not match the digest"},
    )
