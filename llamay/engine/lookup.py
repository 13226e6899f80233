"""Prompt lookup: draft tokens for speculative decoding, taken from the context itself.

Text that repeats — code being edited, a document being quoted, a template being filled — is
predicted by what followed the same words the last time they appeared. `propose` finds the most
recent earlier occurrence of the context's last few tokens and proposes the tokens that came
after it; the scheduler feeds them with the sampled token in one step and keeps those the
sampler would have chosen anyway (generate.py). No draft model is involved.

Because a token's logits do not depend on what else is in its step, and sampling is keyed by
(seed, sequence, position), the tokens generated are the same bits with lookup on or off; only
the number of steps changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# The longest suffix matched first: a longer match predicts better.
MAX_NGRAM = 3


def propose(tokens: Sequence[int], n_draft: int, max_ngram: int = MAX_NGRAM) -> list[int]:
    """Up to n_draft tokens that followed the most recent earlier occurrence of the longest
    suffix of tokens (max_ngram tokens down to one) found before it; [] when none is."""
    if n_draft <= 0 or len(tokens) < 2:
        return []
    ids = np.asarray(tokens, dtype=np.int64)
    n = len(ids)
    for size in range(min(max_ngram, n - 1), 0, -1):
        suffix = ids[n - size :]
        # starts of earlier windows equal to the suffix, whose continuation lies before the end
        candidates = np.flatnonzero(ids[: n - size] == suffix[0])
        for offset in range(1, size):
            candidates = candidates[ids[candidates + offset] == suffix[offset]]
        if len(candidates):
            start = int(candidates[-1]) + size
            return ids[start : min(start + n_draft, n)].tolist()
    return []
