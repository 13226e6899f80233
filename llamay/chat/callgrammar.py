"""The GBNF of the calls a request allows, as the call syntaxes (syntaxes.py) build it.

Each syntax writes the rule of one block of its calls in terms of `CallRules`: a function's
arguments (a rule per function, from its JSON schema), call objects that name a function
(`{"name": ..., "arguments": ...}` with the family's keys), and Qwen3-Coder's parameters written
one by one. The JSON schemas are converted together at the end, so that every rule under them
is named apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from llamay.grammar import json_schema
from llamay.grammar.json_schema import literal

__all__ = ["CallRules", "alternatives", "literal"]

# Whitespace between the parts of a block: a few spaces, and up to two line breaks, each with an
# indent (so that a model cannot pad forever).
WHITESPACE = '[ \\t]{0,4} ("\\n" [ \\t]{0,20}){0,2}'
# Between one block of calls and the next: a separator of bare JSON calls, and a space or a line
# break, as templates write calls one after another.
SEPARATOR = "[;,]? [ \\n]?"
# A parameter's text (Qwen3-Coder writes string parameters raw): anything but `</`, so that
# `</parameter>` ends it; with a maxLength, that many characters but `<`, so that they count.
PARAMETER_TEXT = '([^<] | "<" [^/])*'
BOUNDED_TEXT = "[^<]"


def alternatives(expressions: Sequence[str]) -> str:
    """A GBNF group of alternatives (the expression itself when there is one)."""
    if len(expressions) == 1:
        return expressions[0]
    return "(" + " | ".join(expressions) + ")"


class CallRules:
    """The rules the calls of `functions` (OpenAI function definitions) are built from.
    `arguments_key`: the call object's key for the arguments in the family's own calls;
    `parallel`: more than one call per block where a block holds a list."""

    def __init__(
        self, functions: Sequence[Mapping[str, Any]], arguments_key: str, parallel: bool
    ) -> None:
        self._functions = list(functions)
        self.arguments_key = arguments_key
        self.parallel = parallel
        self._schemas: dict[str, Any] = {}
        self._rules: dict[str, str] = {}
        self._objects: dict[str, str] = {}

    def functions(self) -> list[tuple[int, str, str]]:
        """(index, name, the rule of its arguments) for each function."""
        found = []
        for i, function in enumerate(self._functions):
            rule = f"llamay-args-{i}"
            self._schemas.setdefault(rule, _parameters(function))
            found.append((i, function["name"], rule))
        return found

    def json_call(
        self,
        name_key: str = "name",
        arguments_key: str | None = None,
        *,
        first: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        """The rule of one call object: {name_key: a function's name, arguments_key: its
        arguments}, with the properties of `first` before them (required) and of `extra` after
        (optional)."""
        key = arguments_key or self.arguments_key
        signature = json.dumps([name_key, key, first, extra], sort_keys=True)
        if signature in self._objects:
            return self._objects[signature]
        schemas = []
        for function in self._functions:
            required = [*(first or {}), name_key, key]
            properties = {
                **(first or {}),
                name_key: {"const": function["name"]},
                key: _parameters(function),
                **(extra or {}),
            }
            schemas.append(
                {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": False,
                }
            )
        rule = f"llamay-object-{len(self._objects)}"
        self._schemas[rule] = {"anyOf": schemas} if len(schemas) > 1 else schemas[0]
        self._objects[signature] = rule
        return rule

    def xml_parameters(self, index: int) -> str:
        """The rule of function `index`'s arguments as Qwen3-Coder writes them:
        `<parameter=KEY>\\nVALUE\\n</parameter>` for each property, in the schema's order, the
        required ones present; a string's value raw, others as JSON of their schema."""
        rule = f"llamay-parameters-{index}"
        if rule in self._rules:
            return rule
        schema = _parameters(self._functions[index])
        properties = schema.get("properties")
        required = set(schema.get("required") or ())
        self._rules["llamay-text"] = PARAMETER_TEXT
        if not isinstance(properties, Mapping) or not properties:
            any_key = '"<parameter=" [a-zA-Z0-9_.-]+ ">" "\\n"? llamay-text "</parameter>"'
            self._rules[rule] = f"({any_key} llamay-ws)*"
            return rule
        parts = []
        for j, (key, value_schema) in enumerate(properties.items()):
            value = _raw_value(value_schema)
            if value is None:
                value = f"llamay-value-{index}-{j}"
                self._schemas[value] = value_schema
            one = (
                f'"<parameter=" {literal(str(key))} ">" "\\n"? {value} "\\n"? "</parameter>" '
                "llamay-ws"
            )
            parts.append(one if key in required else f"({one})?")
        self._rules[rule] = " ".join(parts)
        return rule

    def gbnf(self, root: str) -> str:
        """The grammar: the rules built so far and `llamay-calls ::= root`."""
        converted = json_schema.to_gbnf_rules(self._schemas) if self._schemas else ""
        framing = {
            **self._rules,
            "llamay-ws": WHITESPACE,
            "llamay-sep": SEPARATOR,
            "llamay-calls": root,
        }
        return converted + "".join(f"{name} ::= {body}\n" for name, body in framing.items())


def _parameters(function: Mapping[str, Any]) -> Any:
    return function.get("parameters") or {"type": "object", "properties": {}}


def _raw_value(schema: Any) -> str | None:
    """The GBNF of a parameter written as raw text (a string: its enum's or const's values, or
    any text), or None for one written as JSON."""
    if not isinstance(schema, Mapping):
        return None
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return alternatives([literal(v) for v in values])
    if schema.get("type") != "string":
        return None
    longest = schema.get("maxLength")
    if isinstance(longest, int) and not isinstance(longest, bool) and 0 <= longest < 1 << 16:
        return f"{BOUNDED_TEXT}{{0,{longest}}}"
    return "llamay-text"
