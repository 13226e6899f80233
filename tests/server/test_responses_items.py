"""The Responses API's request reading and output items, without a server."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from llamay.chat.answer import Answer
from llamay.chat.toolcalls import HERMES, JSON
from llamay.server.errors import ApiError
from llamay.server.responses import shared_prefix
from llamay.server.responses_items import (
    as_messages,
    input_messages,
    output_items,
    read_request,
)

TOOL = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
CHAT_TOOL = {"type": "function", "function": {"name": "f", "parameters": TOOL["parameters"]}}


def test_a_string_is_one_user_message():
    assert input_messages("Hi") == [{"role": "user", "content": "Hi"}]


def test_items_become_chat_messages():
    items = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
        {"type": "reasoning", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "b"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": '{"x": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c2", "output": "two"},
    ]
    assert input_messages(items) == [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "a"},
        {
            "role": "assistant",
            "content": "b",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x": 1}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one", "name": "f"},
        {"role": "tool", "tool_call_id": "c2", "content": "two", "name": "f"},
    ]


@pytest.mark.parametrize(
    "value",
    [
        "",
        [],
        [{"type": "item_reference", "id": "msg_1"}],
        [{"role": "robot", "content": "x"}],
        [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}],
        [{"type": "function_call", "name": "f", "arguments": "{}"}],
        [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}],
        [{"type": "reasoning"}],
        ["text"],
    ],
)
def test_bad_input_is_400_naming_input(value):
    with pytest.raises(ApiError) as bad:
        input_messages(value)
    assert bad.value.status == 400 and bad.value.param == "input"


def test_a_request_in_the_chat_pipelines_terms():
    request = read_request(
        {
            "model": "m",
            "input": "Hi",
            "tools": [TOOL],
            "tool_choice": {"type": "function", "name": "f"},
            "max_output_tokens": 5,
            "metadata": {"k": "v"},
        }
    )
    assert request.chat_tools == [CHAT_TOOL]
    assert (request.choice, request.named) == ("named", "f")
    assert request.sampling["max_tokens"] == 5
    assert request.store is True and request.stream is False
    assert request.echo["metadata"] == {"k": "v"}
    # offered tools hold the answer to their calls (the pipeline's grammar), not text.format
    assert request.output_grammar() is None
    # tool_choice none: the tools are not offered (not in the prompt, no grammar) and
    # text.format holds the answer instead.
    text_format = {"format": {"type": "json_schema", "name": "x", "schema": TOOL["parameters"]}}
    unoffered = read_request(
        {"model": "m", "input": "Hi", "tools": [TOOL], "tool_choice": "none", "text": text_format}
    )
    assert unoffered.chat_tools is None and unoffered.output_grammar() is not None
    plain = read_request({"model": "m", "input": "Hi", "tools": [TOOL], "tool_choice": "none"})
    assert plain.output_grammar() is None


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "Hi"}, "model"),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": "Hi", "tool_choice": "required"}, "tool_choice"),
        ({"model": "m", "input": "Hi", "store": "yes"}, "store"),
        ({"model": "m", "input": "Hi", "metadata": {"k": 1}}, "metadata"),
        ({"model": "m", "input": "Hi", "truncation": "middle"}, "truncation"),
        ({"model": "m", "input": "Hi", "instructions": ["x"]}, "instructions"),
        ({"model": "m", "input": "Hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"model": "m", "input": "Hi", "text": {"format": {"type": "json_schema"}}}, "text.format"),
        ({"model": "m", "input": "Hi", "conversation": "conv_1"}, "conversation"),
    ],
)
def test_bad_requests_are_400_naming_the_field(body, param):
    with pytest.raises(ApiError) as bad:
        read_request(body)
    assert bad.value.status == 400 and bad.value.param == param


def answered(text: str, fmt=JSON) -> Answer:
    """An answer of `text` (one piece, no control tokens), read in call format `fmt`."""
    answer = Answer(tokenizer=None, tools=[CHAT_TOOL], fmt=fmt)
    answer.feed(SimpleNamespace(text=text, token=None))
    answer.finish()
    return answer


def test_an_answer_becomes_a_call_or_a_message_and_back():
    call = output_items(answered('{"name": "f", "arguments": {"x": 1}}'), "completed", "msg_1")
    [item] = call
    assert item["type"] == "function_call" and json.loads(item["arguments"]) == {"x": 1}
    [message] = output_items(answered("hello"), "completed", "msg_1")
    # in the Hermes format: the text before the calls, then each call
    hermes = '<tool_call>{"name": "f", "arguments": {"x": 2}}</tool_call>'
    lead, *calls = output_items(answered("Let me look. " + hermes * 2, HERMES), "completed", "m")
    assert lead["content"][0]["text"] == "Let me look."
    assert [json.loads(c["arguments"]) for c in calls] == [{"x": 2}, {"x": 2}]
    assert message["id"] == "msg_1" and message["content"][0]["text"] == "hello"
    assert as_messages(call)[0]["tool_calls"][0]["id"] == item["call_id"]
    assert as_messages([message]) == [{"role": "assistant", "content": "hello"}]


@pytest.mark.parametrize(
    ("held", "prompt", "shared"),
    [([1, 2, 3], [1, 2, 3, 4], 3), ([1, 2, 3], [1, 5, 3], 1), ([], [1], 0), ([1, 2], [1], 1)],
)
def test_shared_prefix(held, prompt, shared):
    assert shared_prefix(held, prompt) == shared
