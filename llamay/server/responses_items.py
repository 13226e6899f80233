"""The Responses API's request, read into what the chat pipeline takes, and its output items.

A Responses request says the conversation as `input` (a string, or a list of items: messages,
`function_call`s, `function_call_output`s, `reasoning`) and `instructions`; tools are flat
(`{"type": "function", "name", "parameters"}`), the output format is `text.format`. Here they
become chat messages, chat tools and an output grammar for the pipeline (pipeline.py); what
the model answers becomes output items (`message` with `output_text`, or `function_call`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llamay.chat import Answer
from llamay.grammar import Grammar
from llamay.server.concepts import (
    FLAT_CHOICE,
    FLAT_FORMAT,
    FLAT_TOOLS,
    Choice,
    Format,
    OutputFormat,
    Tools,
)
from llamay.server.errors import ApiError
from llamay.server.fields import Field

# Fields of the request that this server cannot honour: 400 rather than silently ignored.
_UNSUPPORTED = {
    "background": "background responses are not supported: send the request and wait",
    "conversation": "conversations are not supported: continue with previous_response_id",
    "prompt": "prompt templates are not supported: send input and instructions",
}
_ROLES = ("user", "system", "developer", "assistant")
_TEXT = Field("text", Format(FLAT_FORMAT), feeds="output")
_TOOLS = Field("tools", Tools(FLAT_TOOLS))
_TOOL_CHOICE = Field("tool_choice", Choice(FLAT_CHOICE))


def item_id(prefix: str) -> str:
    """An id in OpenAI's form: `resp_…`, `msg_…`, `fc_…`, `call_…`."""
    return f"{prefix}_{secrets.token_hex(12)}"


@dataclass
class Request:
    """A checked Responses request, in the chat pipeline's terms."""

    model: str | None
    messages: list[dict[str, Any]]  # the input, as chat messages
    input_items: list[dict[str, Any]]  # the input as items, each with an id (input_items route)
    instructions: str | None
    tools: list[dict[str, Any]]  # as given (flat), echoed in the response
    chat_tools: list[dict[str, Any]] | None  # as inference.py takes them; None: no tools offered
    tool_choice: Any  # as given, echoed
    choice: str  # "auto", "none", "required" or "named"
    named: str | None
    output: OutputFormat | None  # text.format
    sampling: dict[str, Any]  # sampling_kwargs' options, by its names
    stream: bool
    store: bool
    previous_response_id: str | None
    truncate: bool
    echo: dict[str, Any] = field(default_factory=dict)  # fields the response repeats as given
    # several calls in one answer: under auto as parallel_tool_calls says (default true); a
    # forced choice makes one call unless parallel_tool_calls is true
    parallel: bool = True

    def output_grammar(self) -> Grammar | None:
        """The grammar of `text.format` (json_object, json_schema), unless tools are offered:
        then the pipeline holds the answer to the tools' calls instead (pipeline.start)."""
        if self.chat_tools or self.output is None:
            return None
        return self.output.grammar()

    @property
    def text_format(self) -> Mapping[str, Any]:
        """`text.format` as the response repeats it."""
        return dict(self.output.given) if self.output is not None else {"type": "text"}


def read_request(body: Mapping[str, Any], *, need_input: bool = True) -> Request:
    """The request of `POST /v1/responses` (or, without `need_input`, of input_tokens)."""
    for name, why in _UNSUPPORTED.items():
        if body.get(name):
            raise ApiError(400, why, name)
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise ApiError(400, "model must be the name of a model, such as gemma3:270m", "model")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise ApiError(400, "previous_response_id must be a response id", "previous_response_id")
    if model is None and previous is None:
        raise ApiError(400, "model is required: the name of a model, such as gemma3:270m", "model")
    raw_input = body.get("input")
    if raw_input is None and need_input:
        raise ApiError(400, "input is required: a string, or a list of input items", "input")
    messages = input_messages(raw_input) if raw_input is not None else []
    items = stored_input(raw_input) if raw_input is not None else []
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ApiError(400, "instructions must be a string", "instructions")
    tools = _TOOLS.read(body, {})
    tool_choice = body.get("tool_choice")
    choice = _TOOL_CHOICE.read(body, {"tools": tools})
    parallel = _flag(body, "parallel_tool_calls", choice.mode == "auto")
    return Request(
        model=model,
        messages=messages,
        input_items=items,
        instructions=instructions or None,
        tools=_echoed_tools(body.get("tools")),
        chat_tools=tools if choice.mode != "none" else None,
        tool_choice=tool_choice if tool_choice is not None else "auto",
        choice=choice.mode,
        named=choice.name,
        output=_TEXT.read(body, {}),
        sampling={
            "max_tokens": _max_output_tokens(body.get("max_output_tokens")),
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "seed": body.get("seed"),
        },
        stream=_flag(body, "stream", False),
        store=_flag(body, "store", True),
        previous_response_id=previous,
        truncate=_truncation(body.get("truncation")),
        echo={
            "metadata": _metadata(body.get("metadata")),
            "parallel_tool_calls": parallel,
            "reasoning": _reasoning(body.get("reasoning")),
            "truncation": body.get("truncation") or "disabled",
            "user": body.get("user") if isinstance(body.get("user"), str) else None,
        },
        parallel=parallel,
    )


# --- input ---------------------------------------------------------------------------------------


def input_messages(value: Any) -> list[dict[str, Any]]:
    """Chat messages (chat.chat_prompt's shape) of a Responses `input`: a string is one
    user message; items are messages (`type` "message" or none), function calls (joined to the
    assistant message before them), their outputs (tool messages) and reasoning (dropped:
    templates leave past reasoning out of the prompt)."""
    if isinstance(value, str):
        if not value:
            raise ApiError(400, "input must not be empty", "input")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise ApiError(400, "input must be a string or a non-empty list of input items", "input")
    messages: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call_id -> function name, for the tool messages
    for index, item in enumerate(value):
        where = f"input[{index}]"
        if not isinstance(item, Mapping):
            raise ApiError(400, f"{where} must be an input item object", "input")
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, where))
        elif kind == "function_call":
            call = _function_call(item, where)
            names[call["id"]] = call["function"]["name"]
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            call_id = _string(item, "call_id", where)
            output = item.get("output")
            text = output if isinstance(output, str) else _content_text(output, where)
            tool = {"role": "tool", "tool_call_id": call_id, "content": text}
            if call_id in names:
                tool["name"] = names[call_id]
            messages.append(tool)
        elif kind == "reasoning":
            continue
        else:
            raise ApiError(
                400,
                f"{where}: input items of type {kind!r} are not supported here; send message, "
                "function_call, function_call_output or reasoning items",
                "input",
            )
    if not messages:
        raise ApiError(400, "input holds no message", "input")
    return messages


def stored_input(value: str | list[Any]) -> list[dict[str, Any]]:
    """A checked `input` (input_messages has read it) as the items `GET
    /v1/responses/{id}/input_items` lists: each with an id (the client's, or a new one), a
    message's text as content parts, a status, as OpenAI's API lists them."""
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    items = []
    for item in value:
        kind = item.get("type", "message")
        given = item.get("id")
        if kind == "message":
            parts = "output_text" if item["role"] == "assistant" else "input_text"
            content = item["content"]
            if isinstance(content, str):
                content = [{"type": parts, "text": content}]
            stored = {
                "id": "msg",
                "type": "message",
                "role": item["role"],
                "content": [{"type": p["type"], "text": p["text"]} for p in content],
                "status": "completed",
            }
        elif kind == "function_call":
            stored = {
                "id": "fc",
                "type": kind,
                "call_id": item["call_id"],
                "name": item["name"],
                "arguments": item.get("arguments", "{}"),
                "status": "completed",
            }
        elif kind == "function_call_output":
            stored = {
                "id": "fco",
                "type": kind,
                "call_id": item["call_id"],
                "output": item.get("output"),
                "status": "completed",
            }
        else:  # reasoning, as the client sent it
            stored = {**item, "id": "rs"}
        stored["id"] = given if isinstance(given, str) and given else item_id(stored["id"])
        items.append(stored)
    return items


def _message(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in _ROLES:
        raise ApiError(400, f"{where}: role must be one of {', '.join(_ROLES)}", "input")
    content = item.get("content")
    return {"role": role, "content": _content_text(content, where)}


def _content_text(content: Any, where: str) -> str:
    """A message's content: a string, or text parts (`input_text`, `output_text`, `text`)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: content must be a string or a list of parts", "input")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in ("input_text", "output_text", "text") or not isinstance(
            part.get("text"), str
        ):
            raise ApiError(
                400,
                f"{where}: content parts of type {kind!r} are not supported here; send "
                "input_text parts",
                "input",
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _function_call(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A function_call item as a chat tool call."""
    name = _string(item, "name", where)
    call_id = _string(item, "call_id", where)
    arguments = item.get("arguments", "{}")
    if not isinstance(arguments, str):
        raise ApiError(400, f"{where}: arguments must be a JSON string", "input")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _string(item: Mapping[str, Any], name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str) or not value:
        raise ApiError(400, f"{where}: {name} must be a non-empty string", "input")
    return value


# --- options -------------------------------------------------------------------------------------


def _echoed_tools(value: Any) -> list[dict[str, Any]]:
    """The tools (read already) as the response repeats them."""
    return [
        {
            "type": "function",
            "name": tool["name"],
            "description": tool.get("description"),
            "parameters": tool.get("parameters"),
            "strict": tool.get("strict", True),
        }
        for tool in value or ()
    ]


def _flag(body: Mapping[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"{name} must be true or false", name)
    return value


def _max_output_tokens(value: Any) -> Any:
    """At least one token (the range table allows 0, which chat and text completions take)."""
    if isinstance(value, int) and not isinstance(value, bool) and value < 1:
        raise ApiError(
            400, f"max_output_tokens must be at least 1, not {value}", "max_output_tokens"
        )
    return value


def _truncation(value: Any) -> bool:
    if value in (None, "disabled"):
        return False
    if value == "auto":
        return True
    raise ApiError(400, "truncation must be 'auto' or 'disabled'", "truncation")


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ApiError(400, "metadata must map strings to strings", "metadata")
    return dict(value)


def _reasoning(value: Any) -> dict[str, Any]:
    if value is None:
        return {"effort": None, "summary": None}
    if not isinstance(value, Mapping):
        raise ApiError(400, "reasoning must be an object such as {'effort': 'low'}", "reasoning")
    return {"effort": value.get("effort"), "summary": value.get("summary")}


# --- output --------------------------------------------------------------------------------------


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(message_id: str, text: str | None, status: str) -> dict[str, Any]:
    """An assistant message output item (`text` None: not begun, no part yet)."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [] if text is None else [text_part(text)],
    }


def call_item(name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": item_id("fc"),
        "type": "function_call",
        "call_id": item_id("call"),
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def output_items(answer: Answer, status: str, message_id: str) -> list[Any]:
    """The output items of a whole answer (answer.py: its reasoning, text and calls in the
    model's own formats): a reasoning item when the model reasoned, a message with its text
    (none when it only called), then a function_call per call."""
    items: list[Any] = []
    if answer.reasoning:
        items.append(reasoning_item(answer.reasoning))
    if answer.text.strip() or not answer.calls:
        text = answer.text.strip() if answer.calls else answer.text
        items.append(message_item(message_id, text, status))
    items += [call_item(call.name, call.arguments_json) for call in answer.calls]
    return items


def reasoning_item(text: str) -> dict[str, Any]:
    """A reasoning output item: the model's thinking, as reasoning_text content."""
    return {
        "type": "reasoning",
        "id": item_id("rs"),
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
    }


def as_messages(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Output items as the chat messages a later turn's prompt writes them as."""
    return input_messages([dict(item) for item in items if item.get("type") != "reasoning"])
