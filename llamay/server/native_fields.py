"""llamay's own request bodies, declared once (fields.py): a context's creation and a generate
request in a context. native.py reads them; native_describe.py gives their schemas. Both are
strict: an unknown field is refused, naming the fields there are, so that a mistyped option
does not silently do nothing.
"""

from __future__ import annotations

from typing import Any

from llamay.chat.spellings import SCHEMA_FORMAT
from llamay.engine import ranges
from llamay.server.concepts import Format, Gbnf
from llamay.server.fields import Anything, Custom, Field, Flag, Invalid, Shape, Stop, Text, param

MESSAGE = {
    "type": "object",
    "properties": {
        "role": {"type": "string", "enum": ["system", "user", "assistant"]},
        "content": {"type": "string"},
    },
    "required": ["role", "content"],
}
_ADDED_TURN = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "role": {"type": "string", "enum": ["user", "assistant"]},
        "content": {"type": "string"},
    },
    "required": ["role", "content"],
}
# The engine's parameters a generate request may carry: all but logprobs, which this API
# does not give, and those only other APIs' requests carry (n, top_logprobs).
_SAMPLING = tuple(name for name in ranges.RANGES if name not in ("logprobs", *ranges.REQUEST_ONLY))


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise Invalid("{name} must be a list of message objects")
    return value


CREATE = Shape(
    Field("model", Text(nonempty=True), required="model must be a non-empty string"),
    Field("prompt", Text(), "text the context starts with"),
    Field(
        "messages",
        Custom(_messages, {"type": "array", "items": MESSAGE, "minItems": 1}),
        "a chat the context starts with, through the chat template; the context keeps it",
    ),
    strict=True,
    schema_extra={"oneOf": [{"required": ["prompt"]}, {"required": ["messages"]}]},
)

GENERATE = Shape(
    Field(
        "prompt",
        Text(),
        "text to add before generating",
        default="",
        invalid="prompt must be a string (text to add before generating)",
    ),
    Field(
        "messages",
        Anything({"type": "array", "items": _ADDED_TURN, "minItems": 1}),
        "turns to add to the conversation of a context made from messages, through the chat "
        "template, before generating",
    ),
    *(Field(name, param(name)) for name in _SAMPLING),
    Field("stop", Stop()),
    Field("stream", Flag(), "a token event per token, then done", default=False),
    Field("grammar", Gbnf(), "GBNF the answer must be a sentence of", feeds="output"),
    Field("json_schema", Format(SCHEMA_FORMAT), "the answer's JSON schema", feeds="output"),
    strict=True,
)
