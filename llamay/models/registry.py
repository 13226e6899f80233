"""Which architectures llamay runs (each with its family: how its forward pass differs), and a
clear refusal, by name, for the ones it does not.

A file is checked here before any weight is touched: a refusal costs nothing and says why.
"""

from __future__ import annotations

from llamay.errors import UnsupportedModel
from llamay.gguf import GGUFFile
from llamay.gguf.types import REFUSED
from llamay.models.family import Family
from llamay.models.gemma import GEMMA, GEMMA2, GEMMA3
from llamay.models.llama import LLAMA
from llamay.models.phi3 import PHI3
from llamay.models.qwen import QWEN2, QWEN3

# general.architecture -> how that family's forward pass differs from Llama's
FAMILIES: dict[str, Family] = {
    "llama": LLAMA,
    "qwen2": QWEN2,
    "qwen3": QWEN3,
    "gemma": GEMMA,
    "gemma2": GEMMA2,
    "gemma3": GEMMA3,
    "phi3": PHI3,
}
SUPPORTED = tuple(FAMILIES)

_SSM = "state-space and recurrent models (Mamba, RWKV and hybrids) are not supported"
_VISION = "vision encoders and multimodal projectors are not supported (llamay runs text models)"

# general.architecture values llama.cpp knows that llamay declines, with the reason.
DECLINED = {
    **dict.fromkeys(
        (
            "mamba",
            "mamba2",
            "rwkv6",
            "rwkv6qwen2",
            "rwkv7",
            "arwkv7",
            "jamba",
            "falcon-h1",
            "plamo2",
            "granitehybrid",
            "nemotron_h",
            "lfm2",
            "qwen3next",
        ),
        _SSM,
    ),
    "deepseek2": "DeepSeek-V2/V3 (multi-head latent attention) are not supported",
    "deepseek3": "DeepSeek-V2/V3 (multi-head latent attention) are not supported",
    **dict.fromkeys(("clip", "mllama", "llava", "siglip"), _VISION),
}


def check_supported(gg: GGUFFile) -> str:
    """The file's architecture if llamay runs it; otherwise UnsupportedModel saying why."""
    arch = gg.architecture
    where = f"{gg.path}: "
    vocab_only = UnsupportedModel(
        where + "a vocabulary-only file (no general.architecture or no tensors) has no "
        "model to run; llamay.load_tokenizer and `llamay tokenize` read its tokenizer"
    )
    if arch is None:
        raise vocab_only
    if not isinstance(arch, str):  # a hostile file: a number or an array where a name goes
        raise UnsupportedModel(f"{where}general.architecture is not a name: {arch!r:.40}")
    if arch in DECLINED:
        raise UnsupportedModel(f"{where}architecture {arch!r}: {DECLINED[arch]}")
    if arch not in SUPPORTED:
        raise UnsupportedModel(
            f"{where}architecture {arch!r} is not supported; llamay runs: {', '.join(SUPPORTED)}"
        )
    if not gg.tensors:
        raise vocab_only
    if any(name.startswith(("v.", "mm.", "vision_")) for name in gg.tensors):
        raise UnsupportedModel(where + _VISION)
    refused = sorted({t.type for t in gg.tensors.values() if t.type in REFUSED})
    if refused:
        raise UnsupportedModel(
            f"{where}{' and '.join(refused)} weights are not supported: llamay does not run IQ1 "
            "weights (IQ1_S, IQ1_M); use a file quantized to another type, such as Q4_K_M"
        )
    return arch
