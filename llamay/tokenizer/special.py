"""Special tokens in text: found and cut out before tokenizing, as llama.cpp does it.

llama.cpp (tokenizer_st_partition) takes the special tokens one at a time, longest text first,
and cuts every occurrence of each out of the text that is still raw, left to right. So a longer
token wins over a shorter one that overlaps it, wherever each starts. Control and unknown tokens
are only matched when special tokens are parsed; user-defined ones always are. A token with the
LSTRIP (RSTRIP) attribute also swallows the ASCII whitespace on its left (right).

Rather than scanning the text once per special token (Gemma 3 has 6,400), one regex over a trie of
all special texts finds, at each position, the longest special text starting there; every shorter
one starting there is a prefix of it. The cutting then replays llama.cpp's order over those
occurrences.
"""

from __future__ import annotations

import re

from llamay.tokenizer.vocab import Attr, Vocab

# C's isspace in the "C" locale: what llama.cpp strips for LSTRIP/RSTRIP.
_ASCII_SPACE = frozenset(" \t\n\v\f\r")
_END = ""  # trie key marking the end of a special text


def _trie_pattern(texts: list[str]) -> str:
    """A regex matching the longest of `texts` that starts at a position."""
    trie: dict = {}
    for text in texts:
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[_END] = True

    def pattern(node: dict) -> str:
        branches = []
        for ch in sorted(k for k in node if k != _END):
            chain, child = re.escape(ch), node[ch]
            while len(child) == 1 and _END not in child:  # no branching: no group needed
                ((next_ch, child),) = child.items()
                chain += re.escape(next_ch)
            branches.append(chain + pattern(child))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if _END in node else body

    return pattern(trie)


class SpecialTokens:
    """The special tokens of a vocabulary, ready to be cut out of text."""

    def __init__(self, vocab: Vocab) -> None:
        self._ids = vocab.special_order  # rank = position in llama.cpp's matching order
        self._texts = [vocab.tokens[i] for i in self._ids]
        self._attrs = [vocab.attrs[i] for i in self._ids]
        self._rank_of_text = {text: rank for rank, text in enumerate(self._texts)}
        self._finder = re.compile(f"(?=({_trie_pattern(self._texts)}))") if self._ids else None
        self._ranks_at: dict[str, list[int]] = {}

    def _ranks_starting(self, longest: str) -> list[int]:
        """The ranks of every special text that is a prefix of `longest` (itself included)."""
        ranks = self._ranks_at.get(longest)
        if ranks is None:
            ranks = [
                self._rank_of_text[longest[:k]]
                for k in range(1, len(longest) + 1)
                if longest[:k] in self._rank_of_text
            ]
            self._ranks_at[longest] = ranks
        return ranks

    def partition(self, text: str, parse_special: bool) -> list[int | str]:
        """`text` as raw pieces (str) and special token ids (int), in order."""
        if not text:
            return []
        if self._finder is None:
            return [text]
        skipped = 0 if parse_special else Attr.CONTROL | Attr.UNKNOWN
        occurrences: dict[int, list[int]] = {}
        for match in self._finder.finditer(text):
            start = match.start()
            for rank in self._ranks_starting(match.group(1)):
                if not self._attrs[rank] & skipped:
                    occurrences.setdefault(rank, []).append(start)
        if not occurrences:
            return [text]

        taken = bytearray(len(text))  # 1 where a token or stripped whitespace already sits
        cuts: list[tuple[int, int, int | None]] = []  # (start, end, token id or None if stripped)
        for rank in sorted(occurrences):
            size = len(self._texts[rank])
            attr = self._attrs[rank]
            for start in occurrences[rank]:
                end = start + size
                if taken.find(1, start, end) != -1:
                    continue
                taken[start:end] = b"\x01" * size
                cuts.append((start, end, self._ids[rank]))
                if attr & Attr.LSTRIP:
                    left = start
                    while left > 0 and not taken[left - 1] and text[left - 1] in _ASCII_SPACE:
                        left -= 1
                    if left < start:
                        taken[left:start] = b"\x01" * (start - left)
                        cuts.append((left, start, None))
                if attr & Attr.RSTRIP:
                    right = end
                    while right < len(text) and not taken[right] and text[right] in _ASCII_SPACE:
                        right += 1
                    if right > end:
                        taken[end:right] = b"\x01" * (right - end)
                        cuts.append((end, right, None))

        pieces: list[int | str] = []
        done = 0
        for start, end, token in sorted(cuts):
            if start > done:
                pieces.append(text[done:start])
            if token is not None:
                pieces.append(token)
            done = max(done, end)
        if done < len(text):
            pieces.append(text[done:])
        return pieces
