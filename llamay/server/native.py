"""llamay's own API: contexts as resources, under /llamay/v1.

A context is made from a model and a prompt (or chat messages), generated in (on the pipeline
every family shares, pipeline.py: the context keeps what was generated, so the next request
goes on from there), forked (copy-on-write: no page is copied until one side writes), saved to
a snapshot file and restored from one, and deleted.
A context made from messages keeps its conversation (transcript.py): a generate request may add
turns to it through the chat template, and reading the context gives it back. A running
generation can be cancelled by another request (the stream still ends with its `done` event).
`GET /llamay/v1/stats` gives each loaded model's KV page accounting.

Errors have the OpenAI shape, `{"error": {"message", "type", "param", "code"}}` (errors.py).
A context runs one generation at a time: another request on it while it generates is refused
with 409 (forks and snapshots of an idle context wait their turn instead, a moment each).
Contexts are a server's memory that clients hold: at most `--max-contexts` are open (429 past
that), and one no request has used for `--context-ttl` is closed. An uploaded snapshot's pages
stay private to its context (`?verify=true` recomputes and checks them, and then shares them).
The contexts live in the server's registry (contexts.py); with `--state-dir` each is also a
snapshot there after each change, and any replica sharing the directory serves any id.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import falcon

from llamay import chat
from llamay.engine import Model
from llamay.errors import LlamayError, SnapshotMismatch
from llamay.paths import temp_prefix
from llamay.server import pipeline, sse, transcript
from llamay.server.contexts import ContextRegistry, Entry
from llamay.server.errors import ApiError, read_json
from llamay.server.metrics import loaded_kv_stats
from llamay.server.native_describe import PREFIX, SNAPSHOT_TYPE, describe_routes
from llamay.server.native_fields import CREATE, GENERATE
from llamay.server.state import ServerState
from llamay.server.watch import cancelled_on_disconnect, client_gone
from llamay.state import Context

# Room for a snapshot's header, sections and metadata beyond its tokens, logits and pages.
_SNAPSHOT_OVERHEAD = 64 * 1024
_CHUNK = 1 << 20
# The session a request belongs to: a proxy routes by it, so that a session stays on one
# replica (docs/deploy.md). An answer about a context echoes the request's, or names the
# context when the request had none; the client sends it with every later request.
SESSION_HEADER = "x-llamay-session"
_MAX_SESSION_CHARS = 256


def add_routes(app: falcon.App, state: ServerState) -> None:
    registry = state.contexts
    app.add_route(f"{PREFIX}/contexts", _Contexts(state, registry))
    app.add_route(f"{PREFIX}/contexts/{{context_id}}", _OneContext(registry))
    app.add_route(f"{PREFIX}/contexts/{{context_id}}/generate", _Generate(state, registry))
    app.add_route(f"{PREFIX}/contexts/{{context_id}}/fork", _Fork(registry))
    app.add_route(f"{PREFIX}/contexts/{{context_id}}/cancel", _Cancel(registry))
    app.add_route(f"{PREFIX}/contexts/{{context_id}}/snapshot", _Snapshot(registry))
    app.add_route(f"{PREFIX}/stats", _Stats(state, registry))
    describe_routes()


# --- resources -----------------------------------------------------------------------------------


class _Contexts:
    def __init__(self, state: ServerState, registry: ContextRegistry) -> None:
        self.state = state
        self.registry = registry

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"contexts": self.registry.listing()}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.registry.check_room()
        if (req.content_type or "").split(";")[0].strip().lower() == SNAPSHOT_TYPE:
            name, context = self._restore(req)
        else:
            name, context = self._create(read_json(req, self.state.config.max_body_bytes))
        entry = _keep(req, self.registry, name, context)
        resp.status = falcon.HTTP_201
        resp.set_header("Location", f"{PREFIX}/contexts/{entry.id}")
        _name_session(req, resp, entry.id)
        resp.media = entry.describe()

    def _create(self, body: dict[str, Any]) -> tuple[str, Context]:
        values = CREATE.read(body)
        name, prompt, messages = values["model"], values["prompt"], values["messages"]
        if (prompt is None) == (messages is None):
            raise ApiError(400, "give either 'prompt' (text) or 'messages' (a chat), not both")
        model = self.state.models.get(name)
        turns = None
        if prompt is not None:
            ids = chat.text_prompt(model, prompt)
        else:
            ids = chat.chat_prompt(model, messages)
            turns = transcript.started(messages)
        context = model.context()
        if turns is not None:
            context.note = transcript.noted(None, turns)
        try:
            context.feed(ids)
        except BaseException:
            context.close()
            raise
        self.state.count_tokens(model, len(ids), 0)
        return name, context

    def _restore(self, req: falcon.Request) -> tuple[str, Context]:
        name = req.get_param("model")
        if not name:
            raise ApiError(400, "restoring a snapshot needs the model's name: ?model=NAME", "model")
        model = self.state.models.get(name)
        with tempfile.TemporaryDirectory(prefix=temp_prefix("llamay-restore")) as folder:
            path = Path(folder) / "upload.llamay"
            # Room for the largest snapshot of this model, and at least the server's body
            # limit, so that another model's snapshot gets its 409 rather than a 413.
            limit = max(_largest_snapshot(model), self.state.config.max_body_bytes)
            _receive(req, path, limit)
            # Unverified by default: the restored pages stay this context's own (and its
            # forks'), never shared with other clients through the prefix tree.
            verify = req.get_param_as_bool("verify", default=False)
            try:
                context = model.restore(path, verify=verify)
            except SnapshotMismatch as error:
                raise ApiError(409, _uploaded(error, path)) from None
            except LlamayError as error:
                raise ApiError(400, _uploaded(error, path)) from None
        return name, context


class _OneContext:
    def __init__(self, registry: ContextRegistry) -> None:
        self.registry = registry

    def on_get(self, req: falcon.Request, resp: falcon.Response, context_id: str) -> None:
        entry = self.registry.get(context_id)
        _name_session(req, resp, entry.id)
        context = entry.context
        turns = transcript.of(context.note)
        resp.media = entry.describe() | {
            "persisted_n_tokens": entry.persisted_n_tokens,
            "n_ctx": context.model.n_ctx,
            "pages": context.page_sharing(),
            "messages": turns,
            # what a context made from a prompt holds, as text (a conversation has its turns)
            "text": context.model.detokenize(context.tokens) if turns is None else None,
        }

    def on_delete(self, req: falcon.Request, resp: falcon.Response, context_id: str) -> None:
        entry = self.registry.get(context_id)
        with _idle(entry):
            self.registry.remove(context_id)
            entry.busy = True  # gone: nothing may start on it any more
        entry.context.close()
        resp.status = falcon.HTTP_204


class _Fork:
    def __init__(self, registry: ContextRegistry) -> None:
        self.registry = registry

    def on_post(self, req: falcon.Request, resp: falcon.Response, context_id: str) -> None:
        entry = self.registry.get(context_id)
        with _idle(entry):
            fork = entry.context.fork()
        child = _keep(req, self.registry, entry.model_name, fork, entry.kind)
        resp.status = falcon.HTTP_201
        resp.set_header("Location", f"{PREFIX}/contexts/{child.id}")
        _name_session(req, resp, child.id)
        resp.media = child.describe()


class _Cancel:
    """Ends the generation running in a context, if one is: it stops before its next token,
    and its request answers as usual, with finish_reason "cancelled"."""

    def __init__(self, registry: ContextRegistry) -> None:
        self.registry = registry

    def on_post(self, req: falcon.Request, resp: falcon.Response, context_id: str) -> None:
        entry = self.registry.get(context_id)
        generation = entry.generation
        running = generation is not None and generation.finish_reason is None
        if running:
            generation.cancel()
        _name_session(req, resp, entry.id)
        resp.media = {"id": entry.id, "cancelled": running}


class _Snapshot:
    def __init__(self, registry: ContextRegistry) -> None:
        self.registry = registry

    def on_get(self, req: falcon.Request, resp: falcon.Response, context_id: str) -> None:
        entry = self.registry.get(context_id)
        with tempfile.TemporaryDirectory(prefix=temp_prefix("llamay-snapshot")) as folder:
            path = Path(folder) / f"{context_id}.llamay"
            with _idle(entry):
                note = dict(entry.context.note or {}) | {"model": entry.model_name}
                entry.context.save(path, note=note)
            # The open file outlives its name: the body streams after the folder is gone.
            snapshot = open(path, "rb")  # noqa: SIM115 - falcon closes the stream
        resp.content_type = SNAPSHOT_TYPE
        resp.set_header("Content-Disposition", f'attachment; filename="{context_id}.llamay"')
        resp.set_stream(snapshot, os.fstat(snapshot.fileno()).st_size)


class _Generate:
    def __init__(self, state: ServerState, registry: ContextRegistry) -> None:
        self.state = state
        self.registry = registry

    def on_post(self, req: falcon.Request, resp: falcon.Response, context_id: str) -> None:
        values = GENERATE.read(read_json(req, self.state.config.max_body_bytes))
        prompt, messages, stream = values["prompt"], values["messages"], values["stream"]
        if prompt and messages is not None:
            raise ApiError(400, "give 'prompt' (text) or 'messages' (turns), not both")
        if values["grammar"] is not None and values["json_schema"] is not None:
            raise ApiError(400, "give 'grammar' or 'json_schema', not both")
        output = values["grammar"] or values["json_schema"]
        entry = self.registry.get(context_id)
        model = entry.context.model
        with _idle(entry):
            entry.busy = True
        _name_session(req, resp, entry.id)
        try:
            # Read while the context is ours: another request may have added to it.
            prompt, turns = _what_to_add(entry, prompt, messages)
            held = entry.context.tokens
            added = _added_ids(model, prompt, first=not held)
            run = pipeline.start(
                pipeline.GenerationRequest(
                    model,
                    sampling=GENERATE.sampling(values),
                    output=output,
                    reasoning=False,  # the text is the answer, tags and all
                    context=entry.context,
                    cached=len(held),
                    ids=[list(held) + added],
                    stream=stream,
                    spelling=values.spelling,
                )
            )
            entry.generation = run.generations[0]
        except BaseException:
            self._done(entry)
            raise
        if stream:
            sse.respond(resp, self._events(entry, run, turns))
            return
        try:
            with cancelled_on_disconnect(req, run.generations):
                for _ in run.events():
                    pass
        finally:
            run.release()
            self._done(entry, run.generations[0], turns)
        run.usage(self.state)
        resp.media = {
            "text": run.generations[0].text,
            "tokens": run.tokens(0),
            "finish_reason": run.outcome(0).finish_reason,
            "n_tokens": entry.context.n_tokens,
        }

    def _events(
        self, entry: Entry, run: pipeline.Run, turns: list[transcript.Turn] | None
    ) -> Iterator[bytes]:
        """A token event per token, then a `done` event (or an `error` event)."""
        try:
            for _, piece, _ in run.events():
                # The last piece may be text held back at the end (a stop-string prefix, say)
                # with no token of its own.
                token = {} if piece.token is None else {"token": piece.token}
                yield sse.event({"text": piece.text, **token}, "token")
            run.usage(self.state)
            finish_reason = run.outcome(0).finish_reason
            yield sse.event(
                {"finish_reason": finish_reason, "n_tokens": entry.context.n_tokens}, "done"
            )
        except LlamayError as error:
            yield sse.event({"error": {"message": str(error)}}, "error")
        finally:
            run.release()
            self._done(entry, run.generations[0], turns)

    def _done(
        self,
        entry: Entry,
        generation: Any = None,
        turns: list[transcript.Turn] | None = None,
    ) -> None:
        """A generation in `entry` has ended: its text joins the conversation (`turns`, when the
        context keeps one), what it changed is written behind (before anything else may run in
        the context), and the context is idle again."""
        entry.generation = None
        if generation is not None and turns is not None:
            answered = transcript.answered(turns, generation.text)
            entry.context.note = transcript.noted(entry.context.note, answered)
        try:
            self.registry.touch(entry)
        finally:
            with entry.mutex:
                entry.busy = False
                entry.last_used = time.monotonic()


class _Stats:
    def __init__(self, state: ServerState, registry: ContextRegistry) -> None:
        self.state = state
        self.registry = registry

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        models = loaded_kv_stats(self.state)
        for name, stats in models.items():
            stats["contexts"] = sum(e.model_name == name for e in self.registry.all())
        replica = self.registry.stats() | self.state.metrics.fleet()
        resp.media = {"models": models, "memory": self.state.models.memory(), "replica": replica}


# --- helpers -------------------------------------------------------------------------------------


def _keep(
    req: falcon.Request,
    registry: ContextRegistry,
    name: str,
    context: Context,
    kind: str = "context",
) -> Entry:
    """`context`, made for the request, in the registry under a new id; closed instead (499)
    when the client has gone away meanwhile: nobody would learn the id, so nobody could use or
    delete it, and it would hold its pages until it expired."""
    if client_gone(req):
        context.close()
        raise ApiError(499, "the client went away before its context was made")
    return registry.add(name, context, kind)


@contextlib.contextmanager
def _idle(entry: Entry) -> Iterator[Entry]:
    """Holds an entry's mutex for a moment of work on it, refusing (409) while a generation
    runs in it (or it is being deleted)."""
    with entry.mutex:
        if entry.busy:
            raise ApiError(
                409, f"context {entry.id} is generating; wait for that request to finish"
            )
        yield entry
        entry.last_used = time.monotonic()


def fork_idle(entry: Entry) -> Context:
    """A fork of `entry`'s context, taken while no generation runs in it (409 while one does)."""
    with _idle(entry):
        return entry.context.fork()


def _name_session(req: falcon.Request, resp: falcon.Response, context_id: str) -> None:
    given = req.get_header(SESSION_HEADER)
    if given and len(given) <= _MAX_SESSION_CHARS and given.isprintable():
        resp.set_header(SESSION_HEADER, given)
    else:
        resp.set_header(SESSION_HEADER, context_id)


def _what_to_add(
    entry: Entry, prompt: str, messages: Any
) -> tuple[str, list[transcript.Turn] | None]:
    """The text a generate request adds to `entry`'s context before generating, and the
    conversation the context then holds (None for a context that keeps none): `messages`
    added through the chat template, or `prompt` as it stands (in a conversation, the start
    of the answer)."""
    turns = transcript.of(entry.context.note)
    if messages is not None:
        if turns is None:
            raise ApiError(
                400,
                f"context {entry.id} was not made from messages, so it has no conversation to "
                "add turns to; add text with 'prompt'",
                "messages",
            )
        added = transcript.added_turns(messages)
        text = transcript.continuation(entry.context.model, turns, added)
        return text, transcript.extended(turns, added)
    if turns is None:
        return prompt, None
    return prompt, transcript.answered(turns, prompt)


def _added_ids(model: Model, text: str, *, first: bool) -> list[int]:
    """The tokens of the text a generate request adds to a context (BOS only where the
    context is empty and the model asks for it; specials parsed), refused (400) before it is
    tokenized when its length alone tells it cannot fit."""
    if not text:
        return []
    return model.tokenize(chat.bounded_text(model, text, truncate=False), add_bos=first)


def _largest_snapshot(model: Model) -> int:
    """The size of a snapshot of a full context of `model`: no valid upload is larger."""
    stats = model.kv_stats()
    pages = -(-model.n_ctx // stats["page_tokens"])
    return pages * stats["bytes_per_page"] + 4 * (model.n_ctx + model.n_vocab) + _SNAPSHOT_OVERHEAD


def _receive(req: falcon.Request, path: Path, limit: int) -> None:
    """The request body into `path`; 413 past `limit` bytes."""
    too_large = ApiError(413, f"a snapshot for this model is at most {limit} bytes")
    if req.content_length is not None and req.content_length > limit:
        raise too_large
    received = 0
    with open(path, "wb") as out:
        while chunk := req.bounded_stream.read(_CHUNK):
            received += len(chunk)
            if received > limit:
                raise too_large
            out.write(chunk)


def _uploaded(error: LlamayError, path: Path) -> str:
    """The engine's message about the temporary file, told about the upload instead."""
    return str(error).replace(str(path), "the uploaded snapshot")
