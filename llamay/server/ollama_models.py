"""The Ollama API's model routes: tags, show, ps, pull, create, copy, delete and blobs.

Each is a thin translation to the model store (llamay.store) and the server's loaded models.
Pull and create stream their status as NDJSON unless the request says `"stream": false`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import falcon
import numpy as np

from llamay import gguf, store
from llamay.chat import reasoning_of
from llamay.errors import LlamayError, ModelFormatError, ModelNotFound
from llamay.gguf.quantize import (
    FILE_TYPES,
    Plan,
    QuantizeOptions,
    UnsupportedQuantization,
    plan_file,
)
from llamay.server.errors import ApiError
from llamay.server.ollama_fields import MODEL, STREAM
from llamay.server.state import Route, ServerState
from llamay.store import prune
from llamay.store.blobs import blob_path
from llamay.store.names import looks_like_path
from llamay.store.quantized import store_quantized
from llamay.tokenizer import read_tokenizer
from llamay.tokenizer.chat import template_source
from llamay.tokenizer.fim import supports_infill

NDJSON = "application/x-ndjson"
# What Ollama reports as the expiry of a model kept loaded forever.
_FOREVER = datetime(9999, 12, 31, tzinfo=timezone.utc)
# How often uploads are checked for expiry, at most.
_UPLOAD_SWEEP_S = 300.0
# Metadata arrays (the vocabulary, merges...) are left out of /api/show unless it is verbose.
_ARRAY_TYPES = (list, tuple, np.ndarray, gguf.StringArray)


def add_routes(app: falcon.App, state: ServerState) -> None:
    threading.Thread(
        target=_expire_uploads, args=(state.config.upload_ttl,), name="llamay-uploads", daemon=True
    ).start()
    app.add_route("/api/tags", _Tags(state))
    app.add_route("/api/show", _Show(state))
    app.add_route("/api/ps", _Ps(state))
    app.add_route("/api/pull", _Pull(state))
    app.add_route("/api/create", _Create(state))
    app.add_route("/api/copy", _Copy(state))
    app.add_route("/api/delete", _Delete(state))
    app.add_route("/api/blobs/{digest}", _Blobs(state))


# --- shared with ollama.py -------------------------------------------------------------------------


def model_name(body: dict[str, Any]) -> str:
    """The model a request names: `model`, or `name` as older clients send it."""
    return MODEL.read(body, {})


def stored(state: ServerState, name: str) -> store.ModelEntry | None:
    """The store's entry for a request's model name (aliases followed), or None when the name
    is not a store name (a file under the server's model directories), or is a path outside
    them (never looked up)."""
    target = state.config.aliases.get(name, name)
    try:
        if looks_like_path(target):
            state.models.local_path(target)
        return store.model_info(target)
    except (LlamayError, OSError):  # not a stored name, not even a name, or a damaged entry
        return None


def store_name(state: ServerState, name: str) -> str:
    """A name a request gives the store to find a model by: a path only under the server's
    model directories (404 otherwise, before anything is opened)."""
    return str(state.models.local_path(name)) if looks_like_path(name) else name


def new_name(name: str, field: str) -> str:
    """A name a request gives a model it stores (create, copy): a model name, never a path or
    a URL, which would stand for a file to every other user of the store."""
    if looks_like_path(name) or name.lower().startswith(("http://", "https://")):
        raise ApiError(
            400,
            f"{field} must be a model name (NAME[:TAG], NS/NAME[:TAG]), not a path or URL",
            field,
        )
    return name


def timestamp(seconds: float | datetime) -> str:
    """An RFC 3339 time, as Ollama writes them."""
    if isinstance(seconds, datetime):
        return seconds.isoformat()
    if seconds >= _FOREVER.timestamp():  # forever (inf), or a keep_alive past any calendar
        return _FOREVER.isoformat()
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()


def respond_ndjson(resp: falcon.Response, objects: Iterator[dict[str, Any]]) -> None:
    """Answer with one JSON object per line, each sent as it is made."""
    resp.content_type = NDJSON
    resp.stream = (json.dumps(obj, ensure_ascii=False).encode() + b"\n" for obj in objects)


def details(n_parameters: int, family: str | None, quant: str | None) -> dict[str, Any]:
    """Ollama's `details` of a model."""
    return {
        "parent_model": "",
        "format": "gguf",
        "family": family or "",
        "families": [family] if family else [],
        "parameter_size": _parameter_size(n_parameters),
        "quantization_level": quant or "",
    }


# --- listing and describing ------------------------------------------------------------------------


class _Tags(Route):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        models = []
        for name in self.state.models.available():
            entry = stored(self.state, name)
            if entry is not None:
                models.append(
                    {
                        "name": name,
                        "model": name,
                        "modified_at": timestamp(entry.modified),
                        "size": entry.size,
                        "digest": entry.digest.removeprefix("sha256:"),
                        "details": details(
                            _stored_parameters(entry.path), entry.family, entry.quant
                        ),
                    }
                )
        resp.media = {"models": models}


class _Show(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self.body(req)
        name = model_name(body)
        store_name(
            self.state, self.state.config.aliases.get(name, name)
        )  # 404 for a path elsewhere
        entry = stored(self.state, name)
        if entry is None:
            raise ApiError(404, f"model {name!r} not found", "model")
        read = gguf.read(entry.path)
        metadata = read.metadata
        verbose = body.get("verbose") is True
        info = {
            key: (
                gguf.plain_value(value) if verbose or not isinstance(value, _ARRAY_TYPES) else None
            )
            for key, value in metadata.items()
        }
        info["general.parameter_count"] = _stored_parameters(entry.path)
        chat_template = template_source(metadata)
        template = entry.template or chat_template
        capabilities = ["completion"]
        if "tools" in chat_template:
            capabilities.append("tools")
        if reasoning_of(chat_template) is not None:  # `think` is accepted
            capabilities.append("thinking")
        if supports_infill(read_tokenizer(read)):  # `suffix` is accepted
            capabilities.append("insert")
        answer = {
            "modelfile": _modelfile(entry, template),
            "parameters": _parameters_text(entry.params),
            "template": template,
            "details": details(_stored_parameters(entry.path), entry.family, entry.quant),
            "model_info": info,
            "capabilities": capabilities,
            "modified_at": timestamp(entry.modified),
        }
        if entry.system is not None:
            answer["system"] = entry.system
        if entry.license is not None:
            answer["license"] = entry.license
        resp.media = answer


class _Ps(Route):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        models = []
        for loaded in self.state.models.loaded():
            entry = stored(self.state, loaded.name)
            metadata = loaded.model.file.metadata
            family = entry.family if entry else metadata.get("general.architecture")
            models.append(
                {
                    "name": loaded.name,
                    "model": loaded.name,
                    "size": loaded.size,
                    "digest": entry.digest.removeprefix("sha256:") if entry else "",
                    "details": details(
                        _parameters(loaded.model.file), family, entry.quant if entry else None
                    ),
                    "expires_at": timestamp(loaded.expires_at),
                    "size_vram": 0,
                    "context_length": loaded.model.n_ctx,
                }
            )
        resp.media = {"models": models}


# --- changing the store ----------------------------------------------------------------------------


class _Pull(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self.body(req)
        name = model_name(body)
        source = store_name(self.state, name)
        insecure = body.get("insecure", False) is True

        def pull(progress: Callable[[dict], None]) -> None:
            store.pull(source, insecure=insecure, progress=progress)
            self.state.models.unload(name)  # a loaded older version is reloaded on next use

        _run(resp, body, pull)


class _Create(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self.body(req)
        name = new_name(model_name(body), "model")
        for unsupported in ("adapters", "messages"):
            if body.get(unsupported):
                raise ApiError(400, f"create does not support {unsupported!r}", unsupported)
        kwargs = self._source(body)
        quantizing = self._quantization(body, kwargs)
        for field in ("template", "system"):
            if body.get(field) is not None:
                kwargs[field] = _text(body, field)
        license_text = body.get("license")
        if isinstance(license_text, list) and all(isinstance(t, str) for t in license_text):
            license_text = "\n\n".join(license_text)
        if license_text is not None:
            if not isinstance(license_text, str):
                raise ApiError(400, "license must be text or a list of texts", "license")
            kwargs["license"] = license_text
        if body.get("parameters") is not None:
            if not isinstance(body["parameters"], dict):
                raise ApiError(400, "parameters must be an object", "parameters")
            kwargs["params"] = body["parameters"]

        def create(progress: Callable[[dict], None]) -> None:
            progress({"status": "parsing GGUF"})
            if quantizing is None:
                store.create(name, **kwargs)
            else:
                quantizing.store(name, kwargs, progress)
            self.state.models.unload(name)
            progress({"status": "writing manifest"})
            progress({"status": "success"})

        _run(resp, body, create)

    def _quantization(self, body: dict[str, Any], kwargs: dict[str, Any]) -> _Quantization | None:
        """What `quantize` asks for, checked (400) before anything is stored."""
        type_name = body.get("quantize")
        if type_name is None or type_name == "":
            return None
        if not isinstance(type_name, str):
            raise ApiError(400, "quantize must be a quantization type such as q4_K_M", "quantize")
        if "model_digest" in kwargs:
            if not store.has_blob(kwargs["model_digest"]):
                raise ApiError(404, f"blob {kwargs['model_digest']} not found", "files")
            source, base = blob_path(kwargs["model_digest"]), None
        elif Path(kwargs["from_"]).is_file():
            source, base = Path(kwargs["from_"]), None
        else:
            source, base = store.model_path(kwargs["from_"]), kwargs["from_"]
        options = QuantizeOptions(type_name)
        try:
            quantized = {t.type for t in gguf.read(source).tensors.values()} - _PLAIN
            if quantized:  # as Ollama: only a model of plain numbers is quantized
                raise UnsupportedQuantization(
                    f"quantize works from F16, BF16 or F32 models; this one holds "
                    f"{', '.join(sorted(quantized))} tensors already"
                )
            plan = plan_file(source, options)
        except (UnsupportedQuantization, ModelFormatError) as error:
            raise ApiError(400, str(error), "quantize") from None
        return _Quantization(source, base, options, plan)

    def _source(self, body: dict[str, Any]) -> dict[str, Any]:
        """The model the new one is made from: `files` (one uploaded GGUF blob) or `from` (a
        model name, or a file under the server's model directories)."""
        files, source = body.get("files"), body.get("from")
        if (files is None) == (source is None):
            raise ApiError(400, "give either 'from' (a model) or 'files' (an uploaded GGUF blob)")
        if source is not None:
            if not isinstance(source, str) or not source:
                raise ApiError(400, "from must be a model name", "from")
            path = self.state.models.resolve(source)  # 404, or 403-like refusal, before storing
            target = self.state.config.aliases.get(source, source)
            return {"from_": target if stored(self.state, source) else str(path)}
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise ApiError(400, "files must map file names to blob digests", "files")
        ggufs = [digest for file, digest in files.items() if file.endswith(".gguf")]
        if len(ggufs) != 1 or len(files) != 1:
            raise ApiError(400, "files must hold exactly one .gguf file", "files")
        return {"model_digest": ggufs[0]}


class _Quantization:
    """A create with `quantize`: the model's file quantized into a new blob, the rest of the
    model (a stored source's template and parameters, the request's own) as create keeps it.
    Progress as Ollama reports it: the source's type, the new one, bytes of the source file."""

    def __init__(
        self, source: Path, base: str | None, options: QuantizeOptions, plan: Plan
    ) -> None:
        self.source, self.base, self.options, self.plan = source, base, options, plan

    def store(self, name: str, kwargs: dict[str, Any], progress: Callable[[dict], None]) -> None:
        status = f"quantizing {self._source_type()} model to {self.plan.file_type.name}"
        size, tensor_bytes, done = self.source.stat().st_size, max(1, self.plan.source_bytes), 0

        def report(n: int) -> None:
            nonlocal done
            done += n
            completed = size * done // tensor_bytes
            progress(
                {"status": status, "digest": _NO_DIGEST, "total": size, "completed": completed}
            )

        texts = {
            k: v for k, v in kwargs.items() if k in ("template", "system", "license", "params")
        }
        store_quantized(
            self.source,
            name,
            self.options,
            base=self.base,
            progress=report,
            plan=self.plan,
            **texts,
        )

    def _source_type(self) -> str:
        """The source's file type, or where it names none its matrices' commonest type."""
        named = _FILE_TYPE_NAMES.get(gguf.read(self.source).metadata.get("general.file_type"))
        if named is not None:
            return named
        types = [step.source.type for step in self.plan.steps if len(step.info.shape) > 1]
        return max(set(types), key=types.count) if types else "unknown"


_PLAIN = {"F32", "F16", "BF16"}
# the digest Ollama gives its quantization progress events
_NO_DIGEST = "0000000000000000000"
_FILE_TYPE_NAMES = {ftype.id: ftype.name for ftype in FILE_TYPES.values()}


class _Copy(Route):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = self.body(req)
        source, destination = (
            _text(body, "source"),
            new_name(_text(body, "destination"), "destination"),
        )
        store.copy(
            store_name(self.state, self.state.config.aliases.get(source, source)), destination
        )
        self.state.models.unload(destination)
        resp.status = falcon.HTTP_200


class _Delete(Route):
    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        name = model_name(self.body(req))
        target = store_name(self.state, name)
        try:
            store.remove(target)
        except ModelNotFound:
            raise ApiError(404, f"model {name!r} not found", "model") from None
        self.state.models.unload(name)
        # Under whatever name a model was loaded, it goes once its file is gone.
        for loaded in self.state.models.loaded():
            if not loaded.path.exists():
                self.state.models.unload(loaded.name)
        resp.status = falcon.HTTP_200


class _Blobs(Route):
    """Uploaded blobs, for /api/create to make models of. Those no model uses yet are bounded
    (the config's max_uploads, 413 past it) and expire after its upload_ttl."""

    def on_head(self, req: falcon.Request, resp: falcon.Response, digest: str) -> None:
        resp.status = falcon.HTTP_200 if store.has_blob(digest) else falcon.HTTP_404

    def on_post(self, req: falcon.Request, resp: falcon.Response, digest: str) -> None:
        if not store.has_blob(digest):
            pending = sum(size for _, size, _ in prune.pending_uploads())
            room = max(0, self.state.config.max_uploads - pending)
            too_large = ApiError(
                413,
                f"the store holds {pending} bytes of uploads no model uses, and may hold "
                f"{self.state.config.max_uploads} (--max-uploads): create models from them, or "
                "`llamay prune`",
            )
            if req.content_length is not None and req.content_length > room:
                raise too_large
            store.import_blob(digest, _Bounded(req.bounded_stream, room, too_large))
            prune.track_upload(digest)
        resp.status = falcon.HTTP_201


class _Bounded:
    """A body stream that raises `error` past `limit` bytes."""

    def __init__(self, stream: Any, limit: int, error: ApiError) -> None:
        self.stream = stream
        self.left = limit
        self.error = error

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size)
        self.left -= len(chunk)
        if self.left < 0:
            raise self.error
        return chunk


def _expire_uploads(ttl: float) -> None:
    """Every few minutes, the uploads no model came to use in `ttl` seconds are deleted."""
    while True:
        with contextlib.suppress(LlamayError, OSError):  # a store gone or read-only: next time
            prune.prune_uploads(ttl)
        time.sleep(min(max(ttl, 1.0), _UPLOAD_SWEEP_S))


# --- helpers ---------------------------------------------------------------------------------------


def _run(
    resp: falcon.Response, body: dict[str, Any], work: Callable[[Callable[[dict], None]], None]
) -> None:
    """Run `work(progress)`: streamed, its progress events as NDJSON ending with an `error`
    object if it fails; otherwise the last event once it is done (or the error, as a status)."""
    if not STREAM.read(body, {}):
        events: list[dict] = []
        work(events.append)
        resp.media = events[-1] if events else {"status": "success"}
        return
    respond_ndjson(resp, _progress_stream(work))


def _progress_stream(work: Callable[[Callable[[dict], None]], None]) -> Iterator[dict[str, Any]]:
    """The events of `work` as it runs in a thread (a pull outlives a client that goes away:
    the blobs it stores are reused by the next pull)."""
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    done = object()

    def run() -> None:
        try:
            work(events.put)
        except LlamayError as error:
            events.put({"error": str(error)})
        except Exception as error:  # the stream has begun: the error can only go in it
            events.put({"error": f"internal error: {type(error).__name__}: {error}"})
        events.put(done)

    threading.Thread(target=run, name="llamay-ollama-progress", daemon=True).start()
    while (event := events.get()) is not done:
        yield event


def _text(body: dict[str, Any], field: str) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise ApiError(400, f"{field} must be a non-empty string", field)
    return value


def _parameters(file: gguf.GGUFFile) -> int:
    return sum(math.prod(tensor.shape) for tensor in file.tensors.values())


@functools.lru_cache(maxsize=64)
def _stored_parameters(path: Path) -> int:
    """The parameter count of a stored model (blobs never change: cached by path)."""
    return _parameters(gguf.read(path))


def _parameter_size(count: int) -> str:
    """A parameter count as Ollama labels it: 268.10M, 7.2B."""
    for unit, scale in (("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if count >= scale:
            return f"{count / scale:.2f}{unit}" if unit == "M" else f"{count / scale:.1f}{unit}"
    return str(count)


def _parameters_text(params: dict[str, Any]) -> str:
    """A params layer as Modelfile PARAMETER lines (`name value`, one per stop string)."""
    lines = []
    for key, value in params.items():
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"{key:<30} {json.dumps(item) if isinstance(item, str) else item}")
    return "\n".join(lines)


def _modelfile(entry: store.ModelEntry, template: str) -> str:
    lines = ["# Modelfile generated by llamay", f"FROM {entry.path}"]
    if template:
        lines.append(f'TEMPLATE """{template}"""')
    if entry.system:
        lines.append(f'SYSTEM """{entry.system}"""')
    for key, value in entry.params.items():
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"PARAMETER {key} {json.dumps(item) if isinstance(item, str) else item}")
    return "\n".join(lines) + "\n"
