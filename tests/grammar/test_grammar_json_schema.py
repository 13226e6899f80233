"""JSON schema to grammar: what each keyword lets through, checked at the string level (the
grammar's exact language), and every refusal with its message. Sampling under these grammars
is tested in test_grammar_generation.py."""

from __future__ import annotations

import json
import math
import re

import pytest

from llamay.errors import GrammarError
from llamay.grammar import Grammar, json_schema


def accepts(schema, value_or_text) -> bool:
    text = value_or_text if isinstance(value_or_text, str) else json.dumps(value_or_text)
    return Grammar.from_json_schema(schema).accepts(text)


def test_any_json_accepts_json_and_rejects_the_rest():
    grammar = Grammar.any_json()
    good = ['{"a": [1, -2.5e3, true, false, null, "x\\n\\u00e9"]}', "[]", '"s"', "0", "-0.5", "{ }"]
    bad = ["", "{", "[1,]", "01", "1.", "'s'", '"\\ud800"', '"a\nb"', "nul", "{} {}"]
    assert [t for t in good if not grammar.accepts(t)] == []
    assert [t for t in bad if grammar.accepts(t)] == []


def test_json_object_accepts_only_objects():
    grammar = Grammar.json_object()
    assert grammar.accepts('{"a": {"b": [1]}}')
    assert not grammar.accepts("[1]") and not grammar.accepts('"x"')


def test_whitespace_is_bounded():
    grammar = Grammar.json_object()
    assert grammar.accepts('{\n  "a": 1\n}')
    assert grammar.accepts('{ "a" : 1 }')
    assert not grammar.accepts('{  "a": 1}')  # two spaces
    assert not grammar.accepts("{\n" + " " * 21 + '"a": 1}')  # an indent past 20


@pytest.mark.parametrize(
    "bounds",
    [
        {"minimum": -37, "maximum": 1234},
        {"exclusiveMinimum": 5, "exclusiveMaximum": 9},
        {"minimum": 0},
        {"maximum": -5},
        {"minimum": 7.5, "maximum": 99.2},
        {"minimum": -1000, "maximum": -999},
        {"minimum": 10, "maximum": 10},
    ],
)
def test_integer_bounds_are_exact(bounds):
    grammar = Grammar.from_json_schema({"type": "integer", **bounds})
    low = bounds.get("minimum", bounds.get("exclusiveMinimum", -(10**9)))
    high = bounds.get("maximum", bounds.get("exclusiveMaximum", 10**9))

    def valid(n: int) -> bool:
        above = n > low if "exclusiveMinimum" in bounds else n >= low
        below = n < high if "exclusiveMaximum" in bounds else n <= high
        return above and below

    wrong = [n for n in range(-1300, 1300) if grammar.accepts(str(n)) != valid(n)]
    assert wrong == []
    assert not grammar.accepts("-0") and not grammar.accepts("007")


NUMBER_BOUNDS = [
    {"minimum": -2, "maximum": 3},
    {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
    {"exclusiveMinimum": -1.5, "maximum": 2.25},
    {"minimum": 0.5},
    {"exclusiveMaximum": -3},
]


def _in_bounds(bounds: dict, x: float) -> bool:
    checks = {
        "minimum": lambda b: x >= b,
        "exclusiveMinimum": lambda b: x > b,
        "maximum": lambda b: x <= b,
        "exclusiveMaximum": lambda b: x < b,
    }
    return all(checks[key](value) for key, value in bounds.items())


def _interval_inside(bounds: dict, low: int, high: int) -> bool:
    least = bounds.get("minimum", bounds.get("exclusiveMinimum", -math.inf))
    most = bounds.get("maximum", bounds.get("exclusiveMaximum", math.inf))
    return least <= low and high <= most


@pytest.mark.parametrize("bounds", NUMBER_BOUNDS)
def test_number_bounds_language(bounds):
    """Integers in range, and fractions ending in a non-zero digit whose open whole-number
    interval lies in range: exactly those, so no bound is ever crossed."""
    grammar = Grammar.from_json_schema({"type": "number", **bounds})
    texts = [f"{k}.{f}" for k in range(-6, 7) for f in ("0", "05", "1", "5", "99")]
    texts += [str(k) for k in range(-6, 7)] + ["-0.5", "-0.05", "-0.99"]
    for text in texts:
        if "." not in text:
            writable = _in_bounds(bounds, float(text))
        else:
            whole = int(text.lstrip("-").split(".")[0])
            interval = (-whole - 1, -whole) if text.startswith("-") else (whole, whole + 1)
            writable = not text.endswith("0") and _interval_inside(bounds, *interval)
        assert grammar.accepts(text) == writable, text
        assert not writable or _in_bounds(bounds, float(text)), text
    assert not grammar.accepts("1e0")


def test_string_lengths_count_characters():
    schema = {"type": "string", "minLength": 2, "maxLength": 3}
    for text in ['"ab"', '"aé中"', '"\\n\\u0041"', '"\\ud7ff\\ue000"']:
        assert accepts(schema, text), text
    # A surrogate pair would be one character from two escapes: escapes of halves are refused.
    for text in ['"a"', '"abcd"', '"\\ud83d\\ude00"', '"\\ud83d\\ude00x"']:
        assert not accepts(schema, text), text


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        (
            "date",
            ["2024-02-28", "1999-12-31", "2023-04-30"],
            ["2024-02-30", "2023-04-31", "0999-01-01", "2024-13-01"],
        ),
        ("time", ["23:59:59Z", "00:00:00.123+05:30"], ["24:00:00Z", "12:60:00Z", "12:00:00"]),
        ("date-time", ["2024-01-15T08:30:00Z"], ["2024-01-15 08:30:00Z", "2024-01-15"]),
        ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
        ("email", ["a.b+c@example.co.uk"], ["no-at-sign", "@example.com", "a@b"]),
    ],
)
def test_string_formats(fmt, good, bad):
    schema = {"type": "string", "format": fmt}
    assert [s for s in good if not accepts(schema, json.dumps(s))] == []
    assert [s for s in bad if accepts(schema, json.dumps(s))] == []


PATTERNS = {
    r"^[A-Z]{2}-\d{3,4}$": (["AB-123", "XY-0000"], ["ab-123", "AB-12", "AB-12345", "AB_123"]),
    r"^(foo|bar)?baz$": (["baz", "foobaz", "barbaz"], ["fobaz", "foo", "bazbaz"]),
    r"^a.c$": (["abc", 'a"c', "a\\c", "aéc"], ["a\nc", "ac"]),
    r"^[^a-z]+$": (['A"\\ 1\n\x01'], ["Ab", ""]),
    # \S, \W: ASCII only, a subset of what Python's re allows ("é" would match both).
    r"^\S\s\W\w$": (["x !_", "!\t?e"], ["x y", "é !a"]),
    r"^(?:\+|00)\d+(\.\d{1,2})?$": (["+12", "0012.5"], ["12", "+1.234", "+"]),
    r"^[\w.-]+@[a-z]+\.(com|org)$": (["a.b-c@x.com"], ["a@b.net", "@x.org"]),
    r"^$": ([""], ["a"]),
}


@pytest.mark.parametrize("regex", PATTERNS)
def test_pattern(regex):
    grammar = Grammar.from_json_schema({"type": "string", "pattern": regex})
    good, bad = PATTERNS[regex]
    assert all(re.search(regex, text) for text in good)
    assert [t for t in good if not grammar.accepts(json.dumps(t, ensure_ascii=False))] == []
    assert [t for t in bad if grammar.accepts(json.dumps(t, ensure_ascii=False))] == []


def test_object_properties_required_first_then_optional_in_order():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["b"],
    }
    assert accepts(schema, '{"b": "x"}')
    assert accepts(schema, '{"b": "x", "a": 1, "c": true}')
    assert accepts(schema, '{"b": "x", "c": true}')
    assert not accepts(schema, '{"a": 1}')  # b is required
    assert not accepts(schema, '{"b": "x", "d": 1}')  # no unnamed properties
    assert not accepts(schema, '{"b": 1}')


def test_optional_properties_any_subset_in_order():
    schema = {"type": "object", "properties": {k: {"const": k} for k in "xyz"}}
    for keys in ["", "x", "y", "z", "xy", "xz", "yz", "xyz"]:
        assert accepts(schema, {k: k for k in keys}), keys
    assert not accepts(schema, '{"x": "x",}') and not accepts(schema, '{, "y": "y"}')


def test_additional_properties_schema_types_the_values():
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert accepts(schema, {"any": 1, "keys": 2}) and not accepts(schema, {"k": "v"})
    assert accepts({"type": "object", "additionalProperties": False}, "{}")
    assert not accepts({"type": "object", "additionalProperties": False}, {"k": 1})


def test_enum_and_const():
    schema = {"enum": ["red", 1, None, {"a": [True]}]}
    for value in ["red", 1, None, {"a": [True]}]:
        assert accepts(schema, json.dumps(value, separators=(",", ":")))
    assert not accepts(schema, "2") and not accepts(schema, '"blue"')
    assert accepts({"const": "x"}, '"x"') and not accepts({"const": "x"}, '"y"')
    assert accepts({"type": "string", "enum": ["a", 1]}, '"a"')
    assert not accepts({"type": "string", "enum": ["a", 1]}, "1")


def test_arrays_items_and_counts():
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}
    assert accepts(schema, [1, 2]) and accepts(schema, [1, 2, 3])
    assert (
        not accepts(schema, [1])
        and not accepts(schema, [1, 2, 3, 4])
        and not accepts(schema, ["a", 1])
    )
    assert accepts({"type": "array", "maxItems": 0}, "[]") and not accepts(
        {"type": "array", "maxItems": 0}, "[1]"
    )
    pair = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}
    assert accepts(pair, ["a", 1]) and not accepts(pair, [1, "a"]) and not accepts(pair, ["a"])


def test_any_of_one_of_all_of():
    any_of = {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}
    assert accepts(any_of, '"s"') and accepts(any_of, "3") and not accepts(any_of, "-3")
    one_of = {"oneOf": [{"type": "string"}, {"type": "null"}]}
    assert accepts(one_of, "null") and accepts(one_of, '"x"') and not accepts(one_of, "1")
    all_of = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ]
    }
    assert accepts(all_of, {"a": 1, "b": 2}) and not accepts(all_of, {"a": 1})
    narrowed = {"type": "number", "allOf": [{"type": "integer"}]}
    assert accepts(narrowed, "3") and not accepts(narrowed, "3.5")


def test_refs_and_recursion():
    schema = {
        "$defs": {
            "list": {
                "type": "object",
                "properties": {"head": {"type": "integer"}, "tail": {"$ref": "#/$defs/list"}},
                "required": ["head"],
            }
        },
        "$ref": "#/$defs/list",
    }
    assert accepts(schema, {"head": 1, "tail": {"head": 2, "tail": {"head": 3}}})
    assert not accepts(schema, {"head": 1, "tail": {"tail": {"head": 3}}})
    definitions = {
        "definitions": {"n": {"type": "integer"}},
        "type": "array",
        "items": {"$ref": "#/definitions/n"},
    }
    assert accepts(definitions, [1, 2]) and not accepts(definitions, ["x"])


def test_descriptive_keywords_are_fine_and_the_grammar_is_readable():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "T",
        "description": "d",
        "type": "object",
        "properties": {"user name": {"type": "string", "examples": ["x"], "default": "y"}},
        "required": ["user name"],
        "$comment": "c",
    }
    grammar = Grammar.from_json_schema(schema)
    assert grammar.accepts('{"user name": "z"}')
    assert grammar.gbnf.startswith("root ::= ")
    assert "root-user-name-kv ::= " in grammar.gbnf


def test_the_gbnf_text_is_the_same_grammar():
    """Callers build on `g.gbnf` (tool calls add their own rules): it must parse back as is."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}}}
    again = Grammar.from_gbnf(Grammar.from_json_schema(schema).gbnf)
    assert again.accepts('{"n": 9}') and not again.accepts('{"n": 10}')


# --- refusals ---------------------------------------------------------------------------------

REFUSED = {
    "unknown keyword": (
        {"type": "string", "contentEncoding": "base64"},
        "unsupported JSON schema keyword 'contentEncoding' at #",
    ),
    "unanchored pattern": (
        {"type": "string", "pattern": "a+"},
        "pattern at #/pattern must be anchored as ^...$",
    ),
    "lookahead": (
        {"type": "string", "pattern": "^(?=a)a$"},
        "pattern at #/pattern, offset 2: only plain and (?:...) groups",
    ),
    "backreference": ({"type": "string", "pattern": "^(a)\\1$"}, "unsupported escape \\1"),
    "lazy quantifier": (
        {"type": "string", "pattern": "^a+?$"},
        "lazy and possessive quantifiers are not supported",
    ),
    "inner anchor": ({"type": "string", "pattern": "^a|^b$"}, "'^' is only supported at the ends"),
    "pattern with length": (
        {"type": "string", "pattern": "^a+$", "maxLength": 3},
        "pattern with format/minLength/maxLength at # is not supported",
    ),
    "nested unknown keyword": (
        {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}},
        "unsupported JSON schema keyword 'multipleOf' at #/properties/n",
    ),
    "not": ({"not": {"type": "string"}}, "unsupported JSON schema keyword 'not' at #"),
    "minProperties": (
        {"type": "object", "minProperties": 1},
        "unsupported JSON schema keyword 'minProperties'",
    ),
    "unknown format": (
        {"type": "string", "format": "hostname"},
        "unsupported string format 'hostname' at #",
    ),
    "format with lengths": (
        {"type": "string", "format": "date", "maxLength": 5},
        "format with minLength/maxLength at # is not supported",
    ),
    "uniqueItems": ({"type": "array", "uniqueItems": True}, "uniqueItems at # cannot be enforced"),
    "number bounds with no room": (
        {"type": "number", "minimum": 0.2, "maximum": 0.8},
        "the bounds at # hold no integer and no whole-number interval",
    ),
    "empty integer range": (
        {"type": "integer", "minimum": 5, "maximum": 4},
        "no integer of at most 16 digits",
    ),
    "overlapping oneOf": (
        {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        "oneOf at #: alternatives 0 and 1 may both match one value",
    ),
    "remote ref": ({"$ref": "https://example.com/s.json"}, "only references within the schema"),
    "dangling ref": ({"$ref": "#/$defs/missing"}, "$ref '#/$defs/missing' at # points to nothing"),
    "self reference only": (
        {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        "is left-recursive",
    ),
    "reference cycle": (
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "$ref": "#/$defs/a",
            "type": "object",
        },
        "$ref '#/$defs/a' at # refers back to itself",
    ),
    "false schema": (False, "the schema at # is false: no value is valid there"),
    "conflicting allOf": (
        {"allOf": [{"type": "string"}, {"type": "integer"}]},
        "allOf at # asks for types ['string'] and ['integer'] at once",
    ),
    "unknown type": ({"type": "date"}, "unknown type 'date' at #"),
    "maxLength below minLength": (
        {"type": "string", "minLength": 3, "maxLength": 2},
        "maxLength is below minLength",
    ),
    "enum with other constraints": (
        {"enum": ["a"], "maxLength": 3},
        "'maxLength' next to const/enum at #",
    ),
    "required but forbidden": (
        {"type": "object", "required": ["x"], "additionalProperties": False},
        "required property 'x' at # is not allowed by additionalProperties",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_refusal(name):
    schema, message = REFUSED[name]
    with pytest.raises(GrammarError) as info:
        Grammar.from_json_schema(schema)
    assert message in str(info.value)


def test_several_schemas_become_rules_named_apart():
    point = {"$defs": {"n": {"type": "integer"}}, "type": "object",
             "properties": {"x": {"$ref": "#/$defs/n"}}, "required": ["x"],
             "additionalProperties": False}  # fmt: skip
    name = {"$defs": {"n": {"type": "string"}}, "type": "object",
            "properties": {"x": {"$ref": "#/$defs/n"}}, "required": ["x"],
            "additionalProperties": False}  # fmt: skip
    rules = json_schema.to_gbnf_rules({"point": point, "name": name})
    # each schema's $ref resolves in its own document, though both say "#/$defs/n"
    both = Grammar.from_gbnf(rules + 'root ::= "p" point | "n" name\n')
    assert both.accepts('p{"x": 1}') and both.accepts('n{"x": "a"}')
    assert not both.accepts('p{"x": "a"}') and not both.accepts('n{"x": 1}')
