"""Server-sent events: the streaming format of the OpenAI and Anthropic APIs.

Each event leaves as soon as it is made: waitress writes every chunk the app yields, and the
`X-Accel-Buffering: no` header tells nginx not to hold the stream back (docs/deploy.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator
from typing import Any

import falcon


def event(data: Any, name: str | None = None) -> bytes:
    """One event: `event: NAME` (when named) and `data: JSON` (a str is sent as it is)."""
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {text}\n\n".encode()


def respond(
    resp: falcon.Response,
    events: Generator[bytes, None, None],
    on_close: Callable[[], None] = lambda: None,
) -> None:
    """Answer with an event stream; the events are made as the client reads them. When the
    WSGI server closes the stream (at its end, or because the client went away, even before
    the first event) `events` is closed and `on_close` called: give back there what the
    stream holds."""
    resp.content_type = "text/event-stream; charset=utf-8"
    resp.set_header("Cache-Control", "no-cache")
    resp.set_header("X-Accel-Buffering", "no")
    resp.stream = _Stream(events, on_close)


class _Stream:
    """An iterable whose close() always runs `on_close` (a generator that never started
    skips its own `finally` when closed)."""

    def __init__(self, events: Generator[bytes, None, None], on_close: Callable[[], None]) -> None:
        self._events = events
        self._on_close = on_close

    def __iter__(self) -> Iterator[bytes]:
        return self._events

    def close(self) -> None:
        try:
            self._events.close()
        finally:
            self._on_close()
