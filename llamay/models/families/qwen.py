"""Qwen 2 (and 2.5) and Qwen 3, dense and mixture-of-experts: Llama with NeoX RoPE.

Qwen 2 adds biases to q, k and v (the spec builder takes any bias a file has); Qwen 3 drops
them and normalises each query and key head instead. Their MoE versions route each token to
the top k of a softmax over the experts: Qwen 2 MoE keeps those k weights as they are and adds
a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x); Qwen 3 MoE renormalises the k
weights to sum 1 and has no shared expert.
"""

from __future__ import annotations

from llamay.models.family import Experts, Family

QWEN2 = Family(
    "qwen2",
    rope_neox=True,
    biases=("attn_q", "attn_k", "attn_v"),
    models="Qwen 2, Qwen 2.5, Qwen 2.5 Coder, DeepSeek-R1 distills of Qwen",
)
QWEN3 = Family("qwen3", rope_neox=True, qk_norm="head", models="Qwen 3 (dense)")
QWEN2MOE = Family(
    "qwen2moe",
    rope_neox=True,
    biases=("attn_q", "attn_k", "attn_v"),
    experts=Experts(shared="gated"),
    models="Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B",
)
QWEN3MOE = Family(
    "qwen3moe",
    rope_neox=True,
    qk_norm="head",
    experts=Experts(normalize=True),
    models="Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B (and their 2507 updates)",
)

FAMILIES = (QWEN2, QWEN3, QWEN2MOE, QWEN3MOE)
