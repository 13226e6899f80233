"""Phi-3 (and 3.5): fused qkv and gate+up projections, NeoX RoPE, LongRoPE factors.

Its sliding window is read by llama.cpp but switched off ("Phi SWA is currently disabled"), so
no layer slides here either.
"""

from __future__ import annotations

from llamay.models.family import Family

PHI3 = Family(
    "phi3",
    rope_neox=True,
    fused_qkv=True,
    fused_gate_up=True,
    models="Phi-3 mini/medium, Phi-3.5 mini, Phi-4 mini",
)

FAMILIES = (PHI3,)
