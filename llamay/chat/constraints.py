"""The grammars a chat request asks for: its response format's, or its tools' calls.

`json_grammar` holds an answer to a JSON output format (OpenAI's `response_format`, Anthropic's
`output_format`, Ollama's `format`); `tool_grammar` holds the calls of the offered tools in the
model's own call format (toolcalls.py), lazily under tool_choice "auto".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llamay.chat.toolcalls import call_grammar, format_of
from llamay.engine import Model
from llamay.errors import InvalidRequest
from llamay.grammar import Grammar


def json_grammar(kind: str, schema: Mapping[str, Any] | None = None) -> Grammar | None:
    """The grammar of a JSON output format: "json_object" (any object) or "json_schema" (an
    instance of `schema`); None for "text". GrammarError for a schema it cannot enforce."""
    if kind == "text":
        return None
    if kind == "json_object":
        return Grammar.json_object()
    if kind == "json_schema":
        if not isinstance(schema, Mapping):
            raise InvalidRequest("json_schema needs a 'schema' object", "response_format")
        return Grammar.from_json_schema(dict(schema))
    raise InvalidRequest(f"unknown response format {kind!r}", "response_format")


def tool_grammar(
    model: Model,
    tools: Sequence[Mapping[str, Any]],
    choice: str | None,
    name: str | None = None,
    *,
    parallel: bool = True,
    prefill: str = "",
) -> Any:
    """The grammar for tool_choice `choice` ("auto", "none", "required", or "named" with
    `name`) in the model's call format (toolcalls.call_grammar): None for "none"; a lazy
    grammar triggered by the opening marker for "auto"; calls from the first token for
    "required" (any tool) and "named" (that tool)."""
    if tools is None or choice is None:
        return None
    return call_grammar(
        format_of(model.chat_template.source),
        tools,
        choice,
        name,
        parallel=parallel,
        prefix=prefill,
    )
