"""Tool calls in the model's own convention: the table of call formats, keyed off the template.

A model calls a tool the way its chat template taught it, and that template also writes earlier
calls back into the prompt in the same way. So the format is a property of the template, found
by the markers its source writes:

| format  | the template writes                         | a call is                                            |
|---------|---------------------------------------------|------------------------------------------------------|
| harmony | `<|channel|>` (gpt-oss)                     | `to=functions.NAME ... <|message|>{args}<|call|>`    |
| mistral | `[TOOL_CALLS]`                              | `[TOOL_CALLS] [{"name", "arguments"}, ...]`         |
| hermes  | `<tool_call>` (Qwen 2.5/3, the built-ins)   | `<tool_call>\\n{"name", "arguments"}\\n</tool_call>` |
| llama3  | `<|python_tag|>` or `"parameters"` (3.1+)   | `{"name", "parameters"}`, maybe after `<|python_tag|>` |
| json    | nothing about tools (Gemma, Llama 2, Phi)   | an answer that is `{"name", "arguments"}`            |

Under tool_choice "auto" the answer is free text until the format's opening marker; from there
a lazy grammar (grammar/lazy.py) holds it to calls whose arguments follow the tools' JSON
schemas, up to the closing marker (then more calls, or the end). "required" and a named tool
force a call from the first token: the same grammar, not lazy. Harmony's call sits in its
message's header: the grammar holds the name, the header and the arguments. `CallParser` reads an answer as
it streams: text before the first marker, then each call once it is complete.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llamay.errors import InvalidRequest
from llamay.grammar import Grammar, json_schema
from llamay.grammar.json_schema import literal
from llamay.grammar.lazy import LazyGrammar, Trigger


@dataclass(frozen=True)
class ToolFormat:
    """How one family of templates writes a tool call.

    `opening`/`closing`: the markers around each call (closing "" where a call ends with its
    JSON). `arguments_key`: the call object's key for the arguments. `native`: the template
    renders tools and calls itself (else prompt.py writes them into the system message in
    the bare JSON convention). `anchored`: the opening counts only at the answer's start.
    `list_call`: the calls are one JSON list after the opening marker (Mistral)."""

    name: str
    opening: tuple[str, ...]
    closing: str
    arguments_key: str = "arguments"
    native: bool = True
    anchored: bool = False
    list_call: bool = False


HERMES = ToolFormat("hermes", ("<tool_call>",), "</tool_call>")
LLAMA3 = ToolFormat(
    "llama3", ("<|python_tag|>", "{"), "", arguments_key="parameters", anchored=True
)
MISTRAL = ToolFormat("mistral", ("[TOOL_CALLS]",), "", list_call=True)
HARMONY = ToolFormat("harmony", (" to=functions.", "to=functions."), "<|call|>")
JSON = ToolFormat("json", ("{",), "", native=False, anchored=True)

FORMATS = {f.name: f for f in (HERMES, LLAMA3, MISTRAL, HARMONY, JSON)}


def format_of(template_source: str) -> ToolFormat:
    """The call format a chat template teaches (the module's table)."""
    if "<|channel|>" in template_source:
        return HARMONY
    if "[TOOL_CALLS]" in template_source:
        return MISTRAL
    if "<tool_call>" in template_source:
        return HERMES
    if "<|python_tag|>" in template_source or (
        "<|start_header_id|>" in template_source
        and "tools" in template_source
        and '"parameters"' in template_source
    ):
        return LLAMA3
    return JSON


@dataclass
class ToolCall:
    """One call an answer makes: `arguments` as the JSON object the model wrote."""

    name: str
    arguments: dict[str, Any]
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = secrets.token_hex(12)

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


# --- the functions a request offers -------------------------------------------------------------


def function_of(tool: Any) -> dict[str, Any]:
    """The function definition of an OpenAI tool ({"type": "function", "function": {...}})."""
    function = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise InvalidRequest(
            "each tool must be {'type': 'function', 'function': {'name': ...}}", "tools"
        )
    return dict(function)


def _call_schema(function: Mapping[str, Any], arguments_key: str) -> dict[str, Any]:
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return {
        "type": "object",
        "properties": {"name": {"const": function["name"]}, arguments_key: parameters},
        "required": ["name", arguments_key],
        "additionalProperties": False,
    }


def call_grammar(
    fmt: ToolFormat,
    tools: Sequence[Mapping[str, Any]],
    choice: str,
    name: str | None = None,
    *,
    parallel: bool = True,
    prefix: str = "",
) -> Grammar | LazyGrammar | None:
    """The grammar of the calls under tool_choice `choice` ("auto", "none", "required", or
    "named" with `name`): None for "none"; for "auto" a lazy grammar that the format's opening
    marker triggers; for "required"/"named" the same calls from the first token. `parallel`:
    more than one call per answer. `prefix`: the answer's prefilled start (a marker there
    triggers the grammar at once). GrammarError (400) for a schema it cannot enforce."""
    if not tools or choice == "none":
        return None
    functions = [function_of(tool) for tool in tools]
    if choice == "named":
        functions = [f for f in functions if f["name"] == name]
        if not functions:
            raise InvalidRequest(
                f"tool_choice names {name!r}, which is not among the tools", "tool_choice"
            )
    elif choice not in ("auto", "required"):
        raise InvalidRequest(f"unknown tool_choice {choice!r}", "tool_choice")
    if fmt is HARMONY:
        return _harmony_grammar(functions, choice, prefix)
    schemas = [_call_schema(f, fmt.arguments_key) for f in functions]
    schema = {"anyOf": schemas} if len(schemas) > 1 else schemas[0]
    body = Grammar.from_json_schema(schema).gbnf  # `root` is one call object
    gbnf = body + _framing(fmt, parallel)
    grammar = Grammar.from_gbnf(gbnf, root="llamay-calls")
    if choice != "auto":
        return grammar
    triggers = [Trigger(t, anchored=fmt.anchored and t == "{") for t in fmt.opening]
    return LazyGrammar(grammar, triggers, prefix=prefix)


def _framing(fmt: ToolFormat, parallel: bool) -> str:
    """GBNF rules around `root` (one call object): the markers, and more calls if `parallel`."""
    rules = "llamay-ws ::= [ \\n]?\n"
    if fmt.list_call:
        more = '("," " "? root)*' if parallel else ""
        return rules + f'llamay-calls ::= {literal(fmt.opening[0])} " "? "[" root {more} "]"\n'
    if fmt.closing:
        one = f"{literal(fmt.opening[0])} llamay-ws root llamay-ws {literal(fmt.closing)}"
        more = "(llamay-ws llamay-call)*" if parallel else ""
        return rules + f"llamay-call ::= {one}\nllamay-calls ::= llamay-call {more}\n"
    separator = '(";" | "\\n") " "?' if fmt is LLAMA3 else '"\\n"'
    more = f"({separator} root)*" if parallel else ""
    start = '"<|python_tag|>"? ' if fmt is LLAMA3 else ""
    return rules + f"llamay-calls ::= {start}root {more}\n"


# The header between a call's `to=functions.NAME` and its arguments, as gpt-oss writes it
# (` <|constrain|>json<|message|>`) and as the template writes past calls
# (`<|channel|>commentary json<|message|>`). Its markers are text to a grammar: gpt-oss's
# vocabulary has them as tokens that are always rendered (tokenizer/vocab.py, as llama.cpp).
# "json" follows a space or <|constrain|>, never the name itself: `get_timejson` would read
# back as a call of a function of that name.
_HARMONY_HEADER = (
    'llamay-header ::= " "? ("<|channel|>commentary" " "?)? ("<|constrain|>" "json"? | " json")? '
    '"<|message|>"\n'
)


def _harmony_grammar(
    functions: list[dict[str, Any]], choice: str, prefix: str
) -> Grammar | LazyGrammar:
    """gpt-oss writes a call in its message's header, `to=functions.NAME`, and the arguments
    after `<|message|>`; the call ends with `<|call|>`, an end of generation, so an answer
    makes one call. Under auto the grammar waits for `to=functions.`; a forced call opens the
    commentary channel from the first token."""
    rules = {
        f"llamay-args-{i}": f.get("parameters") or {"type": "object", "properties": {}}
        for i, f in enumerate(functions)
    }
    calls = " | ".join(
        f"{literal(f['name'])} llamay-header llamay-args-{i}" for i, f in enumerate(functions)
    )
    gbnf = (
        json_schema.to_gbnf_rules(rules)
        + _HARMONY_HEADER
        + f'llamay-call ::= "to=functions." ({calls})\n'
        + 'llamay-lazy ::= " "? llamay-call\n'
        + 'llamay-forced ::= "<|channel|>commentary " llamay-call\n'
    )
    if choice == "auto":
        grammar = Grammar.from_gbnf(gbnf, root="llamay-lazy")
        triggers = [Trigger(t) for t in HARMONY.opening]
        return LazyGrammar(grammar, triggers, prefix=prefix)
    return Grammar.from_gbnf(gbnf, root="llamay-forced")


# --- reading an answer ----------------------------------------------------------------------------

_HARMONY_CALL = re.compile(
    r"to=functions\.([A-Za-z0-9_.\-]+)[^<]*(?:<\|channel\|>[^<]*)?(?:<\|constrain\|>[^<]*)?"
    r"<\|message\|>(.*?)(?:<\|call\|>|$)",
    re.S,
)


def _objects(text: str) -> list[Any] | None:
    """The JSON values `text` is made of, separated by whitespace, ";" or ","; None if it is
    anything else."""
    decoder = json.JSONDecoder()
    values, at = [], 0
    while True:
        while at < len(text) and text[at] in " \t\r\n;,":
            at += 1
        if at == len(text):
            return values
        try:
            value, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return None
        values.append(value)


def _as_call(value: Any, fmt: ToolFormat, names: set[str]) -> ToolCall | None:
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments = value.get(fmt.arguments_key, value.get("arguments", value.get("parameters", {})))
    if isinstance(arguments, str):  # some models write the arguments as JSON text
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(value["name"], arguments)


def parse_calls(
    text: str, fmt: ToolFormat, tools: Sequence[Mapping[str, Any]]
) -> tuple[str, list[ToolCall]]:
    """(the text before the first call, the calls) of a whole answer (control tokens written
    out); calls that do not parse, or name no offered tool, leave the answer text."""
    names = {function_of(tool)["name"] for tool in tools}
    start = _opening_at(text, fmt)
    if start is None:
        return text, []
    head, rest = text[:start], text[start:]
    calls: list[ToolCall] = []
    if fmt is HARMONY:
        for match in _HARMONY_CALL.finditer(rest):
            values = _objects(match.group(2).strip())
            single = values and len(values) == 1 and isinstance(values[0], dict)
            if single and match.group(1) in names:
                calls.append(ToolCall(match.group(1), values[0]))
        return (head, calls) if calls else (text, [])
    if fmt.list_call:
        body = rest[len(fmt.opening[0]) :]
        values = _objects(body)
        items = values[0] if values and len(values) == 1 and isinstance(values[0], list) else None
        if items is None:
            return text, []
        calls = [c for c in (_as_call(v, fmt, names) for v in items) if c]
        return (head, calls) if len(calls) == len(items) and calls else (text, [])
    if fmt.closing:
        pattern = re.compile(
            re.escape(fmt.opening[0]) + r"(.*?)(?:" + re.escape(fmt.closing) + r"|$)", re.S
        )
        first = None
        for match in pattern.finditer(rest):
            values = _objects(match.group(1).strip())
            call = _as_call(values[0], fmt, names) if values and len(values) == 1 else None
            if call is None:
                if calls:
                    break
                continue  # a marker written as prose (the lazy grammar let it pass)
            first = match.start() if first is None else first
            calls.append(call)
        if first is None:
            return text, []
        return head + rest[:first], calls
    body = rest.removeprefix("<|python_tag|>")
    values = _objects(body)
    if not values:
        return text, []
    calls = [c for c in (_as_call(v, fmt, names) for v in values) if c]
    return (head, calls) if len(calls) == len(values) else (text, [])


def _opening_at(text: str, fmt: ToolFormat) -> int | None:
    lead = len(text) - len(text.lstrip())
    found = []
    for marker in fmt.opening:
        if fmt.anchored and marker == "{":
            if text[lead:].startswith("{"):
                found.append(lead)
        else:
            at = text.find(marker)
            if at >= 0:
                found.append(at)
    return min(found) if found else None


class CallParser:
    """An answer read as it streams (text with control tokens written out): `push` returns
    the text that is certainly not part of a call; once an opening marker appears, the rest
    is held, and `finish` returns (the held text, if it was not calls after all; the calls)."""

    def __init__(self, fmt: ToolFormat, tools: Sequence[Mapping[str, Any]]) -> None:
        self.fmt = fmt
        self.tools = tools
        self._text = ""  # everything pushed
        self._released = 0  # how much of it went out as text
        self._calling = False

    @property
    def calling(self) -> bool:
        """Whether an opening marker has appeared (the rest is held)."""
        return self._calling

    def push(self, text: str) -> str:
        self._text += text
        if self._calling:
            return ""
        pending = self._text[self._released :]
        start = _opening_at(self._text, self.fmt)
        if start is not None and start >= self._released:
            self._calling = True
            out = self._text[self._released : start]
            self._released = start
            return out
        keep = self._undecided(pending)
        out = pending[: len(pending) - keep]
        self._released += len(out)
        return out

    def _undecided(self, pending: str) -> int:
        """How much of the end of `pending` may still become an opening marker."""
        if self.fmt.anchored and not self._text[: self._released].strip():
            stripped = self._text.lstrip()
            if not stripped:
                return len(pending)  # only whitespace so far: the answer may yet open with "{"
        keep = 0
        for marker in self.fmt.opening:
            if self.fmt.anchored and marker == "{":
                continue
            for n in range(min(len(pending), len(marker) - 1), 0, -1):
                if pending.endswith(marker[:n]):
                    keep = max(keep, n)
                    break
        return keep

    def finish(self) -> tuple[str, list[ToolCall]]:
        """(the rest of the text, the calls) at the end of the answer."""
        rest = self._text[self._released :]
        if not self._calling:
            return rest, []
        head, calls = parse_calls(self._text, self.fmt, self.tools)
        if not calls:
            return rest, []
        return head[self._released :], calls
