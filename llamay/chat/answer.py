"""One assistant answer read as it is generated: reasoning, text and tool calls, for every family.

A family route hands each Piece of a generation to `Answer.feed` and renders what comes back
(then what `Answer.finish` returns) in its own shape: OpenAI's `content`/`reasoning_content`
deltas and `tool_calls`, Anthropic's text/thinking/tool_use blocks, Ollama's `message.content`,
`message.thinking` and `message.tool_calls`. The same events, in the same order, whether the
answer is streamed or collected (collecting is reading them all).

Reasoning. A template that thinks in tags (Qwen 3 and DeepSeek-R1 distills: `<think>...</think>`)
or in channels (gpt-oss's Harmony: `analysis` for reasoning, `final` for the answer,
`commentary` for tool calls) gets its reasoning split off (`reasoning_of`). A prompt that ends
inside `<think>` (R1 distills open the tag in the generation prompt) starts in reasoning.

Tool calls are read by the template's call format (toolcalls.py) from the text after the
reasoning. Control tokens count with their text where they are markers (`[TOOL_CALLS]`,
Harmony's `<|channel|>`...), since the text a generation shows leaves control tokens out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from llamay.chat.calls import ToolCall
from llamay.chat.toolcalls import CallParser, ToolFormat, format_of
from llamay.engine import Model

EventKind = Literal["text", "reasoning", "call"]


@dataclass(frozen=True)
class Event:
    """A step of an answer: new text, new reasoning, or one whole tool call."""

    kind: EventKind
    text: str = ""
    call: ToolCall | None = None


THINK = "think"
HARMONY = "harmony"

_HARMONY_MARKERS = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>")
_HARMONY_MARKERS += ("<|constrain|>",)


def reasoning_of(template_source: str) -> str | None:
    """How a template's model reasons: "think" (tags), "harmony" (channels) or None."""
    if "<|channel|>" in template_source:
        return HARMONY
    if "<think>" in template_source or "</think>" in template_source:
        return THINK
    return None


def opens_thinking(rendered_prompt: str) -> bool:
    """Whether the prompt leaves the answer inside `<think>` (the template opened it)."""
    tail = rendered_prompt.rstrip()
    return tail.endswith("<think>")


@dataclass
class Answer:
    """Reads one generation's pieces (`feed`) into events, and keeps the whole answer:
    `text`, `reasoning` and `calls`. `tools`: the offered tools (None: no calls are read);
    `fmt`: their call format; `reasoning`: "think", "harmony" or None; `inside_thinking`: the
    answer starts inside `<think>`; `prefill`: text the answer continues (a marker in it
    counts, its text is not sent again)."""

    tokenizer: Any
    tools: Sequence[Mapping[str, Any]] | None = None
    fmt: ToolFormat | None = None
    reasoning_kind: str | None = None
    inside_thinking: bool = False
    prefill: str = ""
    text: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._calls = CallParser(self.fmt, self.tools) if self.tools and self.fmt else None
        self._markers: set[str] = set(self.fmt.markers) if self.fmt is not None else set()
        if self.reasoning_kind == HARMONY:
            self._markers.update(_HARMONY_MARKERS)
        self._thinking = self.inside_thinking
        self._held = ""  # think: text that may be the start of a tag
        self._after_reasoning = False  # think: the blank line after </think> is not text
        self._channel = "header" if self.reasoning_kind == HARMONY else "final"
        self._header = ""
        self._opened = False  # harmony: a channel's message has begun
        if self.prefill and self._calls is not None:
            self._calls.push(self.prefill)  # already the client's: its text is not sent

    # --- feeding ---

    def feed(self, piece: Any) -> list[Event]:
        """The events one Piece of the generation makes."""
        text = piece.text
        token = piece.token
        if token is not None and self._markers and self.tokenizer.is_control(token):
            special = self.tokenizer.token_to_piece(token, special=True).decode("utf-8", "replace")
            if special in self._markers:
                text = special
        if self.reasoning_kind == HARMONY:
            return self._harmony(text)
        if self.reasoning_kind == THINK:
            return self._think(text)
        return self._content(text)

    def finish(self) -> list[Event]:
        """The events at the end: held-back text, and the calls of a held answer."""
        events: list[Event] = []
        if self.reasoning_kind == HARMONY and not self._opened and self._header:
            # no channel ever opened: the model did not write Harmony, its text is the answer
            header, self._header = self._header, ""
            events += self._content(header)
        if self._held:
            held, self._held = self._held, ""
            events += self._reasoned(held) if self._thinking else self._content(held)
        if self._calls is not None:
            rest, calls = self._calls.finish()
            if rest:
                self.text += rest
                events.append(Event("text", rest))
            for call in calls:
                self.calls.append(call)
                events.append(Event("call", call=call))
        return events

    # --- the parts of an answer ---

    def _content(self, text: str) -> list[Event]:
        if self._calls is not None:
            text = self._calls.push(text)
        if not text:
            return []
        self.text += text
        return [Event("text", text)]

    def _reasoned(self, text: str) -> list[Event]:
        if not text:
            return []
        self.reasoning += text
        return [Event("reasoning", text)]

    def _think(self, text: str) -> list[Event]:
        events: list[Event] = []
        pending = self._held + text
        self._held = ""
        while pending:
            tag = "</think>" if self._thinking else "<think>"
            at = pending.find(tag)
            if at >= 0:
                before, pending = pending[:at], pending[at + len(tag) :]
                events += self._reasoned(before) if self._thinking else self._content(before)
                # the answer after the reasoning starts after its blank line
                self._after_reasoning = self._thinking
                self._thinking = not self._thinking
                continue
            if self._after_reasoning and not self._thinking:
                pending = pending.lstrip("\n")
                if not pending:
                    break
                self._after_reasoning = False
            if not self._thinking and (self.text.strip() or self.calls):
                # reasoning comes first: once the answer has text, tags in it are text
                events += self._content(pending)
                return events
            keep = _partial(pending, tag)
            self._held = pending[len(pending) - keep :]
            out = pending[: len(pending) - keep]
            events += self._reasoned(out) if self._thinking else self._content(out)
            pending = ""
        return events

    def _harmony(self, text: str) -> list[Event]:
        """Harmony: `<|start|>assistant<|channel|>NAME<|message|>BODY<|end|>`, repeated; the
        generation prompt leaves the answer in the first header."""
        if text in ("<|start|>",):
            self._channel, self._header = "header", ""
            return []
        if text == "<|message|>" and self._channel == "header":
            self._opened = True
            header = self._header
            if "to=functions." in header and self._calls is not None:
                self._channel = "call"
                name = header[header.index("to=functions.") :].split()[0]
                name = name.split("<|")[0]
                return self._content(name + "<|message|>")
            self._channel = "analysis" if "analysis" in header else "final"
            return []
        if text in ("<|end|>", "<|return|>", "<|call|>"):
            if self._channel == "call":
                events = self._content("<|call|>")
                self._channel = "header"
                self._header = ""
                return events
            self._channel, self._header = "header", ""
            return []
        if self._channel == "header":
            self._header += text
            return []
        if self._channel == "analysis":
            return self._reasoned(text)
        return self._content(text)


def answer_reader(
    model: Model,
    prompt: Sequence[int],
    tools: Sequence[Mapping[str, Any]] | None = None,
    prefill: str = "",
    *,
    reasoning: bool = True,
) -> Answer:
    """A reader of the answer to a chat prompt: its reasoning split off where the template
    reasons (unless `reasoning` is False), its calls read in the template's format when `tools`
    are offered; `prefill` is the text the answer continues."""
    source = model.chat_template.source
    kind = reasoning_of(source) if reasoning else None
    if prefill:  # the prompt ends with the prefill: is it inside <think>?
        inside = kind == THINK and prefill.rfind("<think>") > prefill.rfind("</think>")
    else:
        inside = kind == THINK and opens_thinking(
            model.tokenizer.detokenize(list(prompt[-4:]), special=True)
        )
    fmt = format_of(source) if tools else None
    return Answer(model.tokenizer, tools or None, fmt, kind, inside, prefill)


def _partial(text: str, tag: str) -> int:
    """The length of the longest end of `text` that begins `tag`."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0
