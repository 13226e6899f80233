"""The Anthropic Messages API, driven by the official `anthropic` SDK (2.x, and 0.x in a
subprocess) against a real `llamay serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anthropic
import httpx
import jsonschema
import pytest

HELLO = [{"role": "user", "content": "Say hello in three words."}]
WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
        "additionalProperties": False,
    },
}
# The newest 0.x, installed on first use into the pytest cache (it differs from 2.x in the
# API version and auth header it sends).
OLD_SDK = "anthropic<1"


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0)


def greedy(client, messages=HELLO, *, max_tokens=12, sampling=None, **options):
    """A message sampled greedily. The 2.x SDK no longer sends temperature, top_p and top_k
    itself (newer API versions dropped them); llamay still takes them, so they go in the body."""
    return client.messages.create(
        model="gemma3:270m",
        messages=messages,
        max_tokens=max_tokens,
        extra_body=sampling or {"temperature": 0},
        **options,
    )


def test_message_shape_and_usage(client):
    message = greedy(client)
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_")
    assert message.model == "gemma3:270m"
    [block] = message.content
    assert block.type == "text" and block.text
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.stop_sequence is None
    assert message.usage.input_tokens > 5
    assert 1 <= message.usage.output_tokens <= 12
    assert client.messages.count_tokens(model="gemma3:270m", messages=HELLO).input_tokens == (
        message.usage.input_tokens
    )


def test_max_tokens_is_required(server):
    response = httpx.post(
        server.url("/v1/messages"), json={"model": "gemma3:270m", "messages": HELLO}
    )
    assert response.status_code == 400
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in response.json()["error"]["message"]


def test_system_as_string_blocks_or_a_message_role(client):
    as_string = greedy(client, system="You are terse.")
    as_blocks = greedy(client, system=[{"type": "text", "text": "You are terse."}])
    as_role = greedy(client, [{"role": "system", "content": "You are terse."}, *HELLO])
    assert as_string.content[0].text == as_blocks.content[0].text == as_role.content[0].text
    assert as_string.usage.input_tokens == as_role.usage.input_tokens


def test_sampling_options_are_accepted(client):
    message = greedy(client, sampling={"temperature": 0.7, "top_p": 0.9, "top_k": 20, "seed": 3})
    assert message.content[0].text


def test_a_trailing_assistant_message_is_continued(client):
    prefill = [*HELLO, {"role": "assistant", "content": "Hello"}]
    continued = greedy(client, prefill, max_tokens=6)
    counted = client.messages.count_tokens(model="gemma3:270m", messages=prefill)
    assert continued.usage.input_tokens == counted.input_tokens
    plain = greedy(client, max_tokens=6)
    assert continued.usage.input_tokens > plain.usage.input_tokens


def test_stop_sequences(client):
    full = greedy(client, max_tokens=16).content[0].text
    stop = full.split()[1]
    cut = greedy(client, max_tokens=16, stop_sequences=["never appears", stop])
    assert cut.stop_reason == "stop_sequence"
    assert cut.stop_sequence == stop
    assert cut.content[0].text == full[: full.index(stop)]


def test_forced_tool_use_follows_the_schema(client):
    message = greedy(
        client,
        [{"role": "user", "content": "Weather in Rome for 3 days?"}],
        tools=[WEATHER],
        tool_choice={"type": "any"},
        max_tokens=60,
    )
    assert message.stop_reason == "tool_use"
    [block] = message.content
    assert block.type == "tool_use" and block.name == "get_weather"
    assert block.id.startswith("toolu_")
    jsonschema.validate(block.input, WEATHER["input_schema"])


def test_output_format_json_schema(client):
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30}, "rainy": {"type": "boolean"}},
        "required": ["city", "rainy"],
        "additionalProperties": False,
    }
    message = greedy(
        client,
        [{"role": "user", "content": "Name a city and whether it is rainy."}],
        max_tokens=60,
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    assert message.stop_reason == "end_turn"
    jsonschema.validate(json.loads(message.content[0].text), schema)


def test_tool_results_continue_the_conversation(client):
    messages = [
        {"role": "user", "content": "Weather in Rome for 3 days?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Rome", "days": 3},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 25 degrees"},
                {"type": "text", "text": "Summarize it."},
            ],
        },
    ]
    message = greedy(client, messages, tools=[WEATHER], tool_choice={"type": "none"})
    assert message.content[0].type == "text" and message.content[0].text


def event_names(server, body) -> list[tuple[str, dict]]:
    """(event name, data) of a raw /v1/messages stream."""
    events = []
    with httpx.stream("POST", server.url("/v1/messages"), json=body, timeout=120) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                assert data["type"] == name
                events.append((name, data))
    return events


def test_stream_event_sequence(server, client):
    body = {
        "model": "gemma3:270m",
        "messages": HELLO,
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
    }
    events = event_names(server, body)
    names = [name for name, _ in events]
    n_deltas = names.count("content_block_delta")
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * n_deltas,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    whole = greedy(client, max_tokens=8)
    start = events[0][1]["message"]
    assert start["usage"]["input_tokens"] == whole.usage.input_tokens
    assert start["content"] == [] and start["stop_reason"] is None
    text = "".join(data["delta"]["text"] for name, data in events if name == "content_block_delta")
    assert text == whole.content[0].text
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == whole.stop_reason
    assert delta["usage"]["output_tokens"] == whole.usage.output_tokens


def test_sdk_stream_helpers(client):
    with client.messages.stream(
        model="gemma3:270m", messages=HELLO, max_tokens=8, extra_body={"temperature": 0}
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == final.content[0].text == greedy(client, max_tokens=8).content[0].text


def test_streamed_tool_use(server):
    body = {
        "model": "gemma3:270m",
        "messages": [{"role": "user", "content": "Weather in Rome for 3 days?"}],
        "tools": [WEATHER],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "max_tokens": 60,
        "temperature": 0,
        "stream": True,
    }
    events = event_names(server, body)
    start = next(data for name, data in events if name == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    assert start["content_block"]["name"] == "get_weather"
    partial = "".join(
        data["delta"]["partial_json"] for name, data in events if name == "content_block_delta"
    )
    jsonschema.validate(json.loads(partial), WEATHER["input_schema"])
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_models_in_anthropic_shape(client):
    models = list(client.models.list())
    assert "gemma3:270m" in [m.id for m in models]
    assert all(m.type == "model" for m in models)
    assert client.models.retrieve("gemma3:270m").id == "gemma3:270m"


def test_errors_in_anthropic_shape(client):
    with pytest.raises(anthropic.NotFoundError) as raised:
        client.messages.create(model="nope:1b", messages=HELLO, max_tokens=4)
    assert raised.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError):
        greedy(client, [{"role": "user", "content": "word " * 1500}])


def test_the_sdk_sends_the_key(keyed_server):
    keyed = anthropic.Anthropic(
        base_url=keyed_server.base_url, api_key=keyed_server.api_key, max_retries=0
    )
    assert greedy(keyed, max_tokens=2).content
    wrong = anthropic.Anthropic(base_url=keyed_server.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        greedy(wrong, max_tokens=2)
    bearer = anthropic.Anthropic(
        base_url=keyed_server.base_url, auth_token=keyed_server.api_key, max_retries=0
    )
    assert greedy(bearer, max_tokens=2).content


OLD_CLIENT = textwrap.dedent(
    """
    import json, sys
    import anthropic
    client = anthropic.Anthropic(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
    message = client.messages.create(
        model="gemma3:270m", max_tokens=8, temperature=0, top_k=5,
        messages=[{"role": "user", "content": "Say hello."}],
    )
    with client.messages.stream(
        model="gemma3:270m", max_tokens=8, temperature=0,
        messages=[{"role": "user", "content": "Say hello."}],
    ) as stream:
        streamed = "".join(stream.text_stream)
    print(json.dumps({"version": anthropic.__version__, "text": message.content[0].text,
                      "streamed": streamed, "stop": message.stop_reason}))
    """
)


def test_the_0x_sdk(keyed_server, request, tmp_path_factory):
    # pytest's cache keeps the install between runs; without it (-p no:cacheprovider), this run
    cache = getattr(request.config, "cache", None)
    target = (
        Path(cache.mkdir("anthropic-0x"))
        if cache is not None
        else tmp_path_factory.mktemp("anthropic-0x")
    )
    if not (target / "anthropic").is_dir():
        install = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target), OLD_SDK],
            capture_output=True,
            text=True,
        )
        if install.returncode != 0:
            pytest.skip(f"pip could not install {OLD_SDK}: {install.stderr.strip()[-300:]}")
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run(
        [sys.executable, "-c", OLD_CLIENT, keyed_server.base_url, keyed_server.api_key],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["version"].startswith("0.")
    assert result["text"] and result["text"] == result["streamed"]
    assert result["stop"] in ("end_turn", "max_tokens")
