"""The Ollama API's request bodies, declared once (fields.py): generate, chat, embed, the older
embeddings, and the generation `options` they share. ollama.py reads each body with its shape;
ollama_describe.py gives each shape's schema in the OpenAPI document.

`options` are read once a model's params layer is under them (a registry model's stop strings,
temperature...): `OPTIONS.read({**params, **options})`. The load-time options (`num_ctx`,
`num_thread`...) are the server's to choose, and are ignored, as are options llamay has no use
for (mirostat, tfs_z...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llamay.chat.spellings import OLLAMA_FORMAT, OPENAI_TOOLS
from llamay.engine import ranges
from llamay.server.concepts import Format, Tools
from llamay.server.errors import ApiError
from llamay.server.fields import (
    Anything,
    Custom,
    Field,
    Flag,
    Invalid,
    Number,
    Object,
    Refused,
    Shape,
    Stop,
    Text,
    integer,
    param,
)
from llamay.server.ollama_options import OLLAMA_OPTIONS

_NO_MODEL = "model is required: the name of a model"
_THINKS = (True, False, "low", "medium", "high")
_INTEGER = {"type": "integer"}


class _Predict(Number):
    """num_predict: a negative number means no limit (-1 until the model stops, -2 until the
    context is full)."""

    def read(self, value: Any, values: Mapping[str, Any]) -> int | float | None:
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            return None
        return super().read(value, values)

    def schema(self) -> dict[str, Any]:
        return {"type": "integer"}


def _option(theirs: str, ours: str) -> Field:
    if ours == "stop":
        return Field(theirs, Stop(), feeds=ours)
    if ours == "max_tokens":
        kind: Number = _Predict(ranges.RANGES["max_tokens"], sampling=True)
        return Field(
            theirs, kind, "-1: until the model stops; -2: until the context is full", feeds=ours
        )
    return Field(theirs, param(ours), feeds=ours)


OPTIONS = Shape(
    *(_option(theirs, ours) for theirs, ours in OLLAMA_OPTIONS.items()),
    Field("num_ctx", Anything(_INTEGER), "accepted and ignored: the server sizes contexts"),
    Field("num_thread", Anything(_INTEGER), "accepted and ignored: the server's --threads"),
)


def _think(value: Any) -> bool | str:
    if value not in _THINKS:
        raise Invalid('{name} must be true, false, "low", "medium" or "high"')
    return value


def _context(value: Any) -> list[int]:
    """The `context` of an earlier answer: the token ids of the conversation so far (whether
    each is in the vocabulary is the model's to tell)."""
    if not isinstance(value, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value
    ):
        raise Invalid("{name} must be the token ids an earlier answer returned")
    return value


def _messages(messages: Any) -> list[dict[str, Any]]:
    """Ollama chat messages in the shape chat.chat_prompt takes (a tool result's
    `tool_name` becomes `name`)."""
    if not isinstance(messages, list):
        raise Invalid("{name} must be a list")
    converted = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(400, "each message needs a role and content", "messages")
        if message.get("images"):
            raise ApiError(400, "images are not supported: llamay runs text models", "messages")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise ApiError(400, "message content must be a string", "messages")
        plain = {"role": message["role"], "content": content or ""}
        if message.get("tool_calls"):
            plain["tool_calls"] = message["tool_calls"]
        if message.get("tool_name"):
            plain["name"] = message["tool_name"]
        converted.append(plain)
    return converted


def _inputs(value: Any) -> list[str]:
    inputs = [value] if isinstance(value, str) else value
    if not isinstance(inputs, list) or not all(isinstance(text, str) for text in inputs):
        raise Invalid("{name} must be a string or a list of strings")
    return inputs


_STRING = {"type": "string"}
_MESSAGE = {
    "type": "object",
    "properties": {
        "role": _STRING,
        "content": _STRING,
        "tool_calls": {"type": "array", "items": {"type": "object"}},
        "tool_name": _STRING,
    },
    "required": ["role"],
}

MODEL = Field(
    "model",
    Text(nonempty=True),
    "a model name, such as gemma3:270m (`name` in older clients)",
    required=_NO_MODEL,
    invalid=_NO_MODEL,
    also=("name",),
)
STREAM = Field("stream", Flag(), "NDJSON as it is made, else one object", default=True)
_KEEP_ALIVE = Field(
    "keep_alive",
    Anything({"oneOf": [{"type": "number"}, _STRING]}),
    "how long the model stays loaded after this request (0 unloads it)",
)
_NOT_TEXT = "'images' is not supported: llamay runs text models"
# What generate and chat share.
_GENERATION = (
    MODEL,
    STREAM,
    Field("images", Refused(_NOT_TEXT)),
    Field(
        "think",
        Custom(_think, {"oneOf": [{"type": "boolean"}, {"enum": ["low", "medium", "high"]}]}),
        "false turns thinking off; a level sets gpt-oss's reasoning_effort",
        feeds="template_kwargs",
    ),
    Field("logprobs", Flag(), "each token's log-probability", default=False),
    Field("top_logprobs", param("top_logprobs"), "each token's most likely alternatives"),
    _KEEP_ALIVE,
    Field("options", Object({"properties": OPTIONS.schema()["properties"]})),
    Field("format", Format(OLLAMA_FORMAT), feeds="output"),
)

GENERATE = Shape(
    *_GENERATION,
    Field("prompt", Text(), "nothing: load the model (keep_alive 0: unload it)", default=""),
    Field(
        "suffix",
        Text(),
        "the text after the insertion: the answer is what goes between (fill-in-the-middle)",
        default="",
    ),
    Field("system", Text(), "the system prompt (else the model's own)", default=""),
    Field("template", Text(), "a Go template that writes the prompt instead", default=""),
    Field(
        "context",
        Custom(_context, {"type": "array", "items": _INTEGER}),
        "the tokens an earlier answer returned, to go on from",
        default=[],
    ),
    Field("raw", Flag(), "the prompt as it stands, no template", default=False),
)

CHAT = Shape(
    *_GENERATION,
    Field(
        "messages",
        Custom(_messages, {"type": "array", "items": _MESSAGE}),
        "none: load the model (keep_alive 0: unload it)",
    ),
    Field("tools", Tools(OPENAI_TOOLS)),  # Ollama's tools are OpenAI's
)

EMBED = Shape(
    MODEL,
    Field(
        "input",
        Custom(_inputs, {"oneOf": [_STRING, {"type": "array", "items": _STRING}]}),
        default=[],
    ),
    Field("truncate", Flag(), "cut an input longer than the context", default=True),
    Field("dimensions", integer(1), "the first components only, back to unit length"),
    Field("options", Object()),
    _KEEP_ALIVE,
)

EMBEDDINGS = Shape(
    MODEL, Field("prompt", Text(), default=""), Field("options", Object()), _KEEP_ALIVE
)
