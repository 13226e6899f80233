"""Requests a hostile or careless client sends, each once a 5xx, a hang or a leak, against a real
`llamay serve`: every one is a 4xx in its family's shape, answered promptly, and the server goes
on serving (docs/security.md)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

JSON = {"Content-Type": "application/json"}


def post_raw(server, path: str, body: str, timeout: float = 120) -> httpx.Response:
    return httpx.post(server.url(path), content=body.encode(), headers=JSON, timeout=timeout)


def chat(model: str, **fields) -> dict:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 2,
        **fields,
    }


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_are_400(server, number):
    body = json.dumps(chat(server.model)).replace('"max_tokens": 2', f'"max_tokens": {number}')
    answer = post_raw(server, "/v1/chat/completions", body)
    assert answer.status_code == 400, answer.text
    assert "numbers must be finite" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"top_p": -0.5}),
        ("/v1/completions", {"prompt": "Hi", "repeat_penalty": 0}),
        ("/api/generate", {"prompt": "Hi", "options": {"typical_p": 0}, "stream": False}),
        ("/api/generate", {"prompt": "Hi", "options": {"top_k": 3.5}, "stream": False}),
    ],
)
def test_values_the_engine_refuses_are_400_not_500(server, path, body):
    full = (
        {**chat(server.model), **body}
        if path.startswith("/v1/chat")
        else {
            "model": server.model,
            **body,
        }
    )
    answer = httpx.post(server.url(path), json=full, timeout=120)
    assert answer.status_code == 400, answer.text


def test_a_keep_alive_past_any_float_is_forever_not_500(server):
    body = json.dumps({"model": server.model, "keep_alive": 10**400})
    answer = post_raw(server, "/api/generate", body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["done_reason"] == "load"
    quadratic = post_raw(
        server,
        "/api/generate",
        json.dumps({"model": server.model, "keep_alive": "1" + " " * 200_000 + "x"}),
    )
    assert quadratic.status_code == 400


NAME = "a" * 300 + ":latest"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/chat/completions", chat(NAME)),
        ("POST", "/api/show", {"model": NAME}),
        ("POST", "/api/pull", {"model": f"hf.co/{'o' * 300}/r", "stream": False}),
        ("POST", "/api/copy", {"source": NAME, "destination": "b"}),
        ("DELETE", "/api/delete", {"model": NAME}),
        ("POST", "/api/generate", {"model": "x/" * 150 + "y", "prompt": "hi"}),
        ("GET", f"/v1/models/{NAME}", None),
    ],
)
def test_a_name_too_long_for_a_file_is_4xx(server, method, path, body):
    answer = httpx.request(method, server.url(path), json=body, timeout=60)
    assert 400 <= answer.status_code < 500, answer.text


def test_a_lone_surrogate_is_400(server):
    body = '{"model": "mine:1", "from": "gemma3:270m", "template": "\\udc80", "stream": false}'
    answer = post_raw(server, "/api/create", body)
    assert answer.status_code == 400
    assert "lone surrogate" in answer.json()["error"]


@pytest.mark.parametrize(
    "grammar",
    [
        "root ::= " + "(" * 5000 + '"a"' + ")" * 5000,
        "root ::= " + " ".join(['"a"{0,10000}'] * 300),
        "root ::= " + " ".join(["x"] * 200_000) + '\nx ::= "a"?\n',
    ],
    ids=["nested", "multiplying", "many-nullable"],
)
def test_hostile_grammars_are_refused_and_the_server_lives(server, grammar):
    context = httpx.post(
        server.url("/llamay/v1/contexts"),
        json={"model": server.model, "prompt": "Say"},
        timeout=120,
    ).json()["id"]
    answer = httpx.post(
        server.url(f"/llamay/v1/contexts/{context}/generate"),
        json={"grammar": grammar, "max_tokens": 1},
        timeout=300,
    )
    assert answer.status_code in (200, 400), answer.text
    assert httpx.get(server.url("/health"), timeout=10).status_code == 200
    httpx.delete(server.url(f"/llamay/v1/contexts/{context}"))


def test_a_deep_json_schema_is_400(server):
    schema: dict = {"type": "string"}
    for _ in range(60):
        schema = {"type": "object", "properties": {"a": schema}}
    answer = httpx.post(
        server.url("/v1/chat/completions"),
        json=chat(
            server.model, response_format={"type": "json_schema", "json_schema": {"schema": schema}}
        ),
        timeout=60,
    )
    assert answer.status_code == 400
    # Refused as the body is read (more than 64 levels of JSON), before the converter's own
    # bound (32 levels of schema; tests/unit/test_grammar_limits.py) would.
    assert "nested more than" in answer.json()["error"]["message"]


def test_a_body_nested_thousands_deep_is_400(server):
    body = json.dumps({"model": server.model, "messages": []})[:-3] + "[" * 5000 + "]" * 5000 + "}"
    assert post_raw(server, "/v1/chat/completions", body).status_code == 400


def test_a_template_of_many_braces_is_refused_promptly(server):
    """'{{' * 8000 took 5.5 s of a quadratic regex (holding the GIL: /health stalled with it);
    200,000 of them would take hours, far past the request's timeout."""
    body = {"model": server.model, "prompt": "Hi", "template": "{{" * 200_000, "stream": False}
    answer = httpx.post(server.url("/api/generate"), json=body, timeout=120)
    # Read in one pass: braces that never close are text, a prompt too long for the context.
    assert answer.status_code == 400
    assert "the prompt is 400000 characters" in answer.json()["error"]
    assert httpx.get(server.url("/health"), timeout=30).status_code == 200


def test_a_30_mb_prompt_is_refused_without_tokenizing_it(server):
    prompt = "word " * (6 * 1024 * 1024)
    answer = httpx.post(
        server.url("/v1/completions"),
        json={"model": server.model, "prompt": prompt, "max_tokens": 1},
        timeout=300,
    )
    assert answer.status_code == 400
    # Refused by its length alone: tokenized first (some 40 s), it was refused by its tokens.
    assert "characters, so at least" in answer.json()["error"]["message"]


def test_concurrent_forks_of_an_idle_context_all_succeed(server):
    made = httpx.post(
        server.url("/llamay/v1/contexts"),
        json={"model": server.model, "prompt": "Fork me"},
        timeout=120,
    ).json()
    statuses: list[int] = []

    def fork():
        statuses.append(
            httpx.post(server.url(f"/llamay/v1/contexts/{made['id']}/fork"), timeout=60).status_code
        )

    threads = [threading.Thread(target=fork) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [201] * 8
    for context in httpx.get(server.url("/llamay/v1/contexts")).json()["contexts"]:
        httpx.delete(server.url(f"/llamay/v1/contexts/{context['id']}"))
