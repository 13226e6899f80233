"""The Anthropic Messages API: /v1/messages, /v1/messages/count_tokens, and /v1/models in
Anthropic's shape (for requests that carry `anthropic-version`).

Messages are translated into the OpenAI-shaped conversation inference.py renders: text blocks
become text, tool_use blocks tool calls, tool_result blocks tool messages. Both API versions the
SDKs send (and both ways of giving the key) are accepted; unknown fields are ignored.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import falcon

from llamay import chat
from llamay.chat.spellings import ANTHROPIC_CHOICE, ANTHROPIC_FORMAT, ANTHROPIC_TOOLS
from llamay.server import openapi, pipeline, sse
from llamay.server.concepts import Choice, Format, Tools
from llamay.server.errors import ApiError, error_body, from_exception
from llamay.server.fields import Custom, Field, Flag, Invalid, Shape, Stop, Text, Values, param
from llamay.server.state import Route, ServerState

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "cancelled": "end_turn"}
_NO_MODEL = "model: a model name is required, such as gemma3:270m"
_NO_MESSAGES = "messages: a non-empty list of messages is required"


def add_routes(app: falcon.App, state: ServerState) -> None:
    app.add_route("/v1/messages", _Messages(state))
    app.add_route("/v1/messages/count_tokens", _CountTokens(state))
    openapi.describe(
        "POST",
        "/v1/messages",
        "Anthropic message",
        tag="anthropic",
        request=MESSAGES.schema(),
        response={"type": "object"},
        errors=openapi.MODEL_ROUTE_ERRORS,
        stream_type="text/event-stream",
    )
    openapi.describe(
        "POST",
        "/v1/messages/count_tokens",
        "Anthropic token count",
        tag="anthropic",
        request=COUNT_TOKENS.schema(),
        response={"type": "object", "properties": {"input_tokens": {"type": "integer"}}},
        errors=openapi.MODEL_ROUTE_ERRORS,
    )


def model_list(names: Mapping[str, int]) -> dict[str, Any]:
    """/v1/models in Anthropic's shape (one page holding every model)."""
    data = [model_object(name, made) for name, made in names.items()]
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }


def model_object(name: str, made: int) -> dict[str, Any]:
    created_at = datetime.fromtimestamp(made, timezone.utc).isoformat().replace("+00:00", "Z")
    return {"type": "model", "id": name, "display_name": name, "created_at": created_at}


class _Request:
    """A Messages request read into the pipeline's terms (the conversation OpenAI-shaped)."""

    def __init__(self, values: Values) -> None:
        self.name: str = values["model"]
        self.tools = values["tools"]
        self.choice = values["tool_choice"]
        self.conversation = (values["system"] or []) + values["messages"]
        self.thinking: bool | None = values["thinking"]

    def chat(self, model: Any, sampling: dict[str, Any] | None = None, **options: Any) -> Any:
        """The pipeline's request for this message (`options`: parallel, output, stream,
        spelling), for the local model or a remote provider."""
        return pipeline.GenerationRequest(
            model,
            self.conversation,
            sampling=sampling or {},
            tools=self.tools,
            tool_choice=self.choice.mode,
            tool_name=self.choice.name,
            template_kwargs={} if self.thinking is None else {"enable_thinking": self.thinking},
            reasoning=self.thinking is not False,
            **options,
        )


class _Messages(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = MESSAGES.read(self.body(req))
        request = _Request(values)
        stream = values["stream"]
        generation = request.chat(
            pipeline.target(self.state, request.name),
            MESSAGES.sampling(values),
            parallel=request.choice.parallel is not False,
            output=values["output_config"],
            stream=stream,
            spelling=values.spelling,
        )
        run = pipeline.start(generation)
        reply = _Reply(self.state, request.name, run)
        pipeline.answer(req, resp, run, reply.stream if stream else None, reply.collect)


class _CountTokens(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self.body(req)
        request = _Request(COUNT_TOKENS.read(body))
        model = self.state.models.get(request.name)
        resp.media = {"input_tokens": len(request.chat(model).prompt())}


class _Reply:
    """One assistant message, collected or streamed: the run's events rendered as thinking,
    text and tool_use blocks, in that order."""

    def __init__(self, state: ServerState, name: str, run: pipeline.Runner) -> None:
        self.state = state
        self.name = name
        self.run = run
        self.answer = run.answers[0]
        self.id = f"msg_{secrets.token_hex(12)}"

    def _stop(self) -> tuple[str, str | None]:
        outcome = self.run.outcome(0)
        if self.answer.calls:
            return "tool_use", None
        if outcome.stop_sequence is not None:
            return "stop_sequence", outcome.stop_sequence
        return _STOP_REASONS[outcome.finish_reason], None

    def _usage(self) -> dict[str, int]:
        n_prompt, n_generated = self.run.usage(self.state)
        return {"input_tokens": n_prompt, "output_tokens": n_generated}

    def _message(
        self,
        content: list[Any],
        stop_reason: str | None,
        stop_sequence: str | None,
        usage: dict[str, int],
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.name,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }

    def collect(self) -> dict[str, Any]:
        for _ in self.run.events():
            pass
        self.run.finish(0)
        answer = self.answer
        content: list[dict[str, Any]] = []
        if answer.reasoning:
            content.append({"type": "thinking", "thinking": answer.reasoning, "signature": ""})
        if answer.text.strip() or not answer.calls:
            text = answer.text.strip() if answer.calls else answer.text
            content.append({"type": "text", "text": text})
        content += [_tool_use(call) for call in answer.calls]
        return self._message(content, *self._stop(), self._usage())

    def stream(self) -> Iterator[bytes]:
        """message_start, then for each block content_block_start, its deltas (thinking_delta,
        text_delta, or a tool_use block's input as one input_json_delta once the call is
        complete), content_block_stop; message_delta (stop reason, cumulative usage),
        message_stop."""
        pieces = self.run.events()
        blocks = _Blocks()
        try:
            usage = {"input_tokens": self.run.n_prompt, "output_tokens": 0}
            start = self._message([], None, None, usage)
            yield sse.event({"type": "message_start", "message": start}, "message_start")
            for _, _, events in pieces:
                for event in events:
                    yield from blocks.event(event)
            for event in self.run.finish(0):
                yield from blocks.event(event)
            yield from blocks.close(final=True)
            stop_reason, stop_sequence = self._stop()
            yield sse.event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                    "usage": self._usage(),
                },
                "message_delta",
            )
            yield sse.event({"type": "message_stop"}, "message_stop")
        except Exception as error:  # the status line is gone: report in the stream
            yield sse.event(error_body("anthropic", from_exception(error)), "error")
        finally:
            pieces.close()


def _tool_use(call: Any) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_{call.id}",
        "name": call.name,
        "input": call.arguments,
    }


class _Blocks:
    """The content blocks of a streamed message: a block opens when an event of another kind
    arrives (thinking, text, one tool_use per call) and closes when the next opens."""

    def __init__(self) -> None:
        self.index = -1
        self.kind: str | None = None
        self.leading = ""  # blank text before the first block: the text block's, if it is first

    def _open(self, block: dict[str, Any]) -> Iterator[bytes]:
        yield from self.close()
        self.index += 1
        self.kind = block["type"]
        if self.kind != "text":
            self.leading = ""
        yield sse.event(
            {"type": "content_block_start", "index": self.index, "content_block": block},
            "content_block_start",
        )
        if self.index == 0:
            yield sse.event({"type": "ping"}, "ping")

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse.event(
            {"type": "content_block_delta", "index": self.index, "delta": delta},
            "content_block_delta",
        )

    def close(self, final: bool = False) -> Iterator[bytes]:
        if final and self.kind is None:  # an empty answer is one (blank) text block
            yield from self._open({"type": "text", "text": ""})
            if self.leading:
                yield self._delta({"type": "text_delta", "text": self.leading})
        if self.kind is not None:
            if self.kind == "thinking":
                yield self._delta({"type": "signature_delta", "signature": ""})
            yield sse.event(
                {"type": "content_block_stop", "index": self.index}, "content_block_stop"
            )
            self.kind = None

    def event(self, event: Any) -> Iterator[bytes]:
        if event.kind == "reasoning":
            if self.kind != "thinking":
                yield from self._open({"type": "thinking", "thinking": "", "signature": ""})
            yield self._delta({"type": "thinking_delta", "thinking": event.text})
        elif event.kind == "text":
            text = event.text
            if self.kind != "text":
                if not text.strip():  # no block for the blank lines between blocks
                    if self.index < 0:
                        self.leading += text
                    return
                text, self.leading = self.leading + text, ""
                yield from self._open({"type": "text", "text": ""})
            yield self._delta({"type": "text_delta", "text": text})
        else:
            yield from self._open({**_tool_use(event.call), "input": {}})
            yield self._delta(
                {"type": "input_json_delta", "partial_json": event.call.arguments_json}
            )


# --- request translation ------------------------------------------------------------------------


def _thinking(value: Any) -> bool | None:
    """`thinking` ({"type": "enabled", "budget_tokens": N} or {"type": "disabled"}) as the
    template's enable_thinking."""
    kind = value.get("type") if isinstance(value, Mapping) else None
    if kind not in ("enabled", "disabled", "adaptive"):
        raise Invalid("thinking: type must be enabled, disabled or adaptive")
    return kind != "disabled"


def _system(system: Any) -> list[dict[str, Any]]:
    if system == "":
        return []
    return [{"role": "system", "content": chat.text_of(system, "system")}]


def _messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise Invalid(_NO_MESSAGES)
    return [m for raw in messages for m in _message(raw)]


def _message(raw: Any) -> list[dict[str, Any]]:
    """One Anthropic message as OpenAI-shaped messages (tool results become tool messages)."""
    if not isinstance(raw, Mapping) or raw.get("role") not in ("user", "assistant", "system"):
        raise ApiError(
            400, "messages: each message needs a role of 'user' or 'assistant' and content"
        )
    role = raw["role"]
    content = raw.get("content")
    if role == "system" or isinstance(content, str):
        return [{"role": role, "content": chat.text_of(content, "messages")}]
    if not isinstance(content, list):
        raise ApiError(400, "messages: content must be a string or a list of blocks")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind in ("thinking", "redacted_thinking") and role == "assistant":
            continue  # earlier reasoning is not part of the prompt (templates drop it too)
        elif kind == "tool_use" and role == "assistant":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            function = {"name": block.get("name"), "arguments": arguments}
            calls.append({"id": block.get("id"), "type": "function", "function": function})
        elif kind == "tool_result" and role == "user":
            text = chat.text_of(block.get("content") or "", "tool_result")
            if block.get("is_error"):
                text = f"Error: {text}"
            results.append(
                {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text}
            )
        else:
            raise ApiError(
                400, f"messages: {role} content blocks of type {kind!r} are not supported"
            )
    messages = list(results)
    if texts or calls or not results:
        message: dict[str, Any] = {"role": role, "content": "\n".join(texts)}
        if calls:
            message["tool_calls"] = calls
        messages.append(message)
    return messages


# --- the request bodies, declared once -----------------------------------------------------------

_TEXT_OR_BLOCKS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}
_MESSAGE = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {"role": {"enum": ["user", "assistant", "system"]}, "content": _TEXT_OR_BLOCKS},
}
_THINKING = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"enum": ["enabled", "disabled", "adaptive"]},
        "budget_tokens": {"type": "integer"},
    },
}


def _conversation() -> tuple[Field, ...]:
    """What a message and its token count read: the conversation, its tools and its thinking."""
    return (
        Field("model", Text(nonempty=True), required=_NO_MODEL, invalid=_NO_MODEL),
        Field("system", Custom(_system, _TEXT_OR_BLOCKS), "the system prompt"),
        Field(
            "messages",
            Custom(_messages, {"type": "array", "minItems": 1, "items": _MESSAGE}),
            required=_NO_MESSAGES,
        ),
        Field("tools", Tools(ANTHROPIC_TOOLS)),
        Field("tool_choice", Choice(ANTHROPIC_CHOICE)),
        Field(
            "thinking",
            Custom(_thinking, _THINKING),
            "the template's enable_thinking (left to the template without it)",
            feeds="template_kwargs",
        ),
    )


MESSAGES = Shape(
    *_conversation(),
    Field("max_tokens", param("max_tokens"), required="max_tokens: Field required"),
    Field("stop_sequences", Stop(), feeds="stop"),
    Field("temperature", param("temperature")),
    Field("top_p", param("top_p")),
    Field("top_k", param("top_k")),
    Field("seed", param("seed"), "llamay's: the sampler's seed"),
    Field("stream", Flag(), "answer as server-sent events", default=False),
    Field(
        "output_config",
        Format(ANTHROPIC_FORMAT),
        "format: the JSON schema of the answer",
        feeds="output",
    ),
)
COUNT_TOKENS = Shape(*_conversation())
