"""Chat requests for a model that `$LLAMAY_HOME/config.toml` routes to a remote provider.

The OpenAI and Anthropic chat routes ask `find(name)` before loading anything; a remote model
gets the conversation as text turns (tools and grammars are local features) and its answer is
relayed in the family's shape, streamed when the client streams.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from llamay import providers
from llamay.providers import Provider, Reply
from llamay.server import inference


def find(name: str) -> Provider | None:
    """The provider serving `name`, or None for a local model."""
    return providers.find(name)


def ask(
    provider: Provider,
    messages: Sequence[Mapping[str, Any]],
    *,
    max_tokens: Any,
    temperature: Any,
    stream: bool,
    **extra: Any,
) -> Reply:
    """Send OpenAI-shaped `messages` (content as strings or text parts) to the provider; the
    answer's text deltas. ProviderError (502) when the upstream fails."""
    turns = [
        {"role": m.get("role"), "content": inference.text_of(m.get("content"))} for m in messages
    ]
    return provider.chat(
        turns, max_tokens=max_tokens, temperature=temperature, stream=stream, **extra
    )


def finish_reason(reply: Reply) -> str:
    """The reply's finish reason in OpenAI's words ("stop" where the upstream said none)."""
    return reply.finish_reason if reply.finish_reason in ("stop", "length") else "stop"


def deltas(reply: Reply) -> Iterator[str]:
    """The reply's non-empty text deltas."""
    return (text for text in reply if text)
