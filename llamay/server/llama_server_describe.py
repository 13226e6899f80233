"""The OpenAPI description of llama.cpp's server routes (llama_server.py,
llama_server_tools.py); the request bodies are their declarations' schemas
(llama_server_fields.py)."""

from __future__ import annotations

from llamay.server import openapi
from llamay.server.llama_server_fields import (
    APPLY_TEMPLATE,
    COMPLETION,
    DETOKENIZE,
    INFILL,
    SLOT_ACTION,
    TOKENIZE,
)

_STRING = {"type": "string"}
_BOOL = {"type": "boolean"}
_INT = {"type": "integer"}
_NUMBER = {"type": "number"}
_OBJECT = {"type": "object"}
_TOKENS = {"type": "array", "items": {"type": "integer", "minimum": 0}}
_ERRORS = {
    400: "bad request, or a model without FIM tokens (/infill)",
    404: "unknown model",
    503: "busy: the KV cache is full (Retry-After)",
}
_TIMINGS = {
    "type": "object",
    "properties": {
        name: _NUMBER
        for name in (
            "cache_n",
            "prompt_n",
            "prompt_ms",
            "prompt_per_token_ms",
            "prompt_per_second",
            "predicted_n",
            "predicted_ms",
            "predicted_per_token_ms",
            "predicted_per_second",
        )
    },
}
_COMPLETION = {
    "type": "object",
    "properties": {
        "index": _INT,
        "content": _STRING,
        "tokens": _TOKENS,
        "id_slot": _INT,
        "stop": _BOOL,
        "model": _STRING,
        "tokens_predicted": _INT,
        "tokens_evaluated": _INT,
        "generation_settings": _OBJECT,
        "prompt": _STRING,
        "has_new_line": _BOOL,
        "truncated": _BOOL,
        "stop_type": {"enum": ["none", "eos", "limit", "word"]},
        "stopping_word": _STRING,
        "tokens_cached": _INT,
        "timings": _TIMINGS,
        "completion_probabilities": {"type": "array", "items": _OBJECT},
    },
}
_SLOT = {
    "type": "object",
    "properties": {
        "id": _INT,
        "id_task": _INT,
        "n_ctx": _INT,
        "speculative": _BOOL,
        "is_processing": _BOOL,
        "params": _OBJECT,
        "next_token": _OBJECT,
        "n_tokens": _INT,
        "holds_kv": _BOOL,
    },
}


def describe_routes() -> None:
    stream = "text/event-stream"
    answer = {"oneOf": [_COMPLETION, {"type": "array", "items": _COMPLETION}]}
    openapi.describe(
        "POST",
        "/completion",
        "llama-server completion of a raw prompt",
        tag="llama-server",
        request=COMPLETION.schema(),
        response=answer,
        errors=_ERRORS,
        stream_type=stream,
    )
    openapi.describe(
        "POST",
        "/infill",
        "llama-server code infill: the code between a prefix and a suffix",
        tag="llama-server",
        request=INFILL.schema(),
        response=answer,
        errors=_ERRORS,
        stream_type=stream,
    )
    openapi.describe(
        "POST",
        "/tokenize",
        "Token ids of a text",
        tag="llama-server",
        request=TOKENIZE.schema(),
        response={"type": "object", "properties": {"tokens": {"type": "array"}}},
        errors=_ERRORS,
    )
    openapi.describe(
        "POST",
        "/detokenize",
        "The text of token ids",
        tag="llama-server",
        request=DETOKENIZE.schema(),
        response={"type": "object", "properties": {"content": _STRING}},
        errors=_ERRORS,
    )
    openapi.describe(
        "POST",
        "/apply-template",
        "A conversation as the model's chat template writes it",
        tag="llama-server",
        request=APPLY_TEMPLATE.schema(),
        response={"type": "object", "properties": {"prompt": _STRING}},
        errors=_ERRORS,
    )
    model_query = {"model": _STRING}
    openapi.describe(
        "GET",
        "/props",
        "The model's and the server's properties, llama-server's way",
        tag="llama-server",
        query=model_query,
        response={
            "type": "object",
            "properties": {
                "default_generation_settings": _OBJECT,
                "total_slots": _INT,
                "model_alias": _STRING,
                "model_path": _STRING,
                "chat_template": _STRING,
                "build_info": _STRING,
            },
        },
        errors=_ERRORS,
    )
    openapi.describe(
        "GET",
        "/slots",
        "The model's slots",
        tag="llama-server",
        query={**model_query, "fail_on_no_slot": _BOOL},
        response={"type": "array", "items": _SLOT},
        errors={**_ERRORS, 503: "fail_on_no_slot, and every slot is busy"},
    )
    openapi.describe(
        "POST",
        "/slots/{id_slot}",
        "Save, restore or erase a slot's cache",
        tag="llama-server",
        query={"action": {"enum": ["save", "restore", "erase"]}, **model_query},
        path_params={"id_slot": {"type": "string", "pattern": "^[0-9]+$"}},
        request=SLOT_ACTION.schema(),
        response=_OBJECT,
        errors={
            400: "bad action, slot or filename, no --slot-save-path, or a damaged snapshot",
            404: "unknown model, or no such snapshot file",
            409: "the slot is busy, or the snapshot is of other weights",
            503: "busy: the KV cache is full (Retry-After)",
        },
    )
