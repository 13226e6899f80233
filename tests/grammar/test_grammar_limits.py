"""Grammars and JSON schemas are a client's input: whatever their shape, compiling one costs time
and memory linear in its size, within fixed bounds, and whatever is refused is a GrammarError
(a 400 over HTTP), never a RecursionError, a crash or minutes of work.

Linear time is checked as work, not by a clock that a loaded machine slows: the steps of Python
that twice the input takes, against those of the input (`python_steps`). The quadratic versions
(noted beside each) did their extra work in Python loops, where it counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.errors import GrammarError
from llamay.grammar import Grammar, json_schema

EXAMPLES = int(os.environ.get("LLAMAY_FUZZ_EXAMPLES", "300"))
# Twice the input costs at most this many times the work: a linear cost doubles (its constant
# part does not), a quadratic one quadruples.
LINEAR = 2.5


def python_steps(function, *args) -> int:
    """The steps of Python (calls, lines, returns) that `function(*args)` takes, whether it
    returns or raises GrammarError."""
    steps = 0

    def count(frame, event, arg):
        nonlocal steps
        steps += 1
        return count

    previous = sys.gettrace()
    sys.settrace(count)
    try:
        function(*args)
    except GrammarError:
        pass
    finally:
        sys.settrace(previous)
    return steps


def repetitions(n: int) -> str:
    return "root ::= " + " ".join(['"a"{0,10000}'] * n)


def test_repetitions_that_multiply_are_refused_before_they_are_built():
    # 4 KB of text that asked for 3 million rules (1.3 GB, 16 s) before the bound.
    with pytest.raises(GrammarError, match="expands to more than"):
        Grammar.from_gbnf(repetitions(300))
    # Expanded only up to the bound: twice the repetitions cost next to nothing more.
    work = python_steps(Grammar.from_gbnf, repetitions(300))
    assert python_steps(Grammar.from_gbnf, repetitions(600)) < 1.5 * work


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


def chain(n: int) -> str:
    """n rules, each the next one's name, defined leaf-last: a fixed point found one rule per
    pass (the old check: 20,000 passes over 20,000 rules, minutes) is as slow as it gets."""
    lines = ["root ::= r0"] + [f"r{i} ::= r{i + 1}" for i in range(n)] + [f'r{n} ::= "a"']
    return "\n".join(lines)


def test_a_long_chain_of_rules_is_checked_in_linear_time():
    assert Grammar.from_gbnf(chain(20_000)).accepts("a")
    work = python_steps(Grammar.from_gbnf, chain(1000))
    assert python_steps(Grammar.from_gbnf, chain(2000)) < LINEAR * work


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


def one_rule_name(n: int) -> dict:
    """An object of n properties whose names all become the rule name "root-a"."""
    return {
        "type": "object",
        "properties": {f"a{chr(0x4E00 + i)}": {"type": "integer"} for i in range(n)},
    }


def test_properties_of_one_rule_name_convert_in_linear_time():
    # Each name took one more try than the last: some 200 million tries for 15,000 (over a
    # minute). Now the conversion is quick, and the grammar it makes is refused for its size.
    with pytest.raises(GrammarError, match="characters long"):
        Grammar.from_json_schema(one_rule_name(15_000))
    work = python_steps(json_schema.to_gbnf, one_rule_name(500))
    assert python_steps(json_schema.to_gbnf, one_rule_name(1000)) < LINEAR * work
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
    # too large, or too deep: refused by a fixed bound either way, before 2**30 schemas
    with pytest.raises(GrammarError):
        Grammar.from_json_schema(schema)


def test_many_all_of_parts_merge_into_one_schema():
    # (Merged one part at a time, each copied what the parts before it gathered: quadratic, in
    # dict copies that no step count sees. They are gathered apart now, and put in once.)
    parts = [
        {"required": [f"p{i}"], "properties": {f"p{i}": {"type": "integer"}}} for i in range(5000)
    ]
    merged = Grammar.from_json_schema({"type": "object", "allOf": parts})  # within the work bound
    assert merged.accepts(json.dumps({f"p{i}": i for i in range(5000)}))


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
