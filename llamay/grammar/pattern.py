"""JSON schema `pattern` to GBNF: a regular-expression subset, anchored (`^...$`), over the
string's characters, emitted as the JSON text of those characters (quotes, backslashes and
control characters escaped).

Supported: literals, `.`, classes `[...]`/`[^...]` with ranges, `\\d \\w \\s` (ASCII) and
`\\D \\W \\S` (the ASCII characters outside them), escaped punctuation, `\\n \\t \\r \\f \\v
\\xHH \\uHHHH`, groups `(...)`/`(?:...)`, `|`, and the greedy quantifiers `* + ? {m} {m,} {m,n}`.
Anything else is a GrammarError.
"""

from __future__ import annotations

from llamay.errors import GrammarError
from llamay.grammar import utf8

_DIGIT = ((0x30, 0x39),)
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE = ((0x09, 0x0D), (0x20, 0x20))


def _count(text: str) -> bool:
    """Whether `text` is a repetition count: ASCII digits, few enough for int() to be quick."""
    return text.isascii() and text.isdigit() and len(text) <= 6


def _ascii_complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    # Python's \D, \W, \S exclude Unicode digits, letters and spaces too: staying in ASCII
    # keeps every character the grammar allows one that the pattern allows.
    inside = {c for low, high in ranges for c in range(low, high + 1)}
    return tuple((c, c) for c in range(0x80) if c not in inside)


_CLASS_ESCAPES = {
    "d": _DIGIT,
    "w": _WORD,
    "s": _SPACE,
    "D": _ascii_complement(_DIGIT),
    "W": _ascii_complement(_WORD),
    "S": _ascii_complement(_SPACE),
}
_CHAR_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B}
_HEX = {"x": 2, "u": 4}
_MAX_REPEAT = 1000
_MAX_NESTING = 16  # groups: the parser recurses into each, as the GBNF parser does into its output
# What JSON writes for each character it must escape.
_JSON_ESCAPES = {
    0x22: '\\"',
    0x5C: "\\\\",
    0x08: "\\b",
    0x0C: "\\f",
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
}


def to_gbnf(pattern: str, where: str) -> str:
    """A GBNF expression for the JSON string contents (between the quotes) that match `pattern`."""
    if not (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")):
        raise GrammarError(f"pattern at {where} must be anchored as ^...$ to be enforced")
    parser = _Parser(pattern[1:-1], where)
    expression = parser.alternation()
    if parser.pos != len(parser.text):
        raise parser.fail(f"unexpected {parser.text[parser.pos]!r}")
    return expression


def _json_chars(ranges: list[tuple[int, int]]) -> str:
    """A GBNF expression for one character out of `ranges`, as JSON writes it: raw, or escaped
    where JSON must escape it (quote, backslash, control characters)."""
    must_escape = sorted({*_JSON_ESCAPES, *range(0x20)})
    escaped = [c for c in must_escape if any(low <= c <= high for low, high in ranges)]
    raw: list[tuple[int, int]] = []
    for low, high in ranges:
        start = low
        for cut in must_escape:
            if start <= cut <= high:
                if start < cut:
                    raw.append((start, cut - 1))
                start = cut + 1
        if start <= high:
            raw.append((start, high))
    parts = []
    if raw:
        parts.append("[" + "".join(_class_range(low, high) for low, high in raw) + "]")
    for char in escaped:
        text = _JSON_ESCAPES.get(char, f"\\u{char:04x}")
        parts.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
    if not parts:
        raise GrammarError("a character class in a pattern matches nothing")
    return parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"


def _class_range(low: int, high: int) -> str:
    def char(c: int) -> str:
        return f"\\u{c:04X}" if c <= 0xFFFF else f"\\U{c:08X}"

    return char(low) if low == high else f"{char(low)}-{char(high)}"


class _Parser:
    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.pos = 0
        self.depth = 0

    def fail(self, message: str) -> GrammarError:
        return GrammarError(f"pattern at {self.where}, offset {self.pos + 1}: {message}")

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def alternation(self) -> str:
        alternatives = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            alternatives.append(self.sequence())
        if len(alternatives) == 1:
            return alternatives[0]
        return "(" + " | ".join(a or '""' for a in alternatives) + ")"

    def sequence(self) -> str:
        items = []
        while self.peek() not in ("", "|", ")"):
            items.append(self.quantified(self.atom()))
        return " ".join(items)

    def atom(self) -> str:
        ch = self.peek()
        self.pos += 1
        if ch == "(":
            if self.text.startswith("?:", self.pos):
                self.pos += 2
            elif self.peek() == "?":
                raise self.fail("only plain and (?:...) groups are supported")
            if self.depth == _MAX_NESTING:
                raise self.fail(f"groups nest more than {_MAX_NESTING} deep")
            self.depth += 1
            inner = self.alternation()
            self.depth -= 1
            if self.peek() != ")":
                raise self.fail("unclosed group")
            self.pos += 1
            return f"({inner or chr(34) * 2})"
        if ch == "[":
            return _json_chars(self.char_class())
        if ch == ".":
            return _json_chars(utf8.code_points(((0x0A, 0x0A),), negated=True))
        if ch == "\\":
            return _json_chars(utf8.code_points(self.escape(), negated=False))
        if ch in "*+?{":
            raise self.fail(f"{ch!r} must follow the item it repeats")
        if ch in "^$":
            raise self.fail(f"{ch!r} is only supported at the ends of the pattern")
        return _json_chars([(ord(ch), ord(ch))])

    def escape(self) -> tuple[tuple[int, int], ...]:
        """The characters of the escape after a backslash."""
        ch = self.peek()
        self.pos += 1
        if ch in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[ch]
        if ch in _CHAR_ESCAPES:
            return ((_CHAR_ESCAPES[ch],) * 2,)
        if ch in _HEX:
            digits = self.text[self.pos : self.pos + _HEX[ch]]
            if len(digits) != _HEX[ch] or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise self.fail(f"\\{ch} takes {_HEX[ch]} hex digits")
            self.pos += _HEX[ch]
            return ((int(digits, 16),) * 2,)
        if ch and not ch.isalnum():
            return ((ord(ch),) * 2,)
        raise self.fail(f"unsupported escape \\{ch}")

    def char_class(self) -> list[tuple[int, int]]:
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while self.peek() != "]" or first:
            first = False
            if not self.peek():
                raise self.fail("unclosed character class")
            low = self.class_char(ranges)
            if low is None:
                continue
            if self.peek() == "-" and self.text[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.pos += 1
                high = self.class_char(ranges)
                if high is None or high < low:
                    raise self.fail("bad character range")
                ranges.append((low, high))
            else:
                ranges.append((low, low))
        self.pos += 1
        return utf8.code_points(tuple(ranges), negated)

    def class_char(self, ranges: list[tuple[int, int]]) -> int | None:
        """One class character; a class escape (\\d...) adds its ranges and gives None."""
        ch = self.peek()
        self.pos += 1
        if ch != "\\":
            return ord(ch)
        escaped = self.escape()
        if len(escaped) == 1 and escaped[0][0] == escaped[0][1]:
            return escaped[0][0]
        ranges.extend(escaped)
        return None

    def quantified(self, atom: str) -> str:
        ch = self.peek()
        if ch in ("*", "+", "?"):
            self.pos += 1
            suffix = ch
        elif ch == "{":
            end = self.text.find("}", self.pos)
            body = self.text[self.pos + 1 : end] if end > 0 else ""
            low, sep, high = body.partition(",")
            if not _count(low) or (high and not _count(high)):
                raise self.fail("expected {m}, {m,} or {m,n}")
            if int(low) > _MAX_REPEAT or (high and int(high) > _MAX_REPEAT):
                raise self.fail(f"repetition counts above {_MAX_REPEAT} are not supported")
            if high and int(high) < int(low):
                raise self.fail("repetition maximum below its minimum")
            self.pos = end + 1
            suffix = "{" + body + "}" if sep else "{" + low + "}"
        else:
            return atom
        if self.peek() in ("?", "+"):
            raise self.fail("lazy and possessive quantifiers are not supported")
        return f"({atom}){suffix}"
