"""The Ollama API: `/` and /api/ (generate, chat, embed, embeddings, version; the model routes
are in ollama_models.py).

Requests and answers follow Ollama's shapes as its official client sends and reads them.
Generate and chat stream NDJSON by default (`"stream": false` for one object); the last object
has `done: true`, `done_reason` and durations in nanoseconds. A model's params layer (a
registry model's stop strings, temperature...) gives the defaults that `options` override.
`num_ctx`, `num_thread` and the other load-time options are the server's to choose: they are
accepted and ignored, as are options llamay has no use for (mirostat, tfs_z...).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import falcon

from llamay import chat
from llamay._version import __version__
from llamay.chat import reasoning_of
from llamay.engine import Model
from llamay.errors import LlamayError
from llamay.server import inference, ollama_models, pipeline, suffix, ui
from llamay.server.errors import ApiError, read_json
from llamay.server.fields import Shape
from llamay.server.models import parse_keep_alive
from llamay.server.ollama_describe import describe_routes
from llamay.server.ollama_fields import CHAT, EMBED, EMBEDDINGS, GENERATE, OPTIONS
from llamay.server.ollama_models import respond_ndjson, stored
from llamay.server.ollama_template import render_template
from llamay.server.state import Route, ServerState
from llamay.server.watch import cancelled_on_disconnect
from llamay.system import system_info


def add_routes(app: falcon.App, state: ServerState) -> None:
    app.add_route("/", _Root())
    app.add_route("/api/version", _Version())
    app.add_route("/api/generate", _Generate(state))
    app.add_route("/api/chat", _Chat(state))
    app.add_route("/api/embed", _Embed(state))
    app.add_route("/api/embeddings", _Embeddings(state))
    ollama_models.add_routes(app, state)
    describe_routes()


class _Root:
    """Ollama's "Ollama is running"; a browser (which ranks text/html first) gets the chat
    page (ui.py) instead."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.vary = ("Accept",)
        if ui.prefers_page(req):
            ui.send_page(req, resp)
            return
        resp.content_type = falcon.MEDIA_TEXT
        resp.text = "Ollama is running"

    def on_head(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.vary = ("Accept",)
        resp.content_type = (
            "text/html; charset=utf-8" if ui.prefers_page(req) else falcon.MEDIA_TEXT
        )


class _Version:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        # Ollama's one key, then what a bug report needs: the kernel set and the CPU
        info = system_info()
        resp.media = {
            "version": __version__,
            "kernels": info["kernels"],
            "cpu": info["cpu"],
            "cpu_features": info["features"],
        }


# --- generate and chat -------------------------------------------------------------------------


class _Request:
    """What generate and chat share: the model (loaded, and how long that took), sampling,
    streaming, and the answer's closing object."""

    def __init__(self, state: ServerState, req: falcon.Request, shape: Shape) -> None:
        self.started = time.perf_counter()
        self.state = state
        self.values = shape.read(read_json(req, state.config.max_body_bytes))
        self.name: str = self.values["model"]
        self.stream: bool = self.values["stream"]
        self.think = self.values["think"]
        # None: no log-probabilities; k: each token's, with its k most likely alternatives.
        top = self.values["top_logprobs"]
        self.logprobs = (top or 0) if self.values["logprobs"] or top else None
        self.keep_alive = self.values["keep_alive"]
        self.model: Model = state.models.get(self.name, self.keep_alive)
        self.load_s = time.perf_counter() - self.started
        self.entry = stored(state, self.name)
        self.reasons = reasoning_of(self.model.chat_template.source) is not None
        if self.think not in (None, False) and not self.reasons:
            raise ApiError(400, f"{self.name!r} does not support thinking", "think")

    def template_kwargs(self) -> dict[str, Any]:
        """`think` as the template's variables: false turns thinking off (enable_thinking),
        a level sets reasoning_effort (gpt-oss)."""
        if self.think is None:
            return {}
        if isinstance(self.think, str):
            return {"reasoning_effort": self.think}
        return {"enable_thinking": self.think}

    def unloading(self) -> bool:
        """Whether the request asks to unload the model (keep_alive 0)."""
        return parse_keep_alive(self.keep_alive, self.state.config.keep_alive) == 0

    def load_answer(self) -> dict[str, Any]:
        """The answer to a request with nothing to generate: the model is loaded (or, with
        keep_alive 0, unloaded)."""
        reason = "load"
        if self.unloading():
            self.state.models.unload(self.name)
            reason = "unload"
        return {**self.head(), "done": True, "done_reason": reason}

    def sampling(self) -> dict[str, Any]:
        """model.generate's keyword arguments: the params layer, then `options` over it."""
        params = self.entry.params if self.entry else {}
        sampling = OPTIONS.sampling(OPTIONS.read({**params, **(self.values["options"] or {})}))
        if self.logprobs is not None:
            sampling["logprobs"] = self.logprobs
        return sampling

    def head(self) -> dict[str, Any]:
        return {"model": self.name, "created_at": _now()}

    def piece_logprobs(self, piece: Any) -> list[dict[str, Any]]:
        """The log-probabilities of a Piece's token, when asked for."""
        if self.logprobs is None or piece.token is None:
            return []
        return [
            {
                **self._token_logprob(piece.token, piece.logprob),
                "top_logprobs": [
                    self._token_logprob(token, logprob)
                    for token, logprob in piece.top_logprobs or []
                ],
            }
        ]

    def with_logprobs(self, obj: dict[str, Any], logprobs: list[dict[str, Any]]) -> dict:
        return {**obj, "logprobs": logprobs} if self.logprobs is not None else obj

    def _token_logprob(self, token: int, logprob: float) -> dict[str, Any]:
        return {"token": inference.token_text(self.model, token), "logprob": logprob}

    def closing(self, run: pipeline.Run) -> dict[str, Any]:
        """The last object's fields: why it ended, and the counts and durations."""
        run.usage(self.state)
        outcome, timings = run.outcome(0), run.timings(0)
        return {
            "done": True,
            "done_reason": outcome.finish_reason,
            "total_duration": _ns(time.perf_counter() - self.started),
            "load_duration": _ns(self.load_s),
            "prompt_eval_count": outcome.n_prompt,
            "prompt_eval_duration": _ns(timings["prompt_s"]),
            "eval_count": outcome.n_generated,
            "eval_duration": _ns(timings["generate_s"]),
        }


class _Generate(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        request = _Request(self.state, req, GENERATE)
        values, model = request.values, request.model
        prompt, insert = values["prompt"], values["suffix"]
        if not prompt and not insert:
            resp.media = {**request.load_answer(), "response": ""}
            return
        templated = not (values["raw"] or values["template"])
        sampling = request.sampling()
        if insert:  # code completion: the middle, through the model's FIM tokens
            for field in ("context", "template"):
                if values[field]:
                    raise ApiError(400, f"{field} and suffix cannot be combined", field)
            templated = False
            (ids,) = suffix.filled(
                model, request.name, [prompt], insert, sampling.get("max_tokens")
            )
        else:
            ids = self._prompt_ids(request, prompt)
        run = pipeline.start(
            pipeline.GenerationRequest(
                model,
                prompts=[ids],
                sampling=sampling,
                output=values["format"],
                reasoning=templated and request.reasons,
            )
        )

        def objects() -> Iterator[dict[str, Any]]:
            for message, logprobs in _chat_messages(run, request):
                chunk = {**request.head(), "response": message["content"], "done": False}
                if "thinking" in message:
                    chunk["thinking"] = message["thinking"]
                yield request.with_logprobs(chunk, logprobs)
            closing = request.closing(run)
            context = run.prompt + run.tokens(0)
            yield {**request.head(), "response": "", **closing, "context": context}

        _answer(req, resp, request.stream, objects(), run, "response")

    def _prompt_ids(self, request: _Request, prompt: str) -> list[int]:
        """The prompt's tokens after `context` (the tokens of the earlier turns): through the
        chat template, or the request's Go template, or as it stands with `raw`."""
        values, model = request.values, request.model
        context = _in_vocabulary(values["context"], model)
        system = values["system"] or (request.entry.system if request.entry else "")
        template, raw = values["template"], values["raw"]
        if raw or template:
            text = prompt if raw else render_template(template, system, prompt)
            ids = model.tokenize(
                chat.bounded_text(model, text, truncate=False), add_bos=not context
            )
        else:
            messages = [{"role": "system", "content": system}] if system else []
            ids = chat.chat_prompt(
                model,
                [*messages, {"role": "user", "content": prompt}],
                template_kwargs=request.template_kwargs(),
            )
            bos = model.tokenizer.bos_id
            if context and bos is not None and ids[:1] == [bos]:
                ids = ids[1:]
        return chat.fit(model, context + ids, truncate=False, reserve=1)


class _Chat(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        request = _Request(self.state, req, CHAT)
        model = request.model
        messages = list(request.values["messages"] or ())
        if not messages:
            closing = request.load_answer()
            resp.media = {**closing, "message": {"role": "assistant", "content": ""}}
            return
        if request.entry and request.entry.system and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": request.entry.system})
        tools = request.values["tools"]
        output = request.values["format"]
        if tools and output is not None:
            raise ApiError(400, "give 'format' or 'tools', not both", "format")
        chat = pipeline.GenerationRequest(
            model,
            messages,
            sampling=request.sampling(),
            tools=tools,
            tool_choice="auto" if tools else "none",  # Ollama's API has no tool_choice
            output=output,
            template_kwargs=request.template_kwargs(),
            reasoning=request.reasons,
        )
        run = pipeline.start(chat)

        def objects() -> Iterator[dict[str, Any]]:
            for message, logprobs in _chat_messages(run, request):
                chunk = {**request.head(), "message": message, "done": False}
                yield request.with_logprobs(chunk, logprobs)
            closing = request.closing(run)
            yield {**request.head(), "message": {"role": "assistant", "content": ""}, **closing}

        _answer(req, resp, request.stream, objects(), run, "message")


def _answer(
    req: falcon.Request,
    resp: falcon.Response,
    stream: bool,
    objects: Iterator[dict[str, Any]],
    run: pipeline.Run,
    field: str,
) -> None:
    """Streamed: the objects as NDJSON (an error after the first becomes an `error` object).
    Otherwise one object: the last, with the others' `field` (the text, or the message) merged
    into it. Either way the run is released at the end."""
    if stream:
        respond_ndjson(resp, _streamed(objects, run))
        return
    try:
        with cancelled_on_disconnect(req, run.generations):
            parts = list(objects)
    finally:
        run.release()
    last = parts.pop()
    if field == "response":
        last["response"] = "".join(part["response"] for part in parts)
        thinking = "".join(part.get("thinking", "") for part in parts)
        if thinking:
            last["thinking"] = thinking
    else:
        last["message"] = _merged([part["message"] for part in parts])
    if parts and "logprobs" in parts[0]:
        last["logprobs"] = [entry for part in parts for entry in part["logprobs"]]
    resp.media = last


def _streamed(objects: Iterator[dict[str, Any]], run: pipeline.Run) -> Iterator[dict[str, Any]]:
    try:
        yield from objects
    except LlamayError as error:
        yield {"error": str(error)}
    finally:
        run.release()


def _chat_messages(
    run: pipeline.Run, request: _Request
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Assistant message deltas, with their log-probabilities: the run's events (its pieces
    read by the Answer, answer.py) as `content`, `thinking` and, once each is complete,
    `tool_calls`."""

    def messages(events: list[Any]) -> list[dict[str, Any]]:
        out = []
        for event in events:
            message: dict[str, Any] = {"role": "assistant", "content": ""}
            if event.kind == "text":
                message["content"] = event.text
            elif event.kind == "reasoning":
                message["thinking"] = event.text
            else:
                function = {"name": event.call.name, "arguments": event.call.arguments}
                message["tool_calls"] = [{"function": function}]
            out.append(message)
        return out

    for _, piece, events in run.events():
        logprobs = request.piece_logprobs(piece)
        made = messages(events)
        if not made and logprobs:
            made = [{"role": "assistant", "content": ""}]
        for position, message in enumerate(made):
            yield message, logprobs if position == 0 else []
    for message in messages(run.finish(0)):
        yield message, []


def _merged(messages: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {"role": "assistant", "content": ""}
    for message in messages:
        merged["content"] += message["content"]
        if "thinking" in message:
            merged["thinking"] = merged.get("thinking", "") + message["thinking"]
        if "tool_calls" in message:
            merged["tool_calls"] = merged.get("tool_calls", []) + message["tool_calls"]
    return merged


# --- embeddings ----------------------------------------------------------------------------------


class _Embed(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        started = time.perf_counter()
        values = EMBED.read(self.body(req))
        name, inputs, truncate = values["model"], values["input"], values["truncate"]
        dimensions = values["dimensions"]
        model = self.state.models.get(name, values["keep_alive"])
        load_s = time.perf_counter() - started
        if dimensions is not None and dimensions > model.n_embd:
            raise ApiError(400, f"dimensions must be from 1 to {model.n_embd}", "dimensions")
        ids = []
        for text in inputs:
            text = chat.bounded_text(model, text, truncate=truncate)
            ids.append(chat.fit(model, model.tokenize(text), truncate=truncate, reserve=1))
        n_tokens = sum(len(one) for one in ids)
        # dimensions: the first components, back to unit length (Model.embed)
        embeddings = (
            [v.tolist() for v in model.embed_many(ids, dimensions=dimensions)] if ids else []
        )
        self.state.count_tokens(model, n_tokens, 0)
        resp.media = {
            "model": name,
            "embeddings": embeddings,
            "total_duration": _ns(time.perf_counter() - started),
            "load_duration": _ns(load_s),
            "prompt_eval_count": n_tokens,
        }


class _Embeddings(Route):
    """The older embedding route: one prompt, the vector not normalized (as Ollama's)."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = EMBEDDINGS.read(self.body(req))
        name, prompt = values["model"], values["prompt"]
        model = self.state.models.get(name, values["keep_alive"])
        if not prompt:
            resp.media = {"embedding": []}
            return
        prompt = chat.bounded_text(model, prompt, truncate=False)
        ids = chat.fit(model, model.tokenize(prompt), truncate=False, reserve=1)
        self.state.count_tokens(model, len(ids), 0)
        resp.media = {"embedding": model.embed(ids, normalize=False).tolist()}


# --- request fields ------------------------------------------------------------------------------


def _in_vocabulary(context: list[int], model: Model) -> list[int]:
    """The `context` of an earlier answer (the token ids of the conversation so far), once
    each is known to be in the model's vocabulary."""
    if any(token >= model.n_vocab for token in context):
        raise ApiError(400, "context must be the token ids an earlier answer returned", "context")
    return list(context)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)
