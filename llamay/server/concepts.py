"""The kinds of the fields that carry what a chat request asks for: tools, a tool choice, an
output format, in a family's spelling. Each reads with the chat layer's one reader
(llamay/chat/spellings.py), which names the field it refuses, and says its JSON schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llamay.chat import spellings
from llamay.chat.spellings import (
    ChoiceSpelling,
    FormatSpelling,
    OutputFormat,
    ToolChoice,
    ToolSpelling,
)
from llamay.server.fields import Kind

_NAME = "{name}"  # the field's name, which fields.Field fills in


@dataclass(frozen=True)
class Tools(Kind):
    """A list of function tools, as OpenAI function tools (None when empty)."""

    spelling: ToolSpelling
    as_sent = False

    def read(self, value: Any, values: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
        return spellings.read_tools(value, self.spelling, _NAME)

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": dict(self.spelling.item)}


@dataclass(frozen=True)
class Choice(Kind):
    """The tool choice, read after the field `tools` (spellings.read_choice)."""

    spelling: ChoiceSpelling
    tools: str = "tools"
    as_sent = False

    def absent(self, default: Any, values: Mapping[str, Any]) -> ToolChoice:
        return spellings.read_choice(None, values.get(self.tools), self.spelling, _NAME)

    def read(self, value: Any, values: Mapping[str, Any]) -> ToolChoice:
        return spellings.read_choice(value, values.get(self.tools), self.spelling, _NAME)

    def schema(self) -> dict[str, Any]:
        forms: list[dict[str, Any]] = []
        if self.spelling.words:
            forms.append({"enum": list(self.spelling.words)})
        forms.append({"type": "object"})
        return {"oneOf": forms} if len(forms) > 1 else forms[0]


@dataclass(frozen=True)
class Format(Kind):
    """An output format (None: free text)."""

    spelling: FormatSpelling
    as_sent = False

    def read(self, value: Any, values: Mapping[str, Any]) -> OutputFormat | None:
        return spellings.read_format(value, self.spelling, _NAME)

    def schema(self) -> dict[str, Any]:
        spelling = self.spelling
        typed: dict[str, Any] = {"type": "object"}
        if not spelling.bare_schema:
            typed = {"type": "object", "properties": {"type": {"enum": list(spelling.kinds)}}}
        if spelling.inside is not None:
            return {"type": "object", "properties": {spelling.inside: typed}}
        if spelling.words:
            return {"oneOf": [{"enum": ["", *spelling.words]}, typed]}
        return typed


class Gbnf(Kind):
    """A grammar in GBNF that the answer must be a sentence of (none for "")."""

    as_sent = False

    def read(self, value: Any, values: Mapping[str, Any]) -> OutputFormat | None:
        return spellings.read_gbnf(value, _NAME)

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}
