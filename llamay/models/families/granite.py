"""IBM Granite 3 (dense) and Granite 3 MoE: Llama with four multipliers, and optional RoPE.

The token embeddings are multiplied by embedding_scale, the attention and FFN outputs by
residual_scale before each residual add, q.k by attention.scale in place of 1/sqrt(head_dim),
and the logits divided by logit_scale. rope.scaling.finetuned = false switches RoPE off.
Either architecture may have experts (llama.cpp builds both with one graph): softmax, the top
k renormalised; Granite MoE Shared adds a plain shared expert when
expert_shared_feed_forward_length > 0. The expert width is feed_forward_length.
"""

from __future__ import annotations

from llamay.models.family import Experts, Family, Scales

_COMMON = {
    "scales": Scales(
        embedding="embedding_scale",
        residual="residual_scale",
        attention="attention.scale",
        logit="logit_scale",
    ),
    "rope_switch": True,
    "experts": Experts(normalize=True, n_ff_key=None, shared="plain", optional=True),
    # Multipliers of the real models' order (Granite 3.1 8B: 12, 0.22, 1/128, 16), chosen so
    # that each visibly moves a small random model's logits.
    "example_metadata": {
        "embedding_scale": 4.0,
        "residual_scale": 0.5,
        "attention.scale": 0.25,
        "logit_scale": 3.0,
    },
}

GRANITE = Family(
    "granite",
    **_COMMON,
    models="Granite 3.0/3.1/3.2/3.3 2B and 8B (base, instruct), Granite Guardian 3",
)
GRANITEMOE = Family(
    "granitemoe",
    **_COMMON,
    models="Granite 3.0/3.1 1B-A400M and 3B-A800M (MoE)",
)

FAMILIES = (GRANITE, GRANITEMOE)
