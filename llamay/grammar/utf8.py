"""Character classes as UTF-8 byte patterns, so that the matcher works on bytes (byte-fallback
tokens are single bytes of a character) and never produces ill-formed UTF-8."""

from __future__ import annotations

_MAX = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
# The last code point of 1-, 2- and 3-byte UTF-8.
_LENGTH_BOUNDARIES = (0x7F, 0x7FF, 0xFFFF)


def code_points(ranges: tuple[tuple[int, int], ...], negated: bool) -> list[tuple[int, int]]:
    """The class as sorted, disjoint inclusive ranges of encodable code points (no surrogates)."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    if negated:
        complement, nxt = [], 0
        for low, high in merged:
            if low > nxt:
                complement.append((nxt, low - 1))
            nxt = high + 1
        if nxt <= _MAX:
            complement.append((nxt, _MAX))
        merged = complement
    out = []
    for low, high in merged:
        if high < _SURROGATES[0] or low > _SURROGATES[1]:
            out.append((low, high))
            continue
        if low < _SURROGATES[0]:
            out.append((low, _SURROGATES[0] - 1))
        if high > _SURROGATES[1]:
            out.append((_SURROGATES[1] + 1, high))
    return out


def byte_patterns(ranges: list[tuple[int, int]]) -> list[tuple[int, ...]]:
    """Byte patterns whose strings are exactly the UTF-8 forms of the code points in `ranges`:
    each pattern is a tuple of 256-bit masks (bit b: byte b matches), one per byte.

    Patterns that differ only in their first byte are merged, so a class costs few alternatives
    (any code point: 8).
    """
    pieces: list[list[tuple[int, int]]] = []
    for low, high in ranges:
        _split(low, high, pieces)
    merged: dict[tuple[int, ...], int] = {}
    for piece in pieces:
        masks = tuple(((1 << (high + 1)) - 1) ^ ((1 << low) - 1) for low, high in piece)
        merged[masks[1:]] = merged.get(masks[1:], 0) | masks[0]
    return [(first, *rest) for rest, first in merged.items()]


def _split(low: int, high: int, out: list[list[tuple[int, int]]]) -> None:
    for boundary in _LENGTH_BOUNDARIES:
        if low <= boundary < high:
            _split(low, boundary, out)
            _split(boundary + 1, high, out)
            return
    n = len(chr(low).encode("utf-8"))
    for i in range(1, n):
        tail = (1 << (6 * i)) - 1
        if low & ~tail != high & ~tail:
            if low & tail:
                _split(low, low | tail, out)
                _split((low | tail) + 1, high, out)
                return
            if high & tail != tail:
                _split(low, (high & ~tail) - 1, out)
                _split(high & ~tail, high, out)
                return
    first, last = chr(low).encode("utf-8"), chr(high).encode("utf-8")
    out.append(list(zip(first, last, strict=True)))


def encode(char: int) -> bytes:
    if _SURROGATES[0] <= char <= _SURROGATES[1]:
        from llamay.errors import GrammarError

        raise GrammarError(f"U+{char:04X} is a surrogate: it has no UTF-8 form")
    return chr(char).encode("utf-8")
