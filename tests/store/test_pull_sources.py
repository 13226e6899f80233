"""Pulling from Hugging Face (through $HF_ENDPOINT, on loopback), from a URL and from a local file."""

from __future__ import annotations

import pytest

from llamay.errors import DigestMismatch, PullError
from llamay.store import list_models, model_info, pull, resolve_model
from llamay.store.huggingface import quant_label
from llamay.store.paths import blobs_dir

from helpers.clitools import assert_user_error, run_llamay
from helpers.registry_server import digest_of


@pytest.fixture
def hub(registry, tiny_gguf, tiny_gguf_q8, monkeypatch):
    registry.add_hf("owner", "tiny-GGUF", "tiny-Q4_K_M.gguf", tiny_gguf)
    registry.add_hf("owner", "tiny-GGUF", "tiny.Q8_0.gguf", tiny_gguf_q8)
    registry.add_hf("owner", "tiny-GGUF", "README.md", b"# tiny")
    monkeypatch.setenv("HF_ENDPOINT", registry.endpoint)
    return registry


@pytest.mark.parametrize(
    ("file_name", "label"),
    [
        ("gemma-3-270m-it-Q4_K_M.gguf", "Q4_K_M"),
        ("tinyllama-1.1b-chat-v1.0.q8_0.gguf", "Q8_0"),
        ("Qwen2.5-0.5B-Instruct-IQ4_XS.gguf", "IQ4_XS"),
        ("ggml-model-f16.gguf", "F16"),
        ("sub/dir/model-BF16.gguf", "BF16"),
        ("model-UD-Q4_K_XL.gguf", "Q4_K_XL"),
        ("Qwen2-7B.gguf", None),
        ("model-Q4_K_M-00001-of-00002.gguf", None),
        ("mmproj-model-f16.gguf", None),
        ("README.md", None),
    ],
)
def test_quant_labels(file_name, label):
    assert quant_label(file_name) == label


def test_default_quant_through_the_resolve_redirect(hub, tiny_gguf):
    entry = pull("hf.co/owner/tiny-GGUF")
    assert entry.name == "hf.co/owner/tiny-GGUF:Q4_K_M"
    assert entry.path.read_bytes() == tiny_gguf
    assert entry.manifest["layers"] == [
        {
            "mediaType": "application/vnd.ollama.image.model",
            "digest": digest_of(tiny_gguf),
            "size": len(tiny_gguf),
        }
    ]
    paths = [path for _, path, _ in hub.requests]
    assert paths[0] == "/api/models/owner/tiny-GGUF"
    assert "/owner/tiny-GGUF/resolve/main/tiny-Q4_K_M.gguf" in paths
    assert f"/cdn/{digest_of(tiny_gguf)}" in paths
    assert resolve_model("hf.co/owner/tiny-GGUF:Q4_K_M") == entry.path
    assert resolve_model("hf.co/owner/tiny-GGUF") == entry.path


def test_quant_matches_ignoring_case(hub, tiny_gguf_q8):
    entry = pull("hf.co/owner/tiny-GGUF:q8_0")
    assert (entry.name, entry.quant) == ("hf.co/owner/tiny-GGUF:Q8_0", "Q8_0")
    assert entry.path.read_bytes() == tiny_gguf_q8


def test_a_missing_quant_lists_what_exists(hub):
    with pytest.raises(PullError, match="has no Q5_K_M GGUF file; its quantizations: Q4_K_M, Q8_0"):
        pull("hf.co/owner/tiny-GGUF:Q5_K_M")
    with pytest.raises(PullError, match="not found"):
        pull("hf.co/owner/nothing-here")
    assert list_models() == []


def test_hf_token(hub, monkeypatch, tiny_gguf):
    hub.hf_token = "hf_secret"
    with pytest.raises(PullError, match=r"access denied.*set HF_TOKEN"):
        pull("hf.co/owner/tiny-GGUF")
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(PullError, match="HF_TOKEN was refused"):
        pull("hf.co/owner/tiny-GGUF")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert pull("hf.co/owner/tiny-GGUF").path.read_bytes() == tiny_gguf
    hub_requests = [h for _, p, h in hub.requests if "/api/" in p or "/resolve/" in p]
    assert hub_requests[-1]["authorization"] == "Bearer hf_secret"


def test_a_hub_without_head_or_siblings(hub, tiny_gguf):
    hub.answer_head = False
    hub.hf_siblings = False
    entry = pull("hf.co/owner/tiny-GGUF")
    assert entry.path.read_bytes() == tiny_gguf
    paths = [path for _, path, _ in hub.requests]
    assert paths[:2] == ["/api/models/owner/tiny-GGUF", "/api/models/owner/tiny-GGUF/tree/main"]
    hub.wrong_bytes = True  # the digest comes from the download's own ETag then: still checked
    with pytest.raises(DigestMismatch):
        pull("hf.co/owner/tiny-GGUF:Q8_0")


def test_the_linked_etag_is_verified(hub):
    hub.wrong_bytes = True
    with pytest.raises(DigestMismatch):
        pull("hf.co/owner/tiny-GGUF")
    assert list_models() == []
    assert [p.name for p in blobs_dir().iterdir()] == []


def test_hf_resumes_a_dropped_download(hub, tiny_gguf):
    hub.drop_blobs = 1
    assert pull("hf.co/owner/tiny-GGUF").path.read_bytes() == tiny_gguf
    first, second = hub.blob_requests()
    assert "range" not in first
    assert second["range"] == f"bytes={len(tiny_gguf) // 2}-"


def test_a_url(registry, tiny_gguf):
    digest = registry.add_blob(tiny_gguf)
    url = f"{registry.endpoint}/files/{digest}/tiny.gguf"
    entry = pull(url)
    assert entry.name == url
    assert entry.path.read_bytes() == tiny_gguf
    assert resolve_model(url) == entry.path
    registry.requests.clear()
    pull(url)
    assert registry.blob_requests() == []  # known by its ETag: not downloaded again


def test_a_url_that_is_not_gguf_stores_nothing(registry):
    digest = registry.add_blob(b"<html>not a model</html>" * 64)
    with pytest.raises(PullError, match="not a usable GGUF file"):
        pull(f"{registry.endpoint}/files/{digest}/page.gguf")
    assert list_models() == []
    assert [p.name for p in blobs_dir().iterdir()] == []


def test_a_local_file_is_linked_in(tmp_path, tiny_gguf):
    source = tmp_path / "mine.gguf"
    source.write_bytes(tiny_gguf)
    entry = pull(str(source))
    assert entry.name == str(source)
    assert entry.path.samefile(source) or entry.path.read_bytes() == tiny_gguf
    source.unlink()
    assert resolve_model(str(source)) == entry.path  # still in the store
    with pytest.raises(PullError, match="no such file"):
        pull(str(tmp_path / "gone.gguf"))


def test_cli_hf_missing_quant_is_one_error_line(hub):
    result = run_llamay("pull", "hf.co/owner/tiny-GGUF:Q2_K")
    assert_user_error(result, "hf.co/owner/tiny-GGUF:Q2_K", "Q4_K_M, Q8_0")


@pytest.mark.slow
def test_the_builtin_name_pulls_with_no_network():
    entry = pull("gemma3:270m")
    assert (entry.name, entry.family, entry.quant) == ("gemma3:270m", "gemma3", "Q4_K_M")
    assert model_info("gemma3:270m").path == resolve_model("gemma3:270m")
    assert [e.name for e in list_models()] == ["gemma3:270m"]
