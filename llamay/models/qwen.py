"""Qwen 2 (and 2.5) and Qwen 3: Llama with NeoX RoPE.

Qwen 2 adds biases to q, k and v (tensors.py picks up any bias a file has); Qwen 3 drops them
and normalises each query and key head instead.
"""

from __future__ import annotations

from llamay.models.family import Family

QWEN2 = Family(rope_neox=True)
QWEN3 = Family(rope_neox=True, qk_norm=True)
