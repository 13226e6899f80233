"""Which architectures llamay runs (each with its family: how its forward pass differs), and a
clear refusal, by name, for the ones it does not.

The families are the `FAMILIES` of every module in llamay/models/families, found when this
module is first imported: a new family is a new file there, and nothing here changes. A file is
checked here before any weight is touched: a refusal costs nothing and says why.
"""

from __future__ import annotations

import importlib
import pkgutil

from llamay.errors import UnsupportedModel
from llamay.gguf import GGUFFile
from llamay.gguf.types import REFUSED
from llamay.models import families
from llamay.models.family import Family


def _discover() -> dict[str, Family]:
    found: dict[str, Family] = {}
    for module_info in sorted(pkgutil.iter_modules(families.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{families.__name__}.{module_info.name}")
        for family in getattr(module, "FAMILIES", ()):
            if family.arch in found:
                raise RuntimeError(f"two family files declare architecture {family.arch!r}")
            found[family.arch] = family
    return found


# general.architecture -> how that family's forward pass differs from Llama's
FAMILIES: dict[str, Family] = _discover()
SUPPORTED = tuple(sorted(FAMILIES))

_SSM = (
    "state-space, recurrent and hybrid models (Mamba, RWKV, linear-attention hybrids such as "
    "Jamba, Granite 4 hybrid, LFM2, Qwen3-Next) are not supported: llamay runs attention-only "
    "transformers"
)
_MLA = (
    "multi-head latent attention (DeepSeek-V2/V3/R1, Kimi-K2 and their relatives) is not "
    "supported: llamay's KV pages hold one key and one value per head"
)
_VISION = "vision encoders and multimodal projectors are not supported (llamay runs text models)"

# general.architecture values llama.cpp knows that llamay declines, with the reason (the names
# are llama.cpp's LLM_ARCH_NAMES, src/llama-arch.cpp).
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
            "nemotron_h_moe",
            "lfm2",
            "lfm2moe",
            "qwen3next",
            "qwen35",
            "qwen35moe",
            "kimi-linear",
            "minimax-01",
        ),
        _SSM,
    ),
    **dict.fromkeys(("deepseek2", "deepseek3", "deepseek32", "minicpm3", "plm", "glm-dsa"), _MLA),
    **dict.fromkeys(("clip", "mllama", "llava", "siglip"), _VISION),
}


def family_of(arch: object) -> Family:
    """The family of general.architecture `arch`, or UnsupportedModel saying why not."""
    if isinstance(arch, str) and arch in FAMILIES:
        return FAMILIES[arch]
    if isinstance(arch, str) and arch in DECLINED:
        raise UnsupportedModel(f"architecture {arch!r}: {DECLINED[arch]}")
    raise UnsupportedModel(
        f"architecture {arch!r} is not supported; llamay runs: {', '.join(SUPPORTED)}"
    )


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
    try:
        family_of(arch)
    except UnsupportedModel as error:
        raise UnsupportedModel(where + str(error)) from None
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
