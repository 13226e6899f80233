"""The registry declines, by name and with a reason, what llamay does not run."""

from __future__ import annotations

import numpy as np
import pytest

from llamay import gguf
from llamay.errors import UnsupportedModel
from llamay.gguf import RawTensor
from llamay.models.registry import SUPPORTED, check_supported


def model_file(tmp_path, arch, tensors=None):
    metadata = {} if arch is None else {"general.architecture": arch}
    tensors = tensors or {"token_embd.weight": np.zeros((4, 32), np.float32)}
    return gguf.read(gguf.write(tmp_path / f"{arch}.gguf", metadata, tensors))


@pytest.mark.parametrize("arch", SUPPORTED)
def test_supported_architectures_pass(tmp_path, arch):
    assert check_supported(model_file(tmp_path, arch)) == arch


@pytest.mark.parametrize(
    ("arch", "reason"),
    [
        ("mamba", "state-space"),
        ("mamba2", "state-space"),
        ("rwkv6", "RWKV"),
        ("rwkv7", "RWKV"),
        ("jamba", "hybrids"),
        ("falcon-h1", "hybrids"),
        ("granitehybrid", "Granite 4 hybrid"),
        ("nemotron_h", "hybrids"),
        ("lfm2", "LFM2"),
        ("lfm2moe", "LFM2"),
        ("qwen3next", "Qwen3-Next"),
        ("qwen35moe", "hybrids"),
        ("kimi-linear", "hybrids"),
        ("plamo2", "hybrids"),
        ("deepseek2", "DeepSeek-V2/V3"),
        ("deepseek2", "Kimi-K2"),
        ("deepseek32", "multi-head latent attention"),
        ("minicpm3", "multi-head latent attention"),
        ("clip", "vision encoders"),
        ("mllama", "vision encoders"),
    ],
)
def test_declined_by_name(tmp_path, arch, reason):
    with pytest.raises(UnsupportedModel, match=reason) as info:
        check_supported(model_file(tmp_path, arch))
    assert repr(arch) in str(info.value)


def test_unknown_architecture_lists_what_runs(tmp_path):
    with pytest.raises(
        UnsupportedModel,
        match=r"'t5' is not supported; llamay runs: bert, cohere2, gemma, gemma2, gemma3, "
        r"gpt-oss, granite, granitemoe, llama, nomic-bert, olmo2, phi3, qwen2, qwen2moe, qwen3, "
        r"qwen3moe, smollm3$",
    ):
        check_supported(model_file(tmp_path, "t5"))


def test_vocab_only_file_is_not_a_model(tmp_path, data_dir):
    with pytest.raises(UnsupportedModel, match="load_tokenizer"):
        check_supported(model_file(tmp_path, None))
    vocab_only = gguf.read(data_dir / "vocab" / "ggml-vocab-qwen2.gguf")
    assert vocab_only.architecture == "qwen2"
    with pytest.raises(UnsupportedModel, match="vocabulary-only"):
        check_supported(vocab_only)


def test_vision_tensors_inside_a_text_architecture(tmp_path):
    tensors = {"v.patch_embd.weight": np.zeros((4, 32), np.float32)}
    with pytest.raises(UnsupportedModel, match="vision encoders"):
        check_supported(model_file(tmp_path, "gemma3", tensors))


@pytest.mark.parametrize(("name", "block"), [("IQ1_S", 50), ("IQ1_M", 56)])
def test_iq1_weights_refused_at_load(tmp_path, name, block):
    tensors = {"blk.0.ffn_up.weight": RawTensor(name, (256, 1), np.zeros(block, np.uint8))}
    with pytest.raises(UnsupportedModel, match=f"{name} weights are not supported"):
        check_supported(model_file(tmp_path, "llama", tensors))


def test_docs_list_every_supported_and_refused_architecture():
    """docs/models.md names each architecture llamay runs (with its real models) and each one
    it refuses."""
    from pathlib import Path

    from llamay.models.registry import DECLINED, FAMILIES

    docs = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    for arch, family in FAMILIES.items():
        assert f"`{arch}`" in docs, arch
        first_model = family.models.split(",")[0].split(" (")[0]
        assert first_model.split("/")[0] in docs, (arch, first_model)
    for arch in DECLINED:
        assert f"`{arch}`" in docs, arch
