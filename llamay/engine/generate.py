"""Generating tokens into a context: sample, append, repeat until a stop.

A `Generation` is one sequence being generated. `generate` starts it from a prompt and hands it
to the model's scheduler (scheduler.py), which feeds the prompt and then, step after step, one
sampled token, batched with every other sequence running on the model. The Generation decides
what its sequence does at each step (`advance`: sample, check the stops, pass the token on);
its caller reads the results, as token ids by iterating it or as text with `pieces()`. The
scheduler sees only its scheduler's side: `pending`, `consume`, `advance`, `finish`, `fail`,
`done`, `cancelled`.

Every token a Generation yields is in its context once the iterator is exhausted, so a context
can be continued (another turn of a chat, another request) from exactly what was generated. An
end-of-generation token ends the loop without being yielded or appended, as llama.cpp does.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

import numpy as np

from llamay.engine.draft import MAX_DRAFT, MIN_PROBABILITY, DraftState, check_vocabulary
from llamay.engine.lookup import propose
from llamay.engine.ranges import check
from llamay.engine.sampling import Choice, Sampler, SamplingParams
from llamay.errors import ContextOverflow, LlamayError
from llamay.state import Context
from llamay.tokenizer import Tokenizer

if TYPE_CHECKING:
    from llamay.grammar import Grammar

FinishReason = Literal["stop", "length", "cancelled"]

# Lookup's guesses are fed while their running score (Generation._judge_lookup) is at least
# this: half a guess right on average.
LOOKUP_TRUST = 0.5


class Scheduling(Protocol):
    """Where a generation runs: the model's scheduler (scheduler.py)."""

    def submit(self, generation: Generation) -> None: ...

    def wake(self) -> None: ...


class Generator(Protocol):
    """What generating needs of a model (engine/model.py's Model)."""

    n_ctx: int
    tokenizer: Tokenizer
    scheduler: Scheduling

    def context(self) -> Context: ...

    def tokenize(self, text: str, add_bos: bool = True, special: bool = True) -> list[int]: ...


class Piece(NamedTuple):
    """One step of a generation as text.

    `text` is what this token makes visible: it may be empty while a character split across
    tokens, or text that may begin a stop string, is held back. A generation's pieces may end
    with one whose `token` is None, carrying held-back text released at the end.
    """

    token: int | None
    text: str
    logprob: float | None = None
    top_logprobs: list[tuple[int, float]] | None = None


class StopStrings:
    """Finds stop strings in text that arrives in pieces, across piece boundaries.

    Text that could be the start of a stop string is held back until it is known not to be;
    text at and after a stop string is never released.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self._held = ""

    def push(self, text: str) -> tuple[str, bool]:
        """The text now safe to show, and whether a stop string was reached."""
        if not self.stops:
            return text, False
        held = self._held + text
        found = [i for i in (held.find(s) for s in self.stops) if i >= 0]
        if found:
            self._held = ""
            return held[: min(found)], True
        keep = max((_overlap(held, s) for s in self.stops), default=0)
        self._held = held[len(held) - keep :]
        return held[: len(held) - keep], False

    def flush(self) -> str:
        """The held-back text, at the end of a generation that reached no stop string."""
        held, self._held = self._held, ""
        return held


def _overlap(text: str, stop: str) -> int:
    """The length of the longest end of `text` that begins `stop`."""
    for n in range(min(len(text), len(stop) - 1), 0, -1):
        if text.endswith(stop[:n]):
            return n
    return 0


_DONE = object()


class Generation(Iterator[int]):
    """Tokens sampled into `context` until the model ends its turn, a stop string or the end of
    the grammar's language ("stop"), `max_tokens` or a full context ("length"), or `cancel()`
    ("cancelled"). `finish_reason` says which once the results are read.

    Iterate it for token ids, or call `pieces()` for text (one or the other). The sampling
    step of each token is the position it takes in the context, so a seeded generation is
    reproducible from the same context however it is driven and whatever else runs beside it.
    """

    def __init__(
        self,
        model: Generator,
        context: Context,
        prompt: Sequence[int],
        sampler: Sampler,
        *,
        max_tokens: int | None = None,
        stop: Sequence[str] = (),
        grammar: Grammar | None = None,
        logprobs: int | None = None,
        owns_context: bool = False,
        lookup: int = 0,
        draft: DraftState | None = None,
    ) -> None:
        self.context = context
        self.sampler = sampler
        self.n_prompt = len(prompt)
        # prompt tokens whose KV came from the prefix cache instead of being computed
        self.n_cached = 0
        self.finish_reason: FinishReason | None = None
        self.tokens: list[int] = []
        self.text = ""
        self.timings = {"prompt_s": 0.0, "generate_s": 0.0}
        self._model = model
        self._max_tokens = max_tokens
        self._logprobs = logprobs
        self._owns_context = owns_context
        self._matcher = grammar.matcher(model.tokenizer) if grammar is not None else None
        self._decoder = model.tokenizer.stream()
        self._stops = StopStrings(stop)
        self._results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._has_result = threading.Event()  # set with the first result, for started()
        self.error: BaseException | None = None  # what ended it, if it failed
        self._cancelled = False
        self._ending: FinishReason | None = None  # decided; ends once the last token is fed
        self._hit_stop_string = False
        self._done = False
        self._started = time.perf_counter()
        self._first: float | None = None
        # what the scheduler feeds next: the prompt, then each sampled token
        self._pending: list[int] = list(prompt)
        # draft tokens fed after a sampled token, with lookup (lookup.py)
        self._lookup = lookup
        # How well lookup has been guessing here (see _judge_lookup): its guess is fed only
        # while it earns its place, since verifying a wrong guess costs a wider step.
        self._lookup_trust = 1.0
        self._lookup_guess: list[int] = []
        self._lookup_at = 0  # the position of the guess's first token
        self._draft_from_model = False  # whether the pending draft is the draft model's
        # generated tokens that came from an accepted draft (each saved one forward step)
        self.draft_accepted = 0
        self._draft: list[int] = []
        # a draft model's side (draft.py), and the room its next proposal has (0: none wanted)
        self.drafter = draft
        self.draft_room = 0

    @property
    def n_generated(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"<llamay.Generation {self.n_generated} tokens, finish={self.finish_reason}>"

    # ---- the caller's side ----

    def cancel(self) -> None:
        """End the generation before its next token. A context the generation made itself is
        closed, its pages freed, within one scheduler step. Safe from a signal handler."""
        self._cancelled = True
        self._model.scheduler.wake()

    def __next__(self) -> int:
        while True:
            item = self._next_result()
            if item.token is not None:
                return item.token

    def pieces(self) -> Iterator[Piece]:
        """The generation as text, a piece per token (see Piece). Closing this iterator early
        cancels the generation."""
        finished = False
        try:
            while True:
                try:
                    yield self._next_result()
                except StopIteration:
                    finished = True
                    return
        finally:
            if not finished:
                self.cancel()

    def started(self, timeout: float | None = None) -> bool:
        """Waits until the generation has its first result (a token, its end or its error)
        and says whether it has, consuming nothing: a server waits for this before it sends
        a status, so that a failure to start (a full KV cache) is an error status."""
        return self._has_result.wait(timeout)

    def _put(self, item: Any) -> None:
        self._results.put(item)
        self._has_result.set()

    def _next_result(self) -> Piece:
        item = self._results.get()
        if item is _DONE:
            self._results.put(_DONE)  # every later call ends too
            raise StopIteration
        if isinstance(item, BaseException):
            self._results.put(_DONE)
            raise item
        return item

    # ---- the scheduler's side ----

    @property
    def pending(self) -> list[int]:
        """The tokens to feed next: the prompt, then each sampled token and its draft."""
        return self._pending + self._draft

    @property
    def decoding(self) -> bool:
        """Whether one token is pending (a sampled one, with any draft), not a prompt chunk."""
        return len(self._pending) == 1

    @property
    def drafting(self) -> bool:
        """Whether the pending tokens carry a draft: they are fed with every logit, and
        `verify` keeps what the sampler would have chosen."""
        return bool(self._draft)

    def drop_draft(self) -> None:
        """Feeds the sampled token without its draft (no room for both)."""
        self._draft = []

    def draft_request(self) -> tuple[DraftState, list[int], int] | None:
        """What the draft model is asked for (the scheduler batches the asks of every
        generation): this generation's draft state, its tokens with the one just sampled, and
        the room for a draft; None when it wants none now."""
        if self.drafter is None or not self.draft_room or self._draft or len(self._pending) != 1:
            return None
        return self.drafter, [*self.context.tokens, *self._pending], self.draft_room

    def take_draft(self, draft: list[int]) -> None:
        """The draft model's proposal, fed after the sampled token."""
        self._draft = draft
        self._draft_from_model = True
        self.draft_room = 0

    def consume(self, n: int) -> None:
        """The first n pending tokens have been fed."""
        self._pending = self._pending[n:]

    def verify(self, rows: np.ndarray) -> None:
        """After the sampled token and its draft were fed: rows[i] are the logits after the
        i-th of them. Each draft token the sampler chooses in its place (the same draw it
        makes without a draft: the same logits, position and recent tokens) is taken as if
        sampled; the context keeps the sampled token and the accepted draft, with the logits
        after the last of them; the next token is then sampled as usual."""
        draft, self._draft, self._pending = self._draft, [], []
        from_model, self._draft_from_model = self._draft_from_model, False
        base = self.context.n_tokens - (1 + len(draft))  # the sampled token's position
        tokens = self.context.tokens
        kept, end_of_generation = 1, False
        for i, token in enumerate(draft):
            if self._ending is not None:
                break
            step = base + 1 + i
            choice = self._choose(rows[i], step, tokens[:step])
            if choice.token != token:
                break
            if self._model.tokenizer.is_eog(token):
                end_of_generation = True
                break
            self._take(choice)
            kept += 1
        self.context.keep(base + kept, rows[kept - 1])
        self.draft_accepted += kept - 1
        if from_model:
            self.drafter.verified(kept - 1)
        if end_of_generation:
            self.finish("stop")

    @property
    def done(self) -> bool:
        return self._done

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def owns_context(self) -> bool:
        """Whether the generation made its context (and closes it when cancelled)."""
        return self._owns_context

    def adopt_prefix(self) -> None:
        """A new context starts from the longest cached prefix of the whole prompt, which the
        prompt chunks fed later could not find."""
        if self.context.n_tokens == 0 and self._pending:
            self.n_cached = self.context.adopt_prefix(self._pending)
            self.consume(self.n_cached)

    def advance(self) -> None:
        """Called when everything pending has been fed: sample the next token, or finish."""
        if self._cancelled:
            self.finish("cancelled")
        elif self._ending is not None:
            self.finish(self._ending)
        elif self.context.n_tokens >= self._model.n_ctx or self._out_of_tokens():
            self.finish("length")
        else:
            self._sample()

    def _sample(self) -> None:
        logits = self.context.logits(copy=False)  # the sampler copies what it changes
        choice = self._choose(logits, self.context.n_tokens, self.context.tokens)
        if self._model.tokenizer.is_eog(choice.token):
            self.finish("stop")
            return
        self._take(choice)
        self._pending = [choice.token]
        if self._ending is not None:
            return
        # room for draft tokens: the context's, and the token budget's
        room = self._model.n_ctx - self.context.n_tokens - 1
        if self._max_tokens is not None:
            room = min(room, self._max_tokens - self.n_generated)
        if self._lookup:
            self._judge_lookup(choice.token)
            tokens = [*self.context.tokens, choice.token]
            self._lookup_guess = propose(tokens, min(room, self._lookup))
            self._lookup_at = len(tokens)
            if self._lookup_trust >= LOOKUP_TRUST:
                self._draft = self._lookup_guess
        if not self._draft and self.drafter is not None:
            self.draft_room = room  # the scheduler asks the draft model (draft.py)

    def _judge_lookup(self, token: int) -> None:
        """Scores lookup's last guess against the tokens that came (`token` the newest),
        whether the guess was fed or only made: the share of it that was right, up to the
        first wrong token, averaged with the earlier scores. So lookup keeps its place while
        the text repeats, and gives it up (to the draft model, or to plain steps) where the
        text is new, without ever stopping to guess."""
        guess, self._lookup_guess = self._lookup_guess, []
        came = [*self.context.tokens[self._lookup_at :], token]
        known = min(len(guess), len(came))
        if not known:
            return
        right = next((i for i in range(known) if guess[i] != came[i]), known)
        score = 1.0 if right == known else right / len(guess)
        self._lookup_trust = (self._lookup_trust + score) / 2

    def _choose(self, logits: np.ndarray, step: int, recent: Sequence[int]) -> Choice:
        """The sampler's draw for position `step`, under the grammar's mask."""
        allowed = self._matcher.allowed() if self._matcher is not None else None
        choice = self.sampler.choose(
            logits, step=step, recent=recent, allowed=allowed, logprobs=self._logprobs
        )
        if self._first is None:
            self._first = time.perf_counter()
        return choice

    def _take(self, choice: Choice) -> None:
        """A token the generation yields: through the grammar, the stop strings and the
        token budget, to the caller."""
        token = choice.token
        if self._matcher is not None:
            self._matcher.accept(token)
        self.tokens.append(token)
        text, stopped = self._stops.push(self._decoder.feed(token))
        self.text += text
        self._put(Piece(token, text, choice.logprob, choice.top_logprobs))
        self._hit_stop_string = stopped
        if stopped or (self._matcher is not None and self._matcher.must_end):
            self._ending = "stop"
        elif self._out_of_tokens():
            self._ending = "length"

    def _out_of_tokens(self) -> bool:
        return self._max_tokens is not None and self.n_generated >= self._max_tokens

    def finish(self, reason: FinishReason) -> None:
        if reason != "cancelled" and not self._hit_stop_string:
            # held-back text: the last bytes of a character, the start of a stop string
            rest, stopped = self._stops.push(self._decoder.flush())
            rest += "" if stopped else self._stops.flush()
            if rest:
                self.text += rest
                self._put(Piece(None, rest))
        now = time.perf_counter()
        first = self._first if self._first is not None else now
        self.timings = {"prompt_s": first - self._started, "generate_s": now - first}
        self.finish_reason = reason
        self._end()
        self._put(_DONE)

    def fail(self, error: BaseException) -> None:
        """Ends the generation with an error that its caller receives."""
        self.error = error
        self._end()
        self._put(error)

    def _end(self) -> None:
        self._done = True
        self._pending = []
        self._draft = []
        self.draft_room = 0
        if self.drafter is not None:
            self.drafter.close()
        if self._owns_context and (self._cancelled or self.finish_reason is None):
            self.context.close()


def chat_prompt_ids(model: Generator, rendered: str) -> list[int]:
    """The tokens of a conversation rendered by the chat template, special tokens parsed, with one
    BOS: the template's own when it writes one, else the tokenizer's (as llama.cpp avoids a
    double BOS)."""
    bos = model.tokenizer.bos_id
    has_bos = bos is not None and rendered.startswith(model.tokenizer.token_text(bos))
    return model.tokenize(rendered, add_bos=not has_bos, special=True)


def generate(
    model: Generator,
    prompt: str | Sequence[int],
    *,
    max_tokens: int | None = None,
    temperature: float = SamplingParams.temperature,
    top_k: int = SamplingParams.top_k,
    top_p: float = SamplingParams.top_p,
    min_p: float = SamplingParams.min_p,
    typical_p: float = SamplingParams.typical_p,
    repeat_penalty: float = SamplingParams.repeat_penalty,
    repeat_last_n: int = SamplingParams.repeat_last_n,
    presence_penalty: float = SamplingParams.presence_penalty,
    frequency_penalty: float = SamplingParams.frequency_penalty,
    logit_bias: Mapping[int, float] | None = None,
    seed: int | None = None,
    stop: Sequence[str] = (),
    grammar: Grammar | str | None = None,
    logprobs: int | None = None,
    context: Context | None = None,
    sequence: int = 0,
    lookup: int | None = None,
    draft: Generator | bool | None = None,
) -> Generation:
    """Start generating after a prompt, in `context` (after its tokens) or in a new context.

    A text prompt is tokenized as it stands: BOS added when the model asks for it and the context
    is empty, special tokens parsed, no chat template. Sampling defaults are llama.cpp's;
    `temperature=0` is greedy. `seed` None draws one (`result.sampler.seed` tells which);
    `sequence` numbers the sequences that share a seed (n > 1 choices). `stop` strings end the
    generation where they appear, unshown; `grammar` (a Grammar, or GBNF text) constrains the
    text to its language; `logprobs` asks for each token's log-probability (0) and its top
    alternatives (n > 0). The work runs on the model's scheduler, batched with whatever else
    runs; the new context, if one was made, stays open for the caller to continue or close.
    `lookup` N > 0 turns on prompt-lookup decoding (lookup.py): up to N draft tokens copied
    from earlier in the context are verified in each step; the tokens are the same bits as
    without it, in fewer steps when the text repeats; None: the model's default (`lookup=`
    at load, 0 unless given). `draft` speculates with a draft model (draft.py): a Model of
    the same vocabulary, True or None for the one loaded with the model (`draft=` at load;
    none unless given), False for none; again the same tokens, bit for bit, in fewer steps
    when the draft guesses well. With both, a lookup match is tried first.
    Raises ContextOverflow, before anything runs, for a prompt that leaves no room to generate.
    """
    if max_tokens is not None:
        check("max_tokens", max_tokens)
    if logprobs is not None:
        check("logprobs", logprobs)
    if lookup is None:
        lookup = model.lookup
    check("lookup", lookup)
    params = SamplingParams(
        temperature,
        top_k,
        top_p,
        min_p,
        seed,
        typical_p=typical_p,
        repeat_penalty=repeat_penalty,
        repeat_last_n=repeat_last_n,
        presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty,
        logit_bias=dict(logit_bias or {}),
    )
    if isinstance(grammar, str):
        from llamay.grammar import Grammar

        grammar = Grammar.from_gbnf(grammar)
    held = context.n_tokens if context is not None else 0
    if isinstance(prompt, str):
        ids = model.tokenize(prompt, add_bos=held == 0) if prompt else []
    else:
        ids = [int(t) for t in prompt]
    if not ids and not held:
        raise LlamayError("the prompt has no tokens: there is nothing to continue")
    if held + len(ids) >= model.n_ctx:
        raise ContextOverflow(
            f"the prompt is {held + len(ids)} tokens but the context holds {model.n_ctx}, "
            "leaving no room to generate"
        )
    drafter = _drafter(model, draft)
    owns = context is None
    if context is None:
        context = model.context()
    generation = Generation(
        model,
        context,
        ids,
        Sampler(params, sequence),
        max_tokens=max_tokens,
        stop=stop,
        grammar=grammar,
        logprobs=logprobs,
        owns_context=owns,
        lookup=lookup,
        draft=drafter,
    )
    model.scheduler.submit(generation)
    return generation


def _drafter(model: Generator, draft: Generator | bool | None) -> DraftState | None:
    """The draft state of a new generation: with `draft` (a model), the model's own draft
    (True or None), or none (False, or a model loaded without one)."""
    if draft is False:
        return None
    p_min = getattr(model, "draft_p_min", MIN_PROBABILITY)
    if draft is None or draft is True:
        loaded = getattr(model, "draft", None)
        if loaded is None and draft is True:
            raise LlamayError("this model was loaded without a draft model (draft=)")
        return DraftState(loaded, MAX_DRAFT, p_min) if loaded is not None else None
    check_vocabulary(model, draft)
    return DraftState(draft, MAX_DRAFT, p_min)
