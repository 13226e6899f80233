"""What every family asks for in its own spelling: tools, a tool choice, an output format.

One reader each, a field kind of fields.py; a family's spelling is data (`ToolSpelling`,
`ChoiceSpelling`, `FormatSpelling`), so that OpenAI's `{"type": "function", "function":
{"name"}}`, Anthropic's `{"type": "tool", "name"}` and the Responses API's `{"type":
"function", "name"}` are read by the same code into the same thing: OpenAI function tools, a
`ToolChoice`, an `OutputFormat` whose grammar the pipeline holds the answer to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llamay.grammar import Grammar
from llamay.server.fields import Invalid, Kind, either

# --- tools ---------------------------------------------------------------------------------------

_OBJECT = {"type": "object", "properties": {}}


def _openai_tool(tool: Any) -> Mapping[str, Any]:
    """OpenAI's (and Ollama's) `{"type": "function", "function": {"name", ...}}`, kept as
    given: the chat template renders what the client sent."""
    function = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise Invalid("each tool must be {'type': 'function', 'function': {'name': ...}}")
    return tool


def _anthropic_tool(tool: Any) -> Mapping[str, Any]:
    """Anthropic's `{"name", "description", "input_schema"}`."""
    if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
        raise Invalid("{name}: each tool needs a name and an input_schema")
    function = {
        "name": tool["name"],
        "description": tool.get("description", ""),
        "parameters": tool.get("input_schema") or _OBJECT,
    }
    return {"type": "function", "function": function}


def _flat_tool(tool: Any) -> Mapping[str, Any]:
    """The Responses API's `{"type": "function", "name", "description", "parameters"}`."""
    if not isinstance(tool, Mapping) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, Mapping) else type(tool).__name__
        raise Invalid(f"tools of type {kind!r} are not supported here; send function tools")
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise Invalid("each function tool needs a name")
    parameters = tool.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise Invalid("a function tool's parameters must be a JSON schema")
    function = {"name": tool["name"], "parameters": parameters}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolSpelling:
    """How a family writes one function tool: `read(tool)` is it as an OpenAI function tool
    (Invalid when it is none); `item`: its JSON schema."""

    read: Callable[[Any], Mapping[str, Any]]
    item: Mapping[str, Any]


OPENAI_TOOLS = ToolSpelling(
    _openai_tool,
    {
        "type": "object",
        "required": ["function"],
        "properties": {"type": {"const": "function"}, "function": {"type": "object"}},
    },
)
ANTHROPIC_TOOLS = ToolSpelling(
    _anthropic_tool,
    {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
)
FLAT_TOOLS = ToolSpelling(
    _flat_tool,
    {
        "type": "object",
        "required": ["type", "name"],
        "properties": {"type": {"const": "function"}, "name": {"type": "string"}},
    },
)


@dataclass(frozen=True)
class Tools(Kind):
    """A list of function tools, as OpenAI function tools (None when empty)."""

    as_sent = False

    spelling: ToolSpelling

    def read(self, value: Any, values: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
        if not isinstance(value, list):
            raise Invalid("{name} must be a list of function tools")
        return [self.spelling.read(tool) for tool in value] or None

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": dict(self.spelling.item)}


# --- the tool choice -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolChoice:
    """`mode`: "auto", "none", "required" (a call of any tool) or "named" (a call of `name`);
    `parallel`: False where the choice itself turns parallel calls off (None: it says
    nothing)."""

    mode: str
    name: str | None = None
    parallel: bool | None = None

    @property
    def forced(self) -> bool:
        return self.mode in ("required", "named")


@dataclass(frozen=True)
class ChoiceSpelling:
    """How a family writes its tool choice: `words`, a string's mode; `types`, an object's
    mode by its "type" (None: an object without one); `name_at`, where a named choice's name
    is in its object; `parallel_off`, the key of an object that turns parallel calls off;
    `forms`, what a refusal lists."""

    words: Mapping[str, str]
    types: Mapping[str | None, str]
    name_at: tuple[str, ...]
    forms: str
    parallel_off: str | None = None


_WORDS = {"auto": "auto", "none": "none", "required": "required"}
OPENAI_CHOICE = ChoiceSpelling(
    _WORDS,
    {"function": "named", None: "named"},
    ("function", "name"),
    "auto, none, required or {'type': 'function', 'function': {'name': ...}}",
)
ANTHROPIC_CHOICE = ChoiceSpelling(
    {},
    {"auto": "auto", "any": "required", "none": "none", "tool": "named"},
    ("name",),
    "{'type': 'auto'}, {'type': 'any'}, {'type': 'none'} or {'type': 'tool', 'name': ...}",
    parallel_off="disable_parallel_tool_use",
)
FLAT_CHOICE = ChoiceSpelling(
    _WORDS,
    {"function": "named"},
    ("name",),
    "auto, none, required or {'type': 'function', 'name': ...}",
)


@dataclass(frozen=True)
class Choice(Kind):
    """The tool choice, read after the field `tools`: without it "auto" when tools are
    offered, else "none"; a choice that forces a call needs tools."""

    as_sent = False

    spelling: ChoiceSpelling
    tools: str = "tools"

    def absent(self, default: Any, values: Mapping[str, Any]) -> ToolChoice:
        return ToolChoice("auto" if values.get(self.tools) else "none")

    def read(self, value: Any, values: Mapping[str, Any]) -> ToolChoice:
        spelling = self.spelling
        choice = None
        if isinstance(value, str) and value in spelling.words:
            choice = ToolChoice(spelling.words[value])
        elif isinstance(value, Mapping) and value.get("type") in spelling.types:
            mode = spelling.types[value.get("type")]
            name = _at(value, spelling.name_at) if mode == "named" else None
            parallel = None
            if spelling.parallel_off is not None and value.get(spelling.parallel_off):
                parallel = False
            if mode != "named" or isinstance(name, str):
                choice = ToolChoice(mode, name, parallel)
        if choice is None:
            raise Invalid(f"{{name}} must be {spelling.forms}, not {value!r}")
        if not values.get(self.tools):
            if choice.forced:
                raise Invalid(f"{{name}} {value!r} needs tools")
            return ToolChoice("none", parallel=choice.parallel)
        return choice

    def schema(self) -> dict[str, Any]:
        forms: list[dict[str, Any]] = []
        if self.spelling.words:
            forms.append({"enum": list(self.spelling.words)})
        forms.append({"type": "object"})
        return {"oneOf": forms} if len(forms) > 1 else forms[0]


def _at(value: Any, path: Sequence[str]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


# --- the output format ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputFormat:
    """What the answer must be: "json_object" (any JSON object), "json_schema" (an instance of
    `schema`) or "gbnf" (a sentence of the grammar `gbnf`); `given`: the format object as the
    client sent it (the Responses API echoes it)."""

    kind: str
    schema: Mapping[str, Any] | None = None
    gbnf: str | None = None
    given: Mapping[str, Any] = field(default_factory=dict)

    def grammar(self) -> Grammar:
        """The grammar that holds an answer to the format (GrammarError for a schema or
        grammar it cannot enforce)."""
        if self.kind == "json_object":
            return Grammar.json_object()
        if self.kind == "json_schema":
            return Grammar.from_json_schema(dict(self.schema or {}))
        return Grammar.from_gbnf(self.gbnf or "")


@dataclass(frozen=True)
class FormatSpelling:
    """How a family writes its output format: `inside`, the key of the field's object that
    holds it (the Responses API's text.format); `kinds`, the types its object may name;
    `schema_at`, where a json_schema format's schema is in its object; `words`, strings that
    name a kind (Ollama's "json"); `bare_schema`, an object is the schema itself; `forms`,
    what a value that is none of these is told."""

    kinds: tuple[str, ...] = ("text", "json_object", "json_schema")
    schema_at: tuple[str, ...] = ("schema",)
    inside: str | None = None
    words: Mapping[str, str] = field(default_factory=dict)
    bare_schema: bool = False
    forms: str = "an object"


OPENAI_FORMAT = FormatSpelling(schema_at=("json_schema", "schema"))
FLAT_FORMAT = FormatSpelling(
    inside="format", forms="an object such as {'type': 'json_schema', 'schema': {...}}"
)
ANTHROPIC_FORMAT = FormatSpelling(
    kinds=("json_schema",),
    inside="format",
    forms="an object such as {'type': 'json_schema', 'schema': {...}}",
)
OLLAMA_FORMAT = FormatSpelling(
    words={"json": "json_object"}, bare_schema=True, forms='"json" or a JSON schema object'
)
SCHEMA_FORMAT = FormatSpelling(bare_schema=True, forms="a JSON schema object")


@dataclass(frozen=True)
class Format(Kind):
    """An output format (None: free text)."""

    as_sent = False

    spelling: FormatSpelling

    def read(self, value: Any, values: Mapping[str, Any]) -> OutputFormat | None:
        spelling = self.spelling
        where, inside = "{name}", ""
        if spelling.inside is not None:
            if not isinstance(value, Mapping):
                raise Invalid(f"{{name}} must be an object such as {{'{spelling.inside}': ...}}")
            inside = f".{spelling.inside}"
            where, value = where + inside, value.get(spelling.inside)
        if value is None or value == "" or (value == {} and not spelling.bare_schema):
            return None
        if isinstance(value, str) and value in spelling.words:
            return OutputFormat(spelling.words[value], given={"type": spelling.words[value]})
        if not isinstance(value, Mapping):
            raise Invalid(f"{where} must be {spelling.forms}", inside)
        if spelling.bare_schema:
            return OutputFormat("json_schema", value, given=value)
        kind = value.get("type", "text")
        if kind not in spelling.kinds:
            raise Invalid(f"{where}.type must be {either(spelling.kinds)}, not {kind!r}", inside)
        if kind == "text":
            return None
        schema = _at(value, spelling.schema_at)
        if kind == "json_schema" and not isinstance(schema, Mapping):
            raise Invalid(f"{where} json_schema needs a 'schema' object", inside)
        return OutputFormat(kind, schema, given=value)

    def schema(self) -> dict[str, Any]:
        spelling = self.spelling
        typed = {"type": "object"}
        if not spelling.bare_schema:
            typed = {"type": "object", "properties": {"type": {"enum": list(spelling.kinds)}}}
        if spelling.inside is not None:
            return {"type": "object", "properties": {spelling.inside: typed}}
        if spelling.words:
            return {"oneOf": [{"enum": ["", *spelling.words]}, typed]}
        return typed


class Gbnf(Kind):
    """A grammar in GBNF, llama.cpp's notation, that the answer must be a sentence of (none
    for "")."""

    as_sent = False

    def read(self, value: Any, values: Mapping[str, Any]) -> OutputFormat | None:
        if not isinstance(value, str):
            raise Invalid("{name} must be GBNF text")
        if not value:  # as llama.cpp's clients send it: no grammar
            return None
        return OutputFormat("gbnf", gbnf=value, given={"type": "gbnf"})

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}
