"""Llama 2 and 3, Mistral and the many files that reuse general.architecture = llama.

The baseline every other family is described against: pre-norm attention and SiLU-gated FFN,
RoPE on adjacent pairs, optional biases, untied or tied output. llama.cpp reads no sliding
window for this architecture, so a Mistral file's window is ignored here too. A file with
expert_count > 0 (Mixtral) has a mixture of experts for its FFN: the top k of a softmax over the
experts, renormalised to sum 1, each expert feed_forward_length wide.
"""

from __future__ import annotations

from llamay.models.family import Experts, Family

LLAMA = Family(
    "llama",
    experts=Experts(normalize=True, n_ff_key=None, optional=True),
    models="Llama 2, Llama 3/3.1/3.2, Mistral 7B, Mixtral 8x7B and 8x22B, SmolLM2, TinyLlama, "
    "and fine-tunes",
)

FAMILIES = (LLAMA,)
