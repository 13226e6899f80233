"""Constrained generation: GBNF grammars and JSON schemas, compiled to a byte-level pushdown
recognizer whose state masks a vocabulary through a token trie (the hot part is C, in
llamay/_core/csrc/grammar.c). docs/grammars.md describes the language and the guarantees."""

from __future__ import annotations

from llamay.grammar.grammar import Grammar, Matcher

__all__ = ["Grammar", "Matcher"]
