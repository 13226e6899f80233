"""The details real clients key on: the context-overflow code and wording, nullable
parameters, one `created` per model, and one range table behind the parser and the OpenAPI
document."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from llamay.engine import ranges

TOO_LONG = "word " * 3000  # the test server's context holds 1024 tokens


def test_openai_context_overflow_has_its_code(server):
    client = openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="gemma3:270m", messages=[{"role": "user", "content": TOO_LONG}], max_tokens=4
        )
    assert refused.value.code == "context_length_exceeded"
    answer = httpx.post(
        server.url("/v1/completions"),
        json={"model": "gemma3:270m", "prompt": TOO_LONG, "max_tokens": 4},
        timeout=60,
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "context_length_exceeded"


def test_litellm_maps_the_overflow_to_its_context_window_error(server):
    litellm = pytest.importorskip("litellm")
    with pytest.raises(litellm.ContextWindowExceededError):
        litellm.completion(
            model="openai/gemma3:270m",
            api_base=server.url("/v1"),
            api_key="unused",
            messages=[{"role": "user", "content": TOO_LONG}],
            max_tokens=4,
        )


def test_anthropic_overflow_says_prompt_is_too_long(server):
    client = anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model="gemma3:270m", max_tokens=4, messages=[{"role": "user", "content": TOO_LONG}]
        )
    assert refused.value.body["error"]["message"].startswith("prompt is too long")


def test_n_null_is_one_choice(server):
    answer = httpx.post(
        server.url("/v1/chat/completions"),
        json={
            "model": "gemma3:270m",
            "messages": [{"role": "user", "content": "Hi"}],
            "n": None,
            "max_tokens": 2,
            "temperature": None,
            "top_p": None,
            "seed": None,
        },
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["choices"]) == 1


def test_one_model_has_one_created(server):
    client = openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)
    listed = {model.id: model.created for model in client.models.list()}
    for name, made in listed.items():
        assert client.models.retrieve(name).created == made


def test_the_openapi_document_states_the_range_table(server):
    document = httpx.get(server.url("/openapi.json"), timeout=30).json()
    schema = document["paths"]["/v1/completions"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]
    properties = schema["properties"]
    for name in (*ranges.SAMPLING, "max_tokens", "n"):
        allowed = ranges.RANGES[name]
        described = properties[name]
        assert ("null" in described["type"]) == allowed.nullable
        if allowed.low > -ranges.INF:
            key = "exclusiveMinimum" if allowed.low_open else "minimum"
            assert described[key] == allowed.low
    assert properties["n"]["maximum"] == ranges.RANGES["n"].high
    refused = httpx.post(
        server.url("/v1/chat/completions"),
        json={"model": "gemma3:270m", "messages": [{"role": "user", "content": "Hi"}], "n": 17},
        timeout=60,
    )
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "n"


def test_the_specifications_minimums_are_taken(server):
    """top_p 0 keeps only the most likely token (greedy, whatever the temperature); max_tokens
    0 is an empty answer cut by its length."""
    client = openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "Name three colours."}]

    def answer(**options):
        reply = client.chat.completions.create(model="gemma3:270m", messages=messages, **options)
        return reply.choices[0]

    greedy = answer(max_tokens=12, temperature=0)
    for seed in (1, 2):
        top_p_0 = answer(max_tokens=12, temperature=1.5, top_p=0, seed=seed)
        assert top_p_0.message.content == greedy.message.content
    empty = answer(max_tokens=0)
    assert (empty.message.content, empty.finish_reason) == ("", "length")
