"""The two chat APIs a provider may speak, as request bodies and the updates read from answers.

Each API is a `Wire`: where the request goes, the headers that carry the key, the JSON body of a
chat request, and how one answer (or one streamed event) becomes an `Update`. Finish reasons are
given in OpenAI's words ("stop", "length"), which is what llamay's own generations use too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Anthropic's messages API requires max_tokens; this is the budget when the caller sets none.
ANTHROPIC_DEFAULT_MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"

_ANTHROPIC_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


class WireError(Exception):
    """The upstream sent an error event, or an answer of a shape neither API has."""


@dataclass(frozen=True)
class Update:
    """What one answer or streamed event adds: text, and the finish reason and token counts once
    the upstream tells them."""

    text: str = ""
    finish_reason: str | None = None
    n_prompt: int | None = None
    n_generated: int | None = None
    done: bool = False  # the stream is over


class OpenAIWire:
    path = "/chat/completions"
    # the generation options a request may carry, by model.generate's names
    options = (
        "max_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
    )

    @staticmethod
    def headers(key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    @staticmethod
    def body(
        model: str,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int | None,
        temperature: float | None,
        stream: bool,
        extra: Mapping[str, Any],
    ) -> dict[str, Any]:
        body = {"model": model, "messages": list(messages), "stream": stream}
        options = {"max_tokens": max_tokens, "temperature": temperature, **extra}
        return body | {key: value for key, value in options.items() if value is not None}

    @staticmethod
    def answer(reply: Any) -> Update:
        try:
            choice = reply["choices"][0]
            usage = reply.get("usage") or {}
            return Update(
                choice["message"].get("content") or "",
                choice.get("finish_reason"),
                usage.get("prompt_tokens"),
                usage.get("completion_tokens"),
                done=True,
            )
        except (KeyError, IndexError, TypeError, AttributeError):
            raise WireError(f"not a chat completion: {_excerpt(reply)}") from None

    @staticmethod
    def event(name: str, data: str) -> Update | None:
        if data == "[DONE]":
            return Update(done=True)
        chunk = _json(data)
        if isinstance(chunk, dict) and "error" in chunk:
            raise WireError(error_message(chunk))
        try:
            usage = chunk.get("usage") or {}
            if not chunk["choices"]:  # the usage chunk some servers send last
                return Update(
                    n_prompt=usage.get("prompt_tokens"), n_generated=usage.get("completion_tokens")
                )
            choice = chunk["choices"][0]
            return Update(
                (choice.get("delta") or {}).get("content") or "",
                choice.get("finish_reason"),
                usage.get("prompt_tokens"),
                usage.get("completion_tokens"),
            )
        except (KeyError, IndexError, TypeError, AttributeError):
            raise WireError(f"not a chat completion chunk: {_excerpt(chunk)}") from None


class AnthropicWire:
    path = "/v1/messages"
    options = ("max_tokens", "temperature", "top_p", "top_k", "stop")

    @staticmethod
    def headers(key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        return headers | ({"x-api-key": key} if key else {})

    @staticmethod
    def body(
        model: str,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int | None,
        temperature: float | None,
        stream: bool,
        extra: Mapping[str, Any],
    ) -> dict[str, Any]:
        # The messages API takes the system prompt beside the conversation, not in it.
        system = [m["content"] for m in messages if m["role"] == "system"]
        turns = [dict(m) for m in messages if m["role"] != "system"]
        body: dict[str, Any] = {
            "model": model,
            "messages": turns,
            "max_tokens": ANTHROPIC_DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
            "stream": stream,
        }
        if system:
            body["system"] = "\n\n".join(_plain_text(content) for content in system)
        options = dict(extra)
        if "stop" in options:
            options["stop_sequences"] = options.pop("stop")
        options["temperature"] = temperature
        return body | {key: value for key, value in options.items() if value is not None}

    @staticmethod
    def answer(reply: Any) -> Update:
        try:
            text = "".join(block["text"] for block in reply["content"] if block["type"] == "text")
            usage = reply.get("usage") or {}
            return Update(
                text,
                _anthropic_finish(reply.get("stop_reason")),
                usage.get("input_tokens"),
                usage.get("output_tokens"),
                done=True,
            )
        except (KeyError, TypeError, AttributeError):
            raise WireError(f"not a message: {_excerpt(reply)}") from None

    @staticmethod
    def event(name: str, data: str) -> Update | None:
        payload = _json(data)
        kind = payload.get("type", name) if isinstance(payload, dict) else name
        try:
            if kind == "error":
                raise WireError(error_message(payload))
            if kind == "message_start":
                usage = payload["message"].get("usage") or {}
                return Update(n_prompt=usage.get("input_tokens"))
            if kind == "content_block_delta" and payload["delta"].get("type") == "text_delta":
                return Update(payload["delta"]["text"])
            if kind == "message_delta":
                usage = payload.get("usage") or {}
                return Update(
                    finish_reason=_anthropic_finish(payload["delta"].get("stop_reason")),
                    n_generated=usage.get("output_tokens"),
                )
            if kind == "message_stop":
                return Update(done=True)
        except (KeyError, TypeError, AttributeError):
            raise WireError(f"not a message event: {_excerpt(payload)}") from None
        return None  # ping, block starts and stops, deltas of other kinds (tool input, thinking)


WIRES: dict[str, type[OpenAIWire] | type[AnthropicWire]] = {
    "openai": OpenAIWire,
    "anthropic": AnthropicWire,
}


def error_message(reply: Any) -> str:
    """The message in an error answer of either API (`{"error": {"message": ...}}`), else the
    answer itself, shortened."""
    if isinstance(reply, dict):
        error = reply.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        if isinstance(reply.get("message"), str):
            return reply["message"]
    return _excerpt(reply)


def _anthropic_finish(reason: str | None) -> str | None:
    return _ANTHROPIC_FINISH.get(reason, reason) if reason is not None else None


def _plain_text(content: Any) -> str:
    """A message's content as text: a string, or the text of a list of content parts."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _json(data: str) -> Any:
    try:
        return json.loads(data)
    except json.JSONDecodeError:
        raise WireError(f"an event that is not JSON: {data[:200]!r}") from None


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 300 else text[:300] + "..."
