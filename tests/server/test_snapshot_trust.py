"""An uploaded snapshot is untrusted input: it must never change what another client's request
computes. Its checksums only say the file is whole; anyone can write one with the tokens of one
text and the K/V of another.

The attack, end to end over HTTP: a client uploads a snapshot whose TOKS say "... Alice's PIN is
4921 ..." but whose pages hold the K/V of the same text with 1234. Had its pages gone into the
prefix tree, another client's greedy completion of that text would reuse them and answer 1234.
"""

from __future__ import annotations

import httpx
import numpy as np

from helpers.snapshot_file import rebuilt, sections

PEOPLE = "Bob's PIN is 7730. Carol's PIN is 5318. Dave's PIN is 2264. Erin's PIN is 8087. "
QUESTION = "Frank's PIN is 6402.\nQuestion: What is Alice's PIN?\nAnswer: Alice's PIN is"
TRUE = f"Alice's PIN is 4921. {PEOPLE}{QUESTION}"
FALSE = f"Alice's PIN is 1234. {PEOPLE}{QUESTION}"
GREEDY = {"max_tokens": 6, "temperature": 0}


def complete(server, prompt: str) -> str:
    answer = httpx.post(
        server.url("/v1/completions"),
        json={"model": server.model, "prompt": prompt, **GREEDY},
        headers=server.headers(),
        timeout=180,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"][0]["text"]


def forged_snapshot(server) -> bytes:
    """A snapshot of FALSE's K/V and logits that says it holds TRUE's tokens."""
    with httpx.Client(base_url=server.base_url, timeout=180) as api:
        true = api.post("/llamay/v1/contexts", json={"model": server.model, "prompt": TRUE})
        false = api.post("/llamay/v1/contexts", json={"model": server.model, "prompt": FALSE})
        assert true.status_code == false.status_code == 201
        assert true.json()["n_tokens"] == false.json()["n_tokens"] >= 64  # two full pages
        snapshots = {}
        for name, made in (("true", true), ("false", false)):
            snapshots[name] = api.get(f"/llamay/v1/contexts/{made.json()['id']}/snapshot").content
            assert api.delete(f"/llamay/v1/contexts/{made.json()['id']}").status_code == 204
    true_tokens = sections(snapshots["true"])[b"TOKS"]
    assert (
        np.frombuffer(true_tokens, "<i4").tolist()
        != np.frombuffer(sections(snapshots["false"])[b"TOKS"], "<i4").tolist()
    )
    return rebuilt(snapshots["false"], TOKS=true_tokens)


def upload(server, snapshot: bytes, **params) -> httpx.Response:
    return httpx.post(
        server.url("/llamay/v1/contexts"),
        params={"model": server.model, **params},
        content=snapshot,
        headers={"Content-Type": "application/octet-stream"},
        timeout=180,
    )


def test_a_forged_snapshot_does_not_change_another_clients_answer(server, launch, tmp_path_factory):
    cold = complete(server, TRUE)
    assert "4921" in cold
    forged = forged_snapshot(server)
    # A fresh server gets the upload: the shared one has computed TRUE's pages by now, and a
    # cached prefix keeps its own pages, so a forgery could not land there.
    victim_side = launch(tmp_path_factory.mktemp("snapshot-trust-home"))
    restored = upload(victim_side, forged)
    assert restored.status_code == 201, restored.text  # accepted: the file is whole
    assert complete(victim_side, TRUE) == cold
    # The uploader's own context answers from the forged pages: that is its business alone.
    context_id = restored.json()["id"]
    own = httpx.post(
        victim_side.url(f"/llamay/v1/contexts/{context_id}/generate"),
        json={"max_tokens": 6, "temperature": 0},
        timeout=180,
    )
    assert own.status_code == 200
    # Its forks' continuations stay private too: TRUE followed by more text is still cold.
    fork = httpx.post(victim_side.url(f"/llamay/v1/contexts/{context_id}/fork"), timeout=60)
    assert fork.status_code == 201
    assert complete(victim_side, TRUE + cold) == complete(server, TRUE + cold)


def test_a_verified_upload_is_refused_when_forged_and_shared_when_true(
    server, launch, tmp_path_factory
):
    target = launch(tmp_path_factory.mktemp("snapshot-verify-home"))
    forged = forged_snapshot(target)
    refused = upload(target, forged, verify="true")
    assert refused.status_code == 400
    assert "not what these weights compute" in refused.json()["error"]["message"]
    with httpx.Client(base_url=target.base_url, timeout=180) as api:
        made = api.post(
            "/llamay/v1/contexts", json={"model": target.model, "prompt": "Hello there"}
        )
        genuine = api.get(f"/llamay/v1/contexts/{made.json()['id']}/snapshot").content
    accepted = upload(target, genuine, verify="true")
    assert accepted.status_code == 201 and accepted.json()["n_tokens"] == made.json()["n_tokens"]
