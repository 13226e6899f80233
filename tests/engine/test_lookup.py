"""Prompt-lookup decoding: drafts copied from the context, verified in one step, and the tokens
the same bits with lookup on or off, whatever the sampling, stops, grammar or budget."""

from __future__ import annotations

from pathlib import Path

import pytest

import llamay
from llamay.engine.lookup import propose

SYNTH = Path(__file__).parent.parent / "data" / "synth"
LLAMA2 = SYNTH / "llama2-spm-Q8_0.gguf"
TEXT = (Path(__file__).parent.parent / "data" / "texts" / "gpl-2.txt").read_text()[:300]
# A passage, then its start again: what follows is predicted by the first copy.
PROMPT = TEXT + "\n\n" + TEXT[:100]


def test_propose_takes_the_longest_suffix_seen_before_and_what_followed_it():
    tokens = [1, 2, 3, 4, 5, 9, 9, 2, 3, 4, 7, 8, 2, 3, 4]
    assert propose(tokens, 2) == [7, 8]  # [2, 3, 4] last seen before 7, 8
    assert propose([5, 6, 7, 5, 6], 3) == [7, 5, 6]  # may run into the suffix itself
    assert propose([1, 2, 3, 9, 3], 4) == [9, 3]  # one-token match when no longer one is
    assert propose([1, 2, 3], 4) == []
    assert propose([4, 4], 0) == []
    assert propose([7], 3) == []


@pytest.fixture(scope="module")
def model(backend):
    loaded = llamay.load(LLAMA2, backend=backend, n_ctx=256)
    yield loaded
    loaded.close()


def generated(model, **params) -> tuple[list[int], str, str | None]:
    generation = model.generate(PROMPT, **params)
    tokens = list(generation)
    context = generation.context.tokens
    generation.context.close()
    assert context[-len(tokens) :] == tokens  # what was yielded is what the context holds
    return tokens, generation.text, generation.finish_reason


@pytest.mark.parametrize(
    "params",
    [
        {"temperature": 0},
        {"temperature": 0.8, "seed": 3},
        {"temperature": 1.0, "seed": 5, "repeat_penalty": 1.3, "top_k": 0},
        {"temperature": 0, "stop": [" the"]},
        {"temperature": 0.7, "seed": 9, "logprobs": 2},
    ],
    ids=["greedy", "seeded", "penalties", "stop", "logprobs"],
)
@pytest.mark.parametrize("max_tokens", [1, 7, 40])
def test_lookup_changes_no_token(model, params, max_tokens):
    plain = generated(model, max_tokens=max_tokens, **params)
    for lookup in (1, 4, 10):
        assert generated(model, max_tokens=max_tokens, lookup=lookup, **params) == plain


def test_lookup_under_a_grammar_changes_no_token(model):
    grammar = 'root ::= [a-z ]+ "."'
    plain = generated(model, max_tokens=30, temperature=0, grammar=grammar)
    assert generated(model, max_tokens=30, temperature=0, grammar=grammar, lookup=6) == plain


def test_lookup_at_the_end_of_the_context_changes_no_token(backend):
    with llamay.load(LLAMA2, backend=backend, n_ctx=len_of_prompt() + 9) as small:
        plain = generated(small, temperature=0)
        assert plain[2] == "length"
        assert generated(small, temperature=0, lookup=8) == plain


def len_of_prompt() -> int:
    with llamay.load(LLAMA2) as probe:
        return len(probe.tokenize(PROMPT))


def test_lookup_takes_fewer_steps_on_repeated_text(model, monkeypatch):
    """The point of it: greedy decoding of text that repeats accepts drafts, so the same
    tokens come from fewer forward steps."""
    steps = {"n": 0}
    forward = model.forward_batch

    def counted(*args, **kwargs):
        steps["n"] += 1
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward_batch", counted)
    plain = generated(model, max_tokens=40, temperature=0)
    without = steps["n"]
    steps["n"] = 0
    assert generated(model, max_tokens=40, temperature=0, lookup=8) == plain
    assert steps["n"] < without * 0.75


def test_lookup_leaves_the_pages_as_a_plain_run_does(model):
    """Rejected drafts are cut off: the context holds exactly the plain run's tokens, and its
    logits continue as a cold context's do."""
    generation = model.generate(PROMPT, max_tokens=25, temperature=0.9, seed=1, lookup=6)
    list(generation)
    with model.context() as cold:
        cold.feed(generation.context.tokens)
        assert (generation.context.logits() == cold.logits()).all()
        generation.context.feed([5, 6])
        cold.feed([5, 6])
        assert (generation.context.logits() == cold.logits()).all()
    generation.context.close()


def test_a_lookup_out_of_range_is_refused(model):
    for bad in (-1, 65, 2.5):
        with pytest.raises(ValueError, match=r"lookup must be an integer in \[0, 64\]"):
            model.generate("x", lookup=bad)
