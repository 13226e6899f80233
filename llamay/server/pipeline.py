"""One pipeline behind every family: a request in, a run's events out, rendered by the family.

Each family's route only translates. Its parser makes a `GenerationRequest`: a conversation
(OpenAI-shaped messages, rendered by the chat template) or raw prompts (text or token ids, no
template: text completions, Ollama's generate), with checked sampling options, stops, tools and
tool choice, an output format, logprobs (with `echo`, the prompt's own too), `n` choices per
prompt, whether to truncate a prompt that does not fit, and the context to generate in (a new
one per choice, or the caller's, which holds a prefix of the prompt already and stays the
caller's: the Responses API generates in a fork of the stored response it continues, or in a
context of its own that it keeps as the new stored response). A runner starts it:

- `start(request) -> Run`: on the local model: the prompts rendered and fitted, the grammar
  (the tools' lazy grammar under "auto", or the output format's), the generations begun; a
  failure to begin, such as a full KV cache, raises here, before any status is sent;
- on a remote provider (remote.py), a `RemoteRun` that makes the same events, or a 400 naming
  the field the provider cannot be sent.

`target(state, name)` chooses: the provider `$LLAMAY_HOME/config.toml` sends the name to, or
else the local model; the request carries it as its `model`, and `start` runs it there.

Its renderer then reads the run, whichever runner made it (`Runner` is what both offer):
`events()`: (choice index, Piece, [Event]) as tokens are made, each Piece read by the choice's
`Answer` (llamay/chat/answer.py) into text, reasoning and tool calls; then `finish(i)`: the events held to
the end; `finish_reason(i)` / `outcome(i)`; `usage(state)`; `release()` when the answer is
gone. `answer(req, resp, run, ...)` sends it as an event stream or whole. The families:
openai.py (chat and text completions), anthropic.py, ollama.py, responses.py, and native.py's
generate, in a context of its own registry.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import falcon

from llamay import chat
from llamay.chat import Answer, Event
from llamay.chat.spellings import OutputFormat
from llamay.engine import Model
from llamay.providers import Provider
from llamay.server import inference, remote, sse
from llamay.server.errors import ApiError
from llamay.server.watch import cancelled_on_disconnect
from llamay.state import Context

if TYPE_CHECKING:
    from llamay.server.state import ServerState

Prompt = str | Sequence[int]


@dataclass
class GenerationRequest:
    """One generation request, in llamay's terms: a conversation or raw prompts, and how to
    answer them.

    `model`: what runs it, the local model or the remote provider that serves its name
    (`target`). `messages`: OpenAI-shaped (role, content, tool_calls, tool_call_id, name),
    through the chat template; a trailing assistant message is a prefill. `prompts`: instead
    of messages, raw prompts (strings or token ids), each answered by `n` choices. `sampling`:
    model.generate's keyword arguments, checked (the family's request shape, fields.py),
    without a grammar; its `logprobs` asks for each token's. `tools`: OpenAI function tools;
    `tool_choice`: "auto", "none", "required" or "named" (`tool_name`); `parallel`: more than
    one call per answer. `output`: the output format (concepts.OutputFormat) the answer is
    held to when no tools are offered. `template_kwargs`: the chat template's variables
    (enable_thinking, reasoning_effort). `reasoning`: separate a reasoning model's reasoning.
    `n`: choices per prompt. `truncate`: cut a prompt longer than the context instead of
    refusing it. `echo`: each choice repeats its prompt first (`Run.echo`), with the prompt
    tokens' logprobs when `logprobs` is asked for; with max_tokens 0 the prompt is only
    scored. `context`: generate in the caller's context (one prompt, one choice), which holds
    the prompt's first `cached` tokens already (only the rest is fed); it stays open, the
    caller's again once the run is released. `ids`: the prompts' token ids, where the caller
    has them already (a context's own tokens and what it adds: trusted, not fitted); else
    they are rendered from the messages or prompts, once. `stream`: the client streams (a
    remote provider is asked to stream too). `spelling`: the client's field for each thing
    the request carries (fields.Values.spelling), for a refusal to name it."""

    model: Model | Provider
    messages: Sequence[Mapping[str, Any]] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    tools: Sequence[Mapping[str, Any]] | None = None
    tool_choice: str = "none"
    tool_name: str | None = None
    parallel: bool = True
    output: OutputFormat | None = None
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    reasoning: bool = True
    n: int = 1
    truncate: bool = False
    prompts: Sequence[Prompt] | None = None
    echo: bool = False
    context: Context | None = None
    cached: int = 0
    stream: bool = False
    spelling: Mapping[str, str] = field(default_factory=dict)
    # a caller that reads the rendered ids first (to know what its context holds) and then
    # starts the request renders the template once
    ids: list[list[int]] | None = field(default=None, repr=False, compare=False)

    @property
    def offered(self) -> Sequence[Mapping[str, Any]] | None:
        """The tools the model is shown (none under tool_choice "none")."""
        return self.tools if self.tools and self.tool_choice != "none" else None

    @property
    def reserve(self) -> int:
        return self.sampling.get("max_tokens") or 1

    @property
    def held(self) -> int:
        """How many of the prompt's tokens the caller's context holds already."""
        return self.cached if self.context is not None else 0

    def prompt_ids(self) -> list[list[int]]:
        """Each prompt's token ids (a conversation is one prompt), rendered once."""
        if self.ids is None:
            self.ids = self._render()
        return self.ids

    def _render(self) -> list[list[int]]:
        if self.prompts is not None:
            return [
                raw_prompt(self.model, p, truncate=self.truncate, reserve=self.reserve)
                for p in self.prompts
            ]
        return [
            chat.chat_prompt(
                self.model,
                list(self.messages or ()),
                tools=self.offered,
                truncate=self.truncate,
                reserve=self.reserve,
                template_kwargs=self.template_kwargs,
            )
        ]

    def prompt(self) -> list[int]:
        """The (first) prompt's token ids (what count_tokens counts)."""
        return self.prompt_ids()[0]


def raw_prompt(model: Model, prompt: Prompt, *, truncate: bool, reserve: int) -> list[int]:
    """The token ids of a raw prompt: text (chat.text_prompt) or token ids, which must
    be in the vocabulary; fitted to the context (chat.fit)."""
    if isinstance(prompt, str):
        return chat.text_prompt(model, prompt, truncate=truncate, reserve=reserve)
    if not prompt or not all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < model.n_vocab for t in prompt
    ):
        raise ApiError(
            400, "a token-id prompt must be a non-empty list of ids in the vocabulary", "prompt"
        )
    return chat.fit(model, list(prompt), truncate=truncate, reserve=reserve)


@dataclass(frozen=True)
class Echo:
    """A prompt as its answer repeats it: per token (id, the text it made visible, its logprob
    or None, its top alternatives or None), the first token's logprob None as it has no
    context; `rest`: text the decoder released only at the end."""

    tokens: list[tuple[int, str, float | None, list[tuple[int, float]] | None]]
    rest: str

    @property
    def text(self) -> str:
        return "".join(shown for _, shown, _, _ in self.tokens) + self.rest


class Runner(Protocol):
    """What a renderer reads, whether the local model (`Run`) or a remote provider
    (remote.RemoteRun) made the answer."""

    answers: list[Answer]
    generations: list[Any]  # what to cancel when the client goes away
    logprobs: bool
    model: Model | None  # None: a remote provider's

    @property
    def n_prompt(self) -> int: ...

    def events(self) -> Iterator[tuple[int, Any, list[Event]]]: ...

    def finish(self, index: int) -> list[Event]: ...

    def outcome(self, index: int) -> inference.Outcome: ...

    def finish_reason(self, index: int) -> str: ...

    def usage(self, state: ServerState) -> tuple[int, int]: ...

    def release(self) -> None: ...


@dataclass
class Run:
    """A GenerationRequest running on the local model: its prompts, one Generation and one
    Answer per choice (choice i answers prompt i // n)."""

    request: GenerationRequest
    prompts: list[list[int]]
    generations: list[Any]
    answers: list[Answer]
    _echoes: dict[int, Echo] = field(default_factory=dict)

    @property
    def model(self) -> Model:
        return self.request.model

    @property
    def prompt(self) -> list[int]:
        """The first prompt (a conversation's only one)."""
        return self.prompts[0]

    @property
    def n_prompt(self) -> int:
        return sum(len(prompt) for prompt in self.prompts)

    @property
    def logprobs(self) -> bool:
        return "logprobs" in self.request.sampling

    @property
    def stop(self) -> list[str]:
        return list(self.request.sampling.get("stop", []))

    def events(self) -> Iterator[tuple[int, Any, list[Event]]]:
        """(choice index, Piece, its events) in the order they are made; closing the iterator
        (or reaching its end) releases the generations."""
        for index, piece in inference.interleave(self.generations):
            yield index, piece, self.answers[index].feed(piece)

    def finish(self, index: int) -> list[Event]:
        """The events choice `index` held back to its end (the last text, its tool calls)."""
        return self.answers[index].finish()

    def outcome(self, index: int) -> inference.Outcome:
        return inference.Outcome.of(self.model, self.generations[index], self.stop)

    def finish_reason(self, index: int) -> str:
        """ "tool_calls" when the answer made calls, else the generation's reason."""
        return chat.finish_reason_of(self.answers[index].calls, self.outcome(index).finish_reason)

    def n_generated(self) -> int:
        return sum(generation.n_generated for generation in self.generations)

    def usage(self, state: ServerState) -> tuple[int, int]:
        """(prompt tokens, generated tokens) of the answer, counted in the server's metrics
        (the prompt tokens evaluated: not those a caller's context held); call once, at the
        end."""
        generated = self.n_generated()
        state.count_tokens(self.model, self.n_prompt - self.request.held, generated)
        return self.n_prompt, generated

    def tokens(self, index: int) -> list[int]:
        """The tokens choice `index` generated."""
        return list(self.generations[index].tokens)

    def timings(self, index: int) -> Mapping[str, float]:
        """Choice `index`'s prompt_s and generate_s."""
        return self.generations[index].timings

    def echo(self, index: int) -> Echo | None:
        """The prompt choice `index` repeats (None without `echo`), scored once per prompt."""
        if not self.request.echo:
            return None
        prompt_index = index // self.request.n
        if prompt_index not in self._echoes:
            self._echoes[prompt_index] = _echo(
                self.model, self.prompts[prompt_index], self.request.sampling.get("logprobs")
            )
        return self._echoes[prompt_index]

    def release(self) -> None:
        inference.release(self.generations)


def _echo(model: Model, ids: list[int], n_top: int | None) -> Echo:
    scored = (
        inference.prompt_logprobs(model, ids, n_top)
        if n_top is not None
        else [(None, None)] * len(ids)
    )
    decoder = model.tokenizer.stream()
    tokens = [
        (token, decoder.feed(token), logprob, top)
        for token, (logprob, top) in zip(ids, scored, strict=True)
    ]
    return Echo(tokens, decoder.flush())


def target(state: ServerState, name: str) -> Model | Provider:
    """What runs requests for model `name`: the remote provider that serves it, or the local
    model (loaded; 404 for a name that is no model)."""
    provider = remote.find(name)
    return provider if provider is not None else state.models.get(name)


def start(request: GenerationRequest) -> Runner:
    """Begin a GenerationRequest on the runner its model names: a remote provider's
    (remote.start), or the local model's (`run_locally`)."""
    if isinstance(request.model, Provider):
        return remote.start(request.model, request)
    return run_locally(request)


def run_locally(request: GenerationRequest) -> Run:
    """Render, constrain and begin a GenerationRequest on its local model (see the module
    docstring)."""
    model = request.model
    if not isinstance(model, Model):
        raise TypeError(f"{model!r} is not a local model")
    offered = request.offered
    prefill = chat.prefill_of(list(request.messages or ()))
    grammar = (
        chat.tool_grammar(
            model,
            offered,
            request.tool_choice,
            request.tool_name,
            parallel=request.parallel,
            prefill=prefill,
        )
        if offered
        else (request.output.grammar() if request.output is not None else None)
    )
    kwargs = inference.vocabulary_checked(model, dict(request.sampling))
    if grammar is not None:
        kwargs["grammar"] = grammar
    prompts = request.prompt_ids()
    n = inference.check_n(request.n)
    context = request.context
    if context is not None and len(prompts) != 1:
        raise ValueError("a caller's context holds one prompt")
    # max_tokens 0 (OpenAI's minimum): an empty answer cut by its length; with echo, the prompt
    # is only scored. Nothing is evaluated unless a caller's context is to hold the prompt.
    nothing = kwargs.get("max_tokens") == 0 and context is None
    generations: list[Any] = []
    try:
        for ids in prompts:
            if nothing:
                generations += [inference.Unsampled(len(ids)) for _ in range(n)]
            else:
                fed = ids[request.held :]
                generations += inference.start(model, fed, n, kwargs, context)
    except BaseException:
        inference.release(generations)
        raise
    answers = [
        chat.answer_reader(model, prompts[i // n], offered, prefill, reasoning=request.reasoning)
        for i in range(len(generations))
    ]
    return Run(request, prompts, generations, answers)


def answer(
    req: falcon.Request,
    resp: falcon.Response,
    run: Runner,
    stream: Callable[[], Generator[bytes, None, None]] | None,
    collect: Callable[[], Any],
    release: Callable[[], None] | None = None,
) -> None:
    """Send a run's answer: the events of `stream()` as server-sent events when the client
    streams, else `collect()` as one JSON body, the run's generations cancelled if the client
    goes away first. Either way the run is released at the end, by `release` where the
    renderer has more to give back than the run (the Responses API: the context it runs in,
    kept as the stored response or closed), else by `run.release`."""
    release = release or run.release
    if stream is not None:
        sse.respond(resp, stream(), release)
        return
    try:
        with cancelled_on_disconnect(req, run.generations):
            resp.media = collect()
    finally:
        release()
