"""Llama 2 and 3, Mistral and the many files that reuse general.architecture = llama.

The baseline every other family is described against: pre-norm attention and SiLU-gated FFN,
RoPE on adjacent pairs, optional biases, untied or tied output. llama.cpp reads no sliding
window for this architecture, so a Mistral file's window is ignored here too.
"""

from __future__ import annotations

from llamay.models.family import Family

LLAMA = Family(
    "llama",
    models="Llama 2, Llama 3/3.1/3.2, Mistral 7B, SmolLM2, TinyLlama, and fine-tunes",
)

FAMILIES = (LLAMA,)
