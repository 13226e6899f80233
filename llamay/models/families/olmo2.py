"""OLMo 2 (and OLMo 3, which llama.cpp loads as olmo2): norms after attention and FFN only.

No norm before either block: RMS norms on their outputs, before the residual adds; queries and
keys RMS-normed over the whole projection (all heads at once) before RoPE; NeoX RoPE. OLMo 3
adds a sliding window (when the file has attention.sliding_window) on three layers of every
four, whose RoPE keeps the global base but drops any scaling (YaRN included).
"""

from __future__ import annotations

from llamay.models.family import Family

OLMO2 = Family(
    "olmo2",
    rope_neox=True,
    norms="post",
    qk_norm="projection",
    swa_period=4,
    swa_period_key=True,
    swa_rope_unscaled=True,
    models="OLMo 2 1B, 7B, 13B, 32B (base, Instruct); OLMo 3 7B, 32B",
)

FAMILIES = (OLMO2,)
