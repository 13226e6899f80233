"""Printing answers as they are made: the text to stdout, token logprobs and stats to stderr, and
Ctrl-C that ends the answer between two tokens.

Where a line ends (docs/run.md): piped or redirected, stdout holds the answer byte for byte, with
no newline the model did not write. On a terminal, an answer that leaves its line open is ended
with one (a person reads it, and the shell's prompt then starts a line of its own). The stats
line on stderr always starts a line of its own: it begins with a newline when the answer left
its line open where the stats land too (stderr on a terminal, or stdout and stderr one file or
pipe, `2>&1`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import click

from llamay.chat.answer import THINK, Answer, opens_thinking, reasoning_of
from llamay.engine import Model
from llamay.errors import ContextOverflow


@dataclass
class Printed:
    """What an answer printed to stdout: whether it left its line open (no newline last)."""

    line_open: bool = False

    def write(self, text: str, dim: bool = False) -> None:
        if text:
            sys.stdout.write(click.style(text, dim=True) if dim else text)
            self.line_open = not text.endswith("\n")


def stream_local(
    model: Model,
    generation: Any,
    logprobs: bool,
    *,
    thinking: str = "show",
    prompt_ids: list[int] | None = None,
    printed: Printed | None = None,
) -> str:
    """Print a generation's text as it comes (stop strings held back and cut, whole characters
    only); with `logprobs`, one JSON line per token on stderr. A model that reasons in tags or
    channels (its template says so) has its reasoning shown dimmed on a terminal (`thinking`
    "show"), left out ("hide", --hide-thinking), or printed as the model wrote it ("raw": no
    chat template). Returns the answer's text, without the reasoning; `printed` follows what
    went to stdout."""
    out = printed if printed is not None else Printed()
    kind = reasoning_of(model.chat_template.source) if thinking != "raw" else None
    reader = None
    if kind is not None:
        inside = kind == THINK and opens_thinking(
            model.tokenizer.detokenize(list((prompt_ids or [])[-4:]), special=True)
        )
        reader = Answer(model.tokenizer, reasoning_kind=kind, inside_thinking=inside)
    dim = sys.stdout.isatty()
    texts = []

    def show(events: list[Any]) -> None:
        for event in events:
            if event.kind == "text":
                texts.append(event.text)
                out.write(event.text)
            elif thinking == "show":
                out.write(event.text, dim=dim)
        sys.stdout.flush()

    for piece in generation.pieces():
        if reader is not None:
            show(reader.feed(piece))
        elif piece.text:
            texts.append(piece.text)
            out.write(piece.text)
            sys.stdout.flush()
        if logprobs and piece.token is not None:  # (a last piece may only release held text)
            line = {"token": piece.token, "text": model.detokenize([piece.token])}
            click.echo(json.dumps(line | {"logprob": round(piece.logprob, 6)}), err=True)
    if reader is not None:
        show(reader.finish())
    return "".join(texts)


def stream_remote(reply: Iterator[str], printed: Printed | None = None) -> str:
    """Print a remote answer's text deltas as they come. Returns all the text; `printed`
    follows what went to stdout."""
    out = printed if printed is not None else Printed()
    texts = []
    for text in reply:
        texts.append(text)
        out.write(text)
        sys.stdout.flush()
    return "".join(texts)


@contextlib.contextmanager
def ctrl_c_cancels(generation: Any) -> Iterator[None]:
    """Ctrl-C ends the generation between two tokens, leaving its context whole."""
    previous = signal.signal(signal.SIGINT, lambda signum, frame: generation.cancel())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def check_fits(model: Model, n_tokens: int, what: str) -> None:
    """Refuse input that leaves no room for a single generated token."""
    if n_tokens >= model.n_ctx:
        raise ContextOverflow(
            f"{what} is {n_tokens} tokens but the context holds {model.n_ctx}, leaving no room "
            "to generate: shorten it or raise -c"
        )


def local_stats(generation: Any, seed: int | None) -> str:
    """Token counts, speeds and how the generation ended, as one line."""
    timings = generation.timings
    stats = (
        f"prompt {generation.n_prompt} tokens ({rate(generation.n_prompt, timings['prompt_s'])}), "
        f"generated {generation.n_generated} tokens "
        f"({rate(generation.n_generated, timings['generate_s'])}), "
        f"finish: {generation.finish_reason}"
    )
    drafter = getattr(generation, "drafter", None)
    if drafter is not None and drafter.proposed:
        stats += f", draft {drafter.accepted} of {drafter.proposed} tokens accepted"
    return stats + (f", seed {seed}" if seed is not None else "")


def rate(tokens: int, seconds: float) -> str:
    return f"{tokens / seconds:.1f} t/s" if tokens and seconds > 0 else "-"


def echo_stats(stats: str, printed: Printed) -> None:
    """The stats line on stderr, after the answer `printed` (the module docstring says where
    its lines end)."""
    if printed.line_open and sys.stdout.isatty():
        printed.write("\n")
        sys.stdout.flush()
    lead = printed.line_open and (sys.stderr.isatty() or _one_file(sys.stdout, sys.stderr))
    click.echo(("\n" if lead else "") + stats, err=True)


def _one_file(first: Any, second: Any) -> bool:
    """Whether two streams write to one file or pipe (`2>&1`)."""
    try:
        a, b = os.fstat(first.fileno()), os.fstat(second.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (captured, closed)
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
