"""What the chat page asks of llamay's own API, against a real `llamay serve` with Gemma 3 270M:
a context made from messages keeps its conversation, takes new turns through the chat
template, carries its conversation in its snapshot, tells its pages shared and its own, and
a running generation can be cancelled from another request.

Token lists are read from snapshots (their TOKS section), so contexts are compared exactly.
"""

from __future__ import annotations

import json
import math

import httpx
import numpy as np
import pytest

from helpers.snapshot_file import sections

GREEDY = {"temperature": 0, "seed": 7}
QUESTION = {"role": "user", "content": "Name a colour."}
FOLLOW_UP = {"role": "user", "content": "And another one?"}
# More than one KV page (32 tokens here) of text.
LONG_PROMPT = (
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. "
    "How vexingly quick daft zebras jump. The five boxing wizards jump quickly."
)


@pytest.fixture(scope="module")
def api(server):
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=120) as client:
        yield client


def create(api, server, **body) -> dict:
    answer = api.post("/llamay/v1/contexts", json={"model": server.model, **body})
    assert answer.status_code == 201, answer.text
    return answer.json()


def generate(api, context_id: str, **body) -> httpx.Response:
    return api.post(f"/llamay/v1/contexts/{context_id}/generate", json=body)


def tokens(api, context_id: str) -> list[int]:
    snapshot = api.get(f"/llamay/v1/contexts/{context_id}/snapshot").content
    return np.frombuffer(sections(snapshot)[b"TOKS"], dtype="<i4").tolist()


def describe(api, context_id: str) -> dict:
    answer = api.get(f"/llamay/v1/contexts/{context_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_turns_added_to_a_conversation_are_the_template_s_words_for_them(api, server):
    chat = create(api, server, messages=[QUESTION])
    # five tokens: an answer without white space at its end, which Gemma's template trims
    answer = generate(api, chat["id"], max_tokens=5, **GREEDY).json()
    assert answer["text"] == answer["text"].strip()
    assert describe(api, chat["id"])["messages"] == [
        QUESTION,
        {"role": "assistant", "content": answer["text"]},
    ]
    added = generate(api, chat["id"], messages=[FOLLOW_UP], max_tokens=0)
    assert added.status_code == 200, added.text
    assert added.json()["tokens"] == [] and added.json()["finish_reason"] == "length"

    # the same as the whole conversation sent at once (the answer tokenizes back the same)
    whole = create(
        api,
        server,
        messages=[QUESTION, {"role": "assistant", "content": answer["text"]}, FOLLOW_UP],
    )
    assert tokens(api, chat["id"]) == tokens(api, whole["id"])
    held = describe(api, chat["id"])
    assert held["messages"] == [
        QUESTION,
        {"role": "assistant", "content": answer["text"]},
        FOLLOW_UP,
        {"role": "assistant", "content": ""},
    ]
    assert held["text"] is None and held["n_tokens"] == whole["n_tokens"]

    # turns and an answer in one request; a trailing assistant turn is the answer's start
    then = generate(
        api,
        chat["id"],
        messages=[{"role": "assistant", "content": "Red"}],
        max_tokens=3,
        **GREEDY,
    ).json()
    last = describe(api, chat["id"])["messages"][-1]
    assert last == {"role": "assistant", "content": "Red" + then["text"]}
    for context in (chat, whole):
        assert api.delete(f"/llamay/v1/contexts/{context['id']}").status_code == 204


def test_a_conversation_travels_with_its_snapshot_and_its_forks(api, server):
    chat = create(api, server, messages=[{"role": "system", "content": "Be brief."}, QUESTION])
    generate(api, chat["id"], max_tokens=4, **GREEDY)
    conversation = describe(api, chat["id"])["messages"]
    fork = api.post(f"/llamay/v1/contexts/{chat['id']}/fork").json()
    assert describe(api, fork["id"])["messages"] == conversation

    snapshot = api.get(f"/llamay/v1/contexts/{chat['id']}/snapshot").content
    meta = json.loads(sections(snapshot)[b"META"])
    assert meta["note"]["messages"] == conversation and meta["note"]["model"] == server.model
    restored = api.post(
        "/llamay/v1/contexts",
        params={"model": server.model},
        content=snapshot,
        headers={"Content-Type": "application/octet-stream"},
    ).json()
    assert describe(api, restored["id"])["messages"] == conversation
    # the restored context takes turns like the one it was saved from
    for context in (chat, restored):
        assert generate(api, context["id"], messages=[FOLLOW_UP], max_tokens=0).status_code == 200
    assert tokens(api, chat["id"]) == tokens(api, restored["id"])
    # a fork is its own: what is added to it is not in its parent's conversation
    assert describe(api, fork["id"])["messages"] == conversation
    for context in (chat, fork, restored):
        api.delete(f"/llamay/v1/contexts/{context['id']}")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"messages": [{"role": "system", "content": "x"}]}, "a system message begins"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "'user' or 'assistant'"),
        ({"messages": []}, "non-empty list"),
        ({"messages": "hi"}, "non-empty list"),
        ({"messages": [{"role": "user", "content": 3}]}, "must be a string"),
        ({"messages": [{"role": "user", "content": "x", "name": "n"}]}, "{'role', 'content'}"),
        ({"messages": [FOLLOW_UP], "prompt": "x"}, "not both"),
    ],
)
def test_turns_that_cannot_be_added_are_refused(api, server, body, fragment):
    chat = create(api, server, messages=[QUESTION])
    refused = generate(api, chat["id"], **body)
    assert refused.status_code == 400
    assert fragment in refused.json()["error"]["message"]
    # nothing changed, and the context is free for the next request
    assert describe(api, chat["id"])["n_tokens"] == chat["n_tokens"]
    assert generate(api, chat["id"], max_tokens=1, **GREEDY).status_code == 200
    api.delete(f"/llamay/v1/contexts/{chat['id']}")


def test_a_context_made_from_a_prompt_takes_text_not_turns(api, server):
    plain = create(api, server, prompt=LONG_PROMPT)
    refused = generate(api, plain["id"], messages=[FOLLOW_UP])
    assert refused.status_code == 400
    assert "not made from messages" in refused.json()["error"]["message"]
    generate(api, plain["id"], prompt=" And", max_tokens=3, **GREEDY)
    held = describe(api, plain["id"])
    assert held["messages"] is None
    assert held["text"].startswith(LONG_PROMPT + " And")
    api.delete(f"/llamay/v1/contexts/{plain['id']}")


def test_pages_are_told_shared_or_own(api, server):
    page_tokens = api.get("/llamay/v1/stats").json()["models"][server.model]["page_tokens"]
    parent = create(api, server, prompt=LONG_PROMPT)
    n_pages = math.ceil(parent["n_tokens"] / page_tokens)
    assert parent["n_tokens"] > page_tokens  # a full page, which the prefix cache also keeps
    held = describe(api, parent["id"])
    assert held["pages"] == {"total": n_pages, "shared": 0, "own": n_pages}
    assert held["n_ctx"] == 1024

    child = api.post(f"/llamay/v1/contexts/{parent['id']}/fork").json()
    for context in (parent, child):  # a fork shares every page
        assert describe(api, context["id"])["pages"] == {
            "total": n_pages,
            "shared": n_pages,
            "own": 0,
        }
    # writing into the fork copies the shared last page (partial) and adds its own
    generate(api, child["id"], max_tokens=page_tokens, **GREEDY)
    grown = describe(api, child["id"])
    full_pages = parent["n_tokens"] // page_tokens
    assert grown["pages"]["shared"] == full_pages
    assert grown["pages"]["own"] == grown["pages"]["total"] - full_pages
    assert describe(api, parent["id"])["pages"]["shared"] == full_pages
    api.delete(f"/llamay/v1/contexts/{child['id']}")
    assert describe(api, parent["id"])["pages"]["shared"] == 0
    api.delete(f"/llamay/v1/contexts/{parent['id']}")


def test_a_running_generation_is_cancelled_by_another_request(api, server):
    chat = create(api, server, messages=[QUESTION])
    received, done = [], None
    body = {"max_tokens": 500, "temperature": 1.0, "seed": 1, "stream": True}
    with api.stream("POST", f"/llamay/v1/contexts/{chat['id']}/generate", json=body) as stream:
        name = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
                continue
            if not line.startswith("data: "):
                continue
            data = json.loads(line[len("data: ") :])
            if name == "token":
                received.append(data)
                if len(received) == 2:
                    cancelled = api.post(f"/llamay/v1/contexts/{chat['id']}/cancel")
                    assert cancelled.status_code == 200
                    assert cancelled.json() == {"id": chat["id"], "cancelled": True}
            elif name == "done":
                done = data
    assert done is not None and done["finish_reason"] == "cancelled"
    generated = [piece["token"] for piece in received if "token" in piece]
    assert 2 <= len(generated) < 500
    # the context holds everything the stream sent, and its conversation says it
    assert done["n_tokens"] == chat["n_tokens"] + len(generated)
    assert tokens(api, chat["id"])[chat["n_tokens"] :] == generated
    text = "".join(piece["text"] for piece in received)
    assert describe(api, chat["id"])["messages"][-1] == {"role": "assistant", "content": text}
    # idle: nothing to cancel
    again = api.post(f"/llamay/v1/contexts/{chat['id']}/cancel")
    assert again.json() == {"id": chat["id"], "cancelled": False}
    assert api.post("/llamay/v1/contexts/ctx-0000000000000000/cancel").status_code == 404
    api.delete(f"/llamay/v1/contexts/{chat['id']}")
