"""Tool calls as values: the offered tools, one parsed call, and reading JSON inside an answer.

A model writes a call's name and arguments in many shapes (syntaxes.py); whatever the shape, a
call counts only when it names an offered tool and its arguments are a JSON object (or the
parameters of a tool written one by one, converted by the tool's schema).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from llamay.errors import InvalidRequest


@dataclass
class ToolCall:
    """One call an answer makes: `arguments` as the JSON object the model wrote; `id` the one
    the model wrote with it (Mistral, Command R), else a fresh random one."""

    name: str
    arguments: dict[str, Any]
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = secrets.token_hex(12)

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


def function_of(tool: Any) -> dict[str, Any]:
    """The function definition of an OpenAI tool ({"type": "function", "function": {...}})."""
    function = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise InvalidRequest(
            "each tool must be {'type': 'function', 'function': {'name': ...}}", "tools"
        )
    return dict(function)


@dataclass(frozen=True)
class Offered:
    """The tools a request offers, by name."""

    functions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, tools: Sequence[Mapping[str, Any]]) -> Offered:
        return cls({f["name"]: f for f in map(function_of, tools)})

    @property
    def names(self) -> set[str]:
        return set(self.functions)

    def parameters(self, name: str) -> dict[str, Any]:
        """The JSON schema of a tool's arguments."""
        return self.functions[name].get("parameters") or {"type": "object", "properties": {}}

    def names_pattern(self) -> str:
        """A regular expression of exactly the offered names (longest first, so that one
        name that begins another does not cut it short)."""
        names = sorted(self.functions, key=len, reverse=True)
        return "(?:" + "|".join(regex.escape(n, special_only=True) for n in names) + ")"

    def call(self, name: Any, arguments: Any, id: Any = None) -> ToolCall | None:
        """A call of an offered tool, or None: arguments may come as JSON text (some models
        write them so); an id only where it is a string."""
        if name not in self.functions:
            return None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                return None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return None
        return ToolCall(name, arguments, id if isinstance(id, str) else "")

    def call_object(
        self, value: Any, name_key: str = "name", argument_keys: Sequence[str] = ("arguments",)
    ) -> ToolCall | None:
        """A call written as one JSON object: {"name": ..., "arguments": {...}} and the like
        (the keys vary by family; an "id" is kept)."""
        if not isinstance(value, dict):
            return None
        arguments = next((value[k] for k in argument_keys if k in value), {})
        ident = value.get("id", value.get("tool_call_id"))
        return self.call(value.get(name_key), arguments, ident)


_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


def skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def json_at(text: str, at: int) -> tuple[Any, int] | None:
    """The JSON value that starts at `at` (after whitespace) and where it ends; None if there
    is none."""
    at = skip_space(text, at)
    try:
        return _DECODER.raw_decode(text, at)
    except (ValueError, RecursionError):
        return None


def json_values(text: str, at: int, separators: str = "") -> tuple[list[Any], int]:
    """The JSON values from `at` on, separated by whitespace (and any of `separators`), and
    where the last one ends."""
    values: list[Any] = []
    end = at
    while True:
        found = json_at(text, end if not values else _skip(text, end, separators))
        if found is None:
            return values, end
        values.append(found[0])
        end = found[1]


def _skip(text: str, at: int, separators: str) -> int:
    at = skip_space(text, at)
    if separators and at < len(text) and text[at] in separators:
        at = skip_space(text, at + 1)
    return at
