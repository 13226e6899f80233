"""Perplexity as llama.cpp's llama-perplexity computes it, so that the numbers compare.

tools/perplexity/perplexity.cpp: the tokenized text is cut into whole chunks of n_ctx tokens
(the rest is dropped); when the vocabulary adds BOS, each chunk's first token is replaced by BOS;
only the second half of each chunk is scored: the logits at positions n_ctx/2 .. n_ctx-2
predict the tokens after them. The result is exp of the mean negative log-likelihood.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from llamay._core.kernels import token_logprobs
from llamay.engine.model import Model

# Logits are scored a slice of positions at a time so that their memory stays bounded.
LOGITS_BYTES = 32 << 20


def perplexity(
    model: Model,
    tokens: Sequence[int],
    n_ctx: int = 512,
    n_batch: int = 512,
    on_chunk: Callable[[int, float], None] | None = None,
) -> tuple[float, int, int]:
    """(perplexity, chunks, tokens scored) of `tokens` (the whole text, tokenized with BOS as
    the model asks and special tokens not parsed, as llama-perplexity does). n_batch only cuts
    each chunk into forward steps; it does not change the result. `on_chunk(i, ppl)` is called
    after each chunk with its number (from 1) and the perplexity so far."""
    if n_ctx < 2 or n_batch < 1:
        raise ValueError(f"n_ctx must be at least 2 and n_batch at least 1 ({n_ctx}, {n_batch})")
    if n_ctx > model.n_ctx:
        raise ValueError(
            f"perplexity over chunks of {n_ctx} tokens needs a model loaded with "
            f"n_ctx >= {n_ctx} (it has {model.n_ctx})"
        )
    n_chunks = len(tokens) // n_ctx
    if n_chunks < 1:
        raise ValueError(f"{len(tokens)} tokens do not fill one chunk of {n_ctx}")
    tokenizer = model.tokenizer
    bos = tokenizer.bos_id if tokenizer.add_bos else None
    first = n_ctx // 2
    rows = max(1, min(n_batch, LOGITS_BYTES // (4 * model.n_vocab)))
    logprobs: list[float] = []
    for chunk_number, start in enumerate(range(0, n_chunks * n_ctx, n_ctx), 1):
        chunk = list(tokens[start : start + n_ctx])
        if bos is not None:
            chunk[0] = bos
        with model.context() as ctx:
            for begin in range(0, first, n_batch):
                model.forward_batch([(ctx, chunk[begin : min(begin + n_batch, first)])], "none")
            # positions first .. n_ctx-2 predict the tokens after them; the last one is not fed
            for begin in range(first, n_ctx - 1, rows):
                end = min(begin + rows, n_ctx - 1)
                logits = ctx.feed(chunk[begin:end], all_logits=True)
                targets = np.asarray(tokens[start + begin + 1 : start + end + 1], dtype=np.int32)
                logprobs.extend(token_logprobs(logits, targets).tolist())
        if on_chunk is not None:
            on_chunk(chunk_number, _ppl(logprobs))
    return _ppl(logprobs), n_chunks, len(logprobs)


def _ppl(logprobs: list[float]) -> float:
    return math.exp(-math.fsum(logprobs) / len(logprobs))
