"""Bodies sent without a Content-Type, as litellm's Ollama providers and many scripts send them:
read as JSON, as Ollama reads them, while what a web page can send across sites stays refused."""

from __future__ import annotations

import json

import httpx
import pytest

EVIL = "https://evil.example"


def untyped_post(server, path: str, body: dict) -> httpx.Response:
    """A POST whose request carries no Content-Type header at all."""
    request = httpx.Request("POST", server.url(path), content=json.dumps(body).encode())
    assert "content-type" not in request.headers  # httpx adds none for raw bytes
    with httpx.Client(timeout=120) as client:
        return client.send(request)


def test_ollama_routes_read_an_untyped_body_as_json(server):
    generated = untyped_post(
        server,
        "/api/generate",
        {"model": "gemma3:270m", "prompt": "Hi", "stream": False, "options": {"num_predict": 3}},
    )
    assert generated.status_code == 200, generated.text
    assert generated.json()["done"] is True
    chatted = untyped_post(
        server,
        "/api/chat",
        {
            "model": "gemma3:270m",
            "messages": [{"role": "user", "content": "Hi"}],
            "stream": False,
            "options": {"num_predict": 3},
        },
    )
    assert chatted.status_code == 200, chatted.text
    assert chatted.json()["message"]["role"] == "assistant"


def test_an_untyped_body_that_is_not_json_is_400(server):
    answer = untyped_post(server, "/api/copy", {})
    assert answer.status_code == 400
    request = httpx.Request("POST", server.url("/api/generate"), content=b"model=gemma3:270m")
    with httpx.Client(timeout=60) as client:
        answer = client.send(request)
    assert answer.status_code == 400 and "not valid JSON" in answer.json()["error"]


def test_a_foreign_page_still_cannot_send_one(server):
    """A browser sends a cross-site body without a Content-Type only with its Origin."""
    request = httpx.Request(
        "POST",
        server.url("/api/copy"),
        content=b'{"source": "gemma3:270m", "destination": "pwned:1"}',
        headers={"Origin": EVIL},
    )
    with httpx.Client(timeout=60) as client:
        answer = client.send(request)
    assert answer.status_code == 403
    names = [m["name"] for m in httpx.get(server.url("/api/tags")).json()["models"]]
    assert "pwned:1" not in names


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


@pytest.mark.parametrize("provider", ["ollama", "ollama_chat"])
def test_litellm_ollama_providers(server, provider):
    """litellm's two Ollama providers, for real: plain, streamed, a JSON schema, and a tool
    through the chat provider."""
    litellm = pytest.importorskip("litellm")
    options = {"model": f"{provider}/gemma3:270m", "api_base": server.base_url}
    ask = [{"role": "user", "content": "Say hello."}]

    plain = litellm.completion(messages=ask, max_tokens=8, temperature=0, **options)
    text = plain.choices[0].message.content
    assert isinstance(text, str) and text

    streamed = litellm.completion(messages=ask, max_tokens=8, temperature=0, stream=True, **options)
    pieces = "".join(chunk.choices[0].delta.content or "" for chunk in streamed)
    assert pieces == text

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    formatted = litellm.completion(
        messages=[{"role": "user", "content": "Give a JSON object with a key 'a'."}],
        max_tokens=40,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
        **options,
    )
    assert set(json.loads(formatted.choices[0].message.content)) == {"a"}

    if provider == "ollama":
        return  # litellm's generate provider sends no tools: a call there is up to the prompt
    called = litellm.completion(
        messages=[{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
        tools=[WEATHER],
        tool_choice="required",
        max_tokens=120,
        temperature=0,
        **options,
    )
    calls = called.choices[0].message.tool_calls
    assert calls and called.choices[0].finish_reason == "tool_calls"
    for call in calls:
        assert call.function.name == "get_weather"
        assert set(json.loads(call.function.arguments)) == {"city"}
