"""Codepoints as llama.cpp's unicode.cpp classifies them, and the GPT-2 byte-to-character map.

Pre-tokenizers must split text exactly where llama.cpp does, so the classes here are llama.cpp's,
not Python's: general categories of Unicode 15.1 folded into eight classes (unicode_data.py), and
llama.cpp's own list of whitespace. Its regex engine sees each non-ASCII codepoint through one byte
standing for its class (the "collapsed" text); `COLLAPSED` and `WIDE` give the same views to
`str.translate`.
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Callable

from llamay.tokenizer import unicode_data

UNDEFINED = 0x01
NUMBER = 0x02
LETTER = 0x04
SEPARATOR = 0x08
MARK = 0x10
PUNCTUATION = 0x20
SYMBOL = 0x40
CONTROL = 0x80

_RUN_STARTS: list[int] = []
_RUN_FLAGS: list[int] = []
for _item in unicode_data.CATEGORY_RUNS.split():
    _start, _flag = _item.split(":")
    _RUN_STARTS.append(int(_start, 16))
    _RUN_FLAGS.append(int(_flag, 16))

# Unicode's White_Space property, which is llama.cpp's list too.
WHITESPACE = frozenset(
    (
        *range(0x09, 0x0E),
        0x20,
        0x85,
        0xA0,
        0x1680,
        *range(0x2000, 0x200B),
        0x2028,
        0x2029,
        0x202F,
        0x205F,
        0x3000,
    )
)

# Han ranges of unicode_cpt_is_han (the Kimi-K2 pre-tokenizer's \p{Han}).
_HAN_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0x2CEB0, 0x2EBEF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def category(cp: int) -> int:
    """The class flag (NUMBER, LETTER, ...) of a codepoint."""
    return _RUN_FLAGS[bisect_right(_RUN_STARTS, cp) - 1]


def is_han(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _HAN_RANGES)


def lower(cp: int) -> int:
    """The simple lower-case mapping (llama.cpp's unicode_tolower)."""
    return _lowercase().get(cp, cp)


def nfd_first(cp: int) -> int:
    """The first codepoint of the canonical decomposition: how llama.cpp strips accents."""
    firsts, lasts, targets = _nfd_runs()
    i = bisect_right(firsts, cp) - 1
    return targets[i] if i >= 0 and cp <= lasts[i] else cp


@functools.cache
def _lowercase() -> dict[int, int]:
    pairs = (item.split(":") for item in unicode_data.LOWERCASE.split())
    return {int(cp, 16): int(low, 16) for cp, low in pairs}


@functools.cache
def _nfd_runs() -> tuple[list[int], list[int], list[int]]:
    firsts, lasts, targets = [], [], []
    for item in unicode_data.NFD_FIRST.split():
        span, target = item.split(":")
        first, last = span.split("-")
        firsts.append(int(first, 16))
        lasts.append(int(last, 16))
        targets.append(int(target, 16))
    return firsts, lasts, targets


# --- the text views llama.cpp's regexes run on --------------------------------------------------

# What stands for a non-ASCII codepoint in the collapsed text, by class; the same byte replaces
# \p{...} in a collapsed pattern. Whitespace becomes a vertical tab, which \s matches.
COLLAPSED_CLASS_CHAR = {
    NUMBER: "\xd1",
    LETTER: "\xd2",
    PUNCTUATION: "\xd3",
    MARK: "\xd4",
    SYMBOL: "\xd5",
}
_COLLAPSED_WHITESPACE = "\x0b"
_COLLAPSED_OTHER = "\xd0"


class _TranslationTable(dict):
    """A `str.translate` table that classifies each codepoint the first time it is seen."""

    def __init__(self, classify: Callable[[int], str]) -> None:
        super().__init__((cp, cp) for cp in range(128))
        self._classify = classify

    def __missing__(self, cp: int) -> str:
        value = self._classify(cp)
        self[cp] = value
        return value


def _collapse(cp: int) -> str:
    if cp in WHITESPACE:
        return _COLLAPSED_WHITESPACE
    return COLLAPSED_CLASS_CHAR.get(category(cp), _COLLAPSED_OTHER)


def _widen(cp: int) -> str:
    return _COLLAPSED_WHITESPACE if cp in WHITESPACE else chr(cp)


COLLAPSED = _TranslationTable(_collapse)  # for patterns that use \p{...}
WIDE = _TranslationTable(_widen)  # for the others: only non-ASCII whitespace is replaced


SPACE = "\u2581"  # how SentencePiece-style vocabularies write a space


# --- GPT-2's byte-level alphabet ----------------------------------------------------------------


def _byte_alphabet() -> list[str]:
    """The character each byte is written as in a byte-level BPE vocabulary.

    Printable Latin-1 bytes stand for themselves; the other 68 take the codepoints from 256 up,
    in byte order.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    alphabet = [""] * 256
    extra = 0
    for b in range(256):
        if b in printable:
            alphabet[b] = chr(b)
        else:
            alphabet[b] = chr(256 + extra)
            extra += 1
    return alphabet


BYTE_TO_CHAR = _byte_alphabet()
CHAR_TO_BYTE = {ch: b for b, ch in enumerate(BYTE_TO_CHAR)}
