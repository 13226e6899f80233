"""Model lists show what can be loaded: `/v1/models`, `/api/tags` and `llamay ls` list a built-in
name only where it loads with no network (its file assembled in the store, or its packages
installed), so that a client never picks a name from a list only to get 404 for it."""

from __future__ import annotations

import dataclasses

import falcon.testing
import pytest
from click.testing import CliRunner

from llamay.cli.main import cli
from llamay.server import create_app
from llamay.server.config import ServerConfig
from llamay.store.builtin import GEMMA3_270M, PACKAGED

HOST = {"Host": "127.0.0.1"}


@pytest.fixture
def not_installed(monkeypatch):
    """The built-in names stand for a model whose package is not installed and whose file
    was never assembled (this machine has the real one of both)."""
    absent = dataclasses.replace(
        GEMMA3_270M,
        sha256="0" * 64,
        chunk_packages=(("llamay_test_no_such_chunk_package", "model.gguf.part00"),),
    )
    for name in list(PACKAGED):
        monkeypatch.setitem(PACKAGED, name, absent)


def _lists() -> tuple[list[str], list[str], list[str]]:
    """The names /v1/models, /api/tags and `llamay ls` list."""
    client = falcon.testing.TestClient(create_app(ServerConfig()), headers=HOST)
    models = [model["id"] for model in client.simulate_get("/v1/models").json["data"]]
    tags = [model["name"] for model in client.simulate_get("/api/tags").json["models"]]
    shown = CliRunner().invoke(cli, ["ls"])
    assert shown.exit_code == 0, shown.output
    return models, tags, [line.split()[0] for line in shown.output.splitlines()[1:]]


def test_a_builtin_name_whose_package_is_missing_is_in_no_list(not_installed):
    assert _lists() == ([], [], [])
    client = falcon.testing.TestClient(create_app(ServerConfig()), headers=HOST)
    asked = client.simulate_post(
        "/v1/chat/completions",
        json={"model": "gemma3:270m", "messages": [{"role": "user", "content": "Hi"}]},
    )
    assert asked.status_code == 404  # asking for it says what to install
    assert "pip install 'llamay[gemma]'" in asked.json["error"]["message"]


@pytest.mark.slow
def test_where_it_loads_every_list_has_each_builtin_name(gemma_path):
    models, tags, listed = _lists()
    assert models == tags == listed == sorted(PACKAGED)
