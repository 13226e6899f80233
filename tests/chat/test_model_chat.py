"""`Model.chat` on the real Gemma 3 270M: the answer whole and streamed, tool calls, response
formats, cancelling, refusals, and the same tokens as `llamay serve` gives the same request."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

import llamay
from llamay.chat import ChatResult, ChatStream, Event

from helpers.serving import SERVE_ARGS, start_server, stop_server
from helpers.waiting import wait_until

N_CTX = int(SERVE_ARGS[SERVE_ARGS.index("--ctx-size") + 1])  # as the server loads it
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}]
HELLO = [{"role": "user", "content": "Write one sentence about the sea."}]


@pytest.fixture(scope="module")
def model(gemma_path):
    loaded = llamay.load(str(gemma_path), n_ctx=N_CTX)
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory, gemma_path):
    running = start_server(tmp_path_factory.mktemp("chat-serve-home"))
    yield openai.OpenAI(base_url=running.url("/v1"), api_key="unused", max_retries=0)
    stop_server(running)


def held_pages(model) -> int:
    """Pages that a context still holds (the prefix tree's cached pages do not count)."""
    stats = model.kv_stats()
    return stats["pages_used"] - stats["pages_cached"]


def test_load_gives_a_model_that_chats(model):
    assert isinstance(model, llamay.Model)
    result = model.chat(HELLO, max_tokens=8, temperature=0)
    assert isinstance(result, ChatResult)
    assert result.finish_reason == "length" and len(result.tokens) == 8
    assert result.text == model.detokenize(result.tokens)
    assert result.usage.completion_tokens == 8
    assert result.usage.total_tokens == result.usage.prompt_tokens + 8
    assert result.message() == {"role": "assistant", "content": result.text}


def test_a_stream_yields_the_deltas_then_the_same_result(model):
    whole = model.chat(HELLO, max_tokens=12, temperature=0)
    stream = model.chat(HELLO, max_tokens=12, temperature=0, stream=True)
    assert isinstance(stream, ChatStream)
    items = list(stream)
    *deltas, last = items
    assert all(isinstance(d, Event) and d.kind == "text" for d in deltas)
    assert "".join(d.text for d in deltas) == whole.text
    assert last == whole == stream.result
    assert held_pages(model) == 0  # the stream gave its pages back


@pytest.mark.parametrize("stream", [False, True])
def test_an_auto_tool_call_comes_back_parsed(model, stream):
    reply = model.chat(
        ASK,
        tools=[WEATHER],
        parallel_tool_calls=False,
        max_tokens=120,
        temperature=0,
        stream=stream,
    )
    if stream:
        items = list(reply)
        calls = [item.call for item in items if isinstance(item, Event) and item.kind == "call"]
        result = items[-1]
        assert calls == result.tool_calls
    else:
        result = reply
    assert result.finish_reason == "tool_calls"
    [call] = result.tool_calls
    assert call.name == "get_weather" and call.id
    jsonschema.validate(call.arguments, WEATHER["function"]["parameters"])
    message = result.message()
    [written] = message["tool_calls"]
    assert (
        written["id"] == call.id and json.loads(written["function"]["arguments"]) == call.arguments
    )


def test_the_tool_result_is_answered_on_the_next_turn(model):
    first = model.chat(
        ASK, tools=[WEATHER], parallel_tool_calls=False, max_tokens=120, temperature=0
    )
    [call] = first.tool_calls
    result = {"role": "tool", "tool_call_id": call.id, "content": "18 degrees and sunny"}
    follow = model.chat(
        [*ASK, first.message(), result],
        tools=[WEATHER],
        tool_choice="none",
        max_tokens=30,
        temperature=0,
    )
    assert follow.tool_calls == [] and follow.text.strip()
    assert follow.finish_reason in ("stop", "length")


def test_required_and_named_choices_force_a_call(model):
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        result = model.chat(
            HELLO, tools=[WEATHER], tool_choice=choice, max_tokens=60, temperature=0
        )
        assert result.finish_reason == "tool_calls", result
        assert [c.name for c in result.tool_calls] == ["get_weather"]


def test_a_response_format_holds_the_answer_to_its_schema(model):
    schema = {
        "type": "object",
        "properties": {"colour": {"enum": ["blue", "green"]}},
        "required": ["colour"],
        "additionalProperties": False,
    }
    result = model.chat(
        [{"role": "user", "content": "What colour is the sea? Answer in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"schema": schema}},
        max_tokens=30,
        temperature=0,
    )
    assert result.finish_reason == "stop"
    jsonschema.validate(json.loads(result.text), schema)


def test_cancelling_a_stream_ends_it_and_frees_its_pages(model):
    with model.chat(HELLO, max_tokens=200, temperature=0, stream=True) as stream:
        first = next(stream)
        assert first.kind == "text"
        stream.cancel()
        result = stream.collect()
    assert result.finish_reason == "cancelled" and 1 <= len(result.tokens) < 200
    assert held_pages(model) == 0


def test_closing_a_stream_early_frees_its_pages(model):
    stream = model.chat(HELLO, max_tokens=200, temperature=0, stream=True)
    next(stream)
    stream.close()
    assert stream.generation.finish_reason in (None, "cancelled")
    wait_until(lambda: held_pages(model) == 0, 60, "the pages were not freed")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"messages": []}, "messages must not be empty"),
        ({"messages": HELLO, "tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        (
            {
                "messages": HELLO,
                "tools": [WEATHER],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
            "'nope', which is not among the tools",
        ),
        ({"messages": HELLO, "response_format": {"type": "xml"}}, "unknown response format"),
    ],
)
def test_a_request_it_cannot_take_is_refused_by_name(model, kwargs, message):
    with pytest.raises(llamay.InvalidRequest, match=message):
        model.chat(**kwargs, max_tokens=4)
    assert held_pages(model) == 0


# --- the same tokens as the server ------------------------------------------------------------


def _served_tokens(client: openai.OpenAI, **request) -> tuple[list[str], object]:
    completion = client.chat.completions.create(model="gemma3:270m", logprobs=True, **request)
    choice = completion.choices[0]
    return [entry.token for entry in choice.logprobs.content], choice


@pytest.mark.parametrize(
    "sampling",
    [{"temperature": 0}, {"temperature": 0.9, "top_p": 0.95, "seed": 1234}],
    ids=["greedy", "seeded"],
)
def test_the_same_request_gives_the_same_tokens_as_the_server(model, served, sampling):
    tokens, choice = _served_tokens(served, messages=HELLO, max_tokens=24, **sampling)
    result = model.chat(HELLO, max_tokens=24, **sampling)
    assert [model.detokenize([t]) for t in result.tokens] == tokens
    assert result.text == choice.message.content
    assert result.finish_reason == choice.finish_reason


def test_the_same_tool_call_as_the_server(model, served):
    request = {"tools": [WEATHER], "parallel_tool_calls": False, "max_tokens": 120}
    tokens, choice = _served_tokens(served, messages=ASK, temperature=0, **request)
    result = model.chat(ASK, temperature=0, **request)
    assert [model.detokenize([t]) for t in result.tokens] == tokens
    assert choice.finish_reason == result.finish_reason == "tool_calls"
    [served_call] = choice.message.tool_calls
    [call] = result.tool_calls
    assert (served_call.function.name, json.loads(served_call.function.arguments)) == (
        call.name,
        call.arguments,
    )
