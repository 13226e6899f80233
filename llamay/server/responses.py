"""OpenAI's Responses API: /v1/responses, on llamay's contexts.

`POST /v1/responses` reads its request into a pipeline.GenerationRequest (responses_items.py),
runs it on the pipeline as every family does, and renders the run as a response object, or
its stream of events (`response.created`, `response.in_progress`,
`response.output_item.added`, `response.content_part.added`, `response.output_text.delta`,
`response.output_text.done`, `response.content_part.done`, `response.output_item.done`,
`response.completed`; function calls give `response.function_call_arguments.delta` and
`.done` instead of the text events), each with its `sequence_number`.

The run generates in a context of this module's (the request's `context`): with `store` (the
default) it is kept as the response once answered (responses_store.py), else closed. A request
with `previous_response_id` runs in a fork of that response's context, whose tokens are the
request's `cached` prefix: only the tokens it does not hold yet are fed.
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
from llamay.server import openapi, pipeline, sse
from llamay.server.errors import ApiError, from_exception, read_json
from llamay.server.responses_items import (
    INPUT_TOKENS,
    REQUEST,
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
from llamay.server.watch import client_gone
from llamay.state import Context

_ITEM = {"type": "object"}
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
    store = ResponseStore(state.contexts)
    app.add_route("/v1/responses", _Responses(state, store))
    app.add_route("/v1/responses/input_tokens", _InputTokens(state, store))
    app.add_route("/v1/responses/{response_id}", _OneResponse(store))
    app.add_route("/v1/responses/{response_id}/input_items", _InputItems(store))
    openapi.describe(
        "POST",
        "/v1/responses",
        "OpenAI Responses: a response, stored as a context unless store is false",
        tag="openai",
        request=REQUEST.schema(),
        response=_RESPONSE,
        errors={**openapi.MODEL_ROUTE_ERRORS, 429: "too many open contexts (--max-contexts)"},
        stream_type="text/event-stream",
    )
    openapi.describe(
        "POST",
        "/v1/responses/input_tokens",
        "The number of tokens a Responses request's input is",
        tag="openai",
        request=INPUT_TOKENS.schema(),
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
        model = pipeline.target(self.state, name)
        if not isinstance(model, Model):  # a remote provider keeps no context to store
            raise ApiError(
                400,
                f"{name} is served by a remote provider, which the Responses API does not "
                "reach: use /v1/chat/completions",
                "model",
            )
        conversation = (previous.conversation if previous else []) + request.messages
        sampling = {name: value for name, value in request.sampling.items() if value is not None}
        generation = _generation(model, request, conversation, sampling)
        prompt = generation.prompt()
        if request.store:
            self.store.check_room()
        generation.context, generation.cached = _context(self.store, model, request, prompt)
        try:
            run = pipeline.start(generation)
        except BaseException:
            generation.context.close()
            raise
        reply = _Reply(self.state, self.store, request, name, conversation, run, req)
        stream = reply.events if request.stream else None
        pipeline.answer(req, resp, run, stream, reply.collect, release=reply.release)


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
        prompt = _generation(model, request, conversation).prompt()
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


# --- a request becomes a pipeline run -------------------------------------------------------------


def _previous(store: ResponseStore, request: Request) -> Stored | None:
    if request.previous_response_id is None:
        return None
    try:
        return store.get(request.previous_response_id)
    except ApiError as error:
        error.param = "previous_response_id"
        raise


def _generation(
    model: Model,
    request: Request,
    conversation: list[dict[str, Any]],
    sampling: dict[str, Any] | None = None,
) -> pipeline.GenerationRequest:
    """The conversation under this request's instructions and tools, as the pipeline runs it
    (without `sampling`: as input_tokens counts it)."""
    system = [{"role": "system", "content": request.instructions}] if request.instructions else []
    return pipeline.GenerationRequest(
        model,
        system + conversation,
        sampling=sampling or {},
        tools=request.chat_tools,
        tool_choice=request.choice,
        tool_name=request.named,
        parallel=request.parallel,
        output=request.output,
        truncate=request.truncate,
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


class _Reply:
    """One response rendered from its pipeline run: collected (`collect`) or streamed
    (`events`); `release` ends the run and keeps its context as the stored response, or
    closes it."""

    def __init__(
        self,
        state: ServerState,
        store: ResponseStore,
        request: Request,
        name: str,
        conversation: list[dict[str, Any]],
        run: pipeline.Run,
        req: falcon.Request,
    ) -> None:
        self.state = state
        self.req = req  # to tell whether its client is still there
        self.store = store
        self.request = request
        self.name = name
        self.conversation = conversation
        self.run = run
        self.context: Context = run.request.context
        self.answer = run.answers[0]  # text, reasoning and calls in the model's own formats
        self.id = item_id("resp")
        self.message_id = item_id("msg")
        self.created_at = int(time.time())
        self._kept = False  # the context is the store's now, or closed

    def collect(self) -> dict[str, Any]:
        for _ in self.run.events():
            pass
        self.run.finish(0)
        return self.finish()

    def finish(self) -> dict[str, Any]:
        """The response, once the run has ended and its answer is finished; stored when the
        request asks."""
        reason = self.run.outcome(0).finish_reason
        if reason == "cancelled":
            raise ApiError(499, "the request was cancelled")
        status = "incomplete" if reason == "length" else "completed"
        output = output_items(self.answer, status, self.message_id)
        response = self.object(status, output)
        response["usage"] = self.usage()
        response["completed_at"] = int(time.time()) if status == "completed" else None
        if status == "incomplete":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        if self.request.store and not self._unheard():
            conversation = self.conversation + as_messages(output)
            stored = Stored(response, conversation, self.name, self.request.input_items)
            self.store.put(stored, self.context)  # the store owns the context now
            self._kept = True
        return response

    def _unheard(self) -> bool:
        """Whether the answer reaches nobody: sent whole to a client that has gone away. (A
        stream's first event gave the response's id already.) Such a response is not stored,
        as nobody would learn its id to continue or delete it."""
        return not self.request.stream and client_gone(self.req)

    def release(self) -> None:
        """Ends the run (a generation still running is cancelled); closes the context unless
        it was stored."""
        self.run.release()
        if not self._kept:
            self._kept = True
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
        n_prompt, generated = self.run.usage(self.state)
        return {
            "input_tokens": n_prompt,
            # cached: the prompt tokens the previous response's context held already
            "input_tokens_details": {
                "cached_tokens": self.run.request.held,
                "cache_write_tokens": 0,
            },
            "output_tokens": generated,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": n_prompt + generated,
        }

    # --- the stream ---

    def events(self) -> Iterator[bytes]:
        numbers = itertools.count()

        def event(kind: str, **fields: Any) -> bytes:
            return sse.event({"type": kind, "sequence_number": next(numbers), **fields}, kind)

        text_events = _TextEvents(self.message_id, event)
        pieces = self.run.events()
        try:
            yield event("response.created", response=self.object("in_progress", []))
            yield event("response.in_progress", response=self.object("in_progress", []))
            # Text goes out as it comes; a call (under auto, once the format's opening marker
            # appears) and reasoning are held for their own items (answer.py).
            for _, _, steps in pieces:
                for step in steps:
                    if step.kind == "text" and step.text:
                        yield from text_events.delta(step.text)
            held = [e.text for e in self.run.finish(0) if e.kind == "text" and e.text]
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
        finally:
            pieces.close()


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
