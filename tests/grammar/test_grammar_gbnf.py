"""GBNF: what a grammar accepts and rejects (string level, through the same byte recognizer the
matcher runs), the syntax, and every refusal with its message."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamay.errors import GrammarError
from llamay.grammar import Grammar

ARITHMETIC = r"""
# integer arithmetic with parentheses
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= [0-9]+
"""

LANGUAGES = {
    "arithmetic": (
        ARITHMETIC,
        ["1", "12+3", "(1+2)*3", "((7))", "1*2/3-4"],
        ["", "+1", "1+", "(1", "1)", "1 + 2", "a"],
    ),
    "list": (
        'root ::= "[" (item ("," item)*)? "]"\nitem ::= [a-z]+',
        ["[]", "[a]", "[ab,c,def]"],
        ["[", "[,]", "[a,]", "[A]", "[a][b]"],
    ),
    "char classes": (
        "root ::= [a-cx] [^a-z] [\\-\\]] .",
        ["aA-é", "xZ]z", "c9]\n"],
        ["dA-z", "aa-z", "aA+z", "aA-", "aA-zz"],
    ),
    "repetition bounds": (
        'root ::= "a"{2} "b"{1,3} "c"{2,} "d"{,1} "e"?',
        ["aabcc", "aabbbcccd", "aabcccccce", "aabccde"],
        ["abcc", "aabbbbcc", "aabc", "aabccdd", "aabccee"],
    ),
    "negation and any-char": (
        'root ::= "<" [^>]* ">" . .?',
        ["<>x", "<abc>xy", "<日本>語", "<a\nb>!!"],
        ["<>", "<a>b>cd", "<>xyz", "<a"],
    ),
    "escapes": (
        'root ::= "\\x41\\u00e9\\U0001F600" "\\n\\t\\r\\\\\\"" [\\x30-\\x39\\u0100]',
        ['Aé😀\n\t\r\\"5', 'Aé😀\n\t\r\\"Ā'],
        ['Aé😀\n\t\r\\"a', 'Ae😀\n\t\r\\"5'],
    ),
    "multi-line group and comments": (
        'root ::= ( # a comment inside\n  "x"\n  | "y" # another\n) "z" # trailing\n',
        ["xz", "yz"],
        ["z", "xyz"],
    ),
    "empty string": ('root ::= "" | "a"', ["", "a"], ["aa"]),
    "nullable repetition": ('root ::= ("a"?)* "b"', ["b", "ab", "aaab"], ["a", "ba"]),
    "right recursion": ('root ::= "a" root | "b"', ["b", "ab", "a" * 500 + "b"], ["a", "bb"]),
}


@pytest.mark.parametrize("name", LANGUAGES)
def test_accepts_exactly_its_language(name):
    text, good, bad = LANGUAGES[name]
    grammar = Grammar.from_gbnf(text)
    assert [s for s in good if not grammar.accepts(s)] == []
    assert [s for s in bad if grammar.accepts(s)] == []


def test_another_root_rule_can_be_chosen():
    grammar = Grammar.from_gbnf('root ::= "a"\nother ::= "b"', root="other")
    assert grammar.accepts("b") and not grammar.accepts("a")


def test_gbnf_property_is_the_text():
    assert Grammar.from_gbnf(ARITHMETIC).gbnf == ARITHMETIC


def test_accepts_bytes_and_rejects_ill_formed_utf8():
    grammar = Grammar.from_gbnf("root ::= .+")
    assert grammar.accepts("é".encode())
    assert not grammar.accepts(b"\xc3")  # a character cut short
    assert not grammar.accepts(b"\xed\xa0\x80")  # a surrogate
    assert not grammar.accepts(b"\xc0\x80")  # an overlong form


# A regular language written both ways: the recognizer must agree with Python's re.
REGULAR = (
    'root ::= ("ab" | [c-e]+ "f"?){1,3} ([^abc] | "x"{2,3})*',
    re.compile(r"(?:ab|[c-e]+f?){1,3}(?:[^abc]|x{2,3})*", re.DOTALL),
)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdefx\n", max_size=10))
def test_agrees_with_a_regular_expression(text):
    grammar = _regular_grammar()
    assert grammar.accepts(text) == bool(REGULAR[1].fullmatch(text))


_cached: list[Grammar] = []


def _regular_grammar() -> Grammar:
    if not _cached:
        _cached.append(Grammar.from_gbnf(REGULAR[0]))
    return _cached[0]


# --- refusals ---------------------------------------------------------------------------------

REFUSED = {
    "direct left recursion": (
        'root ::= root "a" | "b"',
        "rule 'root' is left-recursive: root -> root",
    ),
    "indirect left recursion": (
        'root ::= expr\nexpr ::= term "+" | "x"\nterm ::= expr "*"',
        "rule 'expr' is left-recursive: expr -> term -> expr",
    ),
    "left recursion behind a nullable prefix": (
        'root ::= "a"? " "* root "b" | "c"',
        "rule 'root' is left-recursive: root -> root",
    ),
    "left recursion behind a nullable rule": (
        'root ::= opt list\nlist ::= opt list "x" | "y"\nopt ::= "o"?',
        "rule 'list' is left-recursive: list -> list",
    ),
    "token terminal by id": ("root ::= <[42]> ", "token terminals (<[id]>, <name>, !<...>)"),
    "token terminal by name": ('root ::= "a" <think>', "token terminals (<[id]>, <name>, !<...>)"),
    "negated token": ("root ::= !<[1]>*", "token terminals (<[id]>, <name>, !<...>)"),
    "undefined rule": ('root ::= "a" missing', "rule 'root' refers to undefined rule 'missing'"),
    "missing root": ('start ::= "a"', "the grammar has no rule 'root' to start from"),
    "no base case": (
        'root ::= "a" root',
        "the grammar's language is empty: rule 'root' derives no finite string",
    ),
    "unproductive helper": (
        'root ::= "a" | loop\nloop ::= "b" loop',
        "rule 'loop' derives no finite string",
    ),
    "empty class only": (
        "root ::= [^\\x00-\\U0010FFFF]",
        "the grammar's language is empty: rule 'root' derives no finite string",
    ),
    "duplicate rule": (
        'root ::= "a"\nroot ::= "b"',
        "line 2, column 1: rule 'root' is defined twice",
    ),
    "missing ::=": ('root = "a"', "line 1, column 6: expected '::=' after rule name 'root'"),
    "unterminated literal": ('root ::= "abc', "line 1, column 10: unterminated string literal"),
    "unterminated class": ("root ::= [abc", "line 1, column 10: unterminated character class"),
    "unclosed group": ('root ::= ("a" | "b"', "line 1, column 10: expected ')' to close the group"),
    "repetition without item": ('root ::= * "a"', "line 1, column 10: '*' must follow the item"),
    "reversed bounds": ('root ::= "a"{3,1}', "repetition {3,1} has its maximum below its minimum"),
    "reversed range": ("root ::= [z-a]", "character range 'z'-'a' is reversed"),
    "bad escape": ('root ::= "\\q"', "line 1, column 11: unknown escape '\\q'"),
    "short hex escape": ('root ::= "\\x4"', "'\\x' takes 2 hex digits"),
    "surrogate literal": ('root ::= "\\ud800"', "U+D800 is a surrogate"),
    "junk after a rule": ('root ::= "a" ;', "line 1, column 14: unexpected ';'"),
    "alternative on the next line": (
        'root ::= "a"\n| "b"',
        "line 2, column 1: expected a rule name",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refusal(name):
    text, message = REFUSED[name]
    with pytest.raises(GrammarError) as info:
        Grammar.from_gbnf(text)
    assert message in str(info.value)
