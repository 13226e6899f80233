"""Generation on Gemma 3 270M: concurrent calls give exactly the tokens they give alone, and a
seeded sample is the same text on 1 and 2 threads."""

from __future__ import annotations

import llamay

from helpers.concurrency import all_at_once

REQUESTS = [
    {"prompt": "The capital of France is", "max_tokens": 24, "temperature": 0},
    {"prompt": "Once upon a time", "max_tokens": 32, "temperature": 0.8, "seed": 42},
    {"prompt": "def fibonacci(n):", "max_tokens": 16, "temperature": 1.0, "seed": 7, "top_k": 0},
    {"prompt": "Roses are red,", "max_tokens": 20, "repeat_penalty": 1.2, "seed": 1},
]


def generated(model, request) -> tuple[list[int], str]:
    generation = model.generate(**request)
    tokens = list(generation)
    generation.context.close()
    return tokens, generation.text


def test_four_concurrent_generations_equal_the_same_calls_alone(gemma_path):
    with llamay.load(gemma_path, n_ctx=512, prefix_cache=False) as model:
        alone = [generated(model, r) for r in REQUESTS]
        together = all_at_once(lambda request: generated(model, request), REQUESTS)
    assert together == alone
    assert all(tokens for tokens, _ in alone)


def test_seeded_sampling_gives_the_same_text_on_one_and_two_threads(gemma_path):
    request = {"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0.9, "seed": 1234}
    texts = []
    for threads in (1, 2):
        with llamay.load(gemma_path, threads=threads, n_ctx=256) as model:
            texts.append(generated(model, request))
    assert texts[0] == texts[1]
    assert len(texts[0][0]) == 40
