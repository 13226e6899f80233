"""The parts every route shares: health, the API key, the body limit, error shapes, routing of
model names, and `llamay serve`'s refusal to listen beyond loopback without a key."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from helpers.clitools import assert_user_error, run_llamay


def test_health(server):
    response = httpx.get(server.url("/health"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.parametrize("path", ["/health", "/v1/models", "/metrics", "/api/tags"])
def test_every_route_needs_the_key(keyed_server, path):
    response = httpx.get(keyed_server.url(path))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    wrong = httpx.get(keyed_server.url(path), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401


def test_the_key_as_bearer_or_x_api_key(keyed_server):
    for headers in (
        {"Authorization": f"Bearer {keyed_server.api_key}"},
        {"x-api-key": keyed_server.api_key},
    ):
        assert httpx.get(keyed_server.url("/v1/models"), headers=headers).status_code == 200


def test_missing_key_in_each_family_shape(keyed_server):
    openai = httpx.post(keyed_server.url("/v1/chat/completions"), json={})
    assert openai.json()["error"]["type"] == "authentication_error"
    anthropic = httpx.post(keyed_server.url("/v1/messages"), json={})
    assert anthropic.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": anthropic.json()["error"]["message"]},
    }
    ollama = httpx.post(keyed_server.url("/api/chat"), json={})
    assert set(ollama.json()) == {"error"} and isinstance(ollama.json()["error"], str)


def test_body_past_the_limit_is_413(server):
    big = b'{"model": "' + b"x" * (33 * 1024 * 1024) + b'"}'
    response = httpx.post(
        server.url("/v1/chat/completions"),
        content=big,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_chunked_body_past_the_limit_is_413(server):
    def chunks():  # no Content-Length: the limit is found while reading
        for _ in range(33):
            yield b" " * (1024 * 1024)

    response = httpx.post(
        server.url("/v1/messages"), content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "request_too_large"


@pytest.mark.parametrize(
    ("path", "family"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")]
)
def test_unknown_model_is_404(server, path, family):
    body = {
        "model": "no-such-model:1b",
        "max_tokens": 4,
        "messages": [{"role": "user", "content": "hi"}],
    }
    response = httpx.post(server.url(path), json=body)
    assert response.status_code == 404
    if family == "openai":
        assert response.json()["error"]["type"] == "not_found_error"
        assert "no-such-model:1b" in response.json()["error"]["message"]
    else:
        assert response.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'{"messages": []}'])
def test_bad_bodies_are_400(server, body):
    response = httpx.post(
        server.url("/v1/chat/completions"),
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_path_outside_the_model_dirs_is_refused(server, gemma_path):
    body = {"model": str(gemma_path), "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(server.url("/v1/chat/completions"), json=body)
    assert response.status_code == 404
    assert "--models-dir" in response.json()["error"]["message"]


def test_unknown_route_is_404(server):
    response = httpx.get(server.url("/v1/nothing"))
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "no route GET /v1/nothing"


def test_model_ids_with_slashes_and_colons(server):
    response = httpx.get(server.url(f"/v1/models/{server.model}"))
    assert response.status_code == 200
    assert response.json()["id"] == server.model and response.json()["object"] == "model"
    missing = httpx.get(server.url("/v1/models/hf.co/someone/model:Q4_K_M"))
    assert missing.status_code == 404


def test_serve_refuses_a_public_address_without_a_key():
    result = run_llamay("serve", "--host", "0.0.0.0", "--port", "0", timeout=60)
    assert_user_error(
        result, "refusing to listen on 0.0.0.0 without an API key", "--insecure-no-key"
    )


def test_serve_listens_beyond_loopback_when_told_to(launch, tmp_path_factory):
    running = launch(tmp_path_factory.mktemp("open-home"), "--host", "0.0.0.0", "--insecure-no-key")
    assert httpx.get(running.url("/health")).json() == {"status": "ok"}


def test_serve_cleans_what_killed_processes_left(launch, tmp_path_factory):
    """A server or pull killed with -9 leaves its temporary files: the next serve removes those
    whose process is gone, and keeps the rest (an unfinished download resumes)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    home = tmp_path_factory.mktemp("stale-home")
    (home / "manifests").mkdir()
    stale = home / "manifests" / f".latest~{child.pid}-abcd.partial"
    stale.write_text("half a manifest")
    folder = Path(tempfile.mkdtemp(prefix=f"llamay-snapshot~{child.pid}-"))
    (folder / "ctx.llamay").write_bytes(b"LLAMAYKV")
    launch(home)
    assert not stale.exists() and not folder.exists()
