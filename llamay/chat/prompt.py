"""The conversation-to-prompt step: messages (OpenAI's shape) through the model's chat template
into prompt tokens that fit its context.

`render_chat` writes a conversation as the template does, ready for the assistant's turn: a
trailing assistant message is continued (prefill), system messages are gathered at the top,
tools are rendered by a template that takes them, and otherwise written into the system message
(with the bare JSON convention, toolcalls.py); earlier calls that a template leaves out are
written into the assistant's text as its family writes them.
`chat_prompt` tokenizes that and fits it to the context (`fit`); `text_prompt` does the same for
raw text. A request the template cannot take is an InvalidRequest naming the field.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from llamay.chat.calls import ToolCall, function_of
from llamay.chat.toolcalls import ToolFormat, format_of
from llamay.engine import Model
from llamay.engine.generate import chat_prompt_ids
from llamay.errors import ContextOverflow, InvalidRequest

_TOOL_INSTRUCTIONS = (
    "You can call these tools (JSON schemas of their arguments):\n{tools}\n\n"
    "To call a tool, answer with only a JSON object of the form "
    '{{"name": "<tool name>", "arguments": {{...}}}} and nothing else. '
    "Otherwise answer normally."
)


def chat_prompt(
    model: Model,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    truncate: bool = False,
    reserve: int = 1,
    template_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """Prompt ids of a conversation (OpenAI-shaped messages: role, content as a string or text
    parts, tool_calls, tool_call_id) through the model's chat template, ready for the assistant
    (`render_chat` says how). See `fit` for `truncate` and `reserve`.
    """
    rendered = render_chat(model, messages, tools=tools, template_kwargs=template_kwargs)
    rendered = bounded_text(model, rendered, truncate=truncate)
    return fit(model, chat_prompt_ids(model, rendered), truncate=truncate, reserve=reserve)


def render_chat(
    model: Model,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """A conversation as the model's chat template writes it, ready for the assistant's turn.

    A trailing assistant message is continued (prefill): the answer goes on from its text.
    `tools` (OpenAI function tools) are rendered by the template when it takes them, else into
    the system message. System messages anywhere in the list are gathered into one at the top,
    as every template expects. `template_kwargs` reach the template as variables
    (`enable_thinking`, `reasoning_effort`).
    """
    if not messages:
        raise InvalidRequest("messages must not be empty", "messages")
    if not all(isinstance(m, Mapping) for m in messages):
        raise InvalidRequest("each message must be an object with a role and content", "messages")
    # OpenAI's newer name for the system role; templates know only "system".
    messages = [
        {**m, "role": "system"} if m.get("role") == "developer" else dict(m) for m in messages
    ]
    prefill = None
    if messages[-1].get("role") == "assistant" and not messages[-1].get("tool_calls"):
        prefill = text_of(messages.pop().get("content"))
    template = model.chat_template
    fmt = format_of(template.source)
    if fmt.short_ids:
        messages = _short_ids(messages)
    takes_tools = fmt.native and _mentions(template.source, "tools")
    if not fmt.native:
        messages = _plain_conversation(messages, tools, fmt)
    else:
        if tools and not takes_tools:
            messages = [_definitions(tools), *messages]
        if not _mentions(template.source, "tool_calls"):
            messages = [_calls_as_text(m, fmt) for m in messages]
    system = [m for m in messages if m.get("role") == "system"]
    if len(system) > 1 or (system and messages[0].get("role") != "system"):
        joined = "\n\n".join(text_of(m.get("content")) for m in system)
        messages = [{"role": "system", "content": joined}] + [
            m for m in messages if m.get("role") != "system"
        ]
    offered = None
    if tools and takes_tools:
        offered = [function_of(t) for t in tools] if fmt.flat_tools else list(tools)
    rendered = template.render(messages, tools=offered, **dict(template_kwargs or {}))
    return rendered + (prefill or "")


def _mentions(source: str, variable: str) -> bool:
    """Whether a template's source names a variable (what it leaves out, it does not write)."""
    return re.search(rf"\b{variable}\b", source) is not None


def prefill_of(messages: Sequence[Any]) -> str:
    """The text a conversation's answer continues: a trailing assistant message without tool
    calls, which chat_prompt leaves open (prefill)."""
    if messages and isinstance(messages[-1], Mapping):
        last = messages[-1]
        if last.get("role") == "assistant" and not last.get("tool_calls"):
            return text_of(last.get("content"))
    return ""


def text_prompt(model: Model, text: str, *, truncate: bool = False, reserve: int = 1) -> list[int]:
    """Prompt ids of raw text (no template): BOS where the model asks for it, specials parsed."""
    if not text:
        raise InvalidRequest("the prompt is empty: there is nothing to continue", "prompt")
    text = bounded_text(model, text, truncate=truncate)
    return fit(model, model.tokenize(text), truncate=truncate, reserve=reserve)


def bounded_text(model: Model, text: str, *, truncate: bool) -> str:
    """`text`, unless it is certainly more tokens than a context holds, which is known from its
    length alone (no token stands for more than max_token_chars characters): then 400
    (ContextOverflow) before a 30 MB text is tokenized only to be refused, or with `truncate`
    its end, enough characters for the most tokens a context holds, and more."""
    limit = (model.n_ctx + 1) * model.tokenizer.max_token_chars
    if len(text) <= limit:
        return text
    if not truncate:
        raise ContextOverflow(
            f"the prompt is {len(text)} characters, so at least "
            f"{len(text) // model.tokenizer.max_token_chars} tokens, but the context holds "
            f"{model.n_ctx}; shorten it or ask for truncation"
        )
    return text[-limit:]


def fit(model: Model, ids: list[int], *, truncate: bool, reserve: int) -> list[int]:
    """The prompt, if it leaves room to generate at least one token (a generation that fills
    the context ends with "length"). Otherwise 400 (ContextOverflow), or with `truncate` its
    first token (BOS) and its most recent tokens, leaving `reserve` tokens (at most half the
    context) to generate into."""
    if len(ids) < model.n_ctx:
        return ids
    if not truncate:
        raise ContextOverflow(
            f"the prompt is {len(ids)} tokens but the context holds {model.n_ctx}; "
            "shorten it or ask for truncation"
        )
    keep = model.n_ctx - min(max(1, reserve), model.n_ctx // 2)
    return ids[:1] + ids[len(ids) - keep + 1 :]


def _plain_conversation(
    messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]] | None, fmt: ToolFormat
) -> list[dict[str, Any]]:
    """For a template without tool support: the tool definitions in the system message, tool
    calls as the JSON the model would write, tool results as user turns; then consecutive
    turns of one role merged, as templates that check alternation require."""
    plain: list[dict[str, Any]] = [_definitions(tools)] if tools else []
    for message in messages:
        if message.get("role") == "tool":
            name = message.get("name") or message.get("tool_call_id") or "tool"
            text = f"Result of {name}: {text_of(message.get('content'))}"
            plain.append({"role": "user", "content": text})
        else:
            plain.append(_calls_as_text(message, fmt))
    merged: list[dict[str, Any]] = []
    for message in plain:
        if merged and merged[-1]["role"] == message["role"] != "system":
            merged[-1] = {
                **merged[-1],
                "content": merged[-1]["content"] + "\n\n" + message["content"],
            }
        else:
            merged.append(message)
    return merged


def _definitions(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The tools as a system message, with how to call them (a bare JSON object)."""
    listing = json.dumps([function_of(tool) for tool in tools], ensure_ascii=False)
    return {"role": "system", "content": _TOOL_INSTRUCTIONS.format(tools=listing)}


def _calls_as_text(message: dict[str, Any], fmt: ToolFormat) -> dict[str, Any]:
    """An assistant message with its tool calls written into its text, as the family's
    models write them; any other message with its content as text."""
    content = text_of(message.get("content"))
    if message.get("role") != "assistant" or not message.get("tool_calls"):
        return {**message, "content": content}
    calls = [_call_of(call) for call in message["tool_calls"]]
    writer = next((syntax.write for syntax in fmt.syntaxes if syntax.write), None)
    written = writer(calls, fmt.arguments_key) if writer else ""
    plain = {k: v for k, v in message.items() if k != "tool_calls"}
    return {**plain, "content": "\n".join(filter(None, [content, written]))}


def _call_of(call: Any) -> ToolCall:
    """A call of an assistant message (OpenAI's shape, arguments as JSON text or an object)."""
    function = call.get("function", call) if isinstance(call, Mapping) else {}
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    ident = call.get("id") if isinstance(call, Mapping) else None
    return ToolCall(
        str(function.get("name")),
        arguments if isinstance(arguments, dict) else {},
        ident if isinstance(ident, str) else "",
    )


def _short_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mistral's template refuses call ids that are not 9 alphanumeric characters, and OpenAI
    clients send `call_...`: each id becomes 9 characters of its digest, the same in the call
    and in the result that answers it."""

    def short(value: Any) -> Any:
        if not isinstance(value, str) or (len(value) == 9 and value.isalnum()):
            return value
        return hashlib.sha256(value.encode()).hexdigest()[:9]

    fixed = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**call, "id": short(call.get("id"))} if isinstance(call, Mapping) else call
                for call in message["tool_calls"]
            ]
        if "tool_call_id" in message:
            message["tool_call_id"] = short(message["tool_call_id"])
        fixed.append(message)
    return fixed


def text_of(content: Any, where: str = "content") -> str:
    """Message content given as a string or as text parts (OpenAI) or blocks (Anthropic), as
    one string; 400 naming `where` for any other kind of part."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise InvalidRequest(
                    f"{where}: parts of type {kind!r} are not supported here; send text"
                )
            texts.append(str(part.get("text", "")))
        return "\n".join(texts)
    raise InvalidRequest(f"{where}: content must be a string or a list of parts, not {content!r}")
