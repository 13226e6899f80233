"""Over HTTP a model is named by its store name, or by a path under a --models-dir directory:
any other path is refused by its spelling, before anything is opened, and the answer is the
same whether the file exists or not, and names none of its bytes."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret.gguf"
    path.write_bytes(b"TOP SECRET: the launch codes are 0000" * 100)
    return path


def post(server, path: str, body: dict) -> httpx.Response:
    return httpx.request(
        "DELETE" if path == "/api/delete" else "POST", server.url(path), json=body, timeout=60
    )


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/api/pull", lambda p: {"model": p, "stream": False}),
        ("/api/show", lambda p: {"model": p}),
        ("/api/copy", lambda p: {"source": p, "destination": "stolen:1"}),
        ("/api/create", lambda p: {"model": "stolen:2", "from": p, "stream": False}),
        ("/api/delete", lambda p: {"model": p}),
        ("/api/generate", lambda p: {"model": p, "prompt": "hi", "stream": False}),
        (
            "/v1/chat/completions",
            lambda p: {"model": p, "messages": [{"role": "user", "content": "hi"}]},
        ),
    ],
)
def test_a_path_outside_the_model_dirs_tells_nothing(server, secret, route, body):
    there = post(server, route, body(str(secret)))
    missing = post(server, route, body(str(secret.with_name("missing.gguf"))))
    assert there.status_code == missing.status_code == 404, there.text
    assert there.text.replace("secret", "missing") == missing.text
    assert "--models-dir" in there.text
    assert "SECRET" not in there.text and str(secret.stat().st_size) not in there.text
    names = [m["name"] for m in httpx.get(server.url("/api/tags")).json()["models"]]
    assert not any(name.startswith("stolen") for name in names)


def test_a_new_name_may_not_be_a_path(server):
    answer = post(server, "/api/copy", {"source": server.model, "destination": "/tmp/x.gguf"})
    assert answer.status_code == 400 and "not a path or URL" in answer.json()["error"]


def test_a_file_in_a_model_dir_is_served_and_its_errors_name_no_bytes(
    launch, tmp_path_factory, gemma_path
):
    models = tmp_path_factory.mktemp("models")
    (models / "gemma.gguf").symlink_to(gemma_path)
    (models / "junk.gguf").write_bytes(b"PK\x03\x04 a zip, not a model" * 10)
    running = launch(tmp_path_factory.mktemp("models-dir-home"), "--models-dir", str(models))
    shown = post(running, "/api/pull", {"model": str(models / "gemma.gguf"), "stream": False})
    assert shown.status_code == 200, shown.text
    junk = post(running, "/api/pull", {"model": str(models / "junk.gguf"), "stream": False})
    assert junk.status_code == 400
    assert "not a GGUF file" in junk.json()["error"] and "PK" not in junk.json()["error"]
