"""Server-sent events, as both remote APIs stream them: `event:` and `data:` lines, a blank line
ending each event."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(event name, data) per event; the name is "message" when the event gives none, and
    several `data:` lines join with newlines, as the EventSource specification says."""
    name, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
        # ":" comments (keep-alives), `id:` and `retry:` mean nothing to a one-shot reader.
    if data:
        yield name, "\n".join(data)
