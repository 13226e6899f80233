"""Grammars and JSON schemas are a client's input: whatever their shape, compiling one costs time
and memory linear in its size, within fixed bounds, and whatever is refused is a GrammarError
(a 400 over HTTP), never a RecursionError, a crash or minutes of work.

The timing bounds here are minutes apart from what the quadratic or exponential versions took
(noted beside each), so a loaded machine does not make them flaky.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.errors import GrammarError
from llamay.grammar import Grammar, json_schema

EXAMPLES = int(os.environ.get("LLAMAY_FUZZ_EXAMPLES", "300"))
GENEROUS_S = 20.0


def timed(function, *args):
    started = time.monotonic()
    try:
        return function(*args), time.monotonic() - started
    except GrammarError as error:
        return error, time.monotonic() - started


def test_repetitions_that_multiply_are_refused_before_they_are_built():
    # 4 KB of text that asked for 3 million rules (1.3 GB, 16 s) before the bound.
    text = "root ::= " + " ".join(['"a"{0,10000}'] * 300)
    refused, seconds = timed(Grammar.from_gbnf, text)
    assert isinstance(refused, GrammarError)
    assert "expands to more than" in str(refused)
    assert seconds < GENEROUS_S


def test_one_large_repetition_still_compiles():
    grammar = Grammar.from_gbnf('root ::= "a"{0,10000}')
    assert grammar.accepts("a" * 10000) and not grammar.accepts("a" * 10001)


def test_groups_nested_past_the_limit_are_a_grammar_error():
    with pytest.raises(GrammarError, match="nest more than 64 deep"):
        Grammar.from_gbnf("root ::= " + "(" * 2000 + '"a"' + ")" * 2000)
    assert Grammar.from_gbnf("root ::= " + "(" * 60 + '"a"' + ")" * 60).accepts("a")


def test_a_huge_repetition_count_is_refused_without_parsing_it():
    with pytest.raises(GrammarError, match="above 10000"):
        Grammar.from_gbnf('root ::= "a"{' + "9" * 5000 + "}")


def test_a_long_chain_of_rules_is_checked_in_linear_time():
    # Defined leaf-last, so that a fixed point found one rule per pass (the old check: 20,000
    # passes over 20,000 rules, minutes) is as slow as it gets.
    n = 20_000
    lines = ["root ::= r0"] + [f"r{i} ::= r{i + 1}" for i in range(n)] + [f'r{n} ::= "a"']
    grammar, seconds = timed(Grammar.from_gbnf, "\n".join(lines))
    assert isinstance(grammar, Grammar) and grammar.accepts("a")
    assert seconds < GENEROUS_S


def test_a_long_left_recursive_cycle_is_found_without_recursion():
    n = 20_000
    lines = ["root ::= r0"] + [f"r{i} ::= r{i + 1}" for i in range(n)] + [f'r{n} ::= r0 "a"']
    with pytest.raises(GrammarError, match="left-recursive"):
        Grammar.from_gbnf("\n".join(lines))


def test_many_nullable_references_do_not_overflow_the_recognizers_stack():
    """200,000 references in a row to a rule that may be empty: the recognizer's closure walked
    them recursively in C and crashed the process (SIGSEGV) on an 8 MB thread stack."""
    script = (
        "import threading\n"
        "from llamay.grammar import Grammar\n"
        "text = 'root ::= ' + ' '.join(['x'] * 200000) + '\\nx ::= \"a\"?\\n'\n"
        "def run():\n"
        "    grammar = Grammar.from_gbnf(text)\n"
        "    print(grammar.accepts('aaa'), grammar.accepts(''))\n"
        "thread = threading.Thread(target=run)\n"
        "thread.start()\n"
        "thread.join()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd="/"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


def test_too_long_a_grammar_text_is_refused():
    with pytest.raises(GrammarError, match="characters long"):
        Grammar.from_gbnf('root ::= "' + "a" * (2 << 20) + '"')


# --- JSON schemas --------------------------------------------------------------------------------


def nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def test_a_deep_schema_is_a_grammar_error_not_a_recursion_error():
    with pytest.raises(GrammarError, match="nests more than"):
        Grammar.from_json_schema(nested(900))
    assert Grammar.from_json_schema(nested(10)).accepts(
        json.dumps(nested_value(10), separators=(",", ":"))
    )


def nested_value(depth: int):
    value = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


def test_properties_of_one_rule_name_convert_in_linear_time():
    # Names that all become the rule name "root-a": each took one more try than the last, some
    # 200 million tries for these (over a minute). Now the conversion is quick, and the grammar
    # it makes is refused for its size.
    properties = {f"a{chr(0x4E00 + i)}": {"type": "integer"} for i in range(15_000)}
    result, seconds = timed(Grammar.from_json_schema, {"type": "object", "properties": properties})
    assert isinstance(result, GrammarError) and "characters long" in str(result)
    assert seconds < GENEROUS_S
    few = {f"a{chr(0x4E00 + i)}": {"type": "integer"} for i in range(3)}
    grammar = Grammar.from_json_schema({"type": "object", "properties": few})
    assert grammar.accepts(json.dumps({"a\u4e00": 1, "a\u4e02": 2}, ensure_ascii=False))


def test_a_wide_one_of_is_refused():
    schema = {"oneOf": [{"const": i} for i in range(5000)]}
    with pytest.raises(GrammarError, match="at most 128"):
        Grammar.from_json_schema(schema)


def test_combinations_that_multiply_are_bounded():
    # Each level's anyOf carries the level's other keywords into every alternative.
    schema: dict = {"type": "integer"}
    for _ in range(30):
        schema = {"anyOf": [schema, schema], "minimum": 0}
    refused, seconds = timed(Grammar.from_json_schema, schema)
    assert isinstance(refused, GrammarError)  # too large, or too deep: 2**30 schemas either way
    assert seconds < GENEROUS_S


def test_many_all_of_parts_merge_in_linear_time():
    parts = [
        {"required": [f"p{i}"], "properties": {f"p{i}": {"type": "integer"}}} for i in range(5000)
    ]
    refused, seconds = timed(Grammar.from_json_schema, {"type": "object", "allOf": parts})
    assert seconds < GENEROUS_S
    assert isinstance(refused, (Grammar, GrammarError))


KEYWORDS = [*sorted(json_schema._SUPPORTED), "title", "x-unknown"]
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["string", "integer", "number", "object", "array", "#", "#/$defs/a", "^a+$"]),
)
SCHEMAS = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYWORDS) | st.text(max_size=3), children, max_size=5),
    ),
    max_leaves=30,
)


@pytest.mark.fuzz
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=SCHEMAS)
def test_any_schema_converts_or_is_a_grammar_error(schema):
    try:
        grammar = Grammar.from_json_schema(schema)
    except GrammarError:
        return
    assert grammar.gbnf


GBNF_PIECES = st.sampled_from(
    ['"a"', "[a-z]", "[^x]", ".", "x", "root", "(", ")", "|", "*", "+", "?", "{2}", "{0,3}",
     "{,2}", "{3,1}", " ", "\n", "::=", "x ::=", '"\\x41"', '"\\u{"', "#c\n", "<[1]>", '"']
)  # fmt: skip


@pytest.mark.fuzz
@settings(max_examples=EXAMPLES, deadline=None)
@given(pieces=st.lists(GBNF_PIECES, max_size=30))
def test_any_gbnf_text_compiles_or_is_a_grammar_error(pieces):
    text = "root ::= " + " ".join(pieces) + '\nx ::= "b"?\n'
    try:
        grammar = Grammar.from_gbnf(text)
    except GrammarError:
        return
    grammar.accepts("ab")
