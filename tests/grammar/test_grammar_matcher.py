"""The matcher: its mask against an independent oracle (the `regex` module's partial matching),
end-of-generation and control tokens, refused tokens, and bounded memory over long outputs."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
import regex

import llamay
from llamay.errors import GrammarError
from llamay.grammar import Grammar
from llamay.grammar.vocabulary import token_trie

# The same regular language as GBNF and as a regular expression.
GBNF = 'root ::= "{" ( [a-z]+ ":" ( [0-9]{1,3} | "\\"" [^"]* "\\"" ) ){0,2} "}" " "?'
PATTERN = regex.compile(r'\{(?:[a-z]+:(?:[0-9]{1,3}|"[^"]*")){0,2}\} ?', regex.DOTALL)


@pytest.fixture(scope="module", params=["llama-spm", "gpt-2"])
def tokenizer(request, data_dir):
    return llamay.load_tokenizer(data_dir / "vocab" / f"ggml-vocab-{request.param}.gguf")


# by the tokenizer itself: keyed by id(), the second vocabulary's tokenizer was once given the
# first one's address after it was freed, and read its 32,000 pieces
_pieces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def pieces(tokenizer) -> list[bytes]:
    """Each token's bytes (control tokens: none)."""
    if tokenizer not in _pieces:
        _pieces[tokenizer] = [
            b"" if tokenizer.is_control(t) else tokenizer.token_to_piece(t)
            for t in range(tokenizer.n_vocab)
        ]
    return _pieces[tokenizer]


def token_of(tokenizer, piece: bytes) -> int:
    return pieces(tokenizer).index(piece)


def oracle(tokenizer, prefix: str) -> np.ndarray:
    """Which tokens keep `prefix` a prefix of the language, by regex partial matching (tokens
    that are not whole characters are left out: regex works on text)."""
    out = np.zeros(tokenizer.n_vocab, dtype=bool)
    for token, piece in enumerate(pieces(tokenizer)):
        if not piece or tokenizer.is_eog(token):
            continue
        try:
            text = prefix + piece.decode("utf-8")
        except UnicodeDecodeError:
            continue
        out[token] = PATTERN.fullmatch(text, partial=True) is not None
    return out


@pytest.mark.parametrize(
    "prefix", ["", "{", "{ab", "{ab:", "{ab:1", '{ab:"x', '{ab:"x"c:99', '{ab:"x"c:99}']
)
def test_mask_agrees_with_the_oracle(tokenizer, prefix):
    matcher = Grammar.from_gbnf(GBNF).matcher(tokenizer)
    for ch in prefix:
        matcher.accept(token_of(tokenizer, ch.encode()))
    assert_agrees(tokenizer, matcher, prefix)


def test_recurring_states_reuse_correct_masks(tokenizer):
    """Inside a string every token leaves the same state: its mask is reused, and what a caller
    does to the array it got does not leak into the next one."""
    matcher = Grammar.from_gbnf(GBNF).matcher(tokenizer)
    prefix = '{ab:"'
    for ch in prefix:
        matcher.accept(token_of(tokenizer, ch.encode()))
    matcher.allowed()[:] = False
    for ch in "xy{":
        matcher.accept(token_of(tokenizer, ch.encode()))
        prefix += ch
        assert_agrees(tokenizer, matcher, prefix)


def assert_agrees(tokenizer, matcher, prefix: str) -> None:
    whole_chars = np.array([_is_text(p) for p in pieces(tokenizer)])
    allowed = matcher.allowed()
    eog = list(tokenizer.eog_ids)
    expected = oracle(tokenizer, prefix)
    assert (allowed & whole_chars).tolist() == (expected & whole_chars).tolist()
    assert allowed[eog].all() == matcher.can_end == bool(PATTERN.fullmatch(prefix))


def _is_text(piece: bytes) -> bool:
    try:
        return bool(piece.decode("utf-8"))
    except UnicodeDecodeError:
        return False


def test_byte_tokens_complete_characters(tokenizer):
    matcher = Grammar.from_gbnf('root ::= "é" [^a]').matcher(tokenizer)
    allowed = matcher.allowed()
    lead = [t for t, p in enumerate(pieces(tokenizer)) if p == b"\xc3"]
    assert lead and allowed[lead].all()
    matcher.accept(lead[0])
    allowed = matcher.allowed()
    tail = [t for t, p in enumerate(pieces(tokenizer)) if p == b"\xa9"]
    assert allowed[tail].all() and allowed.sum() == len(tail)
    matcher.accept(tail[0])
    assert not matcher.can_end
    assert not matcher.allowed()[token_of(tokenizer, b"a")]


def test_end_of_generation_and_control_tokens(tokenizer):
    matcher = Grammar.from_gbnf('root ::= "a" "b"?').matcher(tokenizer)
    eog = sorted(tokenizer.eog_ids)
    controls = [t for t in range(tokenizer.n_vocab) if tokenizer.is_control(t) and t not in eog]
    assert not matcher.allowed()[eog].any() and not matcher.can_end
    with pytest.raises(
        GrammarError, match=r"end-of-generation token \d+ is not allowed: the text is incomplete"
    ):
        matcher.accept(eog[0])
    matcher.accept(token_of(tokenizer, b"a"))
    assert matcher.can_end and not matcher.must_end
    assert matcher.allowed()[eog].all() and not matcher.allowed()[controls].any()
    matcher.accept(token_of(tokenizer, b"b"))
    assert matcher.must_end
    allowed = matcher.allowed()
    assert sorted(np.flatnonzero(allowed)) == eog
    matcher.accept(eog[0])


def test_refused_tokens(tokenizer):
    matcher = Grammar.from_gbnf('root ::= "a"+').matcher(tokenizer)
    with pytest.raises(
        GrammarError, match=r"token \d+ \(b'b'\) is not allowed here by the grammar"
    ):
        matcher.accept(token_of(tokenizer, b"b"))
    textless = [t for t, p in enumerate(pieces(tokenizer)) if not p and not tokenizer.is_eog(t)]
    for token in textless:
        with pytest.raises(GrammarError, match="stands for no text: it is never allowed"):
            matcher.accept(token)
    matcher.accept(token_of(tokenizer, b"a"))  # a refused token changed nothing
    assert matcher.can_end


def test_the_trie_is_built_once_per_tokenizer(tokenizer):
    assert token_trie(tokenizer) is token_trie(tokenizer)


def test_deep_nesting_stays_correct_past_the_cache_limit(tokenizer):
    """Each nesting depth is a new set of stacks; past the cache's limit the matcher compacts
    and must still know how many brackets to close."""
    matcher = Grammar.from_gbnf('root ::= "(" root ")" | "x"').matcher(tokenizer)
    opening, closing, x = (token_of(tokenizer, p) for p in (b"(", b")", b"x"))
    depth = 9000
    for _ in range(depth):
        matcher.accept(opening)
    matcher.accept(x)
    for _ in range(depth - 1):
        matcher.accept(closing)
    assert not matcher.can_end and matcher.allowed()[closing]
    matcher.accept(closing)
    assert matcher.must_end
