"""`Grammar` (a checked, compiled language) and `Matcher` (one sequence's place in it, as a mask
over a tokenizer's vocabulary)."""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any

import numpy as np

from llamay._core.grammar import Recognizer
from llamay.errors import GrammarError
from llamay.grammar import analysis, gbnf, json_schema
from llamay.grammar.compile import compile_rules
from llamay.grammar.vocabulary import token_trie
from llamay.tokenizer import Tokenizer

# Far more than any grammar or schema a request needs; parsing is linear, but each character of
# a literal becomes elements of the compiled form.
MAX_TEXT = 1 << 20


class Grammar:
    """A language to constrain generation to. Build one with `from_gbnf`, `from_json_schema`,
    `any_json` or `json_object`; `matcher(tokenizer)` follows one sequence through it."""

    def __init__(self, text: str, root: str = "root") -> None:
        if len(text) > MAX_TEXT:
            raise GrammarError(
                f"the grammar is {len(text)} characters long; the limit is {MAX_TEXT}"
            )
        rules = gbnf.parse(text)
        analysis.check(rules, root)
        self._text = text
        self._compiled = compile_rules(rules, root)

    @classmethod
    def from_gbnf(cls, text: str, root: str = "root") -> Grammar:
        """A grammar in llama.cpp's GBNF; GrammarError if it cannot be used."""
        return cls(text, root)

    @classmethod
    def from_json_schema(cls, schema: dict[str, Any] | bool) -> Grammar:
        """JSON text that validates against `schema`; GrammarError on a keyword it cannot
        enforce exactly."""
        return cls(json_schema.to_gbnf(schema))

    @classmethod
    @functools.cache
    def any_json(cls) -> Grammar:
        """Any JSON value (one shared instance: a Grammar never changes)."""
        return cls(json_schema.to_gbnf(True))

    @classmethod
    @functools.cache
    def json_object(cls) -> Grammar:
        """Any JSON object (OpenAI's json_object response format); one shared instance."""
        return cls(json_schema.to_gbnf({"type": "object"}))

    @property
    def gbnf(self) -> str:
        """The grammar as GBNF text."""
        return self._text

    def matcher(self, tokenizer: Tokenizer) -> Matcher:
        return Matcher(self, tokenizer)

    def recognizer(self) -> Recognizer:
        """A fresh byte-level recognizer at the start of the language."""
        c = self._compiled
        return Recognizer(c.elems, c.rule_off, c.alt_start, c.bitsets, c.root)

    def accepts(self, text: str | bytes) -> bool:
        """Whether `text` is a complete string of the language."""
        data = text.encode("utf-8") if isinstance(text, str) else text
        recognizer = self.recognizer()
        if not recognizer.accepts_prefix(data):
            return False
        recognizer.feed(data)
        return recognizer.can_end


# Masks that allow at least this many tokens are kept (the costly walks: inside a string the
# state recurs at every token), the last _CACHED_MASKS of them.
_CACHE_FROM = 4096
_CACHED_MASKS = 8


class Matcher:
    """One sequence's progress through a grammar: which tokens may come next."""

    def __init__(self, grammar: Grammar, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._trie = token_trie(tokenizer)
        self._recognizer = grammar.recognizer()
        self._eog = np.array(sorted(tokenizer.eog_ids), dtype=np.int64)
        self._masks: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()

    @property
    def can_end(self) -> bool:
        """Whether the text so far is a complete string of the language."""
        return self._recognizer.can_end

    @property
    def must_end(self) -> bool:
        """Whether the language allows nothing more after the text so far."""
        return self._recognizer.must_end

    def allowed(self) -> np.ndarray:
        """A bool mask over the vocabulary: the tokens that keep the text in the language, and
        the end-of-generation tokens when the text can end here."""
        key = (self._recognizer.epoch, self._recognizer.state)
        cached = self._masks.get(key)
        if cached is not None:
            self._masks.move_to_end(key)
            mask = cached.copy()
        else:
            mask = np.zeros(self._tokenizer.n_vocab, dtype=np.bool_)
            self._recognizer.mask(self._trie, mask)
            if np.count_nonzero(mask) >= _CACHE_FROM:
                self._masks[key] = mask.copy()
                if len(self._masks) > _CACHED_MASKS:
                    self._masks.popitem(last=False)
        if self._recognizer.can_end:
            mask[self._eog] = True
        return mask

    def feed_bytes(self, data: bytes) -> bool:
        """Advances past raw bytes that reached the sequence other than as one allowed token
        (the text after a lazy grammar's trigger, inside the token that completed it). False,
        with nothing consumed, when the language does not allow them here."""
        if not self._recognizer.accepts_prefix(data):
            return False
        self._recognizer.feed(data)
        return True

    def accept(self, token: int) -> None:
        """Advances past `token`; GrammarError if `allowed()` did not allow it."""
        if self._tokenizer.is_eog(token):
            if not self._recognizer.can_end:
                raise GrammarError(
                    f"end-of-generation token {token} is not allowed: the text is incomplete"
                )
            return
        piece = b"" if self._tokenizer.is_control(token) else self._tokenizer.token_to_piece(token)
        if not piece:
            raise GrammarError(
                f"token {token} stands for no text: it is never allowed by a grammar"
            )
        if not self._recognizer.accepts_prefix(piece):
            raise GrammarError(f"token {token} ({piece!r}) is not allowed here by the grammar")
        self._recognizer.feed(piece)
