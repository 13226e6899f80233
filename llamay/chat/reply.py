"""What `Model.chat` gives back: the answer whole (`ChatResult`), or as it is made (`ChatStream`).

A stream yields the same `Event`s the server's API families render (answer.py): new text, new
reasoning, or one tool call once it is complete (its name, its arguments parsed, its id), then
the `ChatResult` of the whole answer. Its `finish_reason` is the one every family reports:
"tool_calls" when the answer made calls, else the generation's "stop", "length" or
"cancelled".
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from llamay.chat.answer import Answer, Event
from llamay.chat.calls import ToolCall
from llamay.engine.generate import Generation


def finish_reason_of(calls: Sequence[ToolCall], generation_reason: str) -> str:
    """ "tool_calls" when the answer made calls, else the generation's own reason."""
    return "tool_calls" if calls else generation_reason


@dataclass(frozen=True)
class Usage:
    """Token counts: the prompt's (as rendered by the chat template) and the answer's."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ChatResult:
    """One assistant answer: `text` (without the reasoning), `reasoning` (what a reasoning model
    thought first, "" for others), `tool_calls` (each with `.name`, `.arguments` as a dict and
    `.id`), `finish_reason` ("stop", "length", "tool_calls" or "cancelled"), `usage`, and the
    generated `tokens`."""

    text: str
    reasoning: str
    tool_calls: list[ToolCall]
    finish_reason: str
    usage: Usage
    tokens: list[int]

    @classmethod
    def of(cls, answer: Answer, generation: Generation, n_prompt: int) -> ChatResult:
        """The result of a finished generation, as `answer` read it."""
        reason = generation.finish_reason or "cancelled"
        return cls(
            text=answer.text,
            reasoning=answer.reasoning,
            tool_calls=list(answer.calls),
            finish_reason=finish_reason_of(answer.calls, reason),
            usage=Usage(n_prompt, generation.n_generated),
            tokens=list(generation.tokens),
        )

    def message(self) -> dict[str, Any]:
        """The answer as an assistant message (OpenAI's shape), to append to the conversation
        before the tools' results: content, and tool_calls with their ids and JSON
        arguments."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["content"] = self.text.strip() or None
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in self.tool_calls
            ]
        return message


class ChatStream(Iterator["Event | ChatResult"]):
    """An answer as it is made: `Event`s (kind "text", "reasoning" or "call"), then its
    `ChatResult`, which `result` also holds from then on. `cancel()` ends the answer between
    two tokens (its finish_reason is then "cancelled"); closing the stream, or leaving a `with`
    block, before the end cancels it too. The generation's pages go back to the cache at the
    end either way."""

    def __init__(self, generation: Generation, answer: Answer, n_prompt: int) -> None:
        self.generation = generation
        self.result: ChatResult | None = None
        self._answer = answer
        self._n_prompt = n_prompt
        self._items = self._run()

    def __next__(self) -> Event | ChatResult:
        return next(self._items)

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cancel(self) -> None:
        """End the answer between two tokens; what it wrote so far is its result."""
        self.generation.cancel()

    def close(self) -> None:
        """Stop reading: an unfinished answer is cancelled and its pages freed."""
        self._items.close()

    def collect(self) -> ChatResult:
        """Read the rest of the answer and return its result."""
        for _ in self._items:
            pass
        assert self.result is not None
        return self.result

    def _run(self) -> Iterator[Event | ChatResult]:
        generation = self.generation
        try:
            for piece in generation.pieces():
                yield from self._answer.feed(piece)
            yield from self._answer.finish()
            self.result = ChatResult.of(self._answer, generation, self._n_prompt)
            yield self.result
        finally:
            if generation.finish_reason is None:
                generation.cancel()  # the scheduler frees the context it made
            else:
                generation.context.close()
