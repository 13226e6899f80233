"""A lazy grammar: generation is free until a trigger string appears, then the grammar holds.

This is how tool calls are constrained under tool_choice "auto" (llama.cpp's lazy grammars do the
same): the model writes text as it likes, and once it writes a tool call's opening marker
(`<tool_call>`, `[TOOL_CALLS]`, `<|python_tag|>`...) the rest of its answer must be calls whose
arguments follow the tools' schemas, up to the closing marker.

The grammar's language starts at the trigger: when a token completes a trigger, the text from
the trigger's first byte to the token's end is fed to the grammar at once. A trigger may be
`anchored` (it counts only at the start of the answer, after whitespace: a bare JSON call is an
answer that begins with "{"). Text before the trigger is free; control tokens count with their
text (a trigger may be one, like Mistral's `[TOOL_CALLS]`). A trigger whose token goes on with
text the grammar refuses (`<tool_call></tool_call>` written as prose) does not count: generation
stays free, and the next trigger may turn the grammar on.

`controls` name control tokens the grammar may match by their text (gpt-oss's calls hold
`<|channel|>`, `<|constrain|>` and `<|message|>`, which a grammar over text never allows): such
a token is allowed where the grammar allows its text, and feeds that text. A lazy grammar
without triggers holds from the first token (a forced call in such a format).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llamay.errors import GrammarError
from llamay.grammar.grammar import Grammar, Matcher
from llamay.tokenizer import Tokenizer


@dataclass(frozen=True)
class Trigger:
    """A string that turns the grammar on; `anchored`: only at the start of the answer."""

    text: str
    anchored: bool = False


class LazyGrammar:
    """`grammar`, enforced from the first of `triggers` on (from the first generated token
    when there are none). `prefix` is text the answer already begins with (an assistant
    prefill): a trigger in it turns the grammar on from the start. `controls`: the texts of control tokens
    the grammar may match (the module docstring)."""

    def __init__(
        self,
        grammar: Grammar,
        triggers: Sequence[Trigger],
        prefix: str = "",
        controls: Sequence[str] = (),
    ) -> None:
        self.grammar = grammar
        self.triggers = tuple(triggers)
        self.prefix = prefix
        self.controls = tuple(controls)

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
        self._longest = max((len(t.text.encode()) for t in lazy.triggers), default=0)
        self._scanned = 0  # where the search for a trigger goes on from
        self._controls = _control_tokens(tokenizer, lazy.controls)
        if not lazy.triggers:  # held from the first generated token
            self._inner = lazy.grammar.matcher(tokenizer)
        elif lazy.prefix:
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
        """None (any token) while free; the grammar's mask once triggered (with the control
        tokens whose text it allows)."""
        if self._inner is None:
            return None
        mask = self._inner.allowed()
        for token, text in self._controls.items():
            if self._inner.allows_bytes(text):
                mask[token] = True
        return mask

    def accept(self, token: int) -> None:
        if self._inner is not None:
            text = self._controls.get(token)
            if text is None:
                self._inner.accept(token)
            elif not self._inner.feed_bytes(text):
                raise GrammarError(f"control token {text!r} is not allowed here by the grammar")
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
        """Where the earliest trigger begins in what was seen (searching from `start`)."""
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
        return best


def _control_tokens(tokenizer: Tokenizer, texts: Sequence[str]) -> dict[int, bytes]:
    """The control tokens of the vocabulary that stand for `texts` (id -> text); a text that is
    no single control token there (a vocabulary without it) is matched as plain text."""
    found = {}
    for text in texts:
        ids = tokenizer.tokenize(text, add_bos=False, special=True)
        if len(ids) == 1 and tokenizer.is_control(ids[0]) and not tokenizer.is_eog(ids[0]):
            found[ids[0]] = text.encode()
    return found
