"""The runner for a model that `$LLAMAY_HOME/config.toml` routes to a remote provider.

The pipeline chooses it (pipeline.target, pipeline.start) for a request whose model a provider
serves. `start` sends the conversation as text turns with the options the provider's API
takes (providers/wire.py: max_tokens, temperature, top_p, stop, and seed and the penalties for
OpenAI's, top_k for Anthropic's), and refuses, with a 400 naming the field as the client spelled
it, whatever it cannot pass on: tools, an output format, logprobs, several choices, a raw
prompt, the template's variables, any other option. The answer is a `RemoteRun`: the same
events a local run makes (pipeline.Runner), so the family's renderer relays it in its shape,
streamed when the client streams, without knowing where it came from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from llamay import chat, providers
from llamay.chat import Answer, Event
from llamay.engine import ranges
from llamay.engine.generate import Piece
from llamay.providers import Provider, Reply
from llamay.providers.wire import WIRES
from llamay.server import inference
from llamay.server.errors import ApiError

if TYPE_CHECKING:
    from llamay.server.pipeline import GenerationRequest
    from llamay.server.state import ServerState


def find(name: str) -> Provider | None:
    """The provider serving `name`, or None for a local model."""
    return providers.find(name)


def start(provider: Provider, request: GenerationRequest) -> RemoteRun:
    """Send the request's conversation to the provider that serves its model, streamed when
    the client streams: 400 for what the provider cannot be sent (`refused`), ProviderError
    (502) when the upstream fails."""
    options = WIRES[provider.api].options
    what = refused(request, options)
    if what is not None:
        field = request.spelling.get(what, what)
        raise ApiError(
            400,
            f"{field} cannot be passed on to the remote provider {provider.config.name!r} that "
            f"serves {provider.name}: it is sent the conversation's text and "
            f"{', '.join(options)}",
            field,
        )
    turns = [
        {"role": m.get("role"), "content": chat.text_of(m.get("content"))}
        for m in request.messages or ()
    ]
    sampling = {name: v for name, v in request.sampling.items() if name in options}
    reply = provider.chat(
        turns,
        max_tokens=sampling.pop("max_tokens", None),
        temperature=sampling.pop("temperature", None),
        stream=request.stream,
        **sampling,
    )
    return RemoteRun(provider.name, reply)


def refused(request: GenerationRequest, options: tuple[str, ...]) -> str | None:
    """What of `request` a provider whose API takes `options` cannot be sent (by what the
    pipeline calls it; the request's spelling names the client's field), or None. An option
    at the value that switches its stage off (a penalty of 0) asks for nothing, and is left
    out rather than refused."""
    if request.prompts is not None:
        return "prompt"  # a raw prompt: the providers take conversations
    if any(_not_text(message) for message in request.messages or ()):
        return "messages"
    for concept, asked in (
        ("tools", request.offered),
        ("output", request.output),
        ("logprobs", "logprobs" in request.sampling),
        ("n", request.n != 1),
        ("echo", request.echo),
        ("template_kwargs", request.template_kwargs),
        ("truncate", request.truncate),
        ("context", request.context is not None),
    ):
        if asked:
            return concept
    # an option at the value that switches its stage off asks for nothing: left out
    return next(
        (
            name
            for name, value in request.sampling.items()
            if name not in options and value != ranges.OFF.get(name)
        ),
        None,
    )


def _not_text(message: Any) -> bool:
    """Whether a message is more than a role and its text: a tool call or a tool's result."""
    return not isinstance(message, Mapping) or bool(
        message.get("tool_calls") or message.get("role") == "tool"
    )


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
