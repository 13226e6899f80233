"""Models that `$LLAMAY_HOME/config.toml` routes to a remote provider, relayed by the OpenAI and
Anthropic routes. The remote provider here is another real `llamay serve` (the `server`
fixture), spoken to over both APIs."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

HELLO = [{"role": "user", "content": "Say hello in three words."}]


@pytest.fixture(scope="module")
def relay(server, tmp_path_factory, launch):
    home = tmp_path_factory.mktemp("relay-home")
    (home / "config.toml").write_text(
        f"""
[[providers]]
name = "upstream-openai"
api = "openai"
base_url = "{server.base_url}/v1"
models = {{ "far-gemma" = "gemma3:270m" }}

[[providers]]
name = "upstream-anthropic"
api = "anthropic"
base_url = "{server.base_url}"
models = {{ "far-claude" = "gemma3:270m" }}
"""
    )
    return launch(home)


def local_answer(server) -> str:
    client = openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)
    completion = client.chat.completions.create(
        model="gemma3:270m", messages=HELLO, temperature=0, max_tokens=8
    )
    return completion.choices[0].message.content


@pytest.mark.parametrize("remote_model", ["far-gemma", "far-claude"])
def test_openai_clients_reach_remote_models(server, relay, remote_model):
    client = openai.OpenAI(base_url=relay.url("/v1"), api_key="unused", max_retries=0)
    options = {"model": remote_model, "messages": HELLO, "temperature": 0, "max_tokens": 8}
    completion = client.chat.completions.create(**options)
    assert completion.model == remote_model
    assert completion.choices[0].message.content == local_answer(server)
    assert completion.usage.completion_tokens == 8 or completion.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(**options, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert text == local_answer(server)


@pytest.mark.parametrize("remote_model", ["far-gemma", "far-claude"])
def test_anthropic_clients_reach_remote_models(server, relay, remote_model):
    client = anthropic.Anthropic(base_url=relay.base_url, api_key="unused", max_retries=0)
    options = {"model": remote_model, "messages": HELLO, "max_tokens": 8}
    message = client.messages.create(**options, extra_body={"temperature": 0})
    assert message.model == remote_model
    assert message.content[0].text == local_answer(server)
    with client.messages.stream(**options, extra_body={"temperature": 0}) as stream:
        assert "".join(stream.text_stream) == local_answer(server)
        assert stream.get_final_message().stop_reason in ("end_turn", "max_tokens")


def counted(relay, model: str) -> tuple[float, float]:
    """The relay's /metrics token counters (prompt, generated) for `model`."""
    found = {}
    for line in httpx.get(relay.url("/metrics")).text.splitlines():
        for kind in ("prompt", "generated"):
            if line.startswith(f'llamay_{kind}_tokens_total{{model="{model}"}} '):
                found[kind] = float(line.split()[-1])
    return found.get("prompt", 0.0), found.get("generated", 0.0)


def test_a_relayed_stream_is_counted_with_the_upstreams_usage(relay):
    """A streamed relay counts the tokens the upstream reported under the local name, whether
    or not the client asked for usage, and gives them in the usage chunk when it did (the
    Anthropic upstream reports usage in its stream)."""
    client = openai.OpenAI(base_url=relay.url("/v1"), api_key="unused", max_retries=0)
    options = {"model": "far-claude", "messages": HELLO, "temperature": 0, "max_tokens": 8}
    whole = client.chat.completions.create(**options).usage
    assert whole.prompt_tokens > 0 and whole.completion_tokens > 0
    before = counted(relay, "far-claude")
    chunks = list(
        client.chat.completions.create(
            **options, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == whole.total_tokens
    assert chunks[-2].choices[0].finish_reason in ("stop", "length")
    assert all(chunk.system_fingerprint is None for chunk in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == client.chat.completions.create(**options).choices[0].message.content
    list(client.chat.completions.create(**options, stream=True))  # no usage asked for
    after = counted(relay, "far-claude")
    assert after[0] - before[0] == 3 * whole.prompt_tokens
    assert after[1] - before[1] == 3 * whole.completion_tokens


def test_an_unreachable_provider_is_502(tmp_path_factory, launch):
    home = tmp_path_factory.mktemp("dead-relay-home")
    (home / "config.toml").write_text(
        '[[providers]]\nname = "gone"\napi = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'models = { "gone-model" = "x" }\n'
    )
    client = openai.OpenAI(base_url=launch(home).url("/v1"), api_key="unused", max_retries=0)
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="gone-model", messages=HELLO)
    assert raised.value.status_code == 502
    assert "cannot reach" in raised.value.message


STORY = {
    "messages": [{"role": "user", "content": "Write a very long story about dragons."}],
    "max_tokens": 400,
    "temperature": 1.0,
    "seed": 1,
    "stream": True,
}


@pytest.mark.parametrize("family", ["openai", "anthropic"])
def test_a_failure_mid_stream_is_reported_in_the_stream(tmp_path_factory, launch, family):
    """The upstream dies while the relay streams its answer: the stream ends with an error
    event in the family's format (the status line, 200, is long gone)."""
    upstream = launch(tmp_path_factory.mktemp("upstream-home"))
    home = tmp_path_factory.mktemp("failing-relay-home")
    (home / "config.toml").write_text(
        f'[[providers]]\nname = "doomed"\napi = "openai"\nbase_url = "{upstream.base_url}/v1"\n'
        'models = { "doomed-model" = "gemma3:270m" }\n'
    )
    relay = launch(home)
    path = "/v1/chat/completions" if family == "openai" else "/v1/messages"
    events = []
    # The relay's first chunk waits for the upstream to load its model: seconds on a loaded
    # machine, past httpx's default of 5.
    body = {"model": "doomed-model", **STORY}
    with httpx.stream("POST", relay.url(path), json=body, timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
                if len(events) == 3:
                    upstream.process.kill()
    if family == "openai":
        assert events[0].startswith('{"id"') and events[-1] != "[DONE]"
        error = json.loads(events[-1])["error"]
        assert error["type"] == "server_error" and "doomed" in error["message"]
    else:
        error = json.loads(events[-1])
        assert error["type"] == "error" and error["error"]["type"] == "api_error"


WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"tools": [WEATHER]}, "tools"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"logprobs": True}, "logprobs"),
        ({"n": 2}, "n"),
        ({"reasoning_effort": "low"}, "reasoning_effort"),
        ({"logit_bias": {"1": 2}}, "logit_bias"),
        ({"extra_body": {"top_k": 5}}, "top_k"),
        ({"extra_body": {"truncate": True}}, "truncate"),
    ],
)
def test_what_a_remote_provider_cannot_be_sent_is_refused_naming_the_field(relay, options, field):
    """The pipeline runs a remote model on the provider's runner, which passes on only the
    conversation's text and the options the provider's API takes: the rest is a 400 naming
    the field, before anything is sent, rather than dropped unsaid."""
    client = openai.OpenAI(base_url=relay.url("/v1"), api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="far-gemma", messages=HELLO, max_tokens=4, **options)
    error = refused.value.body
    assert error["param"] == field
    assert error["message"].startswith(f"{field} cannot be passed on to the remote provider")
    assert "'upstream-openai'" in error["message"] and "far-gemma" in error["message"]


def test_each_provider_api_is_sent_what_it_takes(relay, server):
    """top_k goes to an Anthropic upstream, seed to an OpenAI one, and each the other way
    round is refused."""
    client = openai.OpenAI(base_url=relay.url("/v1"), api_key="unused", max_retries=0)
    options = {"messages": HELLO, "temperature": 0, "max_tokens": 8}
    claude = client.chat.completions.create(model="far-claude", **options, extra_body={"top_k": 1})
    assert claude.choices[0].message.content == local_answer(server)
    gemma = client.chat.completions.create(model="far-gemma", **options, seed=3)
    assert gemma.choices[0].message.content == local_answer(server)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="far-claude", **options, seed=3)
    assert refused.value.body["param"] == "seed"
    anthropic_client = anthropic.Anthropic(base_url=relay.base_url, api_key="unused", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as thinking:
        anthropic_client.messages.create(
            model="far-gemma", messages=HELLO, max_tokens=8, thinking={"type": "disabled"}
        )
    assert thinking.value.body["error"]["message"].startswith("thinking cannot be passed on")


def test_a_remote_model_takes_conversations_not_raw_prompts(relay):
    client = openai.OpenAI(base_url=relay.url("/v1"), api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as raw:
        client.completions.create(model="far-gemma", prompt="Once upon a time", max_tokens=4)
    assert raw.value.body["param"] == "prompt"
    called = [
        *HELLO,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    with pytest.raises(openai.BadRequestError) as history:
        client.chat.completions.create(model="far-gemma", messages=called, max_tokens=4)
    assert history.value.body["param"] == "messages"
