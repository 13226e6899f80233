"""The ways models write tool calls, each read back and held by a grammar in one place.

A `Syntax` is one shape of call, as llama.cpp's chat parsers accept them: its `opening` (a
regular expression for the `regex` module: the text that opens a call of this shape, up to the
tool's name where the shape has no marker of its own; `{names}` stands for the offered tools'
names), `read` (the calls written from an opening on, and where they end; None if the text is
not a call after all), `rules` (the GBNF of one block of these calls, built with
callgrammar.CallRules) and `trigger` (what turns the lazy grammar on: the opening, or just its
marker, so that the grammar holds the name too). An `anchored` syntax counts only where the
answer starts, or right after earlier calls: a bare or fenced JSON object is a call when the
answer is that object, not when prose shows one. `markers` are the control tokens the syntax is
written with, read with their text. `write` writes calls back as a model writes them, for a
template that leaves an assistant's earlier calls out.

| syntax | a call is |
|---|---|
| tool_call | `<tool_call>{"name", "arguments"}</tool_call>` (Hermes, Qwen 2.5/3) |
| qwen_xml | `<tool_call><function=NAME><parameter=KEY>value</parameter>...</function></tool_call>` (Qwen3-Coder: a string's value raw, others JSON) |
| function_tag | `<function=NAME>{arguments}</function>` or `<function name="NAME">`, or Qwen3-Coder's parameters inside |
| wrapped | `{"name", "arguments"}` in `<function_call>`, `<tools>`, `<tool>`, `<response>`, `<json>`, `<xml>` or `<JSON>` |
| fenced | a ```` ```json ```` (or ```` ```xml ````, bare ```` ``` ````) block holding a call object, or a list of them, maybe wrapped as above: what Qwen2.5-Coder writes |
| bare_json | an answer that is `{"name", "arguments"}` (or `"parameters"`, Llama 3.x), one or more |
| python_tag | Llama 3.1's `<|python_tag|>` before such objects |
| mistral_list | `[TOOL_CALLS] [{"name", "arguments", "id"?}, ...]` (Mistral 7B v0.3, Nemo) |
| mistral_named | `[TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{arguments}`, the id optional (Mistral Small 3.2, Devstral) |
| command_r7b | `<|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>` |
| command_r | `Action: ```json [{"tool_name", "parameters"}] ```` (Command R, R+) |
| granite | `<|tool_call|>[{"name", "arguments"}]` |
| deepseek | `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME` and a ```` ```json ```` block, `<｜tool▁call▁end｜>`... (R1; V3.1's `NAME<｜tool▁sep｜>{arguments}` too) |
| harmony | gpt-oss: `to=functions.NAME`, a header, `<|message|>{arguments}<|call|>` |
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex

from llamay.chat.callgrammar import CallRules, alternatives, literal
from llamay.chat.calls import Offered, ToolCall, json_at, json_values, skip_space

Read = tuple[list[ToolCall], int]
Reader = Callable[[str, int, Offered], "Read | None"]
RuleMaker = Callable[[CallRules], str]
# (the calls: name, arguments, id; the arguments' key) -> the text of the calls
Writer = Callable[[list[ToolCall], str], str]


@dataclass(frozen=True)
class Syntax:
    """One shape of tool call (the module docstring)."""

    name: str
    opening: str
    read: Reader
    rules: RuleMaker
    anchored: bool = False
    markers: tuple[str, ...] = ()
    # what turns the lazy grammar on (a regular expression); "": the opening
    trigger: str = ""
    # the forced grammar's start, before a block (Harmony opens its commentary channel)
    forced: str = ""
    # one call per answer (Harmony's call ends the generation)
    single: bool = False
    # earlier calls as text, for a template that does not write them itself
    write: Writer | None = None

    def opening_for(self, offered: Offered) -> str:
        return self.opening.replace("{names}", offered.names_pattern())

    def trigger_for(self, offered: Offered) -> str:
        return (self.trigger or self.opening).replace("{names}", offered.names_pattern())


def _escape(text: str) -> str:
    """`text` as a regular expression of itself (non-ASCII left as it is: the lazy grammar
    matches its triggers on UTF-8 bytes)."""
    return regex.escape(text, special_only=True)


# --- reading -----------------------------------------------------------------------------------

# the keys a call object may hold its arguments under (Llama 3.x writes "parameters")
ARGUMENT_KEYS = ("arguments", "parameters")


def _closing(text: str, at: int, tag: str) -> int | None:
    """Where a block ends: after `tag` (whitespace before it allowed), or at the end of the
    text when nothing but whitespace is left (a call the generation ended before closing)."""
    at = skip_space(text, at)
    if text.startswith(tag, at):
        return at + len(tag)
    return len(text) if at == len(text) else None


def _one_json_call(text: str, at: int, offered: Offered) -> tuple[ToolCall, int] | None:
    found = json_at(text, at)
    if found is None:
        return None
    call = offered.call_object(found[0], argument_keys=ARGUMENT_KEYS)
    return (call, found[1]) if call else None


def _json_calls(value: Any, offered: Offered, name_key: str = "name") -> list[ToolCall] | None:
    """The calls of a JSON object or a list of them; None unless every one is a call."""
    calls = []
    for item in value if isinstance(value, list) else [value]:
        call = offered.call_object(item, name_key, ARGUMENT_KEYS)
        if call is None:
            return None
        calls.append(call)
    return calls or None


_TOOL_CALL = "<tool_call>"


def _read_tool_call(text: str, start: int, offered: Offered) -> Read | None:
    at = skip_space(text, start + len(_TOOL_CALL))
    if text.startswith("<function", at):
        found = _read_function(text, at, offered)
        if found is None:
            return None
        calls, at = found
    else:
        one = _one_json_call(text, at, offered)
        if one is None:
            return None
        calls, at = [one[0]], one[1]
    end = _closing(text, at, "</tool_call>")
    return (calls, end) if end is not None else None


_FUNCTION_TAG = regex.compile(r'<function(?:=([^>\n]+)|\s+name="([^"\n]+)")>')
_PARAMETER = regex.compile(r"\s*<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", regex.S)


def _read_function(text: str, start: int, offered: Offered) -> Read | None:
    """`<function=NAME>` then JSON arguments or Qwen3-Coder's parameters, `</function>`."""
    tag = _FUNCTION_TAG.match(text, start)
    if tag is None:
        return None
    name = (tag.group(1) or tag.group(2)).strip()
    if name not in offered.functions:
        return None
    at = skip_space(text, tag.end())
    if text.startswith("{", at):
        found = json_at(text, at)
        if found is None:
            return None
        call, at = offered.call(name, found[0]), found[1]
    else:
        arguments: dict[str, Any] = {}
        properties = offered.parameters(name).get("properties") or {}
        while parameter := _PARAMETER.match(text, at):
            key = parameter.group(1).strip()
            arguments[key] = _parameter_value(parameter.group(2), properties.get(key))
            at = parameter.end()
        call = offered.call(name, arguments)
    end = _closing(text, at, "</function>")
    return ([call], end) if call is not None and end is not None else None


def _parameter_value(raw: str, schema: Any) -> Any:
    """A parameter written as text, as its schema types it: a string stays text; a number,
    boolean, array or object is read as JSON (and stays text if it is not JSON)."""
    schema = schema if isinstance(schema, dict) else {}
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    values = schema.get("enum", [schema["const"]] if "const" in schema else [])
    if "string" in kinds or (values and all(isinstance(v, str) for v in values)):
        return raw
    try:
        return json.loads(raw.strip())
    except (ValueError, RecursionError):
        return raw


WRAPPERS = ("function_call", "tools", "tool", "response", "json", "xml", "JSON")
_WRAPPER = regex.compile(r"<(" + "|".join(WRAPPERS) + r")>")


def _read_wrapped(text: str, start: int, offered: Offered) -> Read | None:
    tag = _WRAPPER.match(text, start)
    if tag is None:
        return None
    one = _one_json_call(text, tag.end(), offered)
    if one is None:
        return None
    end = _closing(text, one[1], f"</{tag.group(1)}>")
    return ([one[0]], end) if end is not None else None


_FENCE = regex.compile(r"```(?:json|xml|tool_call)?[ \t]*\n")
_FENCED_WRAPPER = regex.compile(r"<(tool_call|" + "|".join(WRAPPERS) + r")>")


def _read_fenced(text: str, start: int, offered: Offered) -> Read | None:
    fence = _FENCE.match(text, start)
    if fence is None:
        return None
    at = skip_space(text, fence.end())
    tag = _FENCED_WRAPPER.match(text, at)
    found = json_at(text, tag.end() if tag else at)
    if found is None:
        return None
    calls = _json_calls(found[0], offered)
    end: int | None = found[1]
    if tag is not None:
        end = _closing(text, found[1], f"</{tag.group(1)}>")
    end = _closing(text, end, "```") if end is not None else None
    return (calls, end) if calls and end is not None else None


def _read_bare(text: str, start: int, offered: Offered) -> Read | None:
    values, end = json_values(text, start, ";,")
    calls: list[ToolCall] = []
    for value in values:
        found = _json_calls(value, offered)
        if found is None:
            return None
        calls += found
    return (calls, end) if calls else None


_PYTHON_TAG = "<|python_tag|>"


def _read_python_tag(text: str, start: int, offered: Offered) -> Read | None:
    return _read_bare(text, start + len(_PYTHON_TAG), offered)


_TOOL_CALLS = "[TOOL_CALLS]"


def _read_mistral_list(text: str, start: int, offered: Offered) -> Read | None:
    found = json_at(text, start + len(_TOOL_CALLS))
    if found is None or not isinstance(found[0], list):
        return None
    calls = _json_calls(found[0], offered)
    return (calls, found[1]) if calls else None


_MISTRAL_NAMED = regex.compile(
    r"\[TOOL_CALLS\]\s*([^\[\s]+)\s*(?:\[CALL_ID\]\s*([^\[\s]+)\s*)?\[ARGS\]"
)


def _read_mistral_named(text: str, start: int, offered: Offered) -> Read | None:
    head = _MISTRAL_NAMED.match(text, start)
    if head is None:
        return None
    found = json_at(text, head.end())
    if found is None:
        return None
    call = offered.call(head.group(1), found[0], head.group(2))
    return ([call], found[1]) if call else None


_START_ACTION = "<|START_ACTION|>"


def _read_start_action(text: str, start: int, offered: Offered) -> Read | None:
    found = json_at(text, start + len(_START_ACTION))
    if found is None:
        return None
    calls = _json_calls(found[0], offered, "tool_name")
    end = _closing(text, found[1], "<|END_ACTION|>")
    return (calls, end) if calls and end is not None else None


_ACTION = regex.compile(r"Action:\s*```(?:json)?[ \t]*\n?")


def _read_action(text: str, start: int, offered: Offered) -> Read | None:
    head = _ACTION.match(text, start)
    if head is None:
        return None
    found = json_at(text, head.end())
    if found is None:
        return None
    calls = _json_calls(found[0], offered, "tool_name")
    end = _closing(text, found[1], "```")
    return (calls, end) if calls and end is not None else None


_GRANITE = "<|tool_call|>"


def _read_granite(text: str, start: int, offered: Offered) -> Read | None:
    found = json_at(text, start + len(_GRANITE))
    if found is None:
        return None
    calls = _json_calls(found[0], offered)
    return (calls, found[1]) if calls else None


# DeepSeek writes its markers with U+FF5C and U+2581; R1 distills write the opening several ways.
DEEPSEEK_BEGIN = "<｜tool▁calls▁begin｜>"
DEEPSEEK_OPENINGS = (
    DEEPSEEK_BEGIN,
    "<｜tool_calls_begin｜>",
    "<｜tool calls begin｜>",
    "<｜tool\\_calls\\_begin｜>",
    "<｜tool▁calls｜>",
)
DEEPSEEK_CALL = "<｜tool▁call▁begin｜>"
DEEPSEEK_SEP = "<｜tool▁sep｜>"
DEEPSEEK_CALL_END = "<｜tool▁call▁end｜>"
DEEPSEEK_END = "<｜tool▁calls▁end｜>"
_DEEPSEEK_OPEN = regex.compile("|".join(_escape(o) for o in DEEPSEEK_OPENINGS))
_DEEPSEEK_HEAD = regex.compile(
    r"\s*(?:"
    + _escape(DEEPSEEK_CALL)
    + r")?\s*(?:function\s*"
    + _escape(DEEPSEEK_SEP)
    + r"([^\n<]+)\n```(?:json)?[ \t]*\n?|([^\n<]+?)\s*"
    + _escape(DEEPSEEK_SEP)
    + ")"
)


def _read_deepseek(text: str, start: int, offered: Offered) -> Read | None:
    opening = _DEEPSEEK_OPEN.match(text, start)
    at = opening.end() if opening else start
    calls: list[ToolCall] = []
    while head := _DEEPSEEK_HEAD.match(text, at):
        found = json_at(text, head.end())
        if found is None:
            return None
        call = offered.call((head.group(1) or head.group(2)).strip(), found[0])
        if call is None:
            return None
        at = found[1]
        if head.group(1):  # R1's form closes its ```json block
            at = skip_space(text, at)
            at = at + 3 if text.startswith("```", at) else at
        end = _closing(text, at, DEEPSEEK_CALL_END)
        if end is None:
            return None
        calls.append(call)
        at = end
    if not calls:
        return None
    end = _closing(text, at, DEEPSEEK_END)
    return (calls, end if end is not None else at)


_HARMONY_CALL = regex.compile(
    r" ?to=functions\.([A-Za-z0-9_.\-]+)[^<]*(?:<\|channel\|>[^<]*)?(?:<\|constrain\|>[^<]*)?"
    r"<\|message\|>(.*?)(?:<\|call\|>|$)",
    regex.S,
)


def _read_harmony(text: str, start: int, offered: Offered) -> Read | None:
    match = _HARMONY_CALL.match(text, start)
    if match is None:
        return None
    values, end = json_values(match.group(2), 0)
    if len(values) != 1 or match.group(2)[end:].strip():
        return None
    call = offered.call(match.group(1), values[0])
    return ([call], match.end()) if call else None


# --- writing calls back ------------------------------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _objects(calls: list[ToolCall], key: str, name_key: str = "name") -> list[dict[str, Any]]:
    return [{name_key: c.name, key: c.arguments} for c in calls]


def _write_tool_call(calls: list[ToolCall], key: str) -> str:
    return "\n".join(f"<tool_call>\n{_dumps(o)}\n</tool_call>" for o in _objects(calls, key))


def _write_qwen_xml(calls: list[ToolCall], key: str) -> str:
    def value(v: Any) -> str:
        return v if isinstance(v, str) else _dumps(v)

    return "\n".join(
        f"<tool_call>\n<function={c.name}>\n"
        + "".join(f"<parameter={k}>\n{value(v)}\n</parameter>\n" for k, v in c.arguments.items())
        + "</function>\n</tool_call>"
        for c in calls
    )


def _write_bare(calls: list[ToolCall], key: str) -> str:
    return "\n".join(_dumps(o) for o in _objects(calls, key))


def _write_mistral_list(calls: list[ToolCall], key: str) -> str:
    return (
        _TOOL_CALLS
        + " "
        + _dumps([{**o, "id": c.id} for o, c in zip(_objects(calls, key), calls, strict=True)])
    )


def _write_mistral_named(calls: list[ToolCall], key: str) -> str:
    return "".join(
        f"{_TOOL_CALLS}{c.name}[CALL_ID]{c.id}[ARGS]{_dumps(c.arguments)}" for c in calls
    )


def _write_start_action(calls: list[ToolCall], key: str) -> str:
    items = [{"tool_call_id": str(i), **o} for i, o in enumerate(_objects(calls, key, "tool_name"))]
    return f"{_START_ACTION}{_dumps(items)}<|END_ACTION|>"


def _write_action(calls: list[ToolCall], key: str) -> str:
    items = json.dumps(_objects(calls, key, "tool_name"), ensure_ascii=False, indent=4)
    return f"Action: ```json\n{items}\n```"


def _write_granite(calls: list[ToolCall], key: str) -> str:
    return _GRANITE + _dumps(_objects(calls, key))


def _write_deepseek(calls: list[ToolCall], key: str) -> str:
    each = "".join(
        f"{DEEPSEEK_CALL}function{DEEPSEEK_SEP}{c.name}\n```json\n{_dumps(c.arguments)}\n```"
        f"{DEEPSEEK_CALL_END}"
        for c in calls
    )
    return f"{DEEPSEEK_BEGIN}{each}{DEEPSEEK_END}"


# --- grammars ----------------------------------------------------------------------------------

WS = "llamay-ws"  # optional whitespace between the parts of a block (callgrammar.CallRules)


def _tool_call_rules(rules: CallRules) -> str:
    return f'"<tool_call>" {WS} {rules.json_call()} {WS} "</tool_call>"'


def _qwen_xml_rules(rules: CallRules) -> str:
    return f'"<tool_call>" {WS} {_function_rules(rules, json=False)} {WS} "</tool_call>"'


def _function_rules(rules: CallRules, json: bool = True) -> str:
    """`<function=NAME>` with its parameters (or with `json` JSON arguments too), for each
    function."""
    each = []
    for i, name, arguments in rules.functions():
        body = f"({arguments} | {rules.xml_parameters(i)})" if json else rules.xml_parameters(i)
        each.append(f'"<function=" {literal(name)} ">" {WS} {body} {WS} "</function>"')
    return alternatives(each)


def _wrapped_rules(rules: CallRules, tags: tuple[str, ...] = WRAPPERS) -> str:
    call = rules.json_call()
    return alternatives([f'"<{tag}>" {WS} {call} {WS} "</{tag}>"' for tag in tags])


def _fenced_rules(rules: CallRules) -> str:
    wrapped = _wrapped_rules(rules, ("tool_call", *WRAPPERS))
    inner = alternatives([_bare_rules(rules), wrapped])
    return f'"```" ("json" | "xml" | "tool_call")? "\\n" {WS} {inner} {WS} "```"'


def _bare_rules(rules: CallRules) -> str:
    """A call object, or a list of them (parallel calls)."""
    call = rules.json_call()
    if not rules.parallel:
        return call
    return f'({call} | "[" {WS} {call} ("," {WS} {call})* {WS} "]")'


def _python_tag_rules(rules: CallRules) -> str:
    return f'"<|python_tag|>" {rules.json_call()}'


def _mistral_list_rules(rules: CallRules) -> str:
    item = rules.json_call(extra={"id": {"type": "string", "pattern": "^[a-zA-Z0-9]{9}$"}})
    more = f'("," {WS} {item})*' if rules.parallel else ""
    return f'"[TOOL_CALLS]" " "? "[" {WS} {item} {more} {WS} "]"'


def _mistral_named_rules(rules: CallRules) -> str:
    return alternatives(
        [
            f'"[TOOL_CALLS]" {literal(name)} ("[CALL_ID]" [a-zA-Z0-9]{{9}})? "[ARGS]" {arguments}'
            for _, name, arguments in rules.functions()
        ]
    )


def _start_action_rules(rules: CallRules) -> str:
    item = rules.json_call(
        "tool_name",
        "parameters",
        first={"tool_call_id": {"type": "string", "pattern": "^[0-9]{1,10}$"}},
    )
    more = f'("," {WS} {item})*' if rules.parallel else ""
    return f'"<|START_ACTION|>" {WS} "[" {WS} {item} {more} {WS} "]" {WS} "<|END_ACTION|>"'


def _action_rules(rules: CallRules) -> str:
    item = rules.json_call("tool_name", "parameters")
    more = f'("," {WS} {item})*' if rules.parallel else ""
    return f'"Action:" {WS} "```json\\n" {WS} "[" {WS} {item} {more} {WS} "]" {WS} "```"'


def _granite_rules(rules: CallRules) -> str:
    item = rules.json_call()
    more = f'("," {WS} {item})*' if rules.parallel else ""
    return f'"<|tool_call|>" {WS} "[" {WS} {item} {more} {WS} "]"'


def _deepseek_rules(rules: CallRules) -> str:
    one = alternatives(
        [
            f"{literal(DEEPSEEK_CALL + 'function' + DEEPSEEK_SEP + name)} "
            f'"\\n```json\\n" {arguments} "```" {literal(DEEPSEEK_CALL_END)}'
            for _, name, arguments in rules.functions()
        ]
    )
    calls = f"({one} {WS})+" if rules.parallel else f"{one} {WS}"
    return f"{literal(DEEPSEEK_BEGIN)} {calls} {literal(DEEPSEEK_END)}"


# The header between a call's `to=functions.NAME` and its arguments, as gpt-oss writes it
# (` <|constrain|>json<|message|>`) and as the template writes past calls
# (`<|channel|>commentary json<|message|>`). Its markers are text to a grammar: gpt-oss's
# vocabulary has them as tokens that are always rendered (tokenizer/vocab.py, as llama.cpp).
# "json" follows a space or <|constrain|>, never the name itself: `get_timejson` would read
# back as a call of a function of that name.
_HARMONY_HEADER = (
    '" "? ("<|channel|>commentary" " "?)? ("<|constrain|>" "json"? | " json")? "<|message|>"'
)


def _harmony_rules(rules: CallRules) -> str:
    calls = alternatives(
        [
            f"{literal(name)} {_HARMONY_HEADER} {arguments}"
            for _, name, arguments in rules.functions()
        ]
    )
    return f'" "? "to=functions." {calls}'


# --- the syntaxes ------------------------------------------------------------------------------

_NAMED_JSON = r'\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?"name"\s*:\s*"{names}"'

TOOL_CALL = Syntax(
    "tool_call",
    _escape(_TOOL_CALL) + r"\s*" + _NAMED_JSON,
    _read_tool_call,
    _tool_call_rules,
    trigger=_escape(_TOOL_CALL),
    write=_write_tool_call,
)
QWEN_XML = Syntax(
    "qwen_xml",
    _escape(_TOOL_CALL) + r"\s*<function={names}>",
    _read_tool_call,
    _qwen_xml_rules,
    trigger=_escape(_TOOL_CALL),
    write=_write_qwen_xml,
)
FUNCTION_TAG = Syntax(
    "function_tag", r'<function(?:={names}>|\s+name="{names}">)', _read_function, _function_rules
)
WRAPPED = Syntax(
    "wrapped", r"<(?:" + "|".join(WRAPPERS) + r")>\s*" + _NAMED_JSON, _read_wrapped, _wrapped_rules
)
FENCED = Syntax(
    "fenced",
    r"```(?:json|xml|tool_call)?[ \t]*\n\s*(?:<(?:tool_call|" + "|".join(WRAPPERS) + r")>\s*)?"
    r"(?:\[\s*)?" + _NAMED_JSON,
    _read_fenced,
    _fenced_rules,
    anchored=True,
)
BARE_JSON = Syntax(
    "bare_json",
    r"(?:\[\s*)?" + _NAMED_JSON,
    _read_bare,
    _bare_rules,
    anchored=True,
    write=_write_bare,
)
PYTHON_TAG = Syntax(
    "python_tag",
    _escape(_PYTHON_TAG),
    _read_python_tag,
    _python_tag_rules,
    markers=(_PYTHON_TAG,),
)
MISTRAL_LIST = Syntax(
    "mistral_list",
    _escape(_TOOL_CALLS) + r"\s*\[",
    _read_mistral_list,
    _mistral_list_rules,
    markers=(_TOOL_CALLS,),
    trigger=_escape(_TOOL_CALLS),
    write=_write_mistral_list,
)
MISTRAL_NAMED = Syntax(
    "mistral_named",
    _escape(_TOOL_CALLS) + r"\s*{names}\s*\[(?:CALL_ID|ARGS)\]",
    _read_mistral_named,
    _mistral_named_rules,
    markers=(_TOOL_CALLS, "[CALL_ID]", "[ARGS]"),
    trigger=_escape(_TOOL_CALLS),
    write=_write_mistral_named,
)
START_ACTION = Syntax(
    "command_r7b",
    _escape(_START_ACTION),
    _read_start_action,
    _start_action_rules,
    markers=(_START_ACTION, "<|END_ACTION|>"),
    write=_write_start_action,
)
ACTION = Syntax(
    "command_r",
    r"Action:\s*```(?:json)?\s*\[\s*\{\s*\"tool_name\"\s*:\s*\"{names}\"",
    _read_action,
    _action_rules,
    write=_write_action,
)
GRANITE = Syntax(
    "granite",
    _escape(_GRANITE),
    _read_granite,
    _granite_rules,
    markers=(_GRANITE,),
    write=_write_granite,
)
DEEPSEEK = Syntax(
    "deepseek",
    "(?:" + "|".join(_escape(o) for o in (*DEEPSEEK_OPENINGS, DEEPSEEK_CALL)) + ")",
    _read_deepseek,
    _deepseek_rules,
    markers=(*DEEPSEEK_OPENINGS, DEEPSEEK_CALL, DEEPSEEK_SEP, DEEPSEEK_CALL_END, DEEPSEEK_END),
    trigger=_escape(DEEPSEEK_BEGIN),
    write=_write_deepseek,
)
HARMONY = Syntax(
    "harmony",
    r" ?to=functions\.",
    _read_harmony,
    _harmony_rules,
    markers=("<|call|>",),
    forced="<|channel|>commentary",
    single=True,
)
