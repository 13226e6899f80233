"""llama.cpp's server routes: /completion and /infill here, the others beside them
(llama_server_tools.py: /tokenize, /detokenize, /apply-template, /props; slots.py: /slots).

Editor plugins (llama.vim, llama.vscode) and scripts written for llama-server talk to these.
A request reads as llama_server_fields.py says; it runs on the shared pipeline (pipeline.py)
as raw token prompts, in a slot of its model where it has one prompt (slots.py), and its
answer has llama-server's shape: one JSON object per prompt (an array for several), or
server-sent `data:` events, one per token, then the final object with `"stop": true` (no
`[DONE]`, as llama-server sends none here).

/infill asks a fill-in-the-middle model for the code between `input_prefix` and
`input_suffix` (llamay/tokenizer/fim.py makes the prompt: the model's FIM tokens, the
repository-level layout with `input_extra` where the model has it); a model without FIM
tokens is a 400 naming what it lacks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import falcon

from llamay.engine import Model
from llamay.server import llama_server_describe, llama_server_tools, pipeline, sse
from llamay.server.errors import ApiError, error_body, from_exception
from llamay.server.llama_server_fields import (
    COMPLETION,
    INFILL,
    Completion,
    completion_prompts,
    model_for,
    project,
    read_completion,
)
from llamay.server.slots import Slot, Slots, SlotTable
from llamay.server.state import Route, ServerState
from llamay.state import Context
from llamay.tokenizer.fim import fim_prompt


def add_routes(app: falcon.App, state: ServerState) -> None:
    slots = Slots(state.config.slots, state.config.context_ttl)
    app.add_route("/completion", _Completion(state, slots))
    app.add_route("/infill", _Infill(state, slots))
    llama_server_tools.add_routes(app, state, slots)
    llama_server_describe.describe_routes()


class _Completion(Route):
    def __init__(self, state: ServerState, slots: Slots) -> None:
        super().__init__(state)
        self.slots = slots

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = COMPLETION.read(self.body(req))
        name, model = model_for(self.state, values["model"])
        options = read_completion(model, values)
        prompts = completion_prompts(model, values["prompt"])
        _run(self.state, self.slots.table(model), req, resp, name, prompts, options)


class _Infill(_Completion):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = INFILL.read(self.body(req))
        name, model = model_for(self.state, values["model"])
        options = read_completion(model, values)
        ids = fim_prompt(
            model.tokenizer,
            values["input_prefix"],
            values["input_suffix"],
            middle=values["prompt"],
            extra=values["input_extra"],
            n_ctx=model.n_ctx,
            reserve=options.n_predict,
            name=name,
        )
        _run(self.state, self.slots.table(model), req, resp, name, [ids], options)


def _run(
    state: ServerState,
    table: SlotTable,
    req: falcon.Request,
    resp: falcon.Response,
    name: str,
    prompts: list[list[int]],
    options: Completion,
) -> None:
    """Run the prompts, one in a slot (when it is alone), and answer."""
    model = table.model
    single = len(prompts) == 1 and options.n_cmpl == 1
    if options.id_slot is not None and not single:
        raise ApiError(400, "id_slot takes one prompt and one completion", "id_slot")
    slot = table.acquire(options.id_slot, prompts[0]) if single else None
    context: Context | None = None
    try:
        held = 0
        if slot is not None:
            context, held = slot.resume(prompts[0])
        if context is None and single and options.n_predict == 0:
            context = model.context()  # nothing to generate: the prompt still fills the cache
        run = pipeline.start(
            pipeline.GenerationRequest(
                model,
                prompts=prompts,
                sampling=options.sampling,
                reasoning=False,  # a raw prompt: the text is the answer, tags and all
                n=options.n_cmpl,
                context=context,
                cached=held,
            )
        )
    except BaseException:
        if context is not None:
            context.close()
        if slot is not None:
            table.release(slot)
        raise
    answer = _Answer(state, name, model, run, options, table, slot, held)
    pipeline.answer(
        req, resp, run, answer.stream if options.stream else None, answer.collect, answer.release
    )


class CompletionText:
    """One completion as it is read, piece by piece (`take`): the text released, its tokens,
    and the cuts llama-server makes on code: a line after the first indented less than
    `n_indent` ends it without that line (its leading whitespace is held until its
    indentation is known), and a newline after `t_max_predict_ms` of generating ends it after
    that newline. `cut` says it was ended so; `flush` releases what is held at the end."""

    def __init__(self, n_indent: int = 0, t_max_predict_ms: float = 0) -> None:
        self.n_indent = n_indent
        self.t_max_predict_ms = t_max_predict_ms
        self.text = ""
        self.tokens: list[int] = []
        self.probs: list[dict[str, Any]] = []
        self.pending = ""
        self.line_start = False  # after a newline: the next line's indentation is checked
        self.has_new_line = False
        self.cut = False  # ended by n_indent or t_max_predict_ms
        self.first: float | None = None

    def take(self, piece: Any) -> str:
        """The text `piece` releases."""
        now = time.monotonic()
        if piece.token is not None:
            self.tokens.append(piece.token)
            if self.first is None:
                self.first = now
        shown = self._indented(piece.text) if self.n_indent else piece.text
        self.text += shown
        if "\n" in shown:
            self.has_new_line = True
            limit = self.t_max_predict_ms
            if limit and self.first is not None and (now - self.first) * 1000 > limit:
                self.cut = True
        return shown

    def _indented(self, new: str) -> str:
        """`new` up to a line (after the first) indented less than n_indent, which ends the
        answer without that line."""
        buffer, self.pending = self.pending + new, ""
        out: list[str] = []
        i = 0
        while i < len(buffer):
            if self.line_start:
                j = i
                while j < len(buffer) and buffer[j] in " \t":
                    j += 1
                if j == len(buffer):  # only whitespace so far: hold it
                    self.pending = buffer[i:]
                    break
                if buffer[j] != "\n" and j - i < self.n_indent:
                    self.cut = True
                    break
                self.line_start = False
            out.append(buffer[i])
            self.line_start = buffer[i] == "\n"
            i += 1
        return "".join(out)

    def flush(self) -> str:
        """Whitespace still held at the end of the answer."""
        rest, self.pending = ("" if self.cut else self.pending), ""
        self.text += rest
        return rest


class _Answer:
    """The answer to one request, collected or streamed, in llama-server's shape."""

    def __init__(
        self,
        state: ServerState,
        name: str,
        model: Model,
        run: pipeline.Run,
        options: Completion,
        table: SlotTable,
        slot: Slot | None,
        held: int,
    ) -> None:
        self.state = state
        self.name = name
        self.model = model
        self.run = run
        self.options = options
        self.table = table
        self.slot = slot
        self.held = held
        self.started = time.monotonic()
        self.choices = [
            CompletionText(options.n_indent, options.t_max_predict_ms) for _ in run.generations
        ]
        self.counted = False

    # --- reading the run ---

    def _events(self) -> Iterator[tuple[int, Any, str]]:
        """(choice index, Piece, the text it releases), until each choice ends or is cut."""
        for index, piece, _ in self.run.events():
            choice = self.choices[index]
            if choice.cut:
                continue  # the cancel has not reached the scheduler yet
            shown = choice.take(piece)
            if self.options.n_probs and piece.token is not None:
                choice.probs.append(self._probability(piece))
            if self.slot is not None:
                self.slot.n_decoded, self.slot.has_new_line = (
                    len(choice.tokens),
                    choice.has_new_line,
                )
            yield index, piece, shown
            if choice.cut:
                self.run.generations[index].cancel()

    def collect(self) -> Any:
        for _ in self._events():
            pass
        for choice in self.choices:
            choice.flush()
        finals = [self._final(index, streamed=False) for index in range(len(self.choices))]
        return finals[0] if len(finals) == 1 else finals

    def stream(self) -> Iterator[bytes]:
        try:
            for index, piece, shown in self._events():
                yield sse.event(self._partial(index, piece, shown))
            for index, choice in enumerate(self.choices):
                rest = choice.flush()
                if rest:
                    yield sse.event(self._partial(index, None, rest))
            for index in range(len(self.choices)):
                yield sse.event(self._final(index, streamed=True))
        except Exception as error:  # the status line is gone: report in the stream
            yield sse.event(error_body("openai", from_exception(error)))

    # --- the objects ---

    def _partial(self, index: int, piece: Any, shown: str) -> dict[str, Any]:
        choice = self.choices[index]
        chunk: dict[str, Any] = {
            "index": index,
            "content": shown,
            "tokens": [piece.token] if piece is not None and piece.token is not None else [],
            "stop": False,
            "id_slot": self._slot_id,
            "tokens_predicted": len(choice.tokens),
            "tokens_evaluated": len(self._prompt(index)),
        }
        if self.options.timings_per_token and choice.first is not None:
            now = time.monotonic()
            chunk["timings"] = _timings(
                len(self._prompt(index)),
                0,
                (choice.first - self.started) * 1000,
                len(choice.tokens),
                (now - choice.first) * 1000,
            )
        if self.options.n_probs and piece is not None and piece.token is not None:
            chunk["completion_probabilities"] = [choice.probs[-1]]
        return chunk

    def _final(self, index: int, *, streamed: bool) -> dict[str, Any]:
        if not self.counted:  # the answer's tokens, counted once in the metrics
            self.run.usage(self.state)
            self.counted = True
        choice, generation = self.choices[index], self.run.generations[index]
        outcome = self.run.outcome(index)
        prompt = self._prompt(index)
        cached = min(len(prompt), self.held + getattr(generation, "n_cached", 0))
        settings = dict(self.options.settings)
        sampler = getattr(generation, "sampler", None)
        if sampler is not None:
            settings["seed"] = sampler.seed
        full = len(prompt) + generation.n_generated >= self.model.n_ctx
        answer: dict[str, Any] = {
            "index": index,
            "content": "" if streamed else choice.text,
            "tokens": choice.tokens if self.options.return_tokens and not streamed else [],
            "id_slot": self._slot_id,
            "stop": True,
            "model": self.name,
            "tokens_predicted": generation.n_generated,
            "tokens_evaluated": len(prompt),
            "generation_settings": settings,
            "prompt": self.model.tokenizer.detokenize(prompt, special=True),
            "has_new_line": choice.has_new_line,
            "truncated": outcome.finish_reason == "length" and full,
            "stop_type": _stop_type(outcome, choice),
            "stopping_word": outcome.stop_sequence or "",
            "tokens_cached": cached,
            "timings": _timings(
                len(prompt) - cached,
                cached,
                generation.timings["prompt_s"] * 1000,
                generation.n_generated,
                generation.timings["generate_s"] * 1000,
            ),
        }
        if self.options.n_probs and not streamed:
            answer["completion_probabilities"] = choice.probs
        return project(answer, self.options.response_fields)

    def _prompt(self, index: int) -> list[int]:
        return self.run.prompts[index // self.options.n_cmpl]

    @property
    def _slot_id(self) -> int:
        return self.slot.id if self.slot is not None else -1

    def _probability(self, piece: Any) -> dict[str, Any]:
        return {
            **self._token(piece.token, piece.logprob),
            "top_logprobs": [self._token(t, lp) for t, lp in piece.top_logprobs or []],
        }

    def _token(self, token: int, logprob: float | None) -> dict[str, Any]:
        raw = self.model.tokenizer.token_to_piece(token, special=True)
        return {
            "id": token,
            "token": raw.decode("utf-8", "replace"),
            "bytes": list(raw),
            "logprob": logprob if logprob is not None and math.isfinite(logprob) else -1e30,
        }

    # --- the end ---

    def release(self) -> None:
        """Give the run back; the slot keeps what its context held (and the context itself
        when it continues a restored one)."""
        self.run.release()
        context = self.run.request.context
        slot = self.slot
        if slot is None:
            if context is not None:
                context.close()
            return
        generation = self.run.generations[0]
        tokens = context.tokens if context is not None else [*self.run.prompt, *generation.tokens]
        if context is not None and self.held and generation.error is None:
            slot.drop_context()
            slot.context = context  # the continuation of the restored context
        elif context is not None:
            context.close()
        slot.tokens = tokens
        slot.n_decoded = generation.n_generated
        slot.n_predict = self.options.n_predict
        slot.params = self.options.settings
        self.table.release(slot)


def _stop_type(outcome: Any, choice: CompletionText) -> str:
    if choice.cut or outcome.finish_reason in ("length", "cancelled"):
        return "limit"
    return "word" if outcome.stop_sequence else "eos"


def _timings(
    prompt_n: int, cache_n: int, prompt_ms: float, predicted_n: int, predicted_ms: float
) -> dict[str, Any]:
    def ratio(a: float, b: float) -> float:
        return a / b if b > 0 else 0.0

    return {
        "cache_n": cache_n,
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": ratio(prompt_ms, prompt_n),
        "prompt_per_second": ratio(1e3 * prompt_n, prompt_ms),
        "predicted_n": predicted_n,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": ratio(predicted_ms, predicted_n),
        "predicted_per_second": ratio(1e3 * predicted_n, predicted_ms),
    }
