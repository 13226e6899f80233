"""gpt-oss (OpenAI's open-weight MoE): attention sinks, alternating windows, clamped SwiGLU experts.

Attention has biases on q, k, v and the output, and a learned logit per query head (attn_sinks)
that joins the softmax's denominator; every other layer (0, 2, ...) slides over a window of
attention.sliding_window (128 in the real models). RoPE is NeoX with YaRN scaling (factor 32 over
4096 positions in the real files). The FFN norm is stored as post_attention_norm. The FFN is a
mixture of experts with biases everywhere: the top k of the router's logits, then the softmax
over those k; each expert computes ggml_swiglu_oai (gate clamped above at 7, up to [-7, 7],
gate * sigmoid(1.702 gate) * (up + 1)). Real files hold the experts in MXFP4.
"""

from __future__ import annotations

from llamay.models.family import Experts, Family

GPT_OSS = Family(
    "gpt-oss",
    rope_neox=True,
    biases=("attn_q", "attn_k", "attn_v", "attn_output"),
    swa_period=2,
    swa_period_key=True,
    swa_rope_base_key=True,
    attn_sinks=True,
    tensor_names={"ffn_norm": "blk.{il}.post_attention_norm"},
    experts=Experts(gating="softmax_weight", activation="swiglu_oai", biases=True),
    example_metadata={
        "attention.sliding_window": 128,
        "rope.freq_base": 150000.0,
        "rope.scaling.type": "yarn",
        "rope.scaling.factor": 32.0,
        "rope.scaling.original_context_length": 4096,
    },
    models="gpt-oss-20b, gpt-oss-120b",
)

FAMILIES = (GPT_OSS,)
