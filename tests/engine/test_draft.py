"""Speculative decoding with a draft model: proposals verified in one step, and the tokens the
same bits with the draft or without it, greedy or seeded, alone or batched, after forks and
rewinds; a draft of another vocabulary is refused by what differs; its contexts are freed."""

from __future__ import annotations

from pathlib import Path

import pytest

import llamay
from llamay.engine import draft as drafting
from llamay.errors import LlamayError
from llamay.models.synthetic import requantize, write_builtin

SYNTH = Path(__file__).parent.parent / "data" / "synth"
LLAMA2 = SYNTH / "llama2-spm-Q8_0.gguf"
TEXT = (Path(__file__).parent.parent / "data" / "texts" / "gpl-2.txt").read_text()[:240]
GREEDY = {"temperature": 0.0}
SEEDED = {"temperature": 0.9, "seed": 11, "top_k": 0, "top_p": 1.0, "min_p": 0.0}


@pytest.fixture(scope="module")
def draft_path(tmp_path_factory) -> Path:
    """The same weights quantized coarser: a draft that guesses most tokens, not all."""
    return requantize(LLAMA2, tmp_path_factory.mktemp("draft") / "draft-Q4_0.gguf", "Q4_0")


@pytest.fixture(scope="module")
def model(draft_path):
    # no confidence cut: long drafts are proposed, and some refused
    loaded = llamay.load(LLAMA2, n_ctx=256, draft=draft_path, draft_p_min=0.0)
    yield loaded
    loaded.close()


def run(model, prompt=TEXT, **params) -> tuple[list[int], int, int]:
    generation = model.generate(prompt, max_tokens=40, **params)
    tokens = list(generation)
    generation.context.close()
    state = generation.drafter
    return tokens, (state.proposed if state else 0), (state.accepted if state else 0)


@pytest.mark.parametrize("params", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_the_draft_changes_no_token(model, params):
    plain, proposed, _ = run(model, draft=False, **params)
    assert proposed == 0
    tokens, proposed, accepted = run(model, **params)
    assert tokens == plain
    assert proposed > accepted > 0  # drafts were proposed, some kept and some refused


def test_batched_proposals_change_no_token(model):
    """Three generations drafting at once: their proposals share the draft model's steps."""
    prompts = [TEXT[i * 20 :] for i in range(3)]
    alone = [run(model, p, draft=False, **SEEDED)[0] for p in prompts]
    generations = [model.generate(p, max_tokens=40, **SEEDED) for p in prompts]
    together = [list(g) for g in generations]
    assert together == alone
    assert all(g.drafter.proposed > 0 for g in generations)
    for g in generations:
        g.context.close()


def test_a_context_continued_after_a_rewind_and_a_fork(model):
    """The draft's own context follows the target's tokens, whatever happened to them."""
    with model.context() as ctx:
        first = model.generate(TEXT, max_tokens=20, context=ctx, **GREEDY)
        list(first)
        ctx.rewind(ctx.n_tokens - 7)
        child = ctx.fork()
        with_draft = list(model.generate(" and", max_tokens=20, context=child, **GREEDY))
        child.close()
        plain = list(model.generate(" and", max_tokens=20, context=ctx, draft=False, **GREEDY))
    assert with_draft == plain


def test_lookup_and_the_draft_together_change_no_token(model):
    prompt = TEXT + "\n" + TEXT[:80]
    plain, _, _ = run(model, prompt, draft=False, **GREEDY)
    assert run(model, prompt, lookup=6, **GREEDY)[0] == plain


def test_the_draft_length_follows_what_is_accepted(draft_path):
    """A model drafting for itself is always right: its proposals grow to the most."""
    with llamay.load(draft_path, n_ctx=256, draft=draft_path, draft_p_min=0.0) as same:
        generation = same.generate(TEXT, max_tokens=60, **GREEDY)
        list(generation)
        assert generation.drafter.accepted == generation.drafter.proposed > 0
        assert generation.drafter.size > drafting.FIRST_DRAFT
        generation.context.close()
    state = drafting.DraftState(model=None, most=16)  # type: ignore[arg-type]
    state.size, state.last = 8, 8
    state.verified(2)
    assert state.size == 4


def test_the_draft_contexts_are_freed(model):
    run(model, **SEEDED)
    stats = model.draft.kv_stats()
    assert model.draft.kv_cache.n_contexts == 0
    assert stats["pages_used"] == stats["pages_cached"]


def test_a_draft_of_another_vocabulary_is_refused(tmp_path, draft_path):
    other = write_builtin(tmp_path / "gemma-vocabulary.gguf")
    with pytest.raises(LlamayError, match=r"cannot draft for llama2-spm-Q8_0\.gguf"):
        llamay.load(LLAMA2, draft=other)
    with llamay.load(LLAMA2, n_ctx=256) as target, llamay.load(other) as foreign:
        with pytest.raises(LlamayError, match="it has 337 tokens, the target 2048"):
            target.generate(TEXT, draft=foreign)
        with pytest.raises(LlamayError, match="loaded without a draft model"):
            target.generate(TEXT, draft=True)


def test_the_draft_counts_in_the_models_memory(model):
    alone = llamay.load(LLAMA2, n_ctx=256)
    try:
        assert model.memory_bytes == alone.memory_bytes + model.draft.memory_bytes
        assert model.draft.kv_stats()["pages_total"] * model.draft.page_tokens >= (
            model.kv_stats()["pages_total"] * model.page_tokens
        )
    finally:
        alone.close()
