"""The grammars a chat request asks for: its response format's, or its tools' calls.

`json_grammar` holds an answer to a JSON output format (OpenAI's `response_format`, Anthropic's
`output_format`, Ollama's `format`); `tool_grammar` holds the calls of the offered tools in the
model's own call format (toolcalls.py), lazily under tool_choice "auto". `tool_choice_of` and
`response_format_grammar` read OpenAI's `tool_choice` and `response_format`, as `Model.chat`
and the OpenAI chat route take them.
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


def tool_choice_of(value: Any, tools: Sequence[Any] | None) -> tuple[str, str | None]:
    """OpenAI's `tool_choice` as ("auto" | "none" | "required" | "named", the named tool):
    None means "auto" when tools are offered, else "none"."""
    if value is None:
        return ("auto" if tools else "none"), None
    if value in ("auto", "none", "required"):
        return value, None
    if isinstance(value, Mapping):
        function = value.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return "named", function["name"]
    raise InvalidRequest(
        f"tool_choice must be auto, none, required or a named function, not {value!r}",
        "tool_choice",
    )


def response_format_grammar(response_format: Any) -> Grammar | None:
    """The grammar of OpenAI's `response_format` ({"type": "text" | "json_object" |
    "json_schema", "json_schema": {"schema": ...}}), None for none or text."""
    if not response_format:
        return None
    if not isinstance(response_format, Mapping):
        raise InvalidRequest("response_format must be an object", "response_format")
    kind = response_format.get("type", "text")
    schema = None
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
    return json_grammar(kind, schema)
