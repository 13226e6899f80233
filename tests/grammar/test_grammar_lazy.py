"""Lazy grammars: free until a trigger, then the grammar's mask; a trigger inside a token that
runs on into refused text does not count; anchored triggers count only at the start."""

from __future__ import annotations

import numpy as np
import pytest

import llamay
from llamay.grammar import Grammar
from llamay.grammar.lazy import LazyGrammar, Trigger

CALL = Grammar.from_gbnf('root ::= "<call>" [a-z]{1,8} "</call>"')


@pytest.fixture(scope="module")
def tokenizer(data_dir):
    return llamay.load_tokenizer(data_dir / "vocab" / "ggml-vocab-gpt-2.gguf")


def feed(matcher, tokenizer, text):
    for token in tokenizer.tokenize(text, add_bos=False):
        mask = matcher.allowed()
        assert mask is None or mask[token], (text, token)
        matcher.accept(token)


def test_free_until_the_trigger_then_held(tokenizer):
    matcher = LazyGrammar(CALL, [Trigger("<call>")]).matcher(tokenizer)
    feed(matcher, tokenizer, "Some text, then ")
    assert matcher.allowed() is None and not matcher.triggered
    feed(matcher, tokenizer, "<call>")
    assert matcher.triggered
    mask = matcher.allowed()
    assert isinstance(mask, np.ndarray) and 0 < np.count_nonzero(mask) < tokenizer.n_vocab
    [space] = tokenizer.tokenize(" ", add_bos=False)
    assert not mask[space]  # only [a-z] may follow the marker
    feed(matcher, tokenizer, "abc</call>")
    assert matcher.must_end


def test_a_marker_written_as_prose_does_not_count(tokenizer):
    matcher = LazyGrammar(CALL, [Trigger("<call>")]).matcher(tokenizer)
    # GPT-2 writes this as " <", "call", "></", ...: the token that completes the marker runs
    # on into "</", which the grammar refuses after it
    feed(matcher, tokenizer, "write <call></call> like this")
    assert not matcher.triggered and matcher.allowed() is None
    feed(matcher, tokenizer, " <call>")
    assert matcher.triggered  # the next marker counts


def test_anchored_triggers_count_only_at_the_start(tokenizer):
    grammar = Grammar.from_gbnf('root ::= "{" [a-z]* "}"')
    late = LazyGrammar(grammar, [Trigger("{", anchored=True)]).matcher(tokenizer)
    feed(late, tokenizer, "text {ab}")
    assert not late.triggered
    early = LazyGrammar(grammar, [Trigger("{", anchored=True)]).matcher(tokenizer)
    feed(early, tokenizer, "  {ab")
    assert early.triggered


def test_a_prefix_with_the_trigger_starts_held(tokenizer):
    matcher = LazyGrammar(CALL, [Trigger("<call>")], prefix="<call>ab").matcher(tokenizer)
    assert matcher.triggered and matcher.allowed() is not None


def test_a_pattern_trigger_waits_for_the_whole_match(tokenizer):
    grammar = Grammar.from_gbnf('root ::= "```" [a-z]* "\\n{\\"name\\": \\"" [a-z]+ "\\"}\\n```"')
    trigger = Trigger(r'```[a-z]*\s*\{\s*"name"\s*:\s*"(?:get|put)"', anchored=True, pattern=True)
    matcher = LazyGrammar(grammar, [trigger]).matcher(tokenizer)
    feed(matcher, tokenizer, '```json\n{"name": "ge')
    assert not matcher.triggered and matcher.allowed() is None  # not a known name yet
    feed(matcher, tokenizer, 't"')
    assert matcher.triggered  # held from the fence on
    assert matcher.allowed() is not None


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "other"}\n```',  # names nothing the pattern knows
        'See: ```json\n{"name": "get"}\n```',  # anchored: prose before it
        '```json\n{"city": "Paris"}',  # no name at all
    ],
)
def test_a_pattern_trigger_that_does_not_match_leaves_it_free(tokenizer, text):
    grammar = Grammar.from_gbnf('root ::= "```" [a-z]* "\\n{\\"name\\": \\"" [a-z]+ "\\"}\\n```"')
    trigger = Trigger(r'```[a-z]*\s*\{\s*"name"\s*:\s*"(?:get|put)"', anchored=True, pattern=True)
    matcher = LazyGrammar(grammar, [trigger]).matcher(tokenizer)
    feed(matcher, tokenizer, text)
    assert not matcher.triggered


def test_an_unanchored_pattern_counts_anywhere_and_past_a_refused_one(tokenizer):
    matcher = LazyGrammar(CALL, [Trigger(r"<c[a-z]ll>", pattern=True)]).matcher(tokenizer)
    feed(matcher, tokenizer, "write <call></call> like this")  # refused after the marker
    assert not matcher.triggered
    feed(matcher, tokenizer, " <call>")
    assert matcher.triggered
