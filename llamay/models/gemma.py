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
    "embedding_scale": True,
    "output_is_embedding": True,
}

GEMMA = Family(**_COMMON)
GEMMA2 = Family(
    **_COMMON,
    post_norms=True,
    swa_period=2,
    swa_default_window=4096,  # "default value of gemma 2"
    attn_softcap=50.0,
    final_softcap=30.0,
    layers_of_27b=46,
)
GEMMA3 = Family(
    **_COMMON,
    post_norms=True,
    qk_norm=True,
    swa_period=6,
    swa_rope_base=10000.0,
    final_softcap=0.0,
    layers_of_27b=62,
)
