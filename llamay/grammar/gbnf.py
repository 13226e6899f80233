"""A parser for llama.cpp's GBNF: `name ::= alternatives` rules, one per line (newlines are
allowed inside parentheses), literals, character classes, any-char, rule references, grouping,
`* + ? {m} {m,} {m,n} {,n}` and `#` comments.

Token terminals (`<[id]>`, `<name>`, `!<...>`) are refused: llamay constrains text, not token ids.
"""

from __future__ import annotations

from llamay.errors import GrammarError
from llamay.grammar.syntax import Alternatives, Class, Group, Item, Literal, Ref, Repeat, Rules

_SIMPLE_ESCAPES = {
    "n": 0x0A,
    "r": 0x0D,
    "t": 0x09,
    "\\": 0x5C,
    '"': 0x22,
    "[": 0x5B,
    "]": 0x5D,
    "-": 0x2D,
    "^": 0x5E,
    "/": 0x2F,
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_MAX_CODE_POINT = 0x10FFFF
_MAX_REPEAT = 10_000
# Groups nest at most this deep: the checks and the compiler walk a group's items recursively.
MAX_NESTING = 64


def parse(text: str) -> Rules:
    """The rules of a GBNF grammar, in definition order."""
    return _Parser(text).grammar()


def _is_name_char(ch: str) -> bool:
    return len(ch) == 1 and ch.isascii() and (ch.isalnum() or ch in "-_")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0  # groups open at pos

    # --- errors and lexing --------------------------------------------------------------------

    def fail(self, message: str, pos: int | None = None) -> GrammarError:
        at = self.pos if pos is None else pos
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return GrammarError(f"GBNF line {line}, column {column}: {message}")

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.text[i] if i < len(self.text) else ""

    def skip_space(self, newlines: bool) -> None:
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "#":
                while self.pos < len(self.text) and self.text[self.pos] not in "\r\n":
                    self.pos += 1
            elif ch in " \t" or (newlines and ch in "\r\n"):
                self.pos += 1
            else:
                return

    def name(self) -> str:
        start = self.pos
        while _is_name_char(self.peek()):
            self.pos += 1
        if self.pos == start:
            found = repr(self.peek()) if self.peek() else "the end of the grammar"
            raise self.fail(f"expected a rule name, found {found}")
        return self.text[start : self.pos]

    def integer(self) -> int | None:
        start = self.pos
        while self.peek().isascii() and self.peek().isdigit():
            self.pos += 1
        if self.pos - start > len(str(_MAX_REPEAT)):  # before int(), which is slow on many digits
            raise self.fail(f"repetition counts above {_MAX_REPEAT} are not supported", start)
        return int(self.text[start : self.pos]) if self.pos > start else None

    # --- grammar structure --------------------------------------------------------------------

    def grammar(self) -> Rules:
        rules: Rules = {}
        self.skip_space(newlines=True)
        while self.pos < len(self.text):
            start = self.pos
            name = self.name()
            if name in rules:
                raise self.fail(f"rule '{name}' is defined twice", start)
            self.skip_space(newlines=False)
            if not self.text.startswith("::=", self.pos):
                raise self.fail(f"expected '::=' after rule name '{name}'")
            self.pos += 3
            self.skip_space(newlines=True)
            rules[name] = self.alternatives(nested=False)
            if self.pos < len(self.text) and self.peek() not in "\r\n":
                raise self.fail(f"unexpected {self.peek()!r}")
            self.skip_space(newlines=True)
        return rules

    def alternatives(self, nested: bool) -> Alternatives:
        alternatives = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            self.skip_space(newlines=True)
            alternatives.append(self.sequence(nested))
        return tuple(alternatives)

    def sequence(self, nested: bool) -> tuple[Item, ...]:
        items: list[Item] = []
        while True:
            ch = self.peek()
            start = self.pos
            if ch == '"':
                self.pos += 1
                items.append(Literal(self.literal()))
            elif ch == "[":
                self.pos += 1
                items.append(self.char_class())
            elif ch == ".":
                self.pos += 1
                items.append(Class((), negated=True))
            elif ch == "(":
                if self.depth == MAX_NESTING:
                    raise self.fail(f"groups nest more than {MAX_NESTING} deep")
                self.pos += 1
                self.depth += 1
                self.skip_space(newlines=True)
                group = self.alternatives(nested=True)
                if self.peek() != ")":
                    raise self.fail("expected ')' to close the group opened", start)
                self.pos += 1
                self.depth -= 1
                items.append(Group(group))
            elif ch in ("<", "!"):
                raise self.fail(
                    "token terminals (<[id]>, <name>, !<...>) are not supported: "
                    "write the text the token stands for as a literal"
                )
            elif ch in ("*", "+", "?", "{"):
                if not items:
                    raise self.fail(f"{ch!r} must follow the item it repeats")
                items[-1] = self.repetition(items[-1])
            elif _is_name_char(ch):
                items.append(Ref(self.name()))
            else:
                return tuple(items)
            self.skip_space(newlines=nested)

    def repetition(self, item: Item) -> Repeat:
        ch = self.peek()
        self.pos += 1
        if ch == "*":
            return Repeat(item, 0, None)
        if ch == "+":
            return Repeat(item, 1, None)
        if ch == "?":
            return Repeat(item, 0, 1)
        start = self.pos - 1
        self.skip_space(newlines=False)
        low = self.integer()
        self.skip_space(newlines=False)
        high: int | None
        if self.peek() == ",":
            self.pos += 1
            self.skip_space(newlines=False)
            high = self.integer()
            self.skip_space(newlines=False)
        else:
            if low is None:
                raise self.fail("expected a number in '{m,n}'")
            high = low
        if self.peek() != "}":
            raise self.fail("expected '}' to close the repetition opened", start)
        self.pos += 1
        low = low or 0
        if high is not None and high < low:
            raise self.fail(f"repetition {{{low},{high}}} has its maximum below its minimum", start)
        if max(low, high or 0) > _MAX_REPEAT:
            raise self.fail(f"repetition counts above {_MAX_REPEAT} are not supported", start)
        return Repeat(item, low, high)

    # --- terminals ----------------------------------------------------------------------------

    def char(self) -> int:
        """One character of a literal or class, escapes decoded."""
        ch = self.peek()
        if not ch:
            raise self.fail("unexpected end of the grammar")
        self.pos += 1
        if ch != "\\":
            return ord(ch)
        start = self.pos - 1
        kind = self.peek()
        self.pos += 1
        if kind in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[kind]
        if kind in _HEX_ESCAPES:
            digits = self.text[self.pos : self.pos + _HEX_ESCAPES[kind]]
            if len(digits) != _HEX_ESCAPES[kind] or any(
                c not in "0123456789abcdefABCDEF" for c in digits
            ):
                raise self.fail(f"'\\{kind}' takes {_HEX_ESCAPES[kind]} hex digits", start)
            self.pos += len(digits)
            value = int(digits, 16)
            if value > _MAX_CODE_POINT:
                raise self.fail(f"\\{kind}{digits} is beyond the last code point U+10FFFF", start)
            return value
        raise self.fail(f"unknown escape '\\{kind}'", start)

    def literal(self) -> tuple[int, ...]:
        start = self.pos - 1
        chars = []
        while self.peek() != '"':
            if not self.peek() or self.peek() in "\r\n":
                raise self.fail("unterminated string literal", start)
            chars.append(self.char())
        self.pos += 1
        return tuple(chars)

    def char_class(self) -> Class:
        start = self.pos - 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges = []
        while self.peek() != "]":
            if not self.peek():
                raise self.fail("unterminated character class", start)
            low = self.char()
            high = low
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                high = self.char()
                if high < low:
                    raise self.fail(f"character range {chr(low)!r}-{chr(high)!r} is reversed")
            ranges.append((low, high))
        self.pos += 1
        return Class(tuple(ranges), negated)
