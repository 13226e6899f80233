"""Cohere 2 (Command R7B, Command A): a parallel block with LayerNorm, and NoPE global layers.

Each layer norms its input once (LayerNorm without bias, eps from attention.layer_norm_epsilon);
attention and the FFN both read that, and the layer's output is x + ffn + attn. Three layers of
every four slide (attention.sliding_window, the period from attention.sliding_window_pattern
where the file has it) and rotate; the fourth attends globally without RoPE. The output is tied
to the embeddings, and the logits are multiplied by logit_scale.
"""

from __future__ import annotations

from llamay.models.family import Family, Scales

COHERE2 = Family(
    "cohere2",
    norm="layer",
    parallel=True,
    swa_period=4,
    swa_period_key=True,
    nope_global=True,
    output_is_embedding=True,
    scales=Scales(logit_multiplier="logit_scale"),
    example_metadata={"attention.sliding_window": 4096, "logit_scale": 0.25},
    models="Command R7B (c4ai-command-r7b-12-2024, R7B Arabic), Command A (111B)",
)

FAMILIES = (COHERE2,)
