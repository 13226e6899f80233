"""Constrained generation end to end: random logits, masked by a grammar's matcher, one token at
a time over real vocabularies. Whatever comes out must be in the language: GBNF output is
accepted by the grammar, and JSON-schema output parses and validates with `jsonschema`."""

from __future__ import annotations

import json
import weakref
from datetime import date, datetime, time

import jsonschema
import numpy as np
import pytest

import llamay
from llamay.grammar import Grammar

# Single characters a finishing generation prefers, in order: they close strings, objects and
# arrays, or fill what must be filled.
CLOSERS = [b'"', b"}", b"]", b")", b"0", b"1", b"a", b"-", b":", b"T", b"Z", b"@", b"."]


@pytest.fixture(scope="module", params=["llama-spm", "gpt-2"])
def tokenizer(request, data_dir):
    return llamay.load_tokenizer(data_dir / "vocab" / f"ggml-vocab-{request.param}.gguf")


def generate(grammar: Grammar, tokenizer, seed: int, budget: int = 40, limit: int = 400) -> bytes:
    """Samples from random logits under the grammar's mask. After `budget` tokens it steers to
    an end: it stops as soon as the text may end, and otherwise prefers closing characters."""
    rng = np.random.default_rng(seed)
    matcher = grammar.matcher(tokenizer)
    eog = np.zeros(tokenizer.n_vocab, dtype=bool)
    eog[list(tokenizer.eog_ids)] = True
    closers = _closer_tokens(tokenizer)
    out = bytearray()
    for step in range(limit):
        allowed = matcher.allowed()
        assert allowed[eog].all() == matcher.can_end and allowed[eog].any() == matcher.can_end
        if matcher.must_end or (matcher.can_end and (step >= budget or rng.random() < 0.05)):
            token = int(np.flatnonzero(allowed & eog)[0])
            matcher.accept(token)
            return bytes(out)
        text_tokens = np.flatnonzero(allowed & ~eog)
        assert len(text_tokens), f"no token can continue {bytes(out)!r}"
        preferred = [t for t in closers if allowed[t]]
        if step >= budget and preferred:
            # Mostly the first closer; sometimes another, for patterns that need one of those.
            token = preferred[0] if rng.random() < 0.5 else int(rng.choice(preferred))
        elif preferred and rng.random() < 0.4:
            token = int(rng.choice(preferred))
        else:
            logits = rng.standard_normal(len(text_tokens))
            token = int(text_tokens[np.argmax(logits)])
        matcher.accept(token)
        out += tokenizer.token_to_piece(token)
    raise AssertionError(f"no end after {limit} tokens: {bytes(out)!r}")


# by the tokenizer itself, not id(): a freed tokenizer's address may be given to the next one
_closers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _closer_tokens(tokenizer) -> list[int]:
    """The tokens whose pieces are exactly the CLOSERS, in CLOSERS order."""
    if tokenizer not in _closers:
        by_piece: dict[bytes, int] = {}
        for token in range(tokenizer.n_vocab):
            if not tokenizer.is_control(token):
                by_piece.setdefault(tokenizer.token_to_piece(token), token)
        _closers[tokenizer] = [by_piece[c] for c in CLOSERS if c in by_piece]
    return _closers[tokenizer]


def validate(schema, text: bytes) -> None:
    value = json.loads(text.decode("utf-8"))
    jsonschema.validate(
        value, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    _check_formats(schema, value)


def _check_formats(schema, value) -> None:
    """Formats jsonschema checks only with optional packages, checked with the standard library."""
    if not isinstance(schema, dict):
        return
    parse = {
        "date": date.fromisoformat,
        "time": time.fromisoformat,
        "date-time": datetime.fromisoformat,
    }
    if schema.get("format") in parse:
        parse[schema["format"]](value)
    for key, sub in schema.get("properties", {}).items():
        if isinstance(value, dict) and key in value:
            _check_formats(sub, value[key])


# --- JSON schema ------------------------------------------------------------------------------

NODE = {
    "type": "object",
    "properties": {
        "value": {"type": "integer"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
    },
    "required": ["value"],
    "additionalProperties": False,
}
SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "format": "email"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "const and enum": {
        "type": "object",
        "properties": {
            "kind": {"const": "circle"},
            "color": {"enum": ["red", "green", 1, None, {"a": [1, "x"]}]},
        },
        "required": ["kind", "color"],
    },
    "nested arrays": {
        "type": "array",
        "items": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3},
        "minItems": 2,
        "maxItems": 4,
    },
    "recursive tree": {"$defs": {"node": NODE}, "$ref": "#/$defs/node"},
    "formats": {
        "type": "object",
        "properties": {
            "day": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "time"},
            "when": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
        },
        "required": ["day", "at", "when", "id"],
    },
    "integer bounds": {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": -37, "maximum": 1234},
            "b": {"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 9},
            "c": {"type": "integer", "minimum": 100},
            "d": {"type": "integer", "maximum": -5},
        },
        "required": ["a", "b", "c", "d"],
    },
    "number bounds": {
        "type": "array",
        "prefixItems": [
            {"type": "number", "minimum": -2, "maximum": 3},
            {"type": "number", "minimum": 0},
            {"type": "number", "maximum": -1},
            {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            {"type": "number", "minimum": -0.75, "exclusiveMaximum": 2.5},
        ],
        "items": False,
    },
    "anyOf": {
        "anyOf": [
            {"type": "string", "maxLength": 3},
            {"type": "integer", "minimum": 0},
            {"type": "null"},
        ]
    },
    "oneOf with a discriminator": {
        "oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                "required": ["kind", "x"],
            },
            {
                "type": "object",
                "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
                "required": ["kind"],
            },
        ]
    },
    "allOf": {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "boolean"}}, "required": ["b"]},
        ]
    },
    "optional properties only": {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in "pqrs"},
        "additionalProperties": False,
    },
    "type list": {"type": ["string", "null", "boolean"]},
    "additionalProperties schema": {"type": "object", "additionalProperties": {"type": "integer"}},
    "string lengths": {
        "type": "array",
        "items": {"type": "string", "minLength": 2, "maxLength": 4},
    },
    "patterns": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": r"^[A-Z]{2}-\d{3,4}$"},
            "text": {"type": "string", "pattern": r"^(\w+|[^a-z]{2})( \S+){0,3}\.?$"},
            "any": {"type": "string", "pattern": r"^.{0,8}$"},
        },
        "required": ["code", "text", "any"],
    },
    "any value": {},
    "empty object": {"type": "object", "additionalProperties": False},
}


@pytest.mark.parametrize("name", SCHEMAS)
def test_schema_output_always_validates(name, tokenizer):
    schema = SCHEMAS[name]
    grammar = Grammar.from_json_schema(schema)
    for seed in range(12):
        validate(schema, generate(grammar, tokenizer, seed))


def random_schema(rng: np.random.Generator, depth: int = 0) -> dict:
    """A random schema from the supported keywords, nesting up to three levels."""
    kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "format", "pattern"]
    if depth < 3:
        kinds += ["array", "object", "object", "anyOf"]
    kind = kinds[rng.integers(len(kinds))]
    if kind == "string":
        low = int(rng.integers(0, 4))
        return {"type": "string", "minLength": low, "maxLength": low + int(rng.integers(0, 6))}
    if kind == "integer":
        low = int(rng.integers(-500, 500))
        bounds = {"minimum": low, "maximum": low + int(rng.integers(0, 3000))}
        return {"type": "integer", **{k: v for k, v in bounds.items() if rng.random() < 0.7}}
    if kind == "number":
        low = float(rng.integers(-200, 200)) / 4
        high = low + 1 + float(rng.integers(0, 400)) / 4
        low_key = "exclusiveMinimum" if rng.random() < 0.5 else "minimum"
        high_key = "exclusiveMaximum" if rng.random() < 0.5 else "maximum"
        return {"type": "number", low_key: low, high_key: high}
    if kind in ("boolean", "null"):
        return {"type": kind}
    if kind == "enum":
        return {"enum": ["a", 1, 2.5, None, True, [1], {"k": "v"}][: int(rng.integers(1, 8))]}
    if kind == "const":
        return {"const": {"nested": [1, "two", None]}}
    if kind == "format":
        return {
            "type": "string",
            "format": str(rng.choice(["date", "time", "date-time", "uuid", "email"])),
        }
    if kind == "pattern":
        patterns = [
            r"^[a-f0-9]{4,8}$",
            r"^(yes|no|\d+)$",
            r"^[a-z]+@[a-z]+\.(com|org)$",
            r"^\S*( .)?$",
        ]
        return {"type": "string", "pattern": patterns[rng.integers(len(patterns))]}
    if kind == "array":
        low = int(rng.integers(0, 3))
        return {
            "type": "array",
            "items": random_schema(rng, depth + 1),
            "minItems": low,
            "maxItems": low + int(rng.integers(0, 3)),
        }
    if kind == "anyOf":
        return {"anyOf": [random_schema(rng, depth + 1) for _ in range(2)]}
    names = [f"p{i}" for i in range(int(rng.integers(0, 5)))]
    return {
        "type": "object",
        "properties": {name: random_schema(rng, depth + 1) for name in names},
        "required": [name for name in names if rng.random() < 0.5],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("schema_seed", range(40))
def test_random_schema_output_always_validates(schema_seed, tokenizer):
    schema = random_schema(np.random.default_rng(schema_seed))
    grammar = Grammar.from_json_schema(schema)
    for seed in range(3):
        validate(schema, generate(grammar, tokenizer, seed))


def test_any_json_and_json_object_output_parses(tokenizer):
    for seed in range(10):
        json.loads(generate(Grammar.any_json(), tokenizer, seed).decode("utf-8"))
        value = json.loads(generate(Grammar.json_object(), tokenizer, seed).decode("utf-8"))
        assert isinstance(value, dict)


# --- GBNF -------------------------------------------------------------------------------------

GBNF = {
    "arithmetic": (
        'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor (("*" | "/") factor)*\n'
        'factor ::= [0-9]{1,3} | "(" expr ")"'
    ),
    "csv": 'root ::= row ("\\n" row){0,3}\nrow ::= cell ("," cell)*\ncell ::= [a-z0-9 ]{0,8}',
    "unicode": 'root ::= "«" [^»\\x00-\\x1F]{1,12} "»" ("→" | "\\u00e9t\\u00e9")?',
    "any-char": 'root ::= "<" .{2,5} ">"',
    "answer": 'root ::= ("yes" | "no" | "maybe") (", because " [a-z ]+ ".")?',
}


@pytest.mark.parametrize("name", GBNF)
def test_gbnf_output_is_in_the_language(name, tokenizer):
    grammar = Grammar.from_gbnf(GBNF[name])
    for seed in range(8):
        text = generate(grammar, tokenizer, seed)
        assert grammar.accepts(text), text


# --- the real vocabulary ----------------------------------------------------------------------


def test_gemma_schema_output_validates(gemma_path):
    tokenizer = llamay.load_tokenizer(gemma_path)
    for name in ("person", "nested arrays", "recursive tree"):
        schema = SCHEMAS[name]
        grammar = Grammar.from_json_schema(schema)
        for seed in range(3):
            validate(schema, generate(grammar, tokenizer, seed, budget=25))
    grammar = Grammar.from_gbnf(GBNF["unicode"])
    for seed in range(3):
        assert grammar.accepts(generate(grammar, tokenizer, seed))
