"""Shared fixtures. Test data lives in tests/data; the real model comes from the gemma extra."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

# The slow tier's rule (tests/README.md): a test that uses one of these fixtures, itself or
# through another, loads the real Gemma model (gemma_path), starts a `llamay serve` (launch,
# server, keyed_server), a headless Chromium (chromium) or replicas behind nginx (fleet).
SLOW_FIXTURES = frozenset({"gemma_path", "launch", "server", "keyed_server", "chromium", "fleet"})

# Tests use only this machine: litellm reads its model price list from its own package instead
# of fetching it from GitHub when imported (retrying for seconds where there is no network).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M, resolved as users resolve it (assembled once, cached)."""
    from llamay.store import resolve_model

    return resolve_model("gemma3:270m")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Every test gets its own LLAMAY_HOME, except for the shared model blobs (big, read-only)."""
    home = tmp_path_factory.mktemp("llamay-home")
    shared_blobs = Path(os.environ.get("LLAMAY_TEST_BLOBS", Path.home() / ".llamay" / "blobs"))
    shared_blobs.mkdir(parents=True, exist_ok=True)
    (home / "blobs").symlink_to(shared_blobs, target_is_directory=True)
    monkeypatch.setenv("LLAMAY_HOME", str(home))


@pytest.fixture(scope="module", params=["cpu", "reference"])
def backend(request) -> str:
    """Each backend in turn, for the tests that hold every backend to the same behaviour (the
    reference backend is slow: use it with the tiny synthetic models)."""
    return request.param
