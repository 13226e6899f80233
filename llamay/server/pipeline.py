"""One pipeline behind the chat families: a request in, generations and their answers out.

Each family's route only translates: its parser makes a `ChatRequest` (OpenAI-shaped messages,
checked sampling options, tools and tool choice, an output grammar, the template's variables),
`start_chat` runs it on the local model, and its renderer turns the `ChatRun`'s events into the
family's answer or stream. The stable entry points, for any route that generates a chat answer
(the Responses API among them):

- `ChatRequest`: what to generate;
- `start_chat(request) -> ChatRun`: the prompt rendered in the template's convention, the grammar
  (the tools' lazy grammar under "auto", or the output format's), the generations begun (a
  failure to begin, such as a full KV cache, raises here, before any status is sent);
- `ChatRun.events()`: (choice index, Piece, [Event]) as tokens are made, each Piece read by the
  choice's `Answer` (answer.py) into text, reasoning and tool calls; then `ChatRun.finish(i)`:
  the events held to the end; `ChatRun.finish_reason(i)`; `ChatRun.release()`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llamay.engine import Model
from llamay.server import inference
from llamay.server.answer import Answer, Event


@dataclass
class ChatRequest:
    """One chat generation request, in llamay's terms.

    `messages`: OpenAI-shaped (role, content, tool_calls, tool_call_id, name); a trailing
    assistant message is a prefill. `sampling`: model.generate's keyword arguments, checked
    (inference.sampling_kwargs / request_sampling), without a grammar. `tools`: OpenAI function
    tools; `tool_choice`: "auto", "none", "required" or "named" (`tool_name`); `parallel`: more
    than one call per answer. `output_grammar`: a response format's grammar, used when no tools
    are offered. `template_kwargs`: the chat template's variables (enable_thinking,
    reasoning_effort). `reasoning`: separate a reasoning model's reasoning. `n`: choices.
    `truncate`: cut a prompt longer than the context instead of refusing it."""

    model: Model
    messages: Sequence[Mapping[str, Any]]
    sampling: dict[str, Any] = field(default_factory=dict)
    tools: Sequence[Mapping[str, Any]] | None = None
    tool_choice: str = "none"
    tool_name: str | None = None
    parallel: bool = True
    output_grammar: Any = None
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    reasoning: bool = True
    n: int = 1
    truncate: bool = False

    @property
    def offered(self) -> Sequence[Mapping[str, Any]] | None:
        """The tools the model is shown (none under tool_choice "none")."""
        return self.tools if self.tools and self.tool_choice != "none" else None

    def prompt(self) -> list[int]:
        """The prompt's token ids (what count_tokens counts)."""
        return inference.chat_prompt(
            self.model,
            list(self.messages),
            tools=self.offered,
            truncate=self.truncate,
            reserve=self.sampling.get("max_tokens") or 1,
            template_kwargs=self.template_kwargs,
        )


@dataclass
class ChatRun:
    """A ChatRequest running: its prompt, one Generation and one Answer per choice."""

    request: ChatRequest
    prompt: list[int]
    generations: list[Any]
    answers: list[Answer]

    @property
    def model(self) -> Model:
        return self.request.model

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
        if self.answers[index].calls:
            return "tool_calls"
        return self.outcome(index).finish_reason

    def n_generated(self) -> int:
        return sum(generation.n_generated for generation in self.generations)

    def release(self) -> None:
        inference.release(self.generations)


def start_chat(request: ChatRequest) -> ChatRun:
    """Render, constrain and begin a ChatRequest on its model (see the module docstring)."""
    model = request.model
    offered = request.offered
    prefill = inference.prefill_of(list(request.messages))
    grammar = (
        inference.tool_grammar(
            model,
            offered,
            request.tool_choice,
            request.tool_name,
            parallel=request.parallel,
            prefill=prefill,
        )
        if offered
        else request.output_grammar
    )
    kwargs = dict(request.sampling)
    if grammar is not None:
        kwargs["grammar"] = grammar
    prompt = request.prompt()
    generations = inference.start(model, prompt, request.n, kwargs)
    answers = [
        inference.answer(model, prompt, offered, prefill, reasoning=request.reasoning)
        for _ in generations
    ]
    return ChatRun(request, prompt, generations, answers)
