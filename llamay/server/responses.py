"""OpenAI's Responses API: /v1/responses, on llamay's contexts.

`POST /v1/responses` reads its request into the chat pipeline's terms (responses_items.py),
generates through inference.py as /v1/chat/completions does, and answers a response object,
or its stream of events (`response.created`, `response.in_progress`,
`response.output_item.added`, `response.content_part.added`, `response.output_text.delta`,
`response.output_text.done`, `response.content_part.done`, `response.output_item.done`,
`response.completed`; function calls give `response.function_call_arguments.delta` and
`.done` instead of the text events), each with its `sequence_number`.

With `store` (the default) the response is kept as a context (responses_store.py): a request
with `previous_response_id` forks it and feeds only the tokens it does not hold yet.
`GET`/`DELETE /v1/responses/{id}` read and remove a stored response,
`GET /v1/responses/{id}/input_items` lists its input items (OpenAI's paged list);
`POST /v1/responses/input_tokens` counts the tokens a request's input would be.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Mapping
from typing import Any

import falcon
import numpy as np

from llamay.engine import Model
from llamay.errors import LlamayError
from llamay.server import inference, openapi, remote, sse
from llamay.server.answer import Answer, reasoning_of
from llamay.server.ending import stop
from llamay.server.errors import ApiError, from_exception, read_json
from llamay.server.native import ContextRegistry
from llamay.server.responses_items import (
    Request,
    as_messages,
    call_item,
    item_id,
    message_item,
    output_items,
    read_request,
    text_part,
)
from llamay.server.responses_store import ResponseStore, Stored
from llamay.server.state import ServerState
from llamay.server.toolcalls import format_of
from llamay.server.watch import cancelled_on_disconnect
from llamay.state import Context

_ITEM = {"type": "object"}
_REQUEST = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "examples": ["gemma3:270m"]},
        "input": {"type": ["string", "array"], "items": _ITEM},
        "instructions": {"type": ["string", "null"]},
        "previous_response_id": {"type": ["string", "null"]},
        "store": {"type": ["boolean", "null"]},
        "stream": {"type": ["boolean", "null"]},
        "max_output_tokens": openapi.parameter("max_tokens", nullable=True),
        "temperature": openapi.parameter("temperature", nullable=True),
        "top_p": openapi.parameter("top_p", nullable=True),
        "seed": openapi.parameter("seed", nullable=True),
        "tools": {"type": ["array", "null"], "items": _ITEM},
        "tool_choice": {"type": ["string", "object", "null"]},
        "parallel_tool_calls": {"type": ["boolean", "null"]},
        "text": {"type": ["object", "null"]},
        "reasoning": {"type": ["object", "null"]},
        "metadata": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
        "truncation": {"enum": ["auto", "disabled", None]},
    },
}
_RESPONSE = {
    "type": "object",
    "required": ["id", "object", "created_at", "status", "model", "output"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "response"},
        "status": {"enum": ["completed", "incomplete", "in_progress", "failed"]},
        "output": {"type": "array", "items": _ITEM},
        "usage": {"type": ["object", "null"]},
    },
}

_INPUT_ITEMS_QUERY = {
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
    "order": {"enum": ["asc", "desc"], "default": "desc"},
    "after": {"type": "string", "description": "an item id: the page starts after it"},
    "include": {"type": "array", "items": {"type": "string"}},
}
_ITEM_LIST = {
    "type": "object",
    "required": ["object", "data", "first_id", "last_id", "has_more"],
    "properties": {
        "object": {"const": "list"},
        "data": {"type": "array", "items": _ITEM},
        "first_id": {"type": ["string", "null"]},
        "last_id": {"type": ["string", "null"]},
        "has_more": {"type": "boolean"},
    },
}


def add_routes(app: falcon.App, state: ServerState) -> None:
    registry = state.extras.setdefault(
        "contexts", ContextRegistry(state.config.max_contexts, state.config.context_ttl)
    )
    store = ResponseStore(registry)
    app.add_route("/v1/responses", _Responses(state, store))
    app.add_route("/v1/responses/input_tokens", _InputTokens(state, store))
    app.add_route("/v1/responses/{response_id}", _OneResponse(store))
    app.add_route("/v1/responses/{response_id}/input_items", _InputItems(store))
    openapi.describe(
        "POST",
        "/v1/responses",
        "OpenAI Responses: a response, stored as a context unless store is false",
        tag="openai",
        request=_REQUEST,
        response=_RESPONSE,
        errors={**openapi.MODEL_ROUTE_ERRORS, 429: "too many open contexts (--max-contexts)"},
        stream_type="text/event-stream",
    )
    openapi.describe(
        "POST",
        "/v1/responses/input_tokens",
        "The number of tokens a Responses request's input is",
        tag="openai",
        request=_REQUEST,
        response={
            "type": "object",
            "properties": {
                "object": {"const": "response.input_tokens"},
                "input_tokens": {"type": "integer"},
            },
        },
        errors=openapi.MODEL_ROUTE_ERRORS,
    )
    openapi.describe(
        "GET",
        "/v1/responses/{response_id}",
        "A stored response",
        tag="openai",
        response=_RESPONSE,
        errors={404: "no such stored response"},
    )
    openapi.describe(
        "DELETE",
        "/v1/responses/{response_id}",
        "Delete a stored response (its context and its snapshot)",
        tag="openai",
        response={
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "object": {"const": "response"},
                "deleted": {"const": True},
            },
        },
        errors={404: "no such stored response"},
    )
    openapi.describe(
        "GET",
        "/v1/responses/{response_id}/input_items",
        "The input items of a stored response, a page at a time",
        tag="openai",
        query=_INPUT_ITEMS_QUERY,
        response=_ITEM_LIST,
        errors={400: "a bad limit, order or after", 404: "no such stored response"},
    )


# --- resources -----------------------------------------------------------------------------------


class _Responses:
    def __init__(self, state: ServerState, store: ResponseStore) -> None:
        self.state = state
        self.store = store

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        request = read_request(read_json(req, self.state.config.max_body_bytes))
        previous = _previous(self.store, request)
        name = request.model or previous.model_name
        if remote.find(name) is not None:
            raise ApiError(
                400,
                f"{name} is served by a remote provider, which the Responses API does not "
                "reach: use /v1/chat/completions",
                "model",
            )
        model = self.state.models.get(name)
        kwargs = _sampling(model, request)
        conversation = (previous.conversation if previous else []) + request.messages
        prompt = _prompt(model, request, conversation, reserve=kwargs.get("max_tokens") or 1)
        if request.store:
            self.store.check_room()
        context, cached = _context(self.store, model, request, prompt)
        try:
            generation = model.generate(prompt[cached:], context=context, **kwargs)
            inference.started([generation])
        except BaseException:
            context.close()
            raise
        run = _Run(self.state, self.store, request, name, model, conversation, context)
        run.begin(generation, len(prompt), cached)
        if request.stream:
            sse.respond(resp, run.events(), run.close)
            return
        try:
            with cancelled_on_disconnect(req, [generation]):
                for piece in generation.pieces():
                    run.answer.feed(piece)
            resp.media = run.finish()
        finally:
            run.close()


class _InputTokens:
    def __init__(self, state: ServerState, store: ResponseStore) -> None:
        self.state = state
        self.store = store

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        request = read_request(read_json(req, self.state.config.max_body_bytes), need_input=False)
        previous = _previous(self.store, request)
        conversation = (previous.conversation if previous else []) + request.messages
        if not conversation:
            raise ApiError(400, "give input (or a previous_response_id) to count", "input")
        model = self.state.models.get(request.model or previous.model_name)
        prompt = _prompt(model, request, conversation, reserve=1)
        resp.media = {"object": "response.input_tokens", "input_tokens": len(prompt)}


class _OneResponse:
    def __init__(self, store: ResponseStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response, response_id: str) -> None:
        resp.media = self.store.get(response_id).response

    def on_delete(self, req: falcon.Request, resp: falcon.Response, response_id: str) -> None:
        self.store.delete(response_id)
        resp.media = {"id": response_id, "object": "response", "deleted": True}


class _InputItems:
    """`GET /v1/responses/{id}/input_items`: the input a response was made from, as items (a
    continuation's own input only, as OpenAI lists it), `limit` at a time, newest first unless
    `order=asc`, from past the item `after`."""

    def __init__(self, store: ResponseStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response, response_id: str) -> None:
        items = self.store.get(response_id).input_items
        limit = _query_int(req, "limit", 20, 1, 100)
        order = req.get_param("order") or "desc"
        if order not in ("asc", "desc"):
            raise ApiError(400, f"order must be asc or desc, not {order[:40]!r}", "order")
        # `include` is accepted and needs nothing: the items carry every field already
        ordered = items if order == "asc" else items[::-1]
        start = 0
        after = req.get_param("after")
        if after is not None:
            ids = [item["id"] for item in ordered]
            if after not in ids:
                raise ApiError(
                    400, f"after: no input item {after[:80]!r} in response {response_id}", "after"
                )
            start = ids.index(after) + 1
        page = ordered[start : start + limit]
        resp.media = {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": start + limit < len(ordered),
        }


def _query_int(req: falcon.Request, name: str, default: int, low: int, high: int) -> int:
    raw = req.get_param(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise ApiError(
            400, f"{name} must be an integer from {low} to {high}, not {raw[:40]!r}", name
        )
    return value


# --- a request becomes a generation --------------------------------------------------------------


def _previous(store: ResponseStore, request: Request) -> Stored | None:
    if request.previous_response_id is None:
        return None
    try:
        return store.get(request.previous_response_id)
    except ApiError as error:
        error.param = "previous_response_id"
        raise


def _sampling(model: Model, request: Request) -> dict[str, Any]:
    try:
        return inference.sampling_kwargs(
            model,
            **request.sampling,
            grammar=request.grammar(format_of(model.chat_template.source)),
        )
    except ApiError as error:
        if error.param == "max_tokens":  # the table's name for this API's max_output_tokens
            error.message = error.message.replace("max_tokens", "max_output_tokens")
            error.param = "max_output_tokens"
        raise


def _prompt(
    model: Model, request: Request, conversation: list[dict[str, Any]], reserve: int
) -> list[int]:
    """The prompt ids of the conversation under this request's instructions and tools."""
    system = [{"role": "system", "content": request.instructions}] if request.instructions else []
    return inference.chat_prompt(
        model,
        system + conversation,
        tools=request.chat_tools,
        truncate=request.truncate,
        reserve=reserve,
    )


def _context(
    store: ResponseStore, model: Model, request: Request, prompt: list[int]
) -> tuple[Context, int]:
    """The context to generate in and how many of the prompt's tokens it holds already: a fork
    of the previous response's context, cut back to the longest prefix it shares with the
    prompt (at least one token is left to feed, for the logits), or a new context."""
    if request.previous_response_id is None:
        return model.context(), 0
    _, context = store.fork(request.previous_response_id, model)
    try:
        cached = min(shared_prefix(context.tokens, prompt), len(prompt) - 1)
        if cached < context.n_tokens:
            context.rewind(cached)
    except BaseException:
        context.close()
        raise
    return context, cached


def shared_prefix(held: list[int], prompt: list[int]) -> int:
    """How many leading tokens `held` and `prompt` have in common."""
    n = min(len(held), len(prompt))
    differ = np.flatnonzero(np.asarray(held[:n]) != np.asarray(prompt[:n]))
    return int(differ[0]) if differ.size else n


class _Run:
    """One response being generated: collected (`finish`) or streamed (`events`); `close`
    ends the generation and keeps its context as the stored response, or closes it."""

    def __init__(
        self,
        state: ServerState,
        store: ResponseStore,
        request: Request,
        name: str,
        model: Model,
        conversation: list[dict[str, Any]],
        context: Context,
    ) -> None:
        self.state = state
        self.store = store
        self.request = request
        self.name = name
        self.model = model
        self.conversation = conversation
        self.context = context
        self.answer_finished = False
        # the answer read as it comes: text, reasoning and calls in the model's own formats
        source = model.chat_template.source
        self.answer = Answer(
            model.tokenizer,
            tools=request.chat_tools,
            fmt=format_of(source),
            reasoning_kind=reasoning_of(source),
        )
        self.id = item_id("resp")
        self.message_id = item_id("msg")
        self.created_at = int(time.time())
        self.generation: Any = None
        self.n_prompt = 0
        self.cached = 0
        self.response: dict[str, Any] | None = None
        self._closed = False

    def begin(self, generation: Any, n_prompt: int, cached: int) -> None:
        self.generation = generation
        self.n_prompt = n_prompt
        self.cached = cached

    def finish(self) -> dict[str, Any]:
        """The response, once the generation has ended; stored when the request asks."""
        generation = self.generation
        stop(generation)
        if generation.finish_reason == "cancelled":
            raise ApiError(499, "the request was cancelled")
        status = "incomplete" if generation.finish_reason == "length" else "completed"
        if not self.answer_finished:
            self.answer.finish()
        output = output_items(self.answer, status, self.message_id)
        response = self.object(status, output)
        response["usage"] = self.usage()
        response["completed_at"] = int(time.time()) if status == "completed" else None
        if status == "incomplete":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        self.state.count_tokens(self.model, generation.n_prompt, generation.n_generated)
        if self.request.store:
            conversation = self.conversation + as_messages(output)
            stored = Stored(response, conversation, self.name, self.request.input_items)
            self.store.put(stored, self.context)  # the store owns the context now
            self._closed = True
        self.response = response
        return response

    def close(self) -> None:
        """Cancels a generation still running; closes the context unless it was stored."""
        if self.generation is not None:
            stop(self.generation)
        if not self._closed:
            self._closed = True
            self.context.close()

    def object(self, status: str, output: list[Any]) -> dict[str, Any]:
        """The response object, as GET returns it and the stream's events carry it."""
        request = self.request
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "completed_at": None,
            "error": None,
            "incomplete_details": None,
            "instructions": request.instructions,
            "max_output_tokens": request.sampling["max_tokens"],
            "model": self.name,
            "output": output,
            "previous_response_id": request.previous_response_id,
            "store": request.store,
            "temperature": request.sampling["temperature"],
            "top_p": request.sampling["top_p"],
            "text": {"format": request.text_format},
            "tool_choice": request.tool_choice,
            "tools": request.tools,
            "usage": None,
            **request.echo,
        }

    def usage(self) -> dict[str, Any]:
        generated = self.generation.n_generated
        return {
            "input_tokens": self.n_prompt,
            # cached: the prompt tokens the previous response's context held already
            "input_tokens_details": {"cached_tokens": self.cached, "cache_write_tokens": 0},
            "output_tokens": generated,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.n_prompt + generated,
        }

    # --- the stream ---

    def events(self) -> Iterator[bytes]:
        numbers = itertools.count()

        def event(kind: str, **fields: Any) -> bytes:
            return sse.event({"type": kind, "sequence_number": next(numbers), **fields}, kind)

        text_events = _TextEvents(self.message_id, event)
        try:
            yield event("response.created", response=self.object("in_progress", []))
            yield event("response.in_progress", response=self.object("in_progress", []))
            # Text goes out as it comes; a call (under auto, once the format's opening marker
            # appears) and reasoning are held for their own items (answer.py).
            for piece in self.generation.pieces():
                for step in self.answer.feed(piece):
                    if step.kind == "text" and step.text:
                        yield from text_events.delta(step.text)
            held = [e.text for e in self.answer.finish() if e.kind == "text" and e.text]
            self.answer_finished = True
            if held:
                yield from text_events.delta("".join(held))
            response = self.finish()
            for index, item in enumerate(response["output"]):
                if item["type"] == "message":
                    text = item["content"][0]["text"]
                    if not text_events.opened and text:
                        yield from text_events.delta(text)
                    yield from text_events.done(text, item)
                else:
                    yield from _call_events(event, index, item)
            kind = (
                "response.completed" if response["status"] == "completed" else "response.incomplete"
            )
            yield event(kind, response=response)
        except (LlamayError, ApiError) as error:  # the status line is gone: report here
            failure = from_exception(error)
            yield event("error", code=None, message=failure.message, param=failure.param)
            failed = self.object("failed", [])
            failed["error"] = {"code": "server_error", "message": failure.message}
            yield event("response.failed", response=failed)


class _TextEvents:
    """The events of the message item that holds streamed text (output index 0)."""

    def __init__(self, message_id: str, event: Any) -> None:
        self.message_id = message_id
        self.event = event
        self.opened = False

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.message_id, "output_index": 0, "content_index": 0}

    def _open(self) -> Iterator[bytes]:
        if not self.opened:
            self.opened = True
            item = message_item(self.message_id, None, "in_progress")
            yield self.event("response.output_item.added", output_index=0, item=item)
            yield self.event("response.content_part.added", **self._where(), part=text_part(""))

    def delta(self, text: str) -> Iterator[bytes]:
        yield from self._open()
        yield self.event("response.output_text.delta", **self._where(), delta=text, logprobs=[])

    def done(self, text: str, item: Mapping[str, Any]) -> Iterator[bytes]:
        yield from self._open()
        yield self.event("response.output_text.done", **self._where(), text=text, logprobs=[])
        yield self.event("response.content_part.done", **self._where(), part=text_part(text))
        yield self.event("response.output_item.done", output_index=0, item=item)


def _call_events(event: Any, index: int, item: Mapping[str, Any]) -> Iterator[bytes]:
    """The events of a function_call item: added, its arguments (one delta), done."""
    begun = {**call_item(item["name"], "", "in_progress"), "id": item["id"]}
    begun["call_id"] = item["call_id"]
    where = {"item_id": item["id"], "output_index": index}
    yield event("response.output_item.added", output_index=index, item=begun)
    yield event("response.function_call_arguments.delta", **where, delta=item["arguments"])
    yield event(
        "response.function_call_arguments.done",
        **where,
        name=item["name"],
        arguments=item["arguments"],
    )
    yield event("response.output_item.done", output_index=index, item=item)
