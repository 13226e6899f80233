"""Lowers checked rules to the flat byte-level form the recognizer runs (csrc/grammar.h).

Literals become one byte set per UTF-8 byte; a class becomes a byte set when it is ASCII-only,
else a rule with one alternative per UTF-8 byte pattern; groups and repetitions become generated
rules. Repetition is right-recursive (`r ::= x r | ""`), which the recognizer runs in constant
stack depth. Alternatives that can derive nothing are dropped, so every stack can finish.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llamay.errors import GrammarError
from llamay.grammar import analysis, utf8
from llamay.grammar.syntax import Class, Group, Item, Literal, Ref, Repeat, Rules, Sequence

_END = -1
# The most elements a compiled grammar may have. Repetition multiplies (`x{0,10000}` is ten
# thousand rules), so a small text can ask for gigabytes; this is room for any schema a tool
# or response format needs (a string of up to 10,000 characters is about 30,000) at tens of MB.
MAX_ELEMENTS = 250_000


@dataclass(frozen=True)
class Compiled:
    elems: np.ndarray  # int32: terminal = byte-set index, reference = -2 - rule, _END
    rule_off: np.ndarray  # int32 (n_rules + 1,): each rule's slice of alt_start
    alt_start: np.ndarray  # int32: where each alternative begins in elems
    bitsets: np.ndarray  # uint8 (n_sets, 32)
    root: int


def compile_rules(rules: Rules, root: str) -> Compiled:
    return _Builder(rules).build(root)


def _ref(rule: int) -> int:
    return -2 - rule


class _Builder:
    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.productive = analysis.productive_rules(rules)
        self.ids = {name: i for i, name in enumerate(rules)}
        self.bodies: list[list[list[int]]] = [[] for _ in rules]
        self.sets: dict[int, int] = {}
        self.classes: dict[tuple, int] = {}
        self.size = 0  # elements made so far, counted before they are made

    def spend(self, n: int) -> None:
        """Counts n more elements; GrammarError past MAX_ELEMENTS, before they are made."""
        self.size += n
        if self.size > MAX_ELEMENTS:
            raise GrammarError(
                f"the grammar expands to more than {MAX_ELEMENTS} elements (its repetitions "
                "multiply what they repeat); use smaller repetition counts or fewer of them"
            )

    def build(self, root: str) -> Compiled:
        for name, alternatives in self.rules.items():
            self.bodies[self.ids[name]] = self.alternatives(alternatives)
        elems: list[int] = []
        rule_off, alt_start = [0], []
        for body in self.bodies:
            for codes in body:
                alt_start.append(len(elems))
                elems += codes
                elems.append(_END)
            rule_off.append(len(alt_start))
        bitsets = np.zeros((len(self.sets), 32), dtype=np.uint8)
        for mask, index in self.sets.items():
            bitsets[index] = np.frombuffer(mask.to_bytes(32, "little"), dtype=np.uint8)
        return Compiled(
            elems=np.array(elems, dtype=np.int32),
            rule_off=np.array(rule_off, dtype=np.int32),
            alt_start=np.array(alt_start, dtype=np.int32),
            bitsets=bitsets,
            root=self.ids[root],
        )

    def new_rule(self, body: list[list[int]]) -> int:
        self.spend(len(body))  # each alternative's end
        self.bodies.append(body)
        return len(self.bodies) - 1

    def byte_set(self, mask: int) -> int:
        return self.sets.setdefault(mask, len(self.sets))

    def alternatives(self, alternatives: tuple[Sequence, ...]) -> list[list[int]]:
        return [
            self.sequence(seq)
            for seq in alternatives
            if all(analysis.is_productive(item, self.productive) for item in seq)
        ]

    def sequence(self, seq: Sequence) -> list[int]:
        return [code for item in seq for code in self.item(item)]

    def item(self, item: Item) -> list[int]:
        if isinstance(item, Literal):
            self.spend(len(item.chars))
            return [self.byte_set(1 << b) for ch in item.chars for b in utf8.encode(ch)]
        if isinstance(item, Class):
            return self.char_class(item)
        if isinstance(item, Ref):
            return [_ref(self.ids[item.name])]
        if isinstance(item, Group):
            if len(item.alternatives) == 1:
                return self.sequence(item.alternatives[0])
            return [_ref(self.new_rule(self.alternatives(item.alternatives)))]
        return self.repeat(item)

    def char_class(self, item: Class) -> list[int]:
        key = (item.ranges, item.negated)
        if key not in self.classes:
            patterns = utf8.byte_patterns(utf8.code_points(item.ranges, item.negated))
            self.spend(sum(len(pattern) for pattern in patterns))
            if len(patterns) == 1 and len(patterns[0]) == 1:
                return [self.byte_set(patterns[0][0])]
            body = [[self.byte_set(mask) for mask in pattern] for pattern in patterns]
            self.classes[key] = self.new_rule(body)
        return [_ref(self.classes[key])]

    def repeat(self, item: Repeat) -> list[int]:
        if not analysis.is_productive(item.item, self.productive):
            return []  # min is 0 (else the sequence was dropped): only the empty repetition
        body = self.item(item.item)
        if len(body) > 1:
            body = [_ref(self.new_rule([body]))]
        bounded = item.min if item.max is None else item.max
        self.spend(len(body) * item.min + (bounded - item.min + 1) * (len(body) + 2))
        out = body * item.min
        if item.max is None:
            loop = len(self.bodies)
            self.bodies.append([[*body, _ref(loop)], []])
            return [*out, _ref(loop)]
        tail: list[int] = []
        for _ in range(item.max - item.min):
            tail = [_ref(self.new_rule([body + tail, []]))]
        return out + tail
