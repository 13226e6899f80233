"""A real `llamay serve` on a free loopback port, shared by the server tests of a session.

The server is the console script a user runs, in its own process with its own LLAMAY_HOME
(sharing the model blobs), serving the real Gemma 3 270M as `gemma3:270m` (helpers/serving.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.serving import API_KEY, Server, start_server, stop_server


@pytest.fixture(scope="session")
def launch() -> Iterator:
    """`launch(home, *args)`: start another `llamay serve` with its own LLAMAY_HOME (for
    config.toml and the like); every one started is stopped at the end of the session."""
    started: list[Server] = []

    def start(home: Path, *args: str, api_key: str | None = None) -> Server:
        started.append(start_server(home, *args, api_key=api_key))
        return started[-1]

    yield start
    for running in started:
        stop_server(running)


@pytest.fixture(scope="session")
def server(tmp_path_factory, gemma_path) -> Iterator[Server]:
    """`llamay serve` without an API key, serving gemma3:270m (loaded on the first request)."""
    running = start_server(tmp_path_factory.mktemp("serve-home"))
    yield running
    stop_server(running)


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory, gemma_path) -> Iterator[Server]:
    """`llamay serve --api-key API_KEY`: every route needs the key."""
    running = start_server(tmp_path_factory.mktemp("serve-home-key"), api_key=API_KEY)
    yield running
    stop_server(running)
