"""Generating tokens into a context: sample, append, repeat until a stop.

A `Generation` is the loop for one sequence; `generate` is the one-call form that starts it from a
prompt. Every token a Generation yields is already in its context, so a context can be continued
(another turn of a chat, another request) from exactly what was generated. An end-of-generation
token ends the loop without being yielded or appended, as llama.cpp does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from llamay.engine.sampling import Sampler, SamplingParams
from llamay.errors import ContextOverflow, LlamayError

if TYPE_CHECKING:  # model.py may import this module to offer Model.generate
    from llamay.engine.context import Context
    from llamay.engine.model import Model

FinishReason = Literal["stop", "length", "cancelled"]


class Generation(Iterator[int]):
    """Tokens sampled into `context`, one per step, until the model ends its turn ("stop"),
    `max_tokens` have been made or the context is full ("length"), or `cancel()` is called
    ("cancelled"). `finish_reason` says which once the iterator is exhausted.

    The sampling step of each token is the position it takes in the context, so a seeded
    generation is reproducible from the same context however it is driven.
    """

    def __init__(
        self, model: Model, context: Context, sampler: Sampler, max_tokens: int | None = None
    ):
        self.context = context
        self.sampler = sampler
        self.finish_reason: FinishReason | None = None
        self.n_generated = 0
        self._model = model
        self._max_tokens = max_tokens
        self._stop_ids = model.tokenizer.eog_ids
        self._cancelled = False

    def cancel(self) -> None:
        """End the generation before its next token; safe to call from a signal handler."""
        self._cancelled = True

    def __next__(self) -> int:
        if self.finish_reason is not None:
            raise StopIteration
        if self._cancelled:
            return self._finish("cancelled")
        if self._max_tokens is not None and self.n_generated >= self._max_tokens:
            return self._finish("length")
        position = len(self.context.tokens)
        if position >= self._model.n_ctx:
            return self._finish("length")
        token = self.sampler.sample(self.context.logits(), step=position)
        if token in self._stop_ids:
            return self._finish("stop")
        self.context.feed([token])
        self.n_generated += 1
        return token

    def _finish(self, reason: FinishReason) -> int:
        self.finish_reason = reason
        raise StopIteration


def chat_prompt_ids(model: Model, rendered: str) -> list[int]:
    """The tokens of a conversation rendered by the chat template, special tokens parsed, with one
    BOS: the template's own when it writes one, else the tokenizer's (as llama.cpp avoids a
    double BOS)."""
    bos = model.tokenizer.bos_id
    has_bos = bos is not None and rendered.startswith(model.tokenizer.token_text(bos))
    return model.tokenize(rendered, add_bos=not has_bos, special=True)


def generate(
    model: Model,
    ids_or_text: str | Sequence[int],
    *,
    max_tokens: int | None = None,
    temperature: float = SamplingParams.temperature,
    top_k: int = SamplingParams.top_k,
    top_p: float = SamplingParams.top_p,
    min_p: float = SamplingParams.min_p,
    seed: int | None = None,
    sequence: int = 0,
) -> Generation:
    """Start generating after a prompt in a new context of `model`.

    A text prompt is tokenized as it stands: BOS added when the model asks for it, special tokens
    parsed, no chat template. The prompt is evaluated here; the tokens come as the result is
    iterated. Sampling defaults are llama.cpp's; `temperature=0` is greedy. `seed` None draws
    one (`result.sampler.seed` tells which); `sequence` numbers the sequences that share a seed.
    The context stays open for the caller (`result.context`) to continue or close.
    """
    params = SamplingParams(temperature, top_k, top_p, min_p, seed)
    ids = model.tokenize(ids_or_text) if isinstance(ids_or_text, str) else list(ids_or_text)
    if not ids:
        raise LlamayError("the prompt has no tokens: there is nothing to continue")
    if len(ids) >= model.n_ctx:
        raise ContextOverflow(
            f"the prompt is {len(ids)} tokens but the context holds {model.n_ctx}, "
            "leaving no room to generate"
        )
    context = model.context()
    context.feed(ids)
    return Generation(model, context, Sampler(params, sequence), max_tokens)
