"""The conversation a chat context keeps, so that turns can be added to it and a client can
show it (llamay's own API, native.py).

A context made from `messages` records them in its note (Context.note, which every snapshot
carries), under "messages": `{"role", "content"}` turns whose last is the assistant's, open —
the text the context holds after the last generation prompt. Generating appends to that turn;
new turns close it, each in the template's own words.

Adding turns renders the conversation once, with the open turn's text replaced by a marker,
and keeps what the chat template writes after the marker: the end of the open turn, the new
turns and the next generation prompt. What the template writes for earlier turns (trimmed, or
without their reasoning) never matters: the context keeps the tokens it holds, and only the
new text is fed.

A note comes from outside when a snapshot is uploaded, so it is read defensively: anything but
a list of such turns ending with an assistant's is no conversation.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from llamay.chat import render_chat, text_of
from llamay.engine import Model
from llamay.server.errors import ApiError

NOTE_KEY = "messages"
ROLES = ("system", "user", "assistant")
# The roles of turns added to a conversation: a system message begins one (templates gather
# them at the top, where the context already holds its own).
ADDED_ROLES = ("user", "assistant")

Turn = dict[str, str]


def of(note: Any) -> list[Turn] | None:
    """The conversation a context's note records, or None (a context made from a prompt, or
    a note that holds no well-formed conversation)."""
    if not isinstance(note, Mapping):
        return None
    turns = note.get(NOTE_KEY)
    if not isinstance(turns, list) or not turns:
        return None
    for turn in turns:
        if not isinstance(turn, Mapping) or set(turn) != {"role", "content"}:
            return None
        if turn["role"] not in ROLES or not isinstance(turn["content"], str):
            return None
    if turns[-1]["role"] != "assistant":
        return None
    return [{"role": turn["role"], "content": turn["content"]} for turn in turns]


def noted(note: Any, turns: Sequence[Turn]) -> dict[str, Any]:
    """`note` with `turns` as its conversation (a new object: forks share their parent's)."""
    return {**(note if isinstance(note, Mapping) else {}), NOTE_KEY: list(turns)}


def started(messages: Sequence[Mapping[str, Any]]) -> list[Turn] | None:
    """The conversation of a context made from `messages`, its assistant turn open (the
    trailing assistant message, a prefill, or an empty one); None when a message is not a
    plain text turn of a known role (a context made from tool calls keeps no record)."""
    turns = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ROLES:
            return None
        if set(message) - {"role", "content"}:
            return None
        turns.append({"role": message["role"], "content": text_of(message.get("content"))})
    return opened(turns)


def added_turns(messages: Any) -> list[Turn]:
    """The turns a generate request adds, checked (400 naming what is wrong)."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list of turns to add", "messages")
    turns = []
    for message in messages:
        if not isinstance(message, Mapping) or set(message) - {"role", "content"}:
            raise ApiError(400, "each message must be {'role', 'content'}", "messages")
        role = message.get("role")
        if role not in ADDED_ROLES:
            raise ApiError(
                400,
                f"messages added to a conversation are 'user' or 'assistant' turns, not {role!r} "
                "(a system message begins a conversation: give it when creating the context)",
                "messages",
            )
        content = message.get("content")
        if not isinstance(content, str):
            raise ApiError(400, "each message's content must be a string", "messages")
        turns.append({"role": role, "content": content})
    return turns


def continuation(model: Model, turns: Sequence[Turn], added: Sequence[Turn]) -> str:
    """The text that closes the open turn of `turns`, adds the `added` turns (a trailing
    assistant turn stays open: the answer goes on from it) and opens the assistant's next."""
    marker = f"LLAMAYOPENTURN{secrets.token_hex(8)}"
    head = [*turns[:-1], {"role": "assistant", "content": marker}]
    rendered = render_chat(model, [*head, *added])
    at = rendered.rfind(marker)
    if at < 0:
        raise ApiError(
            400,
            "this model's chat template does not write earlier answers back, so turns cannot be "
            "added to its conversation; create a context with the whole conversation instead",
            "messages",
        )
    return rendered[at + len(marker) :]


def extended(turns: Sequence[Turn], added: Sequence[Turn]) -> list[Turn]:
    """The conversation after `added` turns, its assistant turn open."""
    return opened([*turns, *added])


def answered(turns: Sequence[Turn], text: str) -> list[Turn]:
    """The conversation with `text` appended to its open assistant turn."""
    last = turns[-1]
    return [*turns[:-1], {"role": "assistant", "content": last["content"] + text}]


def opened(turns: Sequence[Turn]) -> list[Turn]:
    """`turns` ending with an open assistant turn: theirs when they end with one (a prefill),
    else a new, empty one."""
    if turns and turns[-1]["role"] == "assistant":
        return list(turns)
    return [*turns, {"role": "assistant", "content": ""}]
