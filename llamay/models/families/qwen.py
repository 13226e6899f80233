"""Qwen 2 (and 2.5) and Qwen 3: Llama with NeoX RoPE.

Qwen 2 adds biases to q, k and v (the spec builder takes any bias a file has); Qwen 3 drops
them and normalises each query and key head instead.
"""

from __future__ import annotations

from llamay.models.family import Family

QWEN2 = Family(
    "qwen2",
    rope_neox=True,
    biases=("attn_q", "attn_k", "attn_v"),
    models="Qwen 2, Qwen 2.5, Qwen 2.5 Coder, DeepSeek-R1 distills of Qwen",
)
QWEN3 = Family("qwen3", rope_neox=True, qk_norm="head", models="Qwen 3 (dense)")

FAMILIES = (QWEN2, QWEN3)
