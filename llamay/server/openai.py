"""The OpenAI API: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models.

Requests and answers follow OpenAI's shapes as the official SDK sends and reads them; fields
llamay has no use for are ignored. Streams are server-sent events ending with `data: [DONE]`.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Iterator
from typing import Any

import falcon

from llamay.engine import Model
from llamay.server import anthropic, inference, openapi, pipeline, remote, sse, suffix
from llamay.server.errors import ApiError, error_body, from_exception
from llamay.server.fields import Values
from llamay.server.openai_fields import CHAT, COMPLETION, EMBEDDINGS
from llamay.server.state import Route, ServerState

OWNER = "llamay"


def add_routes(app: falcon.App, state: ServerState) -> None:
    app.add_route("/v1/chat/completions", _ChatCompletions(state))
    app.add_route("/v1/completions", _Completions(state))
    app.add_route("/v1/embeddings", _Embeddings(state))
    app.add_route("/v1/models", _Models(state))
    app.add_route("/v1/models/{model_id:path}", _Model(state))
    for path, summary, request in (
        ("/v1/chat/completions", "OpenAI chat completion", CHAT),
        ("/v1/completions", "OpenAI text completion", COMPLETION),
        ("/v1/embeddings", "OpenAI embeddings", EMBEDDINGS),
    ):
        openapi.describe(
            "POST",
            path,
            summary,
            tag="openai",
            request=request.schema(),
            response={"type": "object"},
            errors=openapi.MODEL_ROUTE_ERRORS,
            stream_type="text/event-stream" if "embeddings" not in path else None,
        )
    openapi.describe(
        "GET",
        "/v1/models",
        "Models (OpenAI, or Anthropic with anthropic-version)",
        tag="openai",
        response={"type": "object"},
    )
    openapi.describe(
        "GET",
        "/v1/models/{model_id}",
        "One model",
        tag="openai",
        response={"type": "object"},
        errors={404: "unknown model"},
    )


def created() -> int:
    return int(time.time())


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def _usage(n_prompt: int, n_generated: int) -> dict[str, int]:
    return {
        "prompt_tokens": n_prompt,
        "completion_tokens": n_generated,
        "total_tokens": n_prompt + n_generated,
    }


def _fingerprint(model: Any) -> str | None:
    """The weights, as OpenAI's system_fingerprint names a backend configuration: the first
    hex digits of the file's digest where the store names it by digest (None for a remote
    provider's model)."""
    if model is None:
        return None
    return "fp_" + model.path.name.removeprefix("sha256-")[:12]


def _stream_failure(error: Exception) -> bytes:
    """A failure after the stream began, as OpenAI reports one: an event with an `error`."""
    return sse.event(error_body("openai", from_exception(error)))


class _Answer:
    """What a chat and a text completion share: the answer's id, its usage, its chunks and the
    frame of its stream. A subclass renders the run's choices: `_opening` (before any token),
    `_piece` (each piece's events), `_closing` (a choice's end, with its finish_reason) and
    `collect`."""

    prefix = "chatcmpl"
    object = "chat.completion"
    chunk_object = "chat.completion.chunk"

    def __init__(
        self, state: ServerState, name: str, run: pipeline.Runner, include_usage: bool
    ) -> None:
        self.state = state
        self.name = name
        self.run = run
        self.model = run.model
        self.include_usage = include_usage
        self.fingerprint = _fingerprint(run.model)
        self.id = new_id(self.prefix)
        self.created = created()

    def _usage(self) -> dict[str, int]:
        return _usage(*self.run.usage(self.state))

    def _chunk(self, choices: list[dict[str, Any]], usage: Any = None) -> bytes:
        """One streamed chunk event; `usage` is in every chunk when the client asked for it
        (null but in the last)."""
        chunk = {
            "id": self.id,
            "object": self.chunk_object,
            "created": self.created,
            "model": self.name,
            "system_fingerprint": self.fingerprint,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = usage
        return sse.event(chunk)

    def _body(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.name,
            "system_fingerprint": self.fingerprint,
            "choices": choices,
            "usage": self._usage(),
        }

    def _opening(self) -> Iterator[bytes]:
        return iter(())

    def _piece(self, index: int, piece: Any, events: list[Any]) -> Iterator[bytes]:
        raise NotImplementedError

    def _closing(self, index: int) -> Iterator[bytes]:
        raise NotImplementedError

    def collect(self) -> dict[str, Any]:
        raise NotImplementedError

    def stream(self) -> Iterator[bytes]:
        """The opening chunks, the chunks of each piece as it is made, each choice's closing
        chunks, the usage chunk if asked, then [DONE]; a failure after the status line is an
        error event."""
        pieces = self.run.events()
        try:
            yield from self._opening()
            for index, piece, events in pieces:
                yield from self._piece(index, piece, events)
            for index in range(len(self.run.answers)):
                yield from self._closing(index)
            usage = self._usage()
            if self.include_usage:
                yield self._chunk([], usage)
            yield sse.event("[DONE]")
        except Exception as error:  # the status line is gone: report in the stream
            yield _stream_failure(error)
        finally:
            pieces.close()


# --- chat ---------------------------------------------------------------------------------------


class _ChatCompletions(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = CHAT.read(self.body(req))
        name, stream = values["model"], values["stream"]
        run = pipeline.start(_chat_request(pipeline.target(self.state, name), values))
        chat = _Chat(self.state, name, run, stream and values["stream_options"])
        pipeline.answer(req, resp, run, chat.stream if stream else None, chat.collect)


def _chat_request(model: Any, values: Values) -> pipeline.GenerationRequest:
    """The request in the pipeline's terms, for the local model or a remote provider."""
    sampling = CHAT.sampling(values)
    if values["logprobs"]:
        sampling["logprobs"] = values["top_logprobs"] or 0
    choice = values["tool_choice"]
    return pipeline.GenerationRequest(
        model,
        values["messages"],
        sampling=sampling,
        tools=values["tools"],
        tool_choice=choice.mode,
        tool_name=choice.name,
        parallel=values["parallel_tool_calls"],
        output=values["response_format"],
        template_kwargs=_template_kwargs(values),
        n=values["n"],
        truncate=values["truncate"],
        stream=values["stream"],
        spelling=values.spelling,
    )


def _template_kwargs(values: Values) -> dict[str, Any]:
    """The chat template's variables a request sets: `chat_template_kwargs` (llama.cpp's and
    vLLM's extension, e.g. {"enable_thinking": false}) and `reasoning_effort` (gpt-oss's
    Harmony reads it; "none" turns Qwen 3's thinking off)."""
    variables = dict(values["chat_template_kwargs"] or {})
    effort = values["reasoning_effort"]
    if effort == "none":
        variables.setdefault("enable_thinking", False)
    elif effort is not None:
        variables.setdefault("reasoning_effort", "low" if effort == "minimal" else effort)
    return variables


class _Chat(_Answer):
    """The choices of one chat completion, collected or streamed: the run's events rendered
    as content, reasoning_content and tool_calls. Streamed: the role first, then content and
    reasoning_content deltas as they are made (a tool call's head and arguments once the call
    is complete), and a last chunk per choice with its finish_reason."""

    def collect(self) -> dict[str, Any]:
        logprobs: list[list[dict[str, Any]]] = [[] for _ in self.run.answers]
        for index, piece, _ in self.run.events():
            if self.run.logprobs and piece.token is not None:
                logprobs[index].append(_logprob_entry(self.model, piece))
        choices = []
        for index, answer in enumerate(self.run.answers):
            self.run.finish(index)
            message: dict[str, Any] = {
                "role": "assistant",
                "content": (answer.text.strip() or None) if answer.calls else answer.text,
                "refusal": None,
            }
            if answer.reasoning:
                message["reasoning_content"] = answer.reasoning
            if answer.calls:
                message["tool_calls"] = [_call_object(call) for call in answer.calls]
            choices.append(
                {
                    "index": index,
                    "message": message,
                    "logprobs": {"content": logprobs[index], "refusal": None}
                    if self.run.logprobs
                    else None,
                    "finish_reason": self.run.finish_reason(index),
                }
            )
        return self._body(choices)

    def _opening(self) -> Iterator[bytes]:
        for index in range(len(self.run.answers)):
            yield self._chunk([_delta(index, {"role": "assistant", "content": ""})])

    def _piece(self, index: int, piece: Any, events: list[Any]) -> Iterator[bytes]:
        logprobs = None
        if self.run.logprobs and piece.token is not None:
            logprobs = {"content": [_logprob_entry(self.model, piece)], "refusal": None}
        return self._event_deltas(index, events, logprobs)

    def _closing(self, index: int) -> Iterator[bytes]:
        yield from self._event_deltas(index, self.run.finish(index), None)
        yield self._chunk([_delta(index, {}, None, self.run.finish_reason(index))])

    def _event_deltas(self, index: int, events: list[Any], logprobs: Any) -> Iterator[bytes]:
        """The chunks of one piece's events; its logprobs ride on the first (or on an empty
        content delta when the piece showed nothing yet, as while a call is held)."""
        answer = self.run.answers[index]
        for event in events:
            if event.kind == "text":
                delta: dict[str, Any] = {"content": event.text}
            elif event.kind == "reasoning":
                delta = {"reasoning_content": event.text}
            else:
                position = answer.calls.index(event.call)
                head = {
                    "index": position,
                    "id": f"call_{event.call.id}",
                    "type": "function",
                    "function": {"name": event.call.name, "arguments": ""},
                }
                yield self._chunk([_delta(index, {"tool_calls": [head]}, logprobs)])
                logprobs = None
                delta = {
                    "tool_calls": [
                        {"index": position, "function": {"arguments": event.call.arguments_json}}
                    ]
                }
            yield self._chunk([_delta(index, delta, logprobs)])
            logprobs = None
        if logprobs is not None:
            yield self._chunk([_delta(index, {"content": ""}, logprobs)])


def _call_object(call: Any) -> dict[str, Any]:
    return {
        "id": f"call_{call.id}",
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_json},
    }


def _delta(
    index: int, delta: dict[str, Any], logprobs: Any = None, finish: str | None = None
) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}


def _logprob_entry(model: Any, piece: Any) -> dict[str, Any]:
    text = inference.token_text(model, piece.token)
    top = [
        {
            "token": (alt := inference.token_text(model, token)),
            "logprob": logprob,
            "bytes": list(alt.encode()),
        }
        for token, logprob in (piece.top_logprobs or [])
    ]
    return {
        "token": text,
        "logprob": piece.logprob,
        "bytes": list(text.encode()),
        "top_logprobs": top,
    }


# --- text completions ---------------------------------------------------------------------------


class _Completions(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = COMPLETION.read(self.body(req))
        name, stream = values["model"], values["stream"]
        model = pipeline.target(self.state, name)
        prompts = values["prompt"]
        # code completion: the middle, through FIM tokens (a remote provider takes no raw
        # prompt: its runner refuses one, suffix or not)
        if values["suffix"] is not None and isinstance(model, Model):
            if values["echo"]:
                raise ApiError(400, "echo and suffix cannot be combined", "echo")
            max_tokens = values["max_tokens"]
            prompts = suffix.filled(model, name, prompts, values["suffix"], max_tokens)
        request = pipeline.GenerationRequest(
            model,
            prompts=prompts,
            sampling=COMPLETION.sampling(values),
            reasoning=False,  # a raw prompt: the text is the answer, tags and all
            n=values["n"],
            truncate=values["truncate"],
            echo=values["echo"],
            stream=stream,
            spelling=values.spelling,
        )
        run = pipeline.start(request)
        completion = _TextCompletion(self.state, name, run, stream and values["stream_options"])
        pipeline.answer(req, resp, run, completion.stream if stream else None, completion.collect)


class _TextCompletion(_Answer):
    """The choices of one text completion, collected or streamed. With echo, a choice's text
    begins with its prompt, and with logprobs its lists begin with the prompt's tokens (the
    first token's logprob null, as it has no context), text_offset counting from the start of
    the echoed text; streamed, the offsets go on from chunk to chunk."""

    prefix = "cmpl"
    object = "text_completion"
    chunk_object = "text_completion"

    def __init__(
        self, state: ServerState, name: str, run: pipeline.Run, include_usage: bool = False
    ) -> None:
        super().__init__(state, name, run, include_usage)
        self.local = run
        self.echoed: list[str] = []
        # each choice's logprobs so far: a streamed chunk carries only its new entries
        self.running: list[_LegacyLogprobs] = []

    def _begin(self) -> None:
        """Each choice's echo and logprobs, to begin with (the prompt scored, with echo)."""
        for index in range(len(self.run.answers)):
            text, entries = self._echoed(index)
            self.echoed.append(text)
            self.running.append(entries)

    def _echoed(self, index: int) -> tuple[str, _LegacyLogprobs]:
        """The echoed prompt of choice `index` ("" without echo) and its logprobs."""
        entries = _LegacyLogprobs()
        echo = self.local.echo(index)
        if echo is None:
            return "", entries
        for token, shown, logprob, top in echo.tokens:
            entries.add(self.model, token, shown, logprob, top, first=not entries.tokens)
        entries.advance(len(echo.rest))
        return echo.text, entries

    def _logprobs(self, index: int, piece: Any) -> Any:
        """The entries `piece` adds to choice `index`'s logprobs (None without logprobs)."""
        running = self.running[index]
        if not self.run.logprobs or piece.token is None:
            running.advance(len(piece.text))
            return None
        start = len(running.tokens)
        running.add(self.model, piece.token, piece.text, piece.logprob, piece.top_logprobs)
        return running.body(start)

    def collect(self) -> dict[str, Any]:
        self._begin()
        for index, piece, _ in self.run.events():
            self._logprobs(index, piece)
        choices = []
        for index, answer in enumerate(self.run.answers):
            self.run.finish(index)
            choices.append(
                {
                    "text": self.echoed[index] + answer.text,
                    "index": index,
                    "logprobs": self.running[index].body() if self.run.logprobs else None,
                    "finish_reason": self.run.finish_reason(index),
                }
            )
        return self._body(choices)

    def _opening(self) -> Iterator[bytes]:
        self._begin()
        if self.local.request.echo:
            for index, (text, entries) in enumerate(zip(self.echoed, self.running, strict=True)):
                body = entries.body() if self.run.logprobs else None
                yield self._chunk([_text_choice(index, text, body)])

    def _piece(self, index: int, piece: Any, events: list[Any]) -> Iterator[bytes]:
        logprobs = self._logprobs(index, piece)
        if piece.text or logprobs:
            yield self._chunk([_text_choice(index, piece.text, logprobs)])

    def _closing(self, index: int) -> Iterator[bytes]:
        self.run.finish(index)
        yield self._chunk([_text_choice(index, "", None, self.run.finish_reason(index))])


def _text_choice(
    index: int, text: str, logprobs: Any = None, finish: str | None = None
) -> dict[str, Any]:
    return {"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish}


class _LegacyLogprobs:
    """The completions API's logprobs: parallel lists per token, text_offset counting the
    characters of the choice's text before each token."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.token_logprobs: list[float | None] = []
        self.top_logprobs: list[dict[str, float] | None] = []
        self.text_offset: list[int] = []
        self._offset = 0

    def add(
        self,
        model: Any,
        token: int,
        shown: str,
        logprob: float | None,
        top: Any,
        *,
        first: bool = False,
    ) -> None:
        """One token that made `shown` visible (its alternatives `top`)."""
        self.tokens.append(inference.token_text(model, token))
        self.token_logprobs.append(logprob)
        self.top_logprobs.append(
            None
            if first and logprob is None
            else {inference.token_text(model, t): lp for t, lp in (top or [])}
        )
        self.text_offset.append(self._offset)
        self._offset += len(shown)

    def advance(self, n_chars: int) -> None:
        """Text that no token entry stands for (held-back text released at the end)."""
        self._offset += n_chars

    def body(self, start: int = 0) -> dict[str, Any]:
        return {
            "tokens": self.tokens[start:],
            "token_logprobs": self.token_logprobs[start:],
            "top_logprobs": self.top_logprobs[start:],
            "text_offset": self.text_offset[start:],
        }


# --- embeddings ---------------------------------------------------------------------------------


class _Embeddings(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = EMBEDDINGS.read(self.body(req))
        name, encoding, inputs = values["model"], values["encoding_format"], values["input"]
        model = self.state.models.get(name)
        dimensions = _dimensions(values["dimensions"], model.n_embd)
        data = []
        ids = [
            pipeline.raw_prompt(model, item, truncate=values["truncate"], reserve=0)
            for item in inputs
        ]
        n_tokens = sum(len(one) for one in ids)
        # one batched pass (each vector the same as alone); dimensions: Matryoshka truncation
        vectors = model.embed_many(ids, dimensions=dimensions)
        for index, vector in enumerate(vectors):
            embedding: Any = (
                base64.b64encode(vector.astype("<f4").tobytes()).decode()
                if encoding == "base64"
                else vector.tolist()
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        self.state.count_tokens(model, n_tokens, 0)
        resp.media = {
            "object": "list",
            "data": data,
            "model": name,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }


def _dimensions(dimensions: int | None, n_embd: int) -> int | None:
    """OpenAI's `dimensions`: the first that many components, renormalized (Model.embed); at
    most the model's own."""
    if dimensions is not None and dimensions > n_embd:
        raise ApiError(400, f"dimensions must be from 1 to {n_embd}", "dimensions")
    return dimensions


# --- models -------------------------------------------------------------------------------------


class _Models(Route):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        names = self.state.models.available()
        if req.get_header("anthropic-version"):
            resp.media = anthropic.model_list(names)
        else:
            data = [_model_object(name, made) for name, made in names.items()]
            resp.media = {"object": "list", "data": data}


class _Model(Route):
    def on_get(self, req: falcon.Request, resp: falcon.Response, model_id: str) -> None:
        listed = self.state.models.available()
        if model_id in listed:  # the `created` the list gives
            made = listed[model_id]
        elif remote.find(model_id) is not None:
            made = 0
        else:  # 404 for a name that is no model
            made = int(self.state.models.resolve(model_id).stat().st_mtime)
        if req.get_header("anthropic-version"):
            resp.media = anthropic.model_object(model_id, made)
        else:
            resp.media = _model_object(model_id, made)


def _model_object(name: str, made: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": made, "owned_by": OWNER}
