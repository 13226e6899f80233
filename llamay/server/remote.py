"""The runner for a model that `$LLAMAY_HOME/config.toml` routes to a remote provider.

A chat route asks `find(name)` before loading anything; for a remote model, `start` sends the
conversation as text turns (tools and grammars are local features) and returns a `RemoteRun`:
the same events a local run makes (pipeline.Runner), so the family's renderer relays the answer
in its shape, streamed when the client streams, without knowing where it came from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from llamay import providers
from llamay.chat import Answer, Event, text_of
from llamay.engine.generate import Piece
from llamay.providers import Provider, Reply
from llamay.server import inference

if TYPE_CHECKING:
    from llamay.server.state import ServerState


def find(name: str) -> Provider | None:
    """The provider serving `name`, or None for a local model."""
    return providers.find(name)


def start(
    provider: Provider,
    messages: Sequence[Mapping[str, Any]],
    *,
    max_tokens: Any,
    temperature: Any,
    stream: bool,
    **extra: Any,
) -> RemoteRun:
    """Send OpenAI-shaped `messages` (content as strings or text parts) to the provider (with
    `stream`, asking it to stream); `extra` (top_p, stop, seed...) goes into its request as
    the client gave it. ProviderError (502) when the upstream fails."""
    turns = [{"role": m.get("role"), "content": text_of(m.get("content"))} for m in messages]
    reply = provider.chat(
        turns, max_tokens=max_tokens, temperature=temperature, stream=stream, **extra
    )
    return RemoteRun(provider.name, reply)


class RemoteRun:
    """A provider's reply as a run of one choice: each text delta a Piece (no token, so no
    logprobs), read by a plain Answer into text events."""

    logprobs = False
    model = None

    def __init__(self, name: str, reply: Reply) -> None:
        self.name = name
        self.reply = reply
        self.answers = [Answer(None)]
        self.generations: list[Any] = []  # nothing to cancel: the reply closes with the run

    @property
    def n_prompt(self) -> int:
        """The prompt's tokens as the upstream counted them (0 until it says)."""
        return self.reply.n_prompt or 0

    def events(self) -> Iterator[tuple[int, Any, list[Event]]]:
        for text in self.reply:
            if text:
                piece = Piece(None, text)
                yield 0, piece, self.answers[0].feed(piece)

    def finish(self, index: int) -> list[Event]:
        return []

    def finish_reason(self, index: int) -> str:
        """The upstream's finish reason in OpenAI's words ("stop" where it said none)."""
        reason = self.reply.finish_reason
        return reason if reason in ("stop", "length") else "stop"

    def outcome(self, index: int) -> inference.Outcome:
        n_generated = self.reply.n_generated or 0
        return inference.Outcome(self.finish_reason(index), None, self.n_prompt, n_generated)

    def usage(self, state: ServerState) -> tuple[int, int]:
        """(prompt tokens, generated tokens) as the upstream counted them, in the metrics
        under the local name."""
        n_prompt, n_generated = self.n_prompt, self.reply.n_generated or 0
        state.metrics.tokens(self.name, n_prompt, n_generated)
        return n_prompt, n_generated

    def release(self) -> None:
        self.reply.close()
