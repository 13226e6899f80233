"""Perplexity computed the way llama.cpp's llama-perplexity computes it.

tools/perplexity/perplexity.cpp, perplexity(): the tokenized text is cut into whole chunks of
n_ctx tokens (the remainder is dropped); when the vocabulary adds BOS, each chunk's first token
is replaced by BOS for the forward pass; only the second half of each chunk is scored: the
logits at positions n_ctx/2 ... n_ctx-2 predict the tokens that follow them. The result is
exp(mean negative log-likelihood) over every scored token of every chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from llamay.backends.reference.forward import log_softmax


def perplexity(
    logits: Callable[[Sequence[int]], np.ndarray],
    tokens: Sequence[int],
    n_ctx: int,
    bos_id: int | None,
) -> float:
    """llama-perplexity's "Final estimate: PPL" for `tokens` (the whole text, tokenized).

    `logits(chunk)` returns (len(chunk), n_vocab) logits; `bos_id` is None when the vocabulary
    does not add BOS.
    """
    n_chunk = len(tokens) // n_ctx
    if n_chunk < 1:
        raise ValueError(f"{len(tokens)} tokens do not fill one chunk of {n_ctx}")
    first = n_ctx // 2
    nll = 0.0
    count = 0
    for start in range(0, n_chunk * n_ctx, n_ctx):
        chunk = list(tokens[start : start + n_ctx])
        if bos_id is not None:
            chunk[0] = bos_id
        logprobs = log_softmax(logits(chunk))
        targets = np.asarray(tokens[start + first + 1 : start + n_ctx])
        nll -= logprobs[np.arange(first, n_ctx - 1), targets].sum()
        count += n_ctx - 1 - first
    return math.exp(nll / count)
