"""What a chat request asks for, in each API's spelling: tools, a tool choice, an output format.

One reader each, and a family's spelling is data (`ToolSpelling`, `ChoiceSpelling`,
`FormatSpelling`), so that OpenAI's `{"type": "function", "function": {"name"}}`, Anthropic's
`{"type": "tool", "name"}` and the Responses API's `{"type": "function", "name"}` are read by
the same code into the same thing: OpenAI function tools, a `ToolChoice`, an `OutputFormat`
whose grammar holds the answer. `Model.chat` reads OpenAI's spellings with them; the server
reads every family's (its request declarations, llamay/server/fields.py). A value a reader
refuses is InvalidRequest naming the field (`name`; the server passes "{name}" and fills it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llamay.errors import InvalidRequest
from llamay.grammar import Grammar

# --- tools ---------------------------------------------------------------------------------------

_OBJECT = {"type": "object", "properties": {}}


def _openai_tool(tool: Any) -> Mapping[str, Any]:
    """OpenAI's (and Ollama's) `{"type": "function", "function": {"name", ...}}`, kept as
    given: the chat template renders what the client sent."""
    function = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValueError("each tool must be {'type': 'function', 'function': {'name': ...}}")
    return tool


def _anthropic_tool(tool: Any) -> Mapping[str, Any]:
    """Anthropic's `{"name", "description", "input_schema"}`."""
    if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
        raise ValueError("{name}: each tool needs a name and an input_schema")
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
        raise ValueError(f"tools of type {kind!r} are not supported here; send function tools")
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise ValueError("each function tool needs a name")
    parameters = tool.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise ValueError("a function tool's parameters must be a JSON schema")
    function = {"name": tool["name"], "parameters": parameters}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolSpelling:
    """How a family writes one function tool: `read(tool)` is it as an OpenAI function tool
    (ValueError when it is none); `item`: its JSON schema."""

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


def read_tools(
    value: Any, spelling: ToolSpelling = OPENAI_TOOLS, name: str = "tools"
) -> list[Mapping[str, Any]] | None:
    """A list of function tools in `spelling`, as OpenAI function tools (None for none)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidRequest(f"{name} must be a list of function tools", name)
    try:
        return [spelling.read(tool) for tool in value] or None
    except ValueError as error:
        raise InvalidRequest(str(error).replace("{name}", name), name) from None


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


def read_choice(
    value: Any,
    tools: Sequence[Any] | None,
    spelling: ChoiceSpelling = OPENAI_CHOICE,
    name: str = "tool_choice",
) -> ToolChoice:
    """The tool choice in `spelling`, for `tools` (the tools read already): without one
    "auto" when tools are offered, else "none"; "auto" without tools is "none", and a choice
    that forces a call needs tools."""
    if value is None:
        return ToolChoice("auto" if tools else "none")
    choice = None
    if isinstance(value, str) and value in spelling.words:
        choice = ToolChoice(spelling.words[value])
    elif isinstance(value, Mapping) and value.get("type") in spelling.types:
        mode = spelling.types[value.get("type")]
        named = _at(value, spelling.name_at) if mode == "named" else None
        parallel = None
        if spelling.parallel_off is not None and value.get(spelling.parallel_off):
            parallel = False
        if mode != "named" or isinstance(named, str):
            choice = ToolChoice(mode, named, parallel)
    if choice is None:
        raise InvalidRequest(f"{name} must be {spelling.forms}, not {value!r}", name)
    if not tools:
        if choice.forced:
            raise InvalidRequest(f"{name} {value!r} needs tools", name)
        return ToolChoice("none", parallel=choice.parallel)
    return choice


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


def read_format(
    value: Any, spelling: FormatSpelling = OPENAI_FORMAT, name: str = "response_format"
) -> OutputFormat | None:
    """The output format in `spelling` (None: free text)."""
    where = name
    if spelling.inside is not None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidRequest(
                f"{name} must be an object such as {{'{spelling.inside}': ...}}", name
            )
        where, value = f"{name}.{spelling.inside}", value.get(spelling.inside)
    if value is None or value == "" or (value == {} and not spelling.bare_schema):
        return None
    if isinstance(value, str) and value in spelling.words:
        return OutputFormat(spelling.words[value], given={"type": spelling.words[value]})
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{where} must be {spelling.forms}", where)
    if spelling.bare_schema:
        return OutputFormat("json_schema", value, given=value)
    kind = value.get("type", "text")
    if kind not in spelling.kinds:
        raise InvalidRequest(
            f"unknown response format {kind!r}: {where}.type must be {_either(spelling.kinds)}",
            where,
        )
    if kind == "text":
        return None
    schema = _at(value, spelling.schema_at)
    if kind == "json_schema" and not isinstance(schema, Mapping):
        raise InvalidRequest(f"{where} json_schema needs a 'schema' object", where)
    return OutputFormat(kind, schema, given=value)


def read_gbnf(value: Any, name: str = "grammar") -> OutputFormat | None:
    """A grammar in GBNF, llama.cpp's notation, that the answer must be a sentence of (none
    for "", as llama.cpp's clients send it)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be GBNF text", name)
    return OutputFormat("gbnf", gbnf=value, given={"type": "gbnf"})


def _either(words: Sequence[str]) -> str:
    """The words as "a, b or c"."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
