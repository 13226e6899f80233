"""The OpenAI API's request bodies, declared once (fields.py): chat completions, text completions
and embeddings. openai.py reads each body with its shape, and the OpenAPI document gives each
shape's schema; fields llamay has no use for are ignored, as OpenAI's own server ignores what it
does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llamay.chat.spellings import OPENAI_CHOICE, OPENAI_FORMAT, OPENAI_TOOLS
from llamay.engine import ranges
from llamay.server.concepts import Choice, Format, Tools
from llamay.server.fields import (
    Custom,
    Field,
    Flag,
    Invalid,
    LogitBias,
    Object,
    OneOf,
    Shape,
    Stop,
    Text,
    integer,
    param,
)

_NO_MODEL = "model is required: the name of a model, such as gemma3:270m"
_PROMPTS = "prompt must be a string, a list of strings, or token ids"
_INPUTS = "input must be a string, a list of strings, or token ids"
EFFORTS = ("none", "minimal", "low", "medium", "high")


def prompts(value: Any) -> list[str | list[int]]:
    """The prompts of a completion request: a string, a list of strings, a list of token ids,
    or a list of such lists."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value:
        if all(isinstance(p, int) and not isinstance(p, bool) for p in value):
            return [value]
        if all(isinstance(p, str) for p in value) or all(isinstance(p, list) for p in value):
            return list(value)
    raise Invalid(_PROMPTS)


def _inputs(value: Any) -> list[str | list[int]]:
    """What to embed: a prompt as a completion takes one, none of it empty."""
    if value == "":
        raise Invalid("{name} must not be empty")
    try:
        inputs = prompts(value)
    except Invalid:
        raise Invalid(_INPUTS) from None
    if any(not item for item in inputs):
        raise Invalid("{name} must not contain empty strings")
    return inputs


def _messages(value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise Invalid("{name} must be a non-empty list")
    return value


def _include_usage(value: Any) -> bool:
    """stream_options' include_usage: a usage chunk ends the stream."""
    if not isinstance(value, Mapping):
        raise Invalid("{name} must be an object")
    return bool(value.get("include_usage"))


_PROMPT_SCHEMA = {
    "oneOf": [
        {"type": "string"},
        {"type": "array", "items": {"type": "string"}, "minItems": 1},
        {"type": "array", "items": {"type": "integer"}, "minItems": 1},
        {
            "type": "array",
            "items": {"type": "array", "items": {"type": "integer"}},
            "minItems": 1,
        },
    ]
}
_MESSAGES_SCHEMA = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["role"],
        "properties": {
            "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
            "content": {"type": ["string", "array", "null"]},
        },
    },
}

MODEL = Field(
    "model",
    Text(nonempty=True),
    "a model name, such as gemma3:270m",
    required=_NO_MODEL,
    invalid=_NO_MODEL,
)
# What chat and text completions share: the sampling parameters (the engine's range table),
# the number of choices, streaming, stop strings, logit bias and llamay's `truncate`.
_GENERATION = (
    *(Field(name, param(name)) for name in ranges.SAMPLING),
    Field("n", param("n"), "choices per prompt, each a sequence in the batch"),
    Field("stream", Flag(), "answer as server-sent events", default=False),
    Field(
        "stream_options",
        Custom(_include_usage, {"type": "object"}),
        default=False,
        feeds="include_usage",
    ),
    Field("stop", Stop()),
    Field("logit_bias", LogitBias()),
    Field(
        "truncate",
        Flag(),
        "llamay's: keep the first token and the most recent ones of a "
        "prompt longer than the context, instead of refusing it",
        default=False,
    ),
)

CHAT = Shape(
    MODEL,
    Field(
        "messages",
        Custom(_messages, _MESSAGES_SCHEMA),
        required="messages must be a non-empty list",
    ),
    Field("max_completion_tokens", param("max_tokens"), feeds="max_tokens"),
    Field("max_tokens", param("max_tokens"), "the older name of max_completion_tokens"),
    *_GENERATION,
    Field("logprobs", Flag(), "each token's log-probability", default=False),
    Field("top_logprobs", param("top_logprobs"), "with logprobs: the most likely alternatives"),
    Field("parallel_tool_calls", Flag(), "more than one call per answer", default=True),
    Field(
        "chat_template_kwargs",
        Object(),
        'the chat template\'s variables, such as {"enable_thinking": false}',
        feeds="template_kwargs",
    ),
    Field(
        "reasoning_effort",
        OneOf(EFFORTS),
        "gpt-oss's reasoning_effort; none turns Qwen 3's thinking off",
        feeds="template_kwargs",
    ),
    Field("response_format", Format(OPENAI_FORMAT), feeds="output"),
    Field("tools", Tools(OPENAI_TOOLS)),
    Field("tool_choice", Choice(OPENAI_CHOICE)),
)

COMPLETION = Shape(
    MODEL,
    Field("prompt", Custom(prompts, _PROMPT_SCHEMA), required=_PROMPTS),
    Field("max_tokens", param("max_tokens"), default=16),  # OpenAI's default for completions
    *_GENERATION,
    Field("logprobs", param("logprobs"), "each token's log-probability and this many alternatives"),
    Field("echo", Flag(), "the prompt first, with its logprobs when asked", default=False),
    Field(
        "suffix",
        Text(),
        "the text after the insertion: the answer is what goes between (fill-in-the-middle)",
        invalid="suffix must be a string: the text after the insertion",
    ),
)

EMBEDDINGS = Shape(
    MODEL,
    Field("input", Custom(_inputs, _PROMPT_SCHEMA), required=_INPUTS),
    Field(
        "encoding_format",
        OneOf(("float", "base64")),
        default="float",
        invalid="encoding_format must be 'float' or 'base64'",
    ),
    Field("dimensions", integer(1), "the first components only, back to unit length"),
    Field("truncate", Flag(), "cut an input longer than the context", default=False),
)
