"""The Responses API's request, read into what the chat pipeline takes, and its output items.

A Responses request says the conversation as `input` (a string, or a list of items: messages,
`function_call`s, `function_call_output`s, `reasoning`) and `instructions`; tools are flat
(`{"type": "function", "name", "parameters"}`), the output format is `text.format`. Here they
become chat messages, chat tools and an output grammar for the pipeline (pipeline.py); what
the model answers becomes output items (`message` with `output_text`, or `function_call`).
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llamay.chat import Answer
from llamay.chat.spellings import FLAT_CHOICE, FLAT_FORMAT, FLAT_TOOLS, OutputFormat
from llamay.grammar import Grammar
from llamay.server.concepts import Choice, Format, Tools
from llamay.server.errors import ApiError
from llamay.server.fields import (
    Anything,
    Custom,
    Field,
    Flag,
    Invalid,
    OneOf,
    Refused,
    Shape,
    Text,
    param,
)

_ROLES = ("user", "system", "developer", "assistant")
_NO_MODEL = "model is required: the name of a model, such as gemma3:270m"


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
    sampling: dict[str, Any]  # model.generate's arguments by its names (None: not given)
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
    values = (REQUEST if need_input else INPUT_TOKENS).read(body)
    model, previous = values["model"], values["previous_response_id"]
    if model is None and previous is None:
        raise ApiError(400, _NO_MODEL, "model")
    raw_input = body.get("input")
    tools, choice = values["tools"], values["tool_choice"]
    parallel = values["parallel_tool_calls"]
    if parallel is None:
        parallel = choice.mode == "auto"
    return Request(
        model=model,
        messages=values["input"] or [],
        input_items=stored_input(raw_input) if raw_input is not None else [],
        instructions=values["instructions"] or None,
        tools=_echoed_tools(body.get("tools")),
        chat_tools=tools if choice.mode != "none" else None,
        tool_choice=body["tool_choice"] if body.get("tool_choice") is not None else "auto",
        choice=choice.mode,
        named=choice.name,
        output=values["text"],
        sampling={
            "max_tokens": values["max_output_tokens"],
            **{name: values[name] for name in ("temperature", "top_p", "seed")},
        },
        stream=values["stream"],
        store=values["store"],
        previous_response_id=previous,
        truncate=values["truncation"] == "auto",
        echo={
            "metadata": values["metadata"] or {},
            "parallel_tool_calls": parallel,
            "reasoning": values["reasoning"] or {"effort": None, "summary": None},
            "truncation": values["truncation"],
            "user": values["user"] if isinstance(values["user"], str) else None,
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


def _metadata(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise Invalid("{name} must map strings to strings")
    return dict(value)


def _reasoning(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise Invalid("{name} must be an object such as {'effort': 'low'}")
    return {"effort": value.get("effort"), "summary": value.get("summary")}


# --- the request body, declared once ---------------------------------------------------------------

_ITEM = {"type": "object"}
_SAMPLING = ("temperature", "top_p", "seed")

REQUEST = Shape(
    # what this server cannot honour: 400 rather than silently ignored
    Field(
        "background",
        Refused("background responses are not supported: send the request and wait"),
    ),
    Field(
        "conversation",
        Refused("conversations are not supported: continue with previous_response_id"),
    ),
    Field("prompt", Refused("prompt templates are not supported: send input and instructions")),
    Field(
        "model",
        Text(nonempty=True),
        "a model name, such as gemma3:270m (else the previous response's)",
        invalid="model must be the name of a model, such as gemma3:270m",
    ),
    Field(
        "previous_response_id",
        Text(),
        "a stored response to go on from, in a fork of its context",
        invalid="previous_response_id must be a response id",
    ),
    Field(
        "input",
        Custom(input_messages, {"type": ["string", "array"], "items": _ITEM}),
        "a string, or a list of input items",
        required="input is required: a string, or a list of input items",
    ),
    Field("instructions", Text(), "the system prompt"),
    Field("tools", Tools(FLAT_TOOLS)),
    Field("tool_choice", Choice(FLAT_CHOICE)),
    Field(
        "parallel_tool_calls",
        Flag(),
        "more than one call per answer (default: under tool_choice auto only)",
    ),
    Field("text", Format(FLAT_FORMAT), "format: the answer's output format", feeds="output"),
    Field("max_output_tokens", param("max_tokens", low=1), feeds="max_tokens"),
    *(Field(name, param(name)) for name in _SAMPLING),
    Field("stream", Flag(), "answer as server-sent events", default=False),
    Field("store", Flag(), "keep the response (and its context) to go on from", default=True),
    Field(
        "truncation",
        OneOf(("auto", "disabled")),
        "auto: cut a conversation longer than the context",
        default="disabled",
        invalid="truncation must be 'auto' or 'disabled'",
    ),
    Field(
        "metadata",
        Custom(_metadata, {"type": "object", "additionalProperties": {"type": "string"}}),
    ),
    Field("reasoning", Custom(_reasoning, {"type": "object"})),
    Field("user", Anything({"type": "string"})),
)
# input_tokens counts a request's input: a previous response's alone will do
INPUT_TOKENS = REQUEST.replacing(dataclasses.replace(REQUEST["input"], required=None))


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
