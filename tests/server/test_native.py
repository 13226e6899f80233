"""llamay's own context API (/llamay/v1) against a real `llamay serve`, with httpx.

The page accounting is checked exactly: these contexts stay under one KV page (32 tokens), so
no full page goes to the prefix cache and each context's pages come back when it is deleted.
"""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest

from helpers.tiny import write_tiny
from helpers.waiting import wait_until

PROMPT = "The capital of France is"
GREEDY = {"temperature": 0, "seed": 7}


@pytest.fixture(scope="module")
def api(server):
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=120) as client:
        assert client.post("/api/generate", json={"model": server.model}).status_code == 200
        yield client


@pytest.fixture(scope="module")
def tiny_model(api, tmp_path_factory):
    """A tiny random llama model in the server's store (uploaded as a blob, then created)."""
    path = write_tiny(tmp_path_factory.mktemp("tiny") / "tiny.gguf", "llama", n_layer=1, seed=11)
    data = path.read_bytes()
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    assert api.post(f"/api/blobs/{digest}", content=data).status_code == 201
    created = api.post(
        "/api/create",
        json={"model": "tiny-native", "files": {"tiny.gguf": digest}, "stream": False},
    )
    assert created.status_code == 200, created.text
    yield "tiny-native"
    assert api.request("DELETE", "/api/delete", json={"model": "tiny-native"}).status_code == 200


def pages_used(api, model: str) -> int:
    return api.get("/llamay/v1/stats").json()["models"][model]["pages_used"]


def create(api, model: str, **body) -> dict:
    answer = api.post("/llamay/v1/contexts", json={"model": model, **body})
    assert answer.status_code == 201, answer.text
    return answer.json()


def generate(api, context_id: str, **body) -> dict:
    answer = api.post(f"/llamay/v1/contexts/{context_id}/generate", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def stream(api, context_id: str, **body) -> list[tuple[str, dict]]:
    """The (event, data) pairs of a streamed generation."""
    events = []
    body = {**body, "stream": True}
    with api.stream("POST", f"/llamay/v1/contexts/{context_id}/generate", json=body) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in answer.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[len("data: ") :])))
    return events


def restore(api, snapshot: bytes, model: str) -> httpx.Response:
    return api.post(
        "/llamay/v1/contexts",
        params={"model": model},
        content=snapshot,
        headers={"Content-Type": "application/octet-stream"},
    )


def test_contexts_generate_fork_snapshot_restore_and_free_their_pages(api, server):
    before = pages_used(api, server.model)
    a = create(api, server.model, prompt=PROMPT)
    assert a["model"] == server.model and a["id"].startswith("ctx-")
    n_prompt = a["n_tokens"]
    assert 2 <= n_prompt <= 10
    assert pages_used(api, server.model) == before + 1

    b = api.post(f"/llamay/v1/contexts/{a['id']}/fork")
    assert b.status_code == 201
    b = b.json()
    assert b["n_tokens"] == n_prompt
    assert pages_used(api, server.model) == before + 1  # a fork shares every page

    first = generate(api, a["id"], max_tokens=5, **GREEDY)
    assert first["finish_reason"] == "length"
    assert len(first["tokens"]) == 5
    assert first["n_tokens"] == n_prompt + 5
    # The fork writes into the shared tail page, so it gets a copy of it.
    events = stream(api, b["id"], max_tokens=5, **GREEDY)
    assert [name for name, _ in events] == ["token"] * len(events[:-1]) + ["done"]
    assert [data["token"] for _, data in events if "token" in data] == first["tokens"]
    assert "".join(data.get("text", "") for _, data in events[:-1]) == first["text"]
    assert events[-1][1] == {"finish_reason": "length", "n_tokens": n_prompt + 5}
    assert pages_used(api, server.model) == before + 2

    listed = {c["id"]: c for c in api.get("/llamay/v1/contexts").json()["contexts"]}
    assert listed[a["id"]] == {"id": a["id"], "model": server.model, "n_tokens": n_prompt + 5}
    assert listed[b["id"]]["n_tokens"] == n_prompt + 5

    snapshot = api.get(f"/llamay/v1/contexts/{a['id']}/snapshot")
    assert snapshot.status_code == 200
    assert snapshot.headers["content-type"] == "application/octet-stream"
    assert snapshot.content.startswith(b"LLAMAYKV")
    restored = restore(api, snapshot.content, server.model)
    assert restored.status_code == 201, restored.text
    c = restored.json()
    assert c["n_tokens"] == n_prompt + 5 and c["id"] not in (a["id"], b["id"])
    assert pages_used(api, server.model) == before + 3

    # The context keeps what was generated: both go on identically from the same state.
    then_a = generate(api, a["id"], max_tokens=3, **GREEDY)
    then_c = generate(api, c["id"], max_tokens=3, **GREEDY)
    assert then_a["tokens"] == then_c["tokens"] and len(then_a["tokens"]) == 3
    stats = api.get("/llamay/v1/stats").json()["models"][server.model]
    assert stats["contexts"] >= 3
    assert stats["pages_used"] + stats["pages_free"] == stats["pages_total"]

    for context in (a, b, c):
        deleted = api.delete(f"/llamay/v1/contexts/{context['id']}")
        assert deleted.status_code == 204 and deleted.content == b""
    assert pages_used(api, server.model) == before
    remaining = {c["id"] for c in api.get("/llamay/v1/contexts").json()["contexts"]}
    assert not remaining & {a["id"], b["id"], c["id"]}


def test_a_context_from_messages_holds_the_chat_prompt(api, server):
    messages = [{"role": "user", "content": "Name a colour."}]
    context = create(api, server.model, messages=messages)
    # The same messages through /api/chat, for one token: its prompt_eval_count.
    chat = api.post(
        "/api/chat",
        json={
            "model": server.model,
            "messages": messages,
            "stream": False,
            "options": {"num_predict": 1},
        },
    )
    assert context["n_tokens"] == chat.json()["prompt_eval_count"]
    assert api.delete(f"/llamay/v1/contexts/{context['id']}").status_code == 204


def test_a_snapshot_of_other_weights_is_refused_with_409(api, server, tiny_model):
    tiny = create(api, tiny_model, prompt="a b c")
    gemma = create(api, server.model, prompt=PROMPT)
    tiny_snapshot = api.get(f"/llamay/v1/contexts/{tiny['id']}/snapshot").content
    gemma_snapshot = api.get(f"/llamay/v1/contexts/{gemma['id']}/snapshot").content
    before = api.get("/llamay/v1/contexts").json()

    refused = restore(api, tiny_snapshot, server.model)
    assert refused.status_code == 409
    message = refused.json()["error"]["message"]
    assert "the uploaded snapshot" in message and "other weights" in message
    assert "/tmp" not in message
    assert restore(api, gemma_snapshot, tiny_model).status_code == 409
    assert api.get("/llamay/v1/contexts").json() == before

    back = restore(api, tiny_snapshot, tiny_model)
    assert back.status_code == 201 and back.json()["n_tokens"] == tiny["n_tokens"]
    for context in (tiny, gemma, back.json()):
        assert api.delete(f"/llamay/v1/contexts/{context['id']}").status_code == 204


def test_a_corrupt_snapshot_is_refused_with_400(api, server):
    context = create(api, server.model, prompt=PROMPT)
    snapshot = bytearray(api.get(f"/llamay/v1/contexts/{context['id']}/snapshot").content)
    assert api.delete(f"/llamay/v1/contexts/{context['id']}").status_code == 204
    flipped = bytearray(snapshot)
    flipped[len(flipped) // 2] ^= 0x01
    for damaged in (bytes(flipped), bytes(snapshot[: len(snapshot) // 2]), b"not a snapshot"):
        answer = restore(api, damaged, server.model)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"].startswith("the uploaded snapshot")


def test_a_busy_context_refuses_other_requests_with_409(api, server):
    context = create(api, server.model, prompt=PROMPT)
    url = f"/llamay/v1/contexts/{context['id']}"
    body = {"max_tokens": 12, "stream": True, **GREEDY}
    with api.stream("POST", f"{url}/generate", json=body) as answer:
        lines = answer.iter_lines()
        next(lines)  # the generation has started
        for busy in (
            api.delete(url),
            api.post(f"{url}/fork"),
            api.get(f"{url}/snapshot"),
            api.post(f"{url}/generate", json={"max_tokens": 1}),
        ):
            assert busy.status_code == 409
            assert "is generating" in busy.json()["error"]["message"]
        assert any(line == "event: done" for line in lines)
    assert api.delete(url).status_code == 204


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({"model": "no-such-model", "prompt": "x"}, 404, "no-such-model"),
        ({"model": "~no-such-user/model", "prompt": "x"}, 404, "~no-such-user/model"),
        ({"model": "gemma3:270m"}, 400, "either 'prompt'"),
        ({"model": "gemma3:270m", "prompt": "x", "messages": []}, 400, "either 'prompt'"),
        ({"model": "gemma3:270m", "prompt": 5}, 400, "prompt must be a string"),
        ({"model": "gemma3:270m", "prompt": "x", "max_tokens": 3}, 400, "unknown field"),
        ({"model": "gemma3:270m", "prompt": "word " * 1100}, 400, "context holds 1024"),
    ],
)
def test_create_refuses_bad_requests(api, body, status, fragment):
    answer = api.post("/llamay/v1/contexts", json=body)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert fragment in error["message"]
    assert set(error) == {"message", "type", "param", "code"}


def test_unknown_contexts_and_bad_generate_requests(api, server):
    for method, path in (
        ("POST", "/generate"),
        ("POST", "/fork"),
        ("GET", "/snapshot"),
        ("GET", ""),
        ("DELETE", ""),
    ):
        answer = api.request(method, f"/llamay/v1/contexts/ctx-0000{path}", json={})
        assert answer.status_code == 404
        assert "no context 'ctx-0000'" in answer.json()["error"]["message"]
    context = create(api, server.model, prompt=PROMPT)
    url = f"/llamay/v1/contexts/{context['id']}/generate"
    for body, fragment in (
        ({"temperature": -1}, "temperature"),
        ({"max_tokens": "many"}, "max_tokens"),
        ({"stream": "yes"}, "stream"),
        ({"grammar": "root ::= x", "json_schema": {}}, "not both"),
        ({"n": 2}, "unknown field 'n'"),
    ):
        answer = api.post(url, json=body)
        assert answer.status_code == 400, body
        assert fragment in answer.json()["error"]["message"]
    assert (
        api.post(
            "/llamay/v1/contexts",
            content=b"LLAMAYKV",
            headers={"Content-Type": "application/octet-stream"},
        ).status_code
        == 400
    )  # no ?model=
    assert api.delete(f"/llamay/v1/contexts/{context['id']}").status_code == 204


def test_a_client_that_leaves_a_stream_frees_the_context_for_the_next_request(api, server):
    context = create(api, server.model, prompt=PROMPT)
    url = f"/llamay/v1/contexts/{context['id']}"
    body = {"max_tokens": 500, "stream": True, "temperature": 1.0, "seed": 1}
    with httpx.stream("POST", f"{server.base_url}{url}/generate", json=body, timeout=60) as answer:
        events = (line for line in answer.iter_lines() if line == "event: token")
        for _ in range(3):
            next(events)

    # The generation stops at the server's next write; then the context takes requests again,
    # holding the prompt and what was generated before the client left.
    def forked() -> httpx.Response | None:
        answer = api.post(f"{url}/fork")
        return None if answer.status_code == 409 else answer  # 409: busy yet

    fork = wait_until(forked, 60, "the context stayed busy after its client left")
    assert fork.status_code == 201
    n_tokens = api.get(url).json()["n_tokens"]
    assert context["n_tokens"] + 3 <= n_tokens < context["n_tokens"] + 500
    for context_id in (context["id"], fork.json()["id"]):
        assert api.delete(f"/llamay/v1/contexts/{context_id}").status_code == 204
