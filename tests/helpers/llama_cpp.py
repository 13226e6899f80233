"""The acceptance check against llama.cpp's greedy runs, for any engine that yields logits."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from llamay.backends.reference.forward import log_softmax


def assert_teacher_forced_agreement(
    cases: Sequence[dict], logits_of: Callable[[list[int]], np.ndarray]
) -> np.ndarray:
    """Feeds each case's prompt_ids + output_ids through `logits_of` (ids -> (n, n_vocab)) and
    checks it against llama.cpp's top-5 at every step: the same argmax wherever llama.cpp's top-1
    leads its top-2 by >= 0.5 nats; the log-probability of llama.cpp's top-1 within 0.5 nats at
    every step and 0.08 on average. Returns the absolute differences."""
    differences = []
    for case in cases:
        n_prompt = len(case["prompt_ids"])
        logprobs = log_softmax(
            np.asarray(logits_of(case["prompt_ids"] + case["output_ids"]), np.float64)
        )
        for i, step in enumerate(case["steps"]):
            row = logprobs[n_prompt - 1 + i]
            (top1, top1_logprob), (_, top2_logprob) = step["top"][:2]
            differences.append(row[top1] - top1_logprob)
            if top1_logprob - top2_logprob >= 0.5:
                assert row.argmax() == top1, (case["prompt"], i)
    differences = np.abs(differences)
    assert len(differences) == sum(len(case["steps"]) for case in cases)
    assert differences.max() < 0.5
    assert differences.mean() < 0.08
    return differences
