"""The one place where a request becomes generations, for every API family.

A family route reads its own request shape and calls, in order:

1. `chat.chat_prompt(model, messages, tools=...)` (or `chat.text_prompt`) -> prompt token ids
   (the conversation-to-prompt step is the chat layer's: llamay/chat);
2. the family's request shape (fields.py) -> the keyword arguments of `model.generate`,
   checked, and `vocabulary_checked(...)` once the model is known;
   `chat.tool_grammar(...)` -> the grammar that holds the answer to the tools' calls (an output
   format's is concepts.OutputFormat.grammar);
3. `start(model, prompt, n, kwargs)` -> one Generation per choice, each begun (`started`);
4. `interleave(generations)` -> (choice index, Piece) in the order they are made, for streaming
   or collecting; `Outcome.of(...)` -> what each choice ended with.

Each choice's pieces are read into text, reasoning and tool calls by the chat layer's `Answer`
(llamay/chat/answer.py), the same for every family.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llamay.engine import Model, ranges
from llamay.engine.sampling import log_probabilities
from llamay.server.ending import stop
from llamay.server.errors import ApiError

# --- options -----------------------------------------------------------------------------------


def vocabulary_checked(model: Model, sampling: dict[str, Any]) -> dict[str, Any]:
    """`sampling` (model.generate's keyword arguments, read by a request shape), once its
    logit_bias is known to name only tokens of the model's vocabulary (400 otherwise)."""
    for token in sampling.get("logit_bias") or {}:
        if not 0 <= token < model.n_vocab:
            raise ApiError(
                400, f"logit_bias names token {token}, not in the vocabulary", "logit_bias"
            )
    return sampling


# --- running -------------------------------------------------------------------------------------


def check_n(n: Any) -> int:
    """`n` (choices per prompt), checked against the range table; null means 1, as OpenAI's
    spec says."""
    if n is None:
        return int(ranges.RANGES["n"].default or 1)
    try:
        return int(ranges.check("n", n))
    except ValueError as error:
        raise ApiError(400, str(error), "n") from None


def start(
    model: Model,
    prompt: list[int],
    n: int,
    kwargs: Mapping[str, Any],
    context: Any = None,
) -> list[Any]:
    """`n` generations of the same prompt (check_n), each in a new context, or
    the one generation of `prompt` after the tokens of the caller's `context`. With a seed,
    choice i uses seed + i, so the choices differ from each other and repeat from run to
    run."""
    n = check_n(n)
    if context is not None and n != 1:
        raise ValueError("a caller's context holds one choice")
    generations: list[Any] = []
    try:
        for index in range(n):
            seed = kwargs.get("seed")
            choice_kwargs = {**kwargs, "seed": None if seed is None else seed + index}
            generations.append(model.generate(prompt, context=context, **choice_kwargs))
        started(generations)
    except BaseException:
        release(generations)
        raise
    return generations


def started(generations: Sequence[Any]) -> None:
    """Waits until each generation has its first result, and raises the error of one that
    failed before its first token (no room in the KV cache: a 503): before the answer's
    status is sent, so that a stream does not begin with 200 only to fail."""
    for generation in generations:
        generation.started()
    for generation in generations:
        if generation.error is not None and not generation.tokens:
            raise generation.error


def interleave(generations: Sequence[Any]) -> Iterator[tuple[int, Any]]:
    """(index, Piece) of every generation, one step of each in turn, so that they advance
    together in the scheduler's batches. When the iterator ends or is closed, the generations
    are released (`release`)."""
    streams = [(index, generation.pieces()) for index, generation in enumerate(generations)]
    try:
        while streams:
            for entry in list(streams):
                index, pieces = entry
                piece = next(pieces, None)
                if piece is None:
                    streams.remove(entry)
                else:
                    yield index, piece
    finally:
        release(generations)


def release(generations: Iterable[Any]) -> None:
    """Give the pages of generations back to the pool: a finished generation's context is
    closed, one still running is cancelled (the scheduler closes it within a step). A context
    the caller passed stays open, and is the caller's again once this returns (ending.stop).
    Safe to call more than once: a stream calls it when the client goes away before it
    began."""
    generations = list(generations)
    cancel(generations)
    for generation in generations:
        if not generation.owns_context:
            stop(generation)
        elif generation.finish_reason is not None:
            generation.context.close()


def cancel(generations: Iterable[Any]) -> None:
    """Cancel generations that have not finished; a context the generation made is closed by
    the scheduler within a step, one the caller passed stays the caller's."""
    for generation in generations:
        if generation.finish_reason is None:
            generation.cancel()


@dataclass
class Outcome:
    """What one choice ended with: finish_reason ("stop", "length", "cancelled"), the stop
    string that ended it (None if another reason did) and its token counts."""

    finish_reason: str
    stop_sequence: str | None
    n_prompt: int
    n_generated: int

    @classmethod
    def of(cls, model: Model, generation: Any, stop: Sequence[str] = ()) -> Outcome:
        matched = None
        if generation.finish_reason == "stop" and stop:
            # The stop string is never emitted: it is what the tokens say beyond the text.
            tail = model.detokenize(generation.tokens)[len(generation.text) :]
            matched = next((s for s in stop if tail.startswith(s)), None)
        return cls(generation.finish_reason, matched, generation.n_prompt, generation.n_generated)


class Unsampled:
    """A choice that generates nothing (max_tokens 0; with echo, the prompt is only scored), in
    the shape of a finished Generation."""

    finish_reason = "length"
    error = None
    text = ""
    owns_context = True

    def __init__(self, n_prompt: int) -> None:
        self.n_prompt = n_prompt
        self.tokens: list[int] = []
        self.n_generated = 0
        self.timings = {"prompt_s": 0.0, "generate_s": 0.0}
        self.context = _NoContext()

    def started(self) -> bool:
        return True

    def pieces(self) -> Iterator[Any]:
        return iter(())

    def cancel(self) -> None:
        pass


class _NoContext:
    def close(self) -> None:
        pass


# Prompt rows are scored this many at a time: all_logits holds (rows, n_vocab) float32.
_SCORE_CHUNK = 64


def prompt_logprobs(
    model: Model, ids: Sequence[int], n_top: int
) -> list[tuple[float | None, list[tuple[int, float]] | None]]:
    """(log p(token | the tokens before it), its n_top most likely alternatives) for every
    prompt token, the first (None, None): OpenAI's echoed logprobs, which lm-evaluation-harness
    sums to score a continuation. The prompt is fed in a fresh context (`Context.feed` with
    all_logits), so the figures are the ones that call gives."""
    scored: list[tuple[float | None, list[tuple[int, float]] | None]] = [(None, None)]
    context = model.context()
    try:
        for start in range(0, len(ids), _SCORE_CHUNK):
            rows = context.feed(list(ids[start : start + _SCORE_CHUNK]), all_logits=True)
            for offset, row in enumerate(rows):
                position = start + offset + 1
                if position < len(ids):
                    scored.append(log_probabilities(row, ids[position], n_top))
    finally:
        context.close()
    return scored


def token_text(model: Model, token: int) -> str:
    """The text of one token on its own (for logprobs)."""
    return model.detokenize([token])
