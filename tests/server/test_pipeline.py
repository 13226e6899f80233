"""The pipeline every generating route shares (llamay/server/pipeline.py), driven directly on
the real gemma model: a run in a context the caller holds, as a stored conversation continues."""

from __future__ import annotations

import pytest

import llamay
from llamay.server import pipeline

GREEDY = {"max_tokens": 6, "temperature": 0.0}


@pytest.fixture(scope="module")
def model(gemma_path):
    loaded = llamay.load(str(gemma_path))
    yield loaded
    loaded.close()


def answered(run: pipeline.Run) -> str:
    for _ in run.events():
        pass
    run.finish(0)
    return run.answers[0].text


def test_a_run_in_the_callers_context_feeds_the_rest_and_leaves_the_context_open(model):
    prompt = model.tokenize("The capital of France is")
    fresh = pipeline.start(pipeline.GenerationRequest(model, prompts=[prompt], sampling=GREEDY))
    expected = answered(fresh)
    assert expected and fresh.outcome(0).n_prompt == len(prompt)

    context = model.context()
    try:
        context.feed(prompt[:3])
        request = pipeline.GenerationRequest(
            model, prompts=[prompt], sampling=GREEDY, context=context, cached=3
        )
        run = pipeline.start(request)
        # the same answer as in a new context (the determinism contract), from the rest fed
        assert answered(run) == expected
        assert run.outcome(0).n_prompt == len(prompt) - 3
        assert run.n_prompt == len(prompt)
        run.release()
        # still open, holding the prompt and the answer: the caller's to continue or store
        assert list(context.tokens) == prompt + run.tokens(0)
    finally:
        context.close()


def test_a_callers_context_holds_one_prompt(model):
    context = model.context()
    try:
        request = pipeline.GenerationRequest(
            model, prompts=["one", "two"], sampling=GREEDY, context=context
        )
        with pytest.raises(ValueError):
            pipeline.start(request)
    finally:
        context.close()


def test_a_prompt_read_before_the_run_is_the_one_it_runs(model):
    # The Responses API reads the prompt first (to cut its stored context back to what the
    # two share), then starts the request: the template is rendered once, not twice.
    request = pipeline.GenerationRequest(
        model, [{"role": "user", "content": "Say hi."}], sampling=GREEDY
    )
    ids = request.prompt_ids()
    run = pipeline.start(request)
    try:
        assert run.prompts is ids
        assert answered(run)
    finally:
        run.release()
