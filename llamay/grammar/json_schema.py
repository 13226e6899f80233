"""JSON schema to GBNF. Whatever the grammar lets through validates against the schema: a keyword
that cannot be enforced exactly is a GrammarError, never dropped.

Where the grammar is narrower than the schema it says so here: objects carry no properties the
schema does not name, optional properties come after required ones in schema order, numbers have
at most 16 integer and 16 fraction digits, and whitespace between tokens is at most one space or
one newline with an indent of up to 20 characters, so a model cannot pad forever.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from typing import Any

from llamay.errors import GrammarError
from llamay.grammar import json_rules, numbers, pattern

# Annotations that do not constrain the instance.
_DESCRIPTIVE = frozenset(
    {
        "title",
        "description",
        "$schema",
        "$id",
        "default",
        "examples",
        "$comment",
        "readOnly",
        "writeOnly",
        "deprecated",
    }
)
_BY_TYPE = {
    "string": frozenset({"minLength", "maxLength", "format", "pattern"}),
    "integer": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "array": frozenset({"items", "prefixItems", "minItems", "maxItems", "uniqueItems"}),
    "boolean": frozenset(),
    "null": frozenset(),
}
_GENERAL = frozenset(
    {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions"}
)
_SUPPORTED = _GENERAL.union(*_BY_TYPE.values())
_TYPES = tuple(_BY_TYPE)

_FORMATS = ("date", "time", "date-time", "uuid", "email")

# A schema is a client's: its conversion must stay small whatever its shape. Nesting is bounded
# (the converter recurses once per level), and so is the work: each sub-schema converted and
# each const/enum value costs one unit of the budget, which also stops anyOf/allOf
# combinations from multiplying. oneOf compares its alternatives pairwise, so they are few.
MAX_DEPTH = 32
MAX_WORK = 20_000
MAX_ONE_OF = 128


def to_gbnf(schema: dict[str, Any] | bool) -> str:
    """GBNF whose root is the JSON texts that validate against `schema`."""
    return to_gbnf_rules({"root": schema})


def to_gbnf_rules(schemas: dict[str, dict[str, Any] | bool]) -> str:
    """GBNF with one rule per name of `schemas`: the JSON texts valid under that schema (each
    schema its own document for `$ref`), the rules under them named apart. For a grammar that
    joins several schemas (a tool call's arguments, by the tool's name)."""
    converter = _Converter(True)
    for name in schemas:
        converter.rules[name] = ""  # reserved: no rule under them takes these names
    for name, schema in schemas.items():
        converter.root, converter.refs = schema, {}
        converter.rules[name] = converter.expression(schema, name, "#")
    return "".join(f"{name} ::= {body}\n" for name, body in converter.rules.items())


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _is_schema(value: Any) -> bool:
    return isinstance(value, (dict, bool))


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# What each keyword's value must be, checked before it is used (a schema is a client's: a
# number where a list goes must be a GrammarError, not a TypeError).
_KEYWORD_TYPES: dict[str, tuple[Any, str]] = {
    "type": (lambda v: isinstance(v, str) or _is_names(v), "a type name or a list of them"),
    "enum": (lambda v: isinstance(v, list), "a list"),
    "anyOf": (lambda v: isinstance(v, list), "a list of schemas"),
    "oneOf": (lambda v: isinstance(v, list), "a list of schemas"),
    "allOf": (lambda v: isinstance(v, list), "a list of schemas"),
    "$ref": (lambda v: isinstance(v, str), "a string"),
    "$defs": (lambda v: isinstance(v, dict), "an object"),
    "definitions": (lambda v: isinstance(v, dict), "an object"),
    "properties": (
        lambda v: isinstance(v, dict) and all(_is_schema(s) for s in v.values()),
        "an object of schemas",
    ),
    "required": (_is_names, "a list of property names"),
    "additionalProperties": (_is_schema, "a schema"),
    "items": (lambda v: _is_schema(v) or isinstance(v, list), "a schema"),
    "prefixItems": (lambda v: isinstance(v, list), "a list of schemas"),
    "minItems": (_is_count, "a non-negative integer"),
    "maxItems": (_is_count, "a non-negative integer"),
    "minLength": (_is_count, "a non-negative integer"),
    "maxLength": (_is_count, "a non-negative integer"),
    "uniqueItems": (lambda v: isinstance(v, bool), "true or false"),
    "format": (lambda v: isinstance(v, str), "a string"),
    "pattern": (lambda v: isinstance(v, str), "a string"),
}


def _check_keywords(schema: dict[str, Any], where: str) -> None:
    """GrammarError for a keyword llamay does not know, or a value of the wrong kind."""
    for key, value in schema.items():
        if key not in _SUPPORTED and key not in _DESCRIPTIVE:
            raise GrammarError(f"unsupported JSON schema keyword {str(key)[:40]!r} at {where}")
        expected = _KEYWORD_TYPES.get(key)
        if expected is not None and not expected[0](value):
            raise GrammarError(f"{key} at {where} must be {expected[1]}")


def _is_key(value: Any) -> bool:
    if not isinstance(value, str):
        raise GrammarError(f"required names {value!r}, which is not a property name")
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Converter:
    def __init__(self, root: dict[str, Any] | bool) -> None:
        self.root = root
        self.rules: dict[str, str] = {}
        self.refs: dict[str, str] = {}
        self.next_suffix: dict[str, int] = {}  # per base name: the suffix to try next
        self.depth = 0
        self.work = 0

    def spend(self, n: int, where: str) -> None:
        self.work += n
        if self.work > MAX_WORK:
            raise GrammarError(
                f"the schema is too large to enforce (at {where}): more than {MAX_WORK} "
                "sub-schemas and enum values"
            )

    # --- rules -------------------------------------------------------------------------------

    def rule(self, name: str, body: str) -> str:
        """Adds `name ::= body` under a fresh name; returns the name."""
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-") or "rule"
        # Suffixes go on from the last one taken, so that many names of one base (properties
        # "a!", "a?"... are all "a") cost one try each, not one per earlier name.
        n = self.next_suffix.get(base, 1)
        name = base if n == 1 else f"{base}-{n}"
        while name in self.rules or name in json_rules.RULES:
            n += 1
            name = f"{base}-{n}"
        self.next_suffix[base] = n + 1
        self.rules[name] = body
        return name

    def primitive(self, name: str) -> str:
        if name not in self.rules:
            body, uses = json_rules.RULES[name]
            self.rules[name] = body
            for used in uses:
                self.primitive(used)
        return name

    # --- schemas -----------------------------------------------------------------------------

    def expression(self, schema: Any, name: str, where: str) -> str:
        """A GBNF expression for the JSON texts (followed by optional space) valid under
        `schema`, found at JSON pointer `where`."""
        self.spend(1, where)
        if self.depth == MAX_DEPTH:
            raise GrammarError(f"the schema nests more than {MAX_DEPTH} deep (at {where})")
        self.depth += 1
        try:
            return self.converted(schema, name, where)
        finally:
            self.depth -= 1

    def converted(self, schema: Any, name: str, where: str) -> str:
        if schema is True or schema == {}:
            return self.primitive("value")
        if schema is False:
            raise GrammarError(f"the schema at {where} is false: no value is valid there")
        if not isinstance(schema, dict):
            raise GrammarError(f"the schema at {where} is not an object or a boolean")
        _check_keywords(schema, where)
        if "$ref" in schema and len(self.constraints(schema)) == 1:
            return self.ref(schema["$ref"], where)
        if "allOf" in schema or "$ref" in schema:
            return self.expression(self.merge(schema, where), name, where)
        if "anyOf" in schema or "oneOf" in schema:
            return self.choice(schema, name, where)
        if "const" in schema or "enum" in schema:
            return self.values(schema, where)
        return self.typed(schema, name, where)

    @staticmethod
    def constraints(schema: dict[str, Any]) -> dict[str, Any]:
        skip = _DESCRIPTIVE | {"$defs", "definitions"}
        return {k: v for k, v in schema.items() if k not in skip}

    def ref(self, ref: Any, where: str) -> str:
        if ref not in self.refs:
            target = self.resolve(ref, where)
            name = self.rule("ref-" + str(ref).rsplit("/", 1)[-1], "")
            self.refs[ref] = name  # before the body: a recursive schema refers to itself
            self.rules[name] = self.expression(target, name, ref)
        return self.refs[ref]

    def resolve(self, ref: Any, where: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise GrammarError(
                f"$ref {ref!r} at {where}: only references within the schema ('#/...') are supported"
            )
        node = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise GrammarError(f"$ref {ref!r} at {where} points to nothing in the schema")
        return node

    def merge(self, schema: dict[str, Any], where: str) -> dict[str, Any]:
        """One schema equivalent to `schema` with its allOf parts and $ref targets folded in."""
        parts = deque([self.constraints(schema)])
        merged: dict[str, Any] = {}
        # Gathered apart and put in at the end, so that many parts cost their size, not the
        # product of their count and the size so far.
        required: dict[str, None] = {}
        properties: dict[str, Any] = {}
        folded: set[str] = set()
        while parts:
            part = parts.popleft()
            self.spend(1, where)
            if part is True:
                continue
            if not isinstance(part, dict):
                raise GrammarError(f"allOf at {where} holds something other than a schema")
            _check_keywords(part, where)
            part = dict(self.constraints(part))
            more = part.pop("allOf", [])
            if not isinstance(more, list):
                raise GrammarError(f"allOf at {where} must be a list of schemas")
            parts.extend(more)
            if "$ref" in part:
                ref = part.pop("$ref")
                if not isinstance(ref, str) or ref in folded:
                    raise GrammarError(f"$ref {ref!r} at {where} refers back to itself")
                folded.add(ref)
                parts.append(self.resolve(ref, where))
            if "required" in part:
                if not isinstance(part["required"], list):
                    raise GrammarError(f"required at {where} must be a list")
                required.update(dict.fromkeys(key for key in part.pop("required") if _is_key(key)))
            if "properties" in part:
                if not isinstance(part["properties"], dict):
                    raise GrammarError(f"properties at {where} must be an object")
                for prop, sub in part.pop("properties").items():
                    old = properties.get(prop, sub)
                    properties[prop] = sub if old == sub else {"allOf": [old, sub]}
            for key, value in part.items():
                merged[key] = self.merge_keyword(key, merged.get(key), value, where)
        if required:
            merged["required"] = list(required)
        if properties:
            merged["properties"] = properties
        return merged

    @staticmethod
    def merge_keyword(key: str, old: Any, new: Any, where: str) -> Any:
        if old is None or old == new:
            return new
        if key == "type":
            a = {old} if isinstance(old, str) else set(old)
            b = {new} if isinstance(new, str) else set(new)
            both = (a & b) | (
                {"integer"} if a & {"integer", "number"} and b & {"integer", "number"} else set()
            )
            if not both:
                raise GrammarError(
                    f"allOf at {where} asks for types {sorted(a)} and {sorted(b)} at once"
                )
            return sorted(both)
        raise GrammarError(
            f"allOf at {where} gives '{key}' two different values: {old!r} and {new!r}"
        )

    def choice(self, schema: dict[str, Any], name: str, where: str) -> str:
        rest = {k: v for k, v in self.constraints(schema).items() if k not in ("anyOf", "oneOf")}
        alternatives = []
        for keyword in ("anyOf", "oneOf"):
            if keyword not in schema:
                continue
            subs = schema[keyword]
            if not isinstance(subs, list) or not subs:
                raise GrammarError(f"{keyword} at {where} must be a non-empty list of schemas")
            if keyword == "oneOf":
                if len(subs) > MAX_ONE_OF:
                    raise GrammarError(
                        f"oneOf at {where} has {len(subs)} alternatives; at most {MAX_ONE_OF} "
                        "can be checked to be disjoint (anyOf takes more)"
                    )
                self.check_disjoint(subs, where)
            if alternatives:
                raise GrammarError(f"anyOf and oneOf together at {where} are not supported")
            for i, sub in enumerate(subs):
                part = {"allOf": [rest, sub]} if rest else sub
                alternatives.append(
                    self.rule(
                        f"{name}-{i}",
                        self.expression(part, f"{name}-{i}", f"{where}/{keyword}/{i}"),
                    )
                )
        return " | ".join(alternatives)

    def values(self, schema: dict[str, Any], where: str) -> str:
        extra = set(self.constraints(schema)) - {"const", "enum", "type"}
        if extra:
            raise GrammarError(
                f"'{sorted(extra)[0]}' next to const/enum at {where} is not supported"
            )
        if "const" in schema:
            candidates = [schema["const"]]
        elif isinstance(schema["enum"], list):
            candidates = schema["enum"]
        else:
            raise GrammarError(f"enum at {where} must be a list")
        self.spend(len(candidates), where)
        types = self.types(schema)
        chosen = [v for v in candidates if self.type_matches(v, types)]
        if "const" in schema and "enum" in schema:
            chosen = [v for v in chosen if v in schema["enum"]]
        if not chosen:
            raise GrammarError(f"no value of const/enum at {where} matches the schema")
        try:
            texts = list(dict.fromkeys(_json_text(v) for v in chosen))
        except ValueError as exc:
            raise GrammarError(f"const/enum at {where}: {exc}") from None
        return "(" + " | ".join(literal(t) for t in texts) + ") " + self.primitive("space")

    @staticmethod
    def type_matches(value: Any, types: set[str]) -> bool:
        kind = _json_type(value)
        return kind in types or (kind == "integer" and "number" in types)

    @staticmethod
    def types(schema: dict[str, Any]) -> set[str]:
        """The types `schema` admits; without "type", those its keywords speak of (or all)."""
        declared = schema.get("type")
        if declared is None:
            implied = {t for t, keys in _BY_TYPE.items() if keys & schema.keys()}
            return implied or set(_TYPES)
        return {declared} if isinstance(declared, str) else set(declared)

    def typed(self, schema: dict[str, Any], name: str, where: str) -> str:
        types = self.types(schema)
        unknown = types - set(_TYPES)
        if unknown:
            raise GrammarError(f"unknown type {sorted(unknown)[0]!r} at {where}")
        if types == set(_TYPES) and not self.constraints(schema).keys() - {"type"}:
            return self.primitive("value")
        builders = {
            "string": self.string,
            "integer": self.integer,
            "number": self.number,
            "object": self.object,
            "array": self.array,
            "boolean": lambda *_: self.primitive("boolean"),
            "null": lambda *_: self.primitive("null"),
        }
        if "integer" in types and "number" in types:
            types = types - {"integer"}
        chosen = [t for t in _TYPES if t in types]
        if len(chosen) == 1:
            return builders[chosen[0]](schema, name, where)
        return " | ".join(
            self.rule(f"{name}-{t}", builders[t](schema, f"{name}-{t}", where)) for t in chosen
        )

    # --- the types ---------------------------------------------------------------------------

    def string(self, schema: dict[str, Any], name: str, where: str) -> str:
        fmt = schema.get("format")
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        for key, value in (("minLength", low), ("maxLength", high)):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise GrammarError(f"{key} at {where} must be a non-negative integer")
        if "pattern" in schema:
            if not isinstance(schema["pattern"], str):
                raise GrammarError(f"pattern at {where} must be a string")
            if {"format", "minLength", "maxLength"} & schema.keys():
                raise GrammarError(
                    f"pattern with format/minLength/maxLength at {where} is not supported"
                )
            content = pattern.to_gbnf(schema["pattern"], f"{where}/pattern")
            return f'"\\"" {content} "\\"" {self.primitive("space")}'
        if fmt is not None:
            if fmt not in _FORMATS:
                raise GrammarError(
                    f"unsupported string format {fmt!r} at {where} (supported: {', '.join(_FORMATS)})"
                )
            if "minLength" in schema or "maxLength" in schema:
                raise GrammarError(f"format with minLength/maxLength at {where} is not supported")
            return f'"\\"" {self.primitive(fmt)} "\\"" {self.primitive("space")}'
        if low == 0 and high is None:
            return self.primitive("string")
        if high is not None and high < low:
            raise GrammarError(f"maxLength is below minLength at {where}: no string is valid")
        count = f"{{{low},{'' if high is None else high}}}"
        return f'"\\"" {self.primitive("char")}{count} "\\"" {self.primitive("space")}'

    def bounds(
        self, schema: dict[str, Any], where: str
    ) -> tuple[float | None, bool, float | None, bool]:
        """(low, low is exclusive, high, high is exclusive); None where unbounded."""
        low = high = None
        low_excl = high_excl = False
        for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if key not in schema:
                continue
            value = schema[key]
            if not _is_number(value) or not math.isfinite(value):
                raise GrammarError(f"{key} at {where} must be a finite number")
            excl = key.startswith("exclusive")
            if key.endswith("inimum"):
                if low is None or value > low or (value == low and excl):
                    low, low_excl = value, excl
            elif high is None or value < high or (value == high and excl):
                high, high_excl = value, excl
        return low, low_excl, high, high_excl

    def integer(self, schema: dict[str, Any], name: str, where: str) -> str:
        low, low_excl, high, high_excl = self.bounds(schema, where)
        if low is None and high is None:
            return self.primitive("integer")
        alternatives = numbers.integers(*numbers.whole_bounds(low, low_excl, high, high_excl))
        if not alternatives:
            raise GrammarError(f"no integer of at most 16 digits lies within the bounds at {where}")
        return f"({' | '.join(alternatives)}) {self.primitive('space')}"

    def number(self, schema: dict[str, Any], name: str, where: str) -> str:
        low, low_excl, high, high_excl = self.bounds(schema, where)
        if low is None and high is None:
            return self.primitive("number")
        alternatives = numbers.decimals(low, low_excl, high, high_excl)
        if not alternatives:
            raise GrammarError(
                f"the bounds at {where} hold no integer and no whole-number interval: "
                "the grammar cannot write a number inside them"
            )
        return f"({' | '.join(alternatives)}) {self.primitive('space')}"

    def object(self, schema: dict[str, Any], name: str, where: str) -> str:
        space = self.primitive("space")
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", True)
        if not isinstance(properties, dict) or not isinstance(required, list):
            raise GrammarError(f"properties at {where} must be an object and required a list")
        for key in required:
            if key not in properties:
                if extra is False:
                    raise GrammarError(
                        f"required property {key!r} at {where} is not allowed by additionalProperties"
                    )
                properties = {**properties, key: extra}
        if not properties:
            if extra is False:
                return f'"{{" {space} "}}" {space}'
            value = self.rule(
                f"{name}-value",
                self.expression(extra, f"{name}-value", f"{where}/additionalProperties"),
            )
            member = f'{self.primitive("string")} ":" {space} {value}'
            return f'"{{" {space} ({member} ("," {space} {member})*)? "}}" {space}'
        members = {}
        for key, sub in properties.items():
            value = self.rule(
                f"{name}-{key}", self.expression(sub, f"{name}-{key}", f"{where}/properties/{key}")
            )
            members[key] = self.rule(
                f"{name}-{key}-kv", f'{literal(_json_text(key))} {space} ":" {space} {value}'
            )
        mandatory = [members[k] for k in properties if k in required]
        optional = [members[k] for k in properties if k not in required]
        if mandatory:
            body = f' "," {space} '.join(mandatory) + "".join(
                f' ("," {space} {m})?' for m in optional
            )
        else:
            # Any subset in order: the first one present, then each later one or not.
            rest = ""
            starts = []
            for i in reversed(range(len(optional))):
                starts.append(f"{optional[i]} {rest}".strip())
                if i:
                    tail = f'("," {space} {optional[i]})? {rest}'.strip()
                    rest = self.rule(f"{name}-rest-{i}", tail)
            body = f"({' | '.join(reversed(starts))})?"
        return f'"{{" {space} {body} "}}" {space}'

    def array(self, schema: dict[str, Any], name: str, where: str) -> str:
        space = self.primitive("space")
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        for key, value in (("minItems", low), ("maxItems", high)):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise GrammarError(f"{key} at {where} must be a non-negative integer")
        if schema.get("uniqueItems", False) is not False:
            raise GrammarError(f"uniqueItems at {where} cannot be enforced by a grammar")
        items = schema.get("items", True)
        prefix = schema.get("prefixItems")
        if isinstance(items, list):
            prefix, items = items, True
        if high is not None and high < low:
            raise GrammarError(f"maxItems is below minItems at {where}: no array is valid")
        if prefix is not None:
            if not isinstance(prefix, list) or not prefix:
                raise GrammarError(f"prefixItems at {where} must be a non-empty list")
            if low > len(prefix) or (high is not None and high < len(prefix)):
                raise GrammarError(
                    f"prefixItems with minItems/maxItems other than their length at {where} "
                    "is not supported"
                )
            parts = [
                self.rule(
                    f"{name}-{i}", self.expression(sub, f"{name}-{i}", f"{where}/prefixItems/{i}")
                )
                for i, sub in enumerate(prefix)
            ]
            return f'"[" {space} ' + f' "," {space} '.join(parts) + f' "]" {space}'
        if high == 0:
            return f'"[" {space} "]" {space}'
        item = self.rule(f"{name}-item", self.expression(items, f"{name}-item", f"{where}/items"))
        more = f'("," {space} {item})'
        if low == 0:
            count = "*" if high is None else f"{{0,{high - 1}}}"
            return f'"[" {space} ({item} {more}{count})? "]" {space}'
        count = f"{{{low - 1},{'' if high is None else high - 1}}}"
        return f'"[" {space} {item} {more}{count} "]" {space}'

    # --- oneOf -------------------------------------------------------------------------------

    def check_disjoint(self, subs: list[Any], where: str) -> None:
        """oneOf needs exactly one match: refuse alternatives that a value could match twice."""
        shapes = [self.shape(sub, where) for sub in subs]
        for i in range(len(shapes)):
            for j in range(i + 1, len(shapes)):
                if self.may_overlap(shapes[i], shapes[j]):
                    raise GrammarError(
                        f"oneOf at {where}: alternatives {i} and {j} may both match one value; "
                        "use anyOf, or make them disjoint (different types or const values)"
                    )

    def shape(self, schema: Any, where: str) -> dict[str, Any]:
        """What a oneOf alternative can be: its value set (const/enum), its types, and for
        objects the const/enum values of its required properties."""
        if isinstance(schema, dict):
            _check_keywords(schema, where)
        if isinstance(schema, dict) and ("$ref" in schema or "allOf" in schema):
            schema = self.merge(schema, where)
        if not isinstance(schema, dict) or "anyOf" in schema or "oneOf" in schema:
            return {"types": set(_TYPES), "values": None, "tags": {}}
        values = None
        if "const" in schema:
            values = {_json_text(schema["const"])}
        elif "enum" in schema:
            values = {_json_text(v) for v in schema["enum"]}
        types = {"number" if t == "integer" else t for t in self.types(schema)}
        if values is not None:
            types = {
                "number" if (t := _json_type(json.loads(v))) == "integer" else t for v in values
            }
        tags = {}
        for key in schema.get("required", []):
            sub = schema.get("properties", {}).get(key)
            if isinstance(sub, dict) and ("const" in sub or "enum" in sub):
                tags[key] = self.shape(sub, where)["values"]
        return {"types": types, "values": values, "tags": tags}

    @staticmethod
    def may_overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
        if not a["types"] & b["types"]:
            return False
        if a["values"] is not None and b["values"] is not None:
            return bool(a["values"] & b["values"])
        if a["types"] == b["types"] == {"object"}:
            return not any(
                not a["tags"][k] & b["tags"][k] for k in a["tags"].keys() & b["tags"].keys()
            )
        return True
