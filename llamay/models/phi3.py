"""Phi-3 (and 3.5): fused qkv and gate+up projections, NeoX RoPE, LongRoPE factors.

Its sliding window is read by llama.cpp but switched off ("Phi SWA is currently disabled"), so
no layer slides here either. The fused qkv tensor is found by name (tensors.py).
"""

from __future__ import annotations

from llamay.models.family import Family

PHI3 = Family(rope_neox=True, fused_gate_up=True)
