"""The parsed form of a grammar: each rule is a choice of sequences of items.

Characters are Unicode code points; `Class` ranges are inclusive. Any-char (`.`) is the negated
empty class.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Literal:
    chars: tuple[int, ...]


@dataclass(frozen=True)
class Class:
    ranges: tuple[tuple[int, int], ...]
    negated: bool


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Group:
    alternatives: Alternatives


@dataclass(frozen=True)
class Repeat:
    item: Item
    min: int
    max: int | None  # None: unbounded


Item = Literal | Class | Ref | Group | Repeat
Sequence = tuple[Item, ...]
Alternatives = tuple[Sequence, ...]
Rules = dict[str, Alternatives]  # in definition order
