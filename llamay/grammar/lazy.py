"""A lazy grammar: generation is free until a trigger string appears, then the grammar holds.

This is how tool calls are constrained under tool_choice "auto" (llama.cpp's lazy grammars do the
same): the model writes text as it likes, and once it writes a tool call's opening marker
(`<tool_call>`, `[TOOL_CALLS]`, `<|python_tag|>`...) the rest of its answer must be calls whose
arguments follow the tools' schemas, up to the closing marker.

The grammar's language starts at the trigger: when a token completes a trigger, the text from
the trigger's first byte to the token's end is fed to the grammar at once. A trigger is a string,
or a regular expression (`pattern`, for the `regex` module, matched on the answer's UTF-8 bytes:
a fenced JSON object that names a tool, whatever the whitespace). A trigger may be `anchored`
(it counts only at the start of the answer, after whitespace: a bare JSON call is an answer
that begins with "{"). Text before the trigger is free; control tokens count with their text (a
trigger may be one, like Mistral's `[TOOL_CALLS]`). A trigger whose token goes on with text the
grammar refuses (`<tool_call></tool_call>` written as prose) does not count: generation stays
free, and the next trigger may turn the grammar on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import regex

from llamay.grammar.grammar import Grammar, Matcher
from llamay.tokenizer import Tokenizer


@dataclass(frozen=True)
class Trigger:
    """What turns the grammar on: the string `text`, or with `pattern` the regular expression
    `text`; `anchored`: only at the start of the answer."""

    text: str
    anchored: bool = False
    pattern: bool = False


class LazyGrammar:
    """`grammar`, enforced from the first of `triggers` on. `prefix` is text the answer already
    begins with (an assistant prefill): a trigger in it turns the grammar on from the start."""

    def __init__(self, grammar: Grammar, triggers: Sequence[Trigger], prefix: str = "") -> None:
        if not triggers:
            raise ValueError("a lazy grammar needs at least one trigger")
        self.grammar = grammar
        self.triggers = tuple(t for t in triggers if not t.pattern)
        self.patterns = tuple(
            (regex.compile(t.text.encode(), regex.S), t.anchored) for t in triggers if t.pattern
        )
        self.prefix = prefix

    @property
    def gbnf(self) -> str:
        return self.grammar.gbnf

    def matcher(self, tokenizer: Tokenizer) -> LazyMatcher:
        return LazyMatcher(self, tokenizer)


class LazyMatcher:
    """One sequence's place: free (allowed() is None: every token) until a trigger, then the
    grammar's Matcher."""

    def __init__(self, lazy: LazyGrammar, tokenizer: Tokenizer) -> None:
        self._lazy = lazy
        self._tokenizer = tokenizer
        self._seen = b""  # the answer's bytes while free (prefix included)
        self._inner: Matcher | None = None
        self._longest = max((len(t.text.encode()) for t in lazy.triggers), default=1)
        self._scanned = 0  # where the search for a trigger goes on from
        # per pattern: where a match may still begin (one being written stays in view)
        self._pattern_from = [0] * len(lazy.patterns)
        if lazy.prefix:
            self._see(lazy.prefix.encode())

    @property
    def triggered(self) -> bool:
        """Whether a trigger has turned the grammar on."""
        return self._inner is not None

    @property
    def can_end(self) -> bool:
        return self._inner.can_end if self._inner is not None else True

    @property
    def must_end(self) -> bool:
        return self._inner.must_end if self._inner is not None else False

    def allowed(self) -> np.ndarray | None:
        """None (any token) while free; the grammar's mask once triggered."""
        return self._inner.allowed() if self._inner is not None else None

    def accept(self, token: int) -> None:
        if self._inner is not None:
            self._inner.accept(token)
            return
        if self._tokenizer.is_eog(token):
            return
        self._see(self._tokenizer.token_to_piece(token, special=True))

    def _see(self, data: bytes) -> None:
        self._seen += data
        while self._inner is None:
            start = max(self._scanned, len(self._seen) - len(data) - self._longest + 1, 0)
            found = self._find(start)
            if found is None:
                return
            matcher = self._lazy.grammar.matcher(self._tokenizer)
            if matcher.feed_bytes(self._seen[found:]):
                self._inner = matcher
            else:
                self._scanned = found + 1  # not a call: look past this one

    def _find(self, start: int) -> int | None:
        """Where the earliest trigger begins in what was seen (a string searched from
        `start`, a pattern from where a match of it may still begin)."""
        best: int | None = None
        lead = len(self._seen) - len(self._seen.lstrip())
        for trigger in self._lazy.triggers:
            text = trigger.text.encode()
            if trigger.anchored:
                at = lead if lead >= start and self._seen[lead:].startswith(text) else -1
            else:
                at = self._seen.find(text, start)
            if at >= 0 and (best is None or at < best):
                best = at
        for i, (pattern, anchored) in enumerate(self._lazy.patterns):
            at = self._pattern_at(i, pattern, anchored, lead)
            if at is not None and (best is None or at < best):
                best = at
        return best

    def _pattern_at(self, i: int, pattern: regex.Pattern, anchored: bool, lead: int) -> int | None:
        """Where pattern `i` matches whole, or None; remembers where one still being written
        begins, so that each byte is searched about once."""
        begin = max(self._pattern_from[i], self._scanned)
        if anchored:
            if lead < begin:
                self._pattern_from[i] = len(self._seen) + 1  # past the start: never again
                return None
            match = pattern.match(self._seen, lead, partial=True)
        else:
            match = pattern.search(self._seen, begin, partial=True)
        if match is None:
            self._pattern_from[i] = len(self._seen) + (1 if anchored else 0)
            return None
        self._pattern_from[i] = match.start()
        return None if match.partial else match.start()
