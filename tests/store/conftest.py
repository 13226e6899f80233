"""The store tests: a private $LLAMAY_HOME each (blobs too: these tests delete blobs), a tiny GGUF
model, and a registry server on loopback (tests/registry_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.registry_server import RegistryServer
from helpers.tiny import write_tiny


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch) -> Path:
    """Overrides the suite's fixture of this name: no blobs shared with other tests."""
    home = tmp_path_factory.mktemp("llamay-home")
    monkeypatch.setenv("LLAMAY_HOME", str(home))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    return home


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory) -> bytes:
    """A one-layer llama model (~160 KB), the bytes of its GGUF file."""
    path = write_tiny(tmp_path_factory.mktemp("tiny") / "tiny.gguf", "llama", n_layer=1)
    return path.read_bytes()


@pytest.fixture(scope="session")
def tiny_gguf_q8(tmp_path_factory) -> bytes:
    """The same model with Q8_0 weights: another file, for a second quantization."""
    path = write_tiny(
        tmp_path_factory.mktemp("tiny") / "tiny.gguf", "llama", n_layer=1, weight_type="Q8_0"
    )
    return path.read_bytes()


@pytest.fixture
def registry(tmp_path) -> RegistryServer:
    with RegistryServer(tmp_path / "registry") as server:
        yield server
