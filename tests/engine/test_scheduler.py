"""The scheduler: generations from many threads run batched, each giving exactly what it gives
alone; cancellation frees pages at once; running out of KV pages fails only the sequences that
do not fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay.engine.generate import generate

from helpers.concurrency import StepGate, all_at_once

SYNTH = Path(__file__).parent.parent / "data" / "synth"
LLAMA2 = SYNTH / "llama2-spm-Q8_0.gguf"

REQUESTS = [
    {"prompt": "The license", "max_tokens": 20, "temperature": 0},
    {"prompt": "You may copy and distribute", "max_tokens": 14, "temperature": 0.9, "seed": 7},
    {"prompt": "Permission", "max_tokens": 25, "temperature": 1.2, "top_k": 0, "seed": 3},
    {"prompt": "THE SOFTWARE IS PROVIDED", "max_tokens": 9, "repeat_penalty": 1.3, "seed": 11},
]


def run_alone(model, request) -> list[int]:
    generation = generate(model, **request)
    tokens = list(generation)
    generation.context.close()
    return tokens


def run_together(model, requests) -> list[list[int]]:
    return all_at_once(lambda request: run_alone(model, request), requests)


@pytest.fixture(scope="module")
def model(backend):
    loaded = llamay.load(LLAMA2, backend=backend, n_ctx=64, prefix_cache=False)
    yield loaded
    loaded.close()


def test_concurrent_generations_give_exactly_what_they_give_alone(model):
    alone = [run_alone(model, request) for request in REQUESTS]
    assert run_together(model, REQUESTS) == alone
    assert [len(tokens) for tokens in alone] == [20, 14, 25, 9]


def test_many_threads_reuse_one_prompt_with_distinct_sequences(model):
    requests = [
        {"prompt": "The license", "max_tokens": 12, "seed": 5, "sequence": i} for i in range(6)
    ]
    together = run_together(model, requests)
    assert together == [run_alone(model, r) for r in requests]
    assert len({tuple(t) for t in together}) > 1  # the sequence number keys the draws


def test_a_long_prompt_is_fed_in_chunks_beside_running_decodes(tmp_path, backend):
    with llamay.load(LLAMA2, backend=backend, n_ctx=512, n_batch=16, prefix_cache=False) as model:
        long_prompt = model.tokenize("The license " * 60)[:300]
        requests = [
            {"prompt": long_prompt, "max_tokens": 8, "temperature": 0},
            {"prompt": "Permission", "max_tokens": 30, "temperature": 0},
        ]
        model.scheduler.prefill_budget = 37  # chunks of an odd size, across pages
        assert run_together(model, requests) == [run_alone(model, r) for r in requests]


def test_cancelling_frees_the_pages_of_the_generations_own_context(model):
    baseline = model.kv_stats()["pages_used"]
    with StepGate(model, steps=1) as gate:  # the scheduler stops after the first token
        generation = generate(model, "The license", max_tokens=40, temperature=0)
        next(generation)
        assert model.kv_stats()["pages_used"] > baseline
        generation.cancel()
        gate.open()
        assert list(generation) == []
    assert generation.finish_reason == "cancelled"
    assert model.kv_stats()["pages_used"] == baseline


def test_running_out_of_pages_fails_only_what_does_not_fit(backend):
    with llamay.load(LLAMA2, backend=backend, n_ctx=64, page_tokens=16) as probe:
        page_bytes = probe.kv_stats()["bytes_per_page"]
    with llamay.load(
        LLAMA2, backend=backend, n_ctx=64, page_tokens=16, kv_memory=8 * page_bytes
    ) as model:
        assert model.kv_stats()["pages_total"] == 8
        held = model.context()
        held.feed(list(range(3, 60)))  # 4 pages, leaving room for one more full context
        generations = [generate(model, p, temperature=0) for p in ("The license", "Permission")]
        outcomes = []
        for generation in generations:
            try:
                list(generation)
                outcomes.append(generation.finish_reason)
            except llamay.ContextOverflow as error:
                outcomes.append(str(error))
        failures = [o for o in outcomes if o != "length"]
        assert failures and all(o.startswith("the KV cache is full") for o in failures)
        assert held.tokens == list(range(3, 60))  # what was running keeps its state
        held.close()


def test_a_closed_model_refuses_new_generations(backend):
    model = llamay.load(LLAMA2, backend=backend, n_ctx=64)
    run_alone(model, REQUESTS[0])
    model.close()
    with pytest.raises(llamay.LlamayError, match="closed"):
        generate(model, "The license", max_tokens=2)


def test_embeddings_are_the_mean_of_the_normed_hidden_states(model):
    ids = model.tokenize("The license")
    with model.context() as context:
        hidden = model.forward_batch([(context, ids)], "hidden")[0]
    assert hidden.shape == (len(ids), model.n_embd)
    mean = hidden.astype(np.float64).mean(axis=0)
    vector = model.embed("The license")
    assert np.allclose(vector, mean / np.linalg.norm(mean), atol=1e-6)
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-6)
    assert np.array_equal(model.embed(ids, normalize=False), mean.astype(np.float32))
    assert not np.allclose(vector, model.embed("Permission"))


def test_one_sequences_failure_does_not_touch_its_neighbours(model):
    expected = run_alone(model, REQUESTS[0])
    healthy = generate(model, **REQUESTS[0])
    broken = generate(model, "Permission", max_tokens=5, logit_bias={10**6: 1.0})
    with pytest.raises(ValueError, match="logit_bias names token 1000000"):
        list(broken)
    assert list(healthy) == expected
    healthy.context.close()


def test_a_finished_generation_let_go_of_frees_its_pages(model):
    import gc

    baseline = model.kv_stats()["pages_used"]
    generation = generate(model, "The license", max_tokens=8, temperature=0)
    assert len(list(generation)) == 8
    assert model.kv_stats()["pages_used"] > baseline
    del generation
    gc.collect()
    assert model.kv_stats()["pages_used"] == baseline


def test_a_model_is_busy_while_a_context_is_open_or_a_generation_runs(backend):
    with llamay.load(LLAMA2, backend=backend, n_ctx=64) as fresh:
        assert not fresh.busy
        context = fresh.context()
        fork = context.fork()
        assert fresh.busy
        context.close()
        assert fresh.busy
        fork.close()
        assert not fresh.busy
        generation = generate(fresh, "The license", max_tokens=3, temperature=0)
        assert fresh.busy
        list(generation)
        generation.context.close()
        assert not fresh.busy
