"""The readers of what a chat request asks for (llamay/chat/spellings.py), as Model.chat calls
them: OpenAI's spelling, and a refusal naming the field."""

from __future__ import annotations

import pytest

import llamay
from llamay import chat

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def test_openais_spellings_read_into_one_request():
    tools = chat.read_tools([TOOL])
    assert tools == [TOOL]
    assert chat.read_choice(None, tools) == chat.ToolChoice("auto")
    named = chat.read_choice({"type": "function", "function": {"name": "f"}}, tools)
    assert (named.mode, named.name) == ("named", "f")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    output = chat.read_format({"type": "json_schema", "json_schema": {"schema": schema}})
    assert output.kind == "json_schema" and output.schema == schema
    assert output.grammar() is not None
    assert chat.read_format({"type": "text"}) is None and chat.read_tools(None) is None


@pytest.mark.parametrize(
    ("read", "param", "message"),
    [
        (lambda: chat.read_tools({"f": 1}), "tools", "tools must be a list of function tools"),
        (
            lambda: chat.read_choice("required", None),
            "tool_choice",
            "tool_choice 'required' needs tools",
        ),
        (
            lambda: chat.read_format({"type": "xml"}),
            "response_format",
            "unknown response format 'xml': response_format.type must be text, json_object or "
            "json_schema",
        ),
        (
            lambda: chat.read_format({"type": "json_schema", "json_schema": {}}),
            "response_format",
            "response_format json_schema needs a 'schema' object",
        ),
    ],
)
def test_a_value_no_spelling_reads_is_invalid_naming_its_field(read, param, message):
    with pytest.raises(llamay.InvalidRequest) as refused:
        read()
    assert (refused.value.param, str(refused.value)) == (param, message)
