"""SmolLM3: Llama with no RoPE on every fourth layer (llama.cpp fixes n_no_rope_layer_step at 4:
layers 3, 7, 11... attend without positions)."""

from __future__ import annotations

from llamay.models.family import Family

SMOLLM3 = Family("smollm3", nope_period=4, models="SmolLM3 3B (base, instruct)")

FAMILIES = (SMOLLM3,)
