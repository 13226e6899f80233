"""Printing answers as they are made: the text to stdout, token logprobs and stats to stderr, and
Ctrl-C that ends the answer between two tokens."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from typing import Any

import click

from llamay.engine import Model
from llamay.errors import ContextOverflow
from llamay.server.answer import THINK, Answer, opens_thinking, reasoning_of


def stream_local(
    model: Model,
    generation: Any,
    logprobs: bool,
    *,
    thinking: str = "show",
    prompt_ids: list[int] | None = None,
) -> str:
    """Print a generation's text as it comes (stop strings held back and cut, whole characters
    only); with `logprobs`, one JSON line per token on stderr. A model that reasons in tags or
    channels (its template says so) has its reasoning shown dimmed on a terminal (`thinking`
    "show"), left out ("hide", --hide-thinking), or printed as the model wrote it ("raw": no
    chat template). Returns the answer's text, without the reasoning."""
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
                sys.stdout.write(event.text)
            elif thinking == "show":
                sys.stdout.write(click.style(event.text, dim=True) if dim else event.text)
        sys.stdout.flush()

    for piece in generation.pieces():
        if reader is not None:
            show(reader.feed(piece))
        elif piece.text:
            texts.append(piece.text)
            sys.stdout.write(piece.text)
            sys.stdout.flush()
        if logprobs and piece.token is not None:  # (a last piece may only release held text)
            line = {"token": piece.token, "text": model.detokenize([piece.token])}
            click.echo(json.dumps(line | {"logprob": round(piece.logprob, 6)}), err=True)
    if reader is not None:
        show(reader.finish())
    return "".join(texts)


def stream_remote(reply: Iterator[str]) -> str:
    """Print a remote answer's text deltas as they come. Returns all the text."""
    texts = []
    for text in reply:
        texts.append(text)
        sys.stdout.write(text)
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


def echo_stats(stats: str) -> None:
    # On a terminal the stats start a line of their own (the text need not end one).
    click.echo(("\n" if sys.stderr.isatty() else "") + stats, err=True)
