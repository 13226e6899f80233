"""Tool calls in the model's own convention: the table of families, keyed off the template.

A model calls a tool the way its chat template taught it, and that template also writes earlier
calls back into the prompt in the same way. So the family is a property of the template, found
by the markers its source writes (`format_of`). Each family accepts the shapes its models are
seen to write (syntaxes.py), as llama.cpp's parsers do; the first is the one its template
teaches, which `required` and a named tool_choice hold the answer to.

| family | the template writes | the calls read (syntaxes.py) |
|---|---|---|
| harmony | `<|channel|>` (gpt-oss) | harmony |
| deepseek_r1 | `<｜tool▁calls▁begin｜>` (DeepSeek R1 and its distills) | deepseek, bare_json, fenced |
| command_r7b | `<|START_ACTION|>` | command_r7b, command_r |
| command_r | `Action:` and `tool_name` (Command R, R+) | command_r, command_r7b |
| granite | `<|tool_call|>` (Granite 3) | granite, bare_json, fenced |
| mistral_named | `[TOOL_CALLS]` and `[ARGS]` (Mistral Small 3.2, Devstral) | mistral_named, mistral_list |
| mistral | `[TOOL_CALLS]` (Mistral 7B v0.3, Nemo) | mistral_list, mistral_named |
| qwen3_coder | `<function=` and `<parameter=` (Qwen3-Coder) | qwen_xml, then as hermes |
| hermes | `<tool_call>` (Qwen 2.5/3, Hermes, the built-ins) | tool_call, qwen_xml, function_tag, wrapped, fenced, bare_json |
| llama3 | `<|python_tag|>` or `"parameters"` with Llama 3 headers | bare_json ("parameters"), python_tag, fenced |
| json | nothing about tools (Gemma, Llama 2, Phi) | bare_json, fenced |

Under tool_choice "auto" the answer is free text until a call opens; from there a lazy grammar
(grammar/lazy.py, built by `call_grammar`) holds it to calls whose arguments follow the tools'
JSON schemas, then more calls or the end. `parse_calls` reads a whole answer, `CallParser` one
that streams: text before a call goes out as it comes, a call is held until it is read, and
what only looked like a call goes out as text after all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from llamay.chat import syntaxes as s
from llamay.chat.callgrammar import CallRules, alternatives
from llamay.chat.calls import Offered, ToolCall, function_of, skip_space
from llamay.errors import InvalidRequest
from llamay.grammar import Grammar
from llamay.grammar.lazy import LazyGrammar, Trigger

__all__ = ["FORMATS", "CallParser", "ToolFormat", "call_grammar", "format_of", "parse_calls"]


@dataclass(frozen=True)
class ToolFormat:
    """A family of templates and the call syntaxes its models write (the first is the one its
    template teaches). `detect`: sets of markers, one of which the template's source holds
    all of. `arguments_key`: the arguments' key in the family's own call objects. `native`: the
    template renders tools and calls itself (else prompt.py writes them into the system
    message). `short_ids`: its template wants call ids of 9 alphanumeric characters.
    `flat_tools`: its template reads a tool's name and parameters from the tool itself, not
    from its "function"."""

    name: str
    syntaxes: tuple[s.Syntax, ...]
    detect: tuple[tuple[str, ...], ...] = ()
    arguments_key: str = "arguments"
    native: bool = True
    short_ids: bool = False
    flat_tools: bool = False

    @property
    def markers(self) -> set[str]:
        """The control tokens its calls are written with (read with their text)."""
        return {marker for syntax in self.syntaxes for marker in syntax.markers}


_HERMES_REST = (s.FUNCTION_TAG, s.WRAPPED, s.FENCED, s.BARE_JSON)
HARMONY = ToolFormat("harmony", (s.HARMONY,), (("<|channel|>",),))
DEEPSEEK_R1 = ToolFormat("deepseek_r1", (s.DEEPSEEK, s.BARE_JSON, s.FENCED), ((s.DEEPSEEK_BEGIN,),))
COMMAND_R7B = ToolFormat(
    "command_r7b", (s.START_ACTION, s.ACTION), (("<|START_ACTION|>",),), "parameters"
)
COMMAND_R = ToolFormat(
    "command_r",
    (s.ACTION, s.START_ACTION),
    (("Action:", "tool_name"),),
    "parameters",
    flat_tools=True,
)
GRANITE = ToolFormat("granite", (s.GRANITE, s.BARE_JSON, s.FENCED), (("<|tool_call|>",),))
MISTRAL_NAMED = ToolFormat(
    "mistral_named",
    (s.MISTRAL_NAMED, s.MISTRAL_LIST),
    (("[TOOL_CALLS]", "[ARGS]"),),
    short_ids=True,
)
MISTRAL = ToolFormat(
    "mistral", (s.MISTRAL_LIST, s.MISTRAL_NAMED), (("[TOOL_CALLS]",),), short_ids=True
)
QWEN3_CODER = ToolFormat(
    "qwen3_coder", (s.QWEN_XML, s.TOOL_CALL, *_HERMES_REST), (("<function=", "<parameter="),)
)
HERMES = ToolFormat("hermes", (s.TOOL_CALL, s.QWEN_XML, *_HERMES_REST), (("<tool_call>",),))
LLAMA3 = ToolFormat(
    "llama3",
    (s.BARE_JSON, s.PYTHON_TAG, s.FENCED),
    (("<|python_tag|>",), ("<|start_header_id|>", "tools", '"parameters"')),
    "parameters",
)
JSON = ToolFormat("json", (s.BARE_JSON, s.FENCED), native=False)

# In the order they are tried: the first whose markers a template holds is its family.
FORMATS = {
    f.name: f
    for f in (
        HARMONY,
        DEEPSEEK_R1,
        COMMAND_R7B,
        COMMAND_R,
        GRANITE,
        MISTRAL_NAMED,
        MISTRAL,
        QWEN3_CODER,
        HERMES,
        LLAMA3,
        JSON,
    )
}


def format_of(template_source: str) -> ToolFormat:
    """The call family a chat template teaches (the module's table); json for a template that
    knows no tools."""
    for fmt in FORMATS.values():
        if any(all(marker in template_source for marker in group) for group in fmt.detect):
            return fmt
    return JSON


# --- grammars ----------------------------------------------------------------------------------


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
    "named" with `name`): None for "none"; for "auto" a lazy grammar that each syntax's opening
    triggers, holding what follows to calls of the offered tools in any of the family's
    syntaxes; for "required"/"named" the family's own syntax from the first token. `parallel`:
    more than one call per answer. `prefix`: the answer's prefilled start (an opening there
    triggers the grammar at once). GrammarError for a schema it cannot enforce."""
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
    rules = CallRules(functions, fmt.arguments_key, parallel)
    syntaxes = fmt.syntaxes if choice == "auto" else fmt.syntaxes[:1]
    block = alternatives([syntax.rules(rules) for syntax in syntaxes])
    single = not parallel or any(syntax.single for syntax in syntaxes)
    calls = block if single else f"{block} (llamay-sep {block})*"
    if choice != "auto":
        forced = syntaxes[0].forced
        root = f"{s.literal(forced)} {calls}" if forced else calls
        return Grammar.from_gbnf(rules.gbnf(root), root="llamay-calls")
    grammar = Grammar.from_gbnf(rules.gbnf(calls), root="llamay-calls")
    offered = Offered.of(tools)
    triggers = {
        Trigger(syntax.trigger_for(offered), anchored=syntax.anchored, pattern=True)
        for syntax in syntaxes
    }
    return LazyGrammar(grammar, sorted(triggers, key=lambda t: t.text), prefix=prefix)


# --- reading an answer -------------------------------------------------------------------------


class _Openings:
    """Where calls of a family's syntaxes may open in a text, for one request's tools."""

    def __init__(self, fmt: ToolFormat, offered: Offered) -> None:
        self.syntaxes = [
            (syntax, regex.compile(syntax.opening_for(offered), regex.S)) for syntax in fmt.syntaxes
        ]
        free = [p.pattern for syntax, p in self.syntaxes if not syntax.anchored]
        anchored = [p.pattern for syntax, p in self.syntaxes if syntax.anchored]
        self._free = regex.compile("|".join(f"(?:{p})" for p in free), regex.S) if free else None
        self._anchored = (
            regex.compile("|".join(f"(?:{p})" for p in anchored), regex.S) if anchored else None
        )

    def candidates(self, text: str, at: int, anchor: int | None) -> list[tuple[int, s.Syntax]]:
        """(start, syntax) of each syntax's first opening from `at` on (an anchored one only at
        `anchor`), earliest first, then in the table's order."""
        found = []
        for order, (syntax, pattern) in enumerate(self.syntaxes):
            if syntax.anchored:
                match = pattern.match(text, anchor) if anchor is not None else None
            else:
                match = pattern.search(text, at)
            if match is not None:
                found.append((match.start(), order, syntax))
        return [(start, syntax) for start, _, syntax in sorted(found, key=lambda f: f[:2])]

    def pending(self, text: str, at: int, anchor: int | None) -> tuple[int, bool] | None:
        """Where the earliest opening, whole or still being written at the end of `text`,
        begins from `at` on, and whether it is whole; None if none can."""
        best: tuple[int, bool] | None = None
        for pattern, start in ((self._anchored, anchor), (self._free, at)):
            if pattern is None or start is None:
                continue
            search = pattern.match if pattern is self._anchored else pattern.search
            match = search(text, start, partial=True)
            if match is None or (match.partial and match.start() == len(text) > start):
                continue
            whole = not match.partial
            if best is None or (match.start(), not whole) < (best[0], not best[1]):
                best = (match.start(), whole)
        return best


def _read(text: str, openings: _Openings, offered: Offered) -> tuple[str, str, list[ToolCall]]:
    """(the answer's text before its calls, the text after them, the calls), either text ""
    where it is only whitespace. Calls follow each other, separated by whitespace only; an
    opening that does not read as a call is text. A call of an anchored syntax makes the answer
    calls only: with prose before or after it, it is all text."""
    calls: list[ToolCall] = []
    first = end = at = 0
    anchored = False
    while True:
        anchor = skip_space(text, end) if calls or at == 0 else None
        candidates = openings.candidates(text, at, anchor)
        read = None
        for start, syntax in candidates:
            if calls and text[end:start].strip():
                break  # text after the calls: they are done
            read = syntax.read(text, start, offered)
            if read is not None:
                anchored = anchored or syntax.anchored
                break
        if read is None:
            if calls or not candidates:
                break
            at = candidates[0][0] + 1  # not a call: look past it
            continue
        if not calls:
            first = start
        calls += read[0]
        end = at = read[1]
    head, tail = text[:first], text[end:]
    if calls and tail.strip():
        rest = skip_space(text, end)
        if any(start == rest for start, _ in openings.candidates(text, rest, rest)):
            tail = ""  # one more call, cut off before its end: not text the model meant
    if not calls or (anchored and (head.strip() or tail.strip())):
        return text, "", []
    return (head if head.strip() else ""), (tail if tail.strip() else ""), calls


def parse_calls(
    text: str, fmt: ToolFormat, tools: Sequence[Mapping[str, Any]]
) -> tuple[str, list[ToolCall]]:
    """(the text besides the calls, the calls) of a whole answer (control tokens written out);
    calls that do not parse, or name no offered tool, stay text."""
    offered = Offered.of(tools)
    head, tail, calls = _read(text, _Openings(fmt, offered), offered)
    return head + tail, calls


class CallParser:
    """An answer read as it streams (text with control tokens written out): `push` returns
    the text that is certainly not part of a call; once a call opens, the rest is held, and
    `finish` returns (the held text that was not calls; the calls)."""

    def __init__(self, fmt: ToolFormat, tools: Sequence[Mapping[str, Any]]) -> None:
        self.fmt = fmt
        self._offered = Offered.of(tools)
        self._openings = _Openings(fmt, self._offered)
        self._text = ""  # everything pushed
        self._released = 0  # how much of it went out as text
        self._spoke = False  # whether what went out holds more than whitespace
        self._calling = False

    @property
    def calling(self) -> bool:
        """Whether a call has opened (the rest is held)."""
        return self._calling

    def push(self, text: str) -> str:
        self._text += text
        if self._calling:
            return ""
        # an anchored syntax opens only an answer that is nothing but whitespace before it
        anchor = None if self._spoke else skip_space(self._text, 0)
        pending = self._openings.pending(self._text, self._released, anchor)
        if pending is None:
            start = len(self._text)
        else:
            start, self._calling = pending
            if start == anchor:
                start = self._released  # hold the whitespace too: an answer that is calls
        out = self._text[self._released : start]
        self._released = start
        self._spoke = self._spoke or bool(out.strip())
        return out

    def finish(self) -> tuple[str, list[ToolCall]]:
        """(the rest of the text, the calls) at the end of the answer."""
        rest = self._text[self._released :]
        if not self._calling:
            return rest, []
        head, tail, calls = _read(self._text, self._openings, self._offered)
        if not calls:
            return rest, []
        return head[self._released :] + tail, calls
