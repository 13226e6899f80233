"""Gemma 1, 2 and 3: GeGLU, embeddings scaled by sqrt(n_embd), output tied to the embeddings.

Gemma 2 adds post-norms, logit soft-caps and a sliding window on every other layer; Gemma 3
keeps the post-norms, drops the soft-caps, normalises query and key heads, and slides on five
layers of every six, whose RoPE uses base 10000 unscaled. The norm weights in GGUF files already
include Gemma's +1.
"""

from __future__ import annotations

from llamay.models.family import Family

_COMMON = {
    "rope_neox": True,
    "activation": "gelu_tanh",
    "embedding_sqrt_scale": True,
    "output_is_embedding": True,
}

GEMMA = Family("gemma", **_COMMON, models="Gemma 2B, 7B, CodeGemma")
GEMMA2 = Family(
    "gemma2",
    **_COMMON,
    norms="pre+post",
    swa_period=2,
    swa_default_window=4096,  # "default value of gemma 2"
    attn_softcap=50.0,
    final_softcap=30.0,
    layers_of_27b=46,
    models="Gemma 2 2B, 9B, 27B",
)
GEMMA3 = Family(
    "gemma3",
    **_COMMON,
    norms="pre+post",
    qk_norm="head",
    swa_period=6,
    swa_rope_base=10000.0,
    final_softcap=0.0,
    layers_of_27b=62,
    models="Gemma 3 270M, 1B, 4B, 12B, 27B (text)",
)

FAMILIES = (GEMMA, GEMMA2, GEMMA3)
