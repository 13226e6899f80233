"""Pull names: each written form, its stored name and manifest key, and the refusals."""

from __future__ import annotations

import pytest

from llamay.errors import ModelNotFound
from llamay.store.names import from_key, parse


@pytest.mark.parametrize(
    ("written", "stored", "key"),
    [
        ("gemma3:270m", "gemma3:270m", ("registry.ollama.ai", "library", "gemma3", "270m")),
        ("library/gemma3:270m", "gemma3:270m", ("registry.ollama.ai", "library", "gemma3", "270m")),
        ("qwen3", "qwen3:latest", ("registry.ollama.ai", "library", "qwen3", "latest")),
        ("me/tiny:1", "me/tiny:1", ("registry.ollama.ai", "me", "tiny", "1")),
        ("127.0.0.1:8080/ns/tiny:q4", "127.0.0.1:8080/ns/tiny:q4", ("127.0.0.1:8080", "ns", "tiny", "q4")),
        ("localhost:5000/tiny", "localhost:5000/library/tiny:latest", ("localhost:5000", "library", "tiny", "latest")),
        ("hf.co/owner/repo", "hf.co/owner/repo:Q4_K_M", ("hf.co", "owner", "repo", "Q4_K_M")),
        ("hf.co/owner/repo:q8_0", "hf.co/owner/repo:Q8_0", ("hf.co", "owner", "repo", "Q8_0")),
        ("huggingface.co/owner/repo:F16", "hf.co/owner/repo:F16", ("hf.co", "owner", "repo", "F16")),
        ("https://host/a/b%20c.gguf", "https://host/a/b%20c.gguf", ("_urls", "https:%2F%2Fhost%2Fa%2Fb%2520c.gguf")),
    ],
)  # fmt: skip
def test_written_stored_and_key(written, stored, key):
    name = parse(written)
    assert str(name) == stored
    assert name.key == key
    assert from_key(key) == parse(stored)


def test_a_path_is_stored_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = parse("./m.gguf")
    assert (name.kind, str(name)) == ("file", str(tmp_path / "m.gguf"))
    assert from_key(name.key) == name


@pytest.mark.parametrize(
    "bad", ["a/b/c/d", "ns/../x", "hf.co/owner", "hf.co/a/b/c", "x:tag/y", "-x", "a b"]
)
def test_refused(bad):
    with pytest.raises(ModelNotFound):
        parse(bad)


def test_insecure_only_for_hosts():
    assert parse("127.0.0.1:9/ns/m:t").custom_host
    assert not parse("ns/m:t").custom_host
    assert not parse("hf.co/o/r").custom_host
